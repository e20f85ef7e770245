"""Fakes that stand in for external systems in tests."""
