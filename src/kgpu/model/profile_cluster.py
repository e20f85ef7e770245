"""The cluster-wide sections of the profile: the cluster itself, and the add-ons kgpu renders for it (the
NVIDIA device plugin, NVIDIA's DRA driver, monitoring, KubeRay, spot-interruption handling).

Each section has defaults, so a profile names only what it changes; ``kgpu.model.profile.Profile`` checks
them against the pools.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kgpu.model.names import DNS1123_LABEL_MAX_LENGTH, DNS1123_LABEL_PATTERN
from kgpu.model.profile_base import _Model


class Cluster(_Model):
    name: str = Field(default="gpu-cluster", pattern=r"^[a-zA-Z][-a-zA-Z0-9]*$")
    region: str = "us-west-2"
    zones: list[str] = Field(default_factory=list)
    kubernetes_version: str = Field(default="1.33", pattern=r"^1\.[0-9]+$")


class DevicePlugin(_Model):
    version: str = Field(default="v0.20.0", pattern=r"^v0\.[0-9]+\.[0-9]+$")
    strategy: Literal["none", "time-slicing", "mig"] = "none"
    time_slicing_replicas: int = Field(strict=True, default=4, ge=2)
    mig_strategy: Literal["single", "mixed"] = "single"
    install: Literal["manifest", "helm"] = Field(
        default="manifest",
        description="manifest: kgpu's DaemonSet (target device-plugin); helm: values for NVIDIA's "
        "nvidia-device-plugin chart instead (target device-plugin-chart), as seed 002 recommends",
    )


class DraDriver(_Model):
    """NVIDIA's DRA driver (NVIDIA/k8s-dra-driver-gpu, chart nvidia-dra-driver-gpu) for pools with
    ``gpuAllocation: dra``: kgpu renders the chart's values (target dra-driver-chart) and its DeviceClasses."""

    version: str = Field(
        default="25.8.1",
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        max_length=32,
        description="the chart's version (its appVersion)",
    )
    namespace: str = Field(
        default="nvidia-dra-driver-gpu",
        pattern=DNS1123_LABEL_PATTERN,
        max_length=DNS1123_LABEL_MAX_LENGTH,
        description="the Helm release's namespace (the chart refuses default)",
    )
    nvidia_driver_root: str = Field(
        default="/",
        pattern=r"^/[^\s]*$",
        description="where the host's NVIDIA driver lives: / when installed on the host (EKS GPU AMIs, on-prem "
        "bootstrap), /run/nvidia/driver under the GPU Operator's driver container",
    )
    compute_domains: bool = Field(
        default=False,
        description="also run the ComputeDomain side (IMEX channels for multi-node NVLink, GB200); GPUs alone "
        "need only the gpus kubelet plugin",
    )


class Monitoring(_Model):
    enabled: bool = True
    namespace: str = "kgpu-system"
    exporter_image: str = Field(
        default="ghcr.io/kgpu/kgpu:0.1.0",
        min_length=1,
        description="the image the exporter DaemonSet runs; `make image` builds it from the Dockerfile",
    )
    exporter_run_as_root: bool = Field(
        default=False,
        description="run the exporter as uid 0: needed for pod labels from the kubelet's root-only pod-resources socket",
    )
    job_name: str = Field(
        default="kgpu-exporter",
        pattern=r"^[a-zA-Z_][a-zA-Z0-9_.:-]*$",
        description="Prometheus job of the exporter's series; the alert rules select it (seed 002 uses gpu-exporter)",
    )
    prometheus_operator: bool = Field(default=True, description="also render ServiceMonitor/PrometheusRule")
    grafana_datasource_uid: str = Field(
        default="prometheus",
        pattern=r"^[a-zA-Z0-9_-]{1,40}$",
        description="uid of the Grafana Prometheus data source the dashboards use (kube-prometheus-stack's: prometheus)",
    )
    prometheus_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s]+$",
        description="render a Grafana data source (uid grafanaDatasourceUid) for the Prometheus at this URL",
    )


class KubeRay(_Model):
    """A RayCluster (ray.io/v1) on the profile's pools: CPU head, one worker group per GPU pool."""

    ray_version: str = Field(default="2.46.0", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    image: str = Field(default="rayproject/ray:2.46.0", description="head image; workers use <image>-gpu")
    head_pool: str | None = Field(
        default=None, description="pool of the head pod; default: first non-GPU pool"
    )
    gpus_per_worker: int = Field(strict=True, default=1, ge=1)
    enable_in_tree_autoscaling: bool = False
    operator_version: str = Field(
        default="1.7.0",
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="kuberay-operator Helm chart and image version (kgpu render --target kuberay-operator)",
    )


class SpotInterruptions(_Model):
    """How spot interruptions reach the cluster: Karpenter's interruption queue (SQS + EventBridge rules)
    for Karpenter pools, aws-node-termination-handler for eksctl node groups."""

    enabled: bool = True
    queue_name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,80}$",
        description="Karpenter's SQS interruption queue; default: the cluster name (Karpenter's getting-started stack)",
    )
