# kgpu's container image: the `kgpu` CLI, and the GPU exporter the monitoring target's DaemonSet runs.
#
#   make image                          # ghcr.io/kgpu/kgpu:<version>, with docker, podman or buildah
#   docker build -t ghcr.io/kgpu/kgpu:0.1.0 .
#
# Runs as the unprivileged uid 65532 by default. The exporter needs nothing else to read NVML: the NVIDIA
# container runtime mounts the driver library and devices (NVIDIA_VISIBLE_DEVICES=all in the DaemonSet).
#
# Pod labels (namespace/pod/container on each GPU's series) come from the kubelet's pod-resources socket,
# /var/lib/kubelet/pod-resources/kubelet.sock, which the kubelet creates owned by root with mode 0600 on
# most distributions. To get them, run the exporter as uid 0, either
#   - from the profile: `monitoring.exporterRunAsRoot: true` (the DaemonSet sets runAsUser: 0), or
#   - as an image whose default user is root: `make image IMAGE_UID=0` (docker build --build-arg UID=0),
#     tagged <version>-root by make.
# Without access the exporter still serves every GPU metric and leaves the pod labels out.

ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[exporter]"

FROM python:${PYTHON_VERSION}-slim
ARG VERSION=0.1.0
ARG UID=65532
LABEL org.opencontainers.image.title="kgpu" \
      org.opencontainers.image.description="GPU workloads on Kubernetes: render, simulate, plan, and an NVML Prometheus exporter" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kgpu/kgpu" \
      org.opencontainers.image.vendor="The kgpu authors"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels "kgpu[exporter]==${VERSION}" \
    && rm -rf /wheels \
    && if [ "${UID}" != "0" ]; then useradd --system --uid "${UID}" --no-create-home --shell /usr/sbin/nologin kgpu; fi
USER ${UID}
EXPOSE 9835
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9835/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["kgpu"]
CMD ["exporter", "--listen", ":9835"]
