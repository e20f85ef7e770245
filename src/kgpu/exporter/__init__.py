"""GPU node agent: the NVML Prometheus exporter and the node preflight (``kgpu exporter``, ``kgpu node-check``)."""
