"""Kubernetes objects kgpu reasons about, and the pure predicates over them."""
