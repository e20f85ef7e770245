"""``CUDA_VISIBLE_DEVICES`` / ``NVIDIA_VISIBLE_DEVICES`` in a pod spec against the device plugin's allocation.

The NVIDIA device plugin gives a container the GPUs it allocated; what the container sees is then shaped by
two variables a pod spec may also set:

- ``NVIDIA_VISIBLE_DEVICES`` selects the devices the NVIDIA container runtime injects. With the plugin's
  default ``deviceListStrategy: envvar`` the plugin sets it to the allocated devices, and kubelet passes the
  pod spec's own ``env`` after the plugin's, so a value in the spec replaces the allocation: ``all`` hands the
  container every GPU of the node (whether it requested any or not: GPUs the scheduler counts as free), and
  ``none`` / ``void`` / an empty value hide the GPUs it was given. Runtimes configured with
  ``accept-nvidia-visible-devices-envvar-when-unprivileged = false`` and the plugin's ``volume-mounts``
  strategy ignore the variable (Bottlerocket's default); kgpu cannot see that configuration, so the finding
  says it. TKE super nodes are excluded: each pod there is its own machine with exactly its spec's GPUs (the
  guide's monitoring section sets ``NVIDIA_VISIBLE_DEVICES: all`` there).
- ``CUDA_VISIBLE_DEVICES`` indexes the devices the container sees, renumbered from 0. An index at or past the
  container's GPU count is invalid, and CUDA stops enumerating at the first invalid index: ``1`` on a
  1-GPU container leaves no device ("no CUDA-capable device is detected"); fewer indices than allocated GPUs
  leave the rest idle but billed. GPU UUIDs (``GPU-...``, ``MIG-...``) name physical devices the pod spec
  cannot know before the plugin allocates.

DaemonSet pods (exporters, the device plugin itself) are skipped: they see every GPU on purpose. ``kgpu
snapshot`` keeps these two variables' values and replaces every other ``env`` value with ``<redacted>``
(kgpu.live.snapshot); a redacted value (from an older snapshot) is reported as set but not compared (info).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kgpu.doctor.common import snippet
from kgpu.doctor.findings import ERROR, INFO, WARNING, Finding
from kgpu.doctor.state import ClusterState, PodInfo
from kgpu.errors import InputError
from kgpu.model.nvidia import GPU
from kgpu.model.quantity import parse_quantity

CUDA = "CUDA_VISIBLE_DEVICES"
NVIDIA = "NVIDIA_VISIBLE_DEVICES"
REDACTED = "<redacted>"  # what kgpu snapshot writes for every env value
GPU_RESOURCE = GPU  # the resource the device plugin advertises (kgpu.model.sharing)


def _container_gpus(container: dict[str, Any]) -> int:
    resources = container.get("resources") or {}
    for part in ("limits", "requests"):
        raw = (resources.get(part) or {}).get(GPU_RESOURCE) if isinstance(resources, dict) else None
        if raw is not None:
            try:
                q = parse_quantity(raw)
            except InputError:  # a bad quantity is the workloads check's finding, not this one's
                return 0
            return max(int(q), 0)
    return 0


def _env(container: dict[str, Any]) -> dict[str, str | None]:
    """The two variables as the container sets them (None: from valueFrom, unknown here)."""
    out: dict[str, str | None] = {}
    env = container.get("env")
    for entry in env if isinstance(env, list) else ():
        if isinstance(entry, dict) and entry.get("name") in (CUDA, NVIDIA):
            value = entry.get("value")
            out[str(entry["name"])] = None if "valueFrom" in entry else str(value if value is not None else "")
    return out


def _containers(pod: PodInfo) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = pod.raw.get("spec")
    if not isinstance(spec, dict):
        return
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        for i, c in enumerate(items if isinstance(items, list) else ()):
            if isinstance(c, dict):
                yield f"spec.{field}[{i}]", c


def _indices(gpus: int) -> str:
    return "0" if gpus == 1 else f"0-{gpus - 1}"


def _remove_fix(container: str, name: str) -> str:
    return f"remove {name} from {container}.env: the device plugin already gives the container its GPUs"


def check_visible_devices(state: ClusterState) -> Iterator[Finding]:
    for pod in state.pods:
        if pod.is_daemon or pod.terminated:
            continue
        node = state.node_by_name.get(pod.node_name)
        virtual = node is not None and node.virtual
        for where, container in _containers(pod):
            env = _env(container)
            if not env:
                continue
            gpus = _container_gpus(container)
            label = f"{where} ({container.get('name', '?')})"
            if NVIDIA in env and not virtual:
                yield from _nvidia(pod, label, where, env[NVIDIA], gpus)
            if CUDA in env and gpus:
                yield from _cuda(pod, label, where, env[CUDA], gpus)


def _nvidia(pod: PodInfo, label: str, where: str, value: str | None, gpus: int) -> Iterator[Finding]:
    check = "nvidia-visible-devices-in-spec"
    caveat = (
        " (unless the node's container runtime ignores the variable for unprivileged containers, or the "
        "device plugin uses deviceListStrategy volume-mounts)"
    )
    if value is None or value == REDACTED:
        yield Finding(
            check,
            INFO,
            pod.ref,
            f"{label} sets {NVIDIA} ({'from valueFrom' if value is None else 'value redacted by kgpu snapshot'}): "
            f"a value in the pod spec replaces the device plugin's allocation of {gpus} GPU(s){caveat}",
            _remove_fix(where, NVIDIA),
        )
        return
    text = value.strip().lower()
    if text == "all":
        yield Finding(
            check,
            WARNING,
            pod.ref,
            f"{label} sets {NVIDIA}=all: the container gets every GPU of its node, "
            + (f"not the {gpus} the device plugin allocated" if gpus else "though it requested none")
            + f"; the scheduler still counts those GPUs free for other pods{caveat}",
            _remove_fix(where, NVIDIA),
        )
    elif text in ("", "none", "void") and gpus:
        yield Finding(
            check,
            ERROR,
            pod.ref,
            f"{label} sets {NVIDIA}={value!r}: the container sees none of the {gpus} GPU(s) allocated to it "
            f"(CUDA: no CUDA-capable device is detected){caveat}",
            _remove_fix(where, NVIDIA),
        )
    elif text not in ("", "none", "void"):
        yield Finding(
            check,
            WARNING,
            pod.ref,
            f"{label} sets {NVIDIA}={value}: the container gets those devices of its node, whichever "
            f"{gpus} GPU(s) the device plugin allocated{caveat}",
            _remove_fix(where, NVIDIA),
        )


def _cuda(pod: PodInfo, label: str, where: str, value: str | None, gpus: int) -> Iterator[Finding]:
    check = "cuda-visible-devices-conflict"
    if value is None or value == REDACTED:
        yield Finding(
            check,
            INFO,
            pod.ref,
            f"{label} sets {CUDA} ({'from valueFrom' if value is None else 'value redacted by kgpu snapshot'}); "
            f"kgpu cannot compare it with the {gpus} GPU(s) allocated (indices {_indices(gpus)})",
            "kubectl get pod -o json keeps env values: kgpu doctor --snapshot <that file>",
        )
        return
    parts = [p.strip() for p in value.split(",")] if value.strip() else []
    fix = snippet({"env": [{"name": CUDA, "value": ",".join(str(i) for i in range(gpus))}]})
    if any(p.upper().startswith(("GPU-", "MIG-")) for p in parts):
        yield Finding(
            check,
            WARNING,
            pod.ref,
            f"{label} sets {CUDA}={value}: UUIDs name physical devices, and the pod spec cannot know which the "
            f"device plugin allocates; inside the container its {gpus} GPU(s) are {_indices(gpus)}",
            fix,
        )
        return
    visible = 0
    for p in parts:
        if not p.isdigit() or int(p) >= gpus:
            break
        visible += 1
    if visible == 0:
        why = "an empty list" if not parts else f"index {parts[0]} is not one of its GPUs ({_indices(gpus)})"
        yield Finding(
            check,
            ERROR,
            pod.ref,
            f"{label} sets {CUDA}={value!r} with {gpus} GPU(s) allocated: {why}, so CUDA sees no device "
            '("no CUDA-capable device is detected")',
            fix,
        )
    elif visible < len(parts):
        yield Finding(
            check,
            WARNING,
            pod.ref,
            f"{label} sets {CUDA}={value} with {gpus} GPU(s) allocated: CUDA stops at index {parts[visible]} "
            f"(the container's GPUs are {_indices(gpus)}), so it sees {visible}, not {len(parts)}",
            fix,
        )
    elif visible < gpus:
        yield Finding(
            check,
            WARNING,
            pod.ref,
            f"{label} sets {CUDA}={value}: {visible} of the {gpus} GPU(s) allocated are visible to CUDA; the "
            f"other {gpus - visible} stay idle, reserved and billed",
            fix + f"\n# or request {visible} GPU(s)",
        )


CHECKS = {
    "nvidia-visible-devices-in-spec": check_visible_devices,
    "cuda-visible-devices-conflict": check_visible_devices,
}
