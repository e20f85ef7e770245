"""Checks over a cluster state (live or snapshot) for known GPU failure modes."""
