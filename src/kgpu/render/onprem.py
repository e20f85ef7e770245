"""On-premises GPU hosts: make ``nvidia`` the default container runtime (containerd or docker).

Output is host configuration, not cluster objects, so it is rendered twice from one source: as
:func:`host_files` (path -> content, written by ``kgpu render -o DIR`` under ``onprem-files/``) and as a
ConfigMap holding the same files, which validates like every other document and can be mounted by a node
set-up DaemonSet. The containerd drop-in is config version 2 (containerd 1.7); the main config must import
``/etc/containerd/conf.d/*.toml``. ``SystemdCgroup = true`` matches kubelet's default systemd cgroup driver:
a runtime that disagrees with kubelet restarts pods at random. ``nvidia-ctk runtime configure
--runtime=containerd --set-as-default`` writes an equivalent file.
"""

from __future__ import annotations

import json
from typing import Any

from kgpu.model.profile import PoolKind, Profile
from kgpu.render import MANAGED_BY

NAME = "kgpu-nvidia-runtime"
NAMESPACE = "kube-system"
CONTAINERD_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
DOCKER_DAEMON = "/etc/docker/daemon.json"
RUNTIME = "/usr/bin/nvidia-container-runtime"

_CONTAINERD = f"""# {CONTAINERD_DROPIN}: nvidia as containerd's default runtime (containerd 1.7, config version 2).
# /etc/containerd/config.toml must contain: imports = ["/etc/containerd/conf.d/*.toml"]
# Apply with: systemctl restart containerd
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  privileged_without_host_devices = false
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "{RUNTIME}"
  SystemdCgroup = true
"""


def _docker() -> str:
    data = {"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": RUNTIME, "runtimeArgs": []}}}
    return json.dumps(data, indent=4) + "\n"


def _verify(profile: Profile) -> str:
    nodes = [
        n.name for p in profile.pools if p.kind == PoolKind.STATIC and p.is_gpu for n in p.nodes if n.gpus
    ]
    lines = [
        "#!/bin/sh",
        "# On each GPU host: driver, container toolkit, default runtime.",
        "nvidia-smi || echo 'FAIL: NVIDIA driver not loaded'",
        "nvidia-ctk --version || echo 'FAIL: nvidia-container-toolkit not installed'",
        "if command -v containerd >/dev/null; then",
        '  # expect: default_runtime_name = "nvidia" and BinaryName = "' + RUNTIME + '"',
        "  containerd config dump | grep -E 'default_runtime_name|BinaryName'",
        "fi",
        "if command -v docker >/dev/null; then",
        "  # expect: nvidia",
        "  docker info --format '{{.DefaultRuntime}}'",
        "fi",
        "",
        "# From a machine with kubectl: every GPU node advertises nvidia.com/gpu.",
        "kubectl get nodes -o custom-columns='NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu'",
    ]
    lines += [f"kubectl describe node {n} | grep nvidia.com/gpu" for n in nodes]
    return "\n".join(lines) + "\n"


def host_files(profile: Profile) -> dict[str, str]:
    """Files to put on every GPU host, by absolute path (plus the verification script)."""
    if not applies(profile):
        return {}
    return {
        CONTAINERD_DROPIN: _CONTAINERD,
        DOCKER_DAEMON: _docker(),
        "verify-gpu-runtime.sh": _verify(profile),
    }


def applies(profile: Profile) -> bool:
    return any(p.kind == PoolKind.STATIC and p.is_gpu for p in profile.pools)


def render(profile: Profile) -> list[dict[str, Any]]:
    if not applies(profile):
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                "labels": dict(MANAGED_BY),
                "annotations": {
                    "kgpu.dev/containerd-dropin": CONTAINERD_DROPIN,
                    "kgpu.dev/docker-daemon": DOCKER_DAEMON,
                },
            },
            "data": {
                "99-nvidia.toml": _CONTAINERD,
                "daemon.json": _docker(),
                "verify-gpu-runtime.sh": _verify(profile),
            },
        }
    ]
