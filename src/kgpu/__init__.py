"""kgpu: GPU workloads on Kubernetes, correct, cheap and observable."""

__version__ = "0.1.0"
