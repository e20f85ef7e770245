"""The NVIDIA device plugin's workloads: which containers, pods and DaemonSets run it, its version, the tool
that manages a plugin DaemonSet (the GPU Operator's ClusterPolicy, NVIDIA's Helm chart), and nodes that run
it built into their image.

The plugin's image (``k8s-device-plugin``) holds four programs, and NVIDIA runs three of them from it:
GPU Feature Discovery (the Helm chart's ``<release>-gpu-feature-discovery`` with ``gfd.enabled=true``, the
GPU Operator's ``gpu-feature-discovery``), the MPS control daemon and the config manager (init containers
and sidecars). Only a container that runs ``nvidia-device-plugin`` (the image's entrypoint) is a plugin;
see :func:`runs_plugin`. The checks over them are :mod:`kgpu.doctor.deviceplugin`'s.
"""

from __future__ import annotations

import re
from typing import Any

from kgpu.doctor.state import LABEL_KGPU_DEVICE_PLUGIN, ClusterState, DaemonSetInfo, NodeInfo, PodInfo

PLUGIN_IMAGE = "k8s-device-plugin"

_VERSION = re.compile(r"^v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?")


def is_plugin_image(image: str) -> bool:
    return PLUGIN_IMAGE in image


# The programs of the k8s-device-plugin image (its Dockerfile copies them to /usr/bin; the ENTRYPOINT is
# nvidia-device-plugin), and the directory the plugin registers its socket in.
PLUGIN_PROGRAM = "nvidia-device-plugin"
OTHER_PROGRAMS = frozenset({"gpu-feature-discovery", "config-manager", "mps-control-daemon"})
SHELLS = frozenset({"sh", "bash", "ash", "dash", "busybox"})
KUBELET_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
_WORDS = re.compile(r"[^\s;&|()`'\"]+")


def _strings(x: Any) -> list[str]:
    return [v for v in x if isinstance(v, str)] if isinstance(x, list) else []


def _programs(words: list[str]) -> set[str]:
    return {w.rsplit("/", 1)[-1] for text in words for w in _WORDS.findall(text)}


def runs_plugin(container: Any) -> bool:
    """Whether a container of a pod (template) runs the device plugin, not another program of its image.

    No ``command``: the image's entrypoint, ``nvidia-device-plugin``. A command naming it (the Helm chart's
    ``["nvidia-device-plugin"]``) runs it; one naming ``gpu-feature-discovery``, ``config-manager`` or
    ``mps-control-daemon`` does not. A shell script or another program runs it when it names it, or names
    none of the others and mounts the kubelet's device-plugin directory (the GPU Operator's
    ``bash -c /bin/entrypoint.sh``, which execs the plugin).
    """
    if not isinstance(container, dict):
        return False
    image = container.get("image")
    if not isinstance(image, str) or not is_plugin_image(image):
        return False
    command = _strings(container.get("command"))
    if not command:
        return True
    exe = command[0].rsplit("/", 1)[-1]
    if exe == PLUGIN_PROGRAM:
        return True
    if exe in OTHER_PROGRAMS:
        return False
    named = _programs(command[1:] + _strings(container.get("args")))
    if PLUGIN_PROGRAM in named:
        return True
    if named & OTHER_PROGRAMS:
        return False
    mounts = container.get("volumeMounts")
    return any(
        isinstance(m, dict) and str(m.get("mountPath") or "").rstrip("/") == KUBELET_DEVICE_PLUGINS
        for m in (mounts if isinstance(mounts, list) else ())
    )


def plugin_containers(spec: Any) -> list[dict[str, Any]]:
    """The containers of a pod spec that run the device plugin (init containers finish: not counted)."""
    containers = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in containers if runs_plugin(c)] if isinstance(containers, list) else []


def _template_spec(ds: DaemonSetInfo) -> Any:
    spec = ds.raw.get("spec")
    tmpl = spec.get("template") if isinstance(spec, dict) else None
    return tmpl.get("spec") if isinstance(tmpl, dict) else None


def is_plugin_daemonset(ds: DaemonSetInfo) -> bool:
    return any(is_plugin_image(i) for i in ds.images) and bool(plugin_containers(_template_spec(ds)))


def is_plugin_pod(pod: PodInfo) -> bool:
    return any(is_plugin_image(i) for i in pod.images) and bool(plugin_containers(pod.raw.get("spec")))


def cluster_policy(ds: DaemonSetInfo) -> str:
    """The GPU Operator's ClusterPolicy that owns the DaemonSet ("" when none does)."""
    meta = ds.raw.get("metadata")
    for ref in (meta.get("ownerReferences") if isinstance(meta, dict) else None) or ():
        if isinstance(ref, dict) and ref.get("kind") == "ClusterPolicy" and ref.get("name"):
            return str(ref["name"])
    return ""


def helm_release(ds: DaemonSetInfo) -> tuple[str, str] | None:
    """(release, namespace) of NVIDIA's device-plugin chart that made the DaemonSet, from Helm's labels and
    annotations; None when it is not from that chart."""
    meta = ds.raw.get("metadata")
    if not isinstance(meta, dict):
        return None
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    notes = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    assert isinstance(labels, dict) and isinstance(notes, dict)
    if not str(labels.get("helm.sh/chart") or "").startswith("nvidia-device-plugin-"):
        return None
    release = notes.get("meta.helm.sh/release-name") or labels.get("app.kubernetes.io/instance")
    namespace = notes.get("meta.helm.sh/release-namespace") or ds.namespace
    return (str(release), str(namespace)) if release else None


def plugin_daemonsets(state: ClusterState) -> list[DaemonSetInfo]:
    return [ds for ds in state.daemonsets if is_plugin_daemonset(ds)]


def plugin_pods(pods: list[PodInfo]) -> list[PodInfo]:
    return [p for p in pods if is_plugin_pod(p)]


def builtin_plugin(node: NodeInfo) -> str:
    """Why the node runs a device plugin without any DaemonSet ("" when it does not)."""
    image = node.os_image.lower()
    if "bottlerocket" in image and "nvidia" in image:
        return f"its image runs the plugin itself ({node.os_image})"
    if node.labels.get(LABEL_KGPU_DEVICE_PLUGIN) == "builtin":
        return f"label {LABEL_KGPU_DEVICE_PLUGIN}=builtin (Bottlerocket NVIDIA image)"
    return ""


def plugin_version(image: str) -> tuple[int, int, int] | None:
    tag = image.split("@", 1)[0]
    slash, colon = tag.rfind("/"), tag.rfind(":")
    if colon <= slash:
        return None
    m = _VERSION.match(tag[colon + 1 :])
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
