"""Shell completion of GPU names and of the node labels `-l` selects on, from kgpu's own catalogs.

- ``catalog --gpu``: the AWS catalog's GPU names in both forms kgpu takes (Karpenter's label form ``a100`` and
  the catalog's ``A100-80GB``), or with ``--provider tke`` the TKE gpu-type annotation values (``T4``, ``V100``);
- ``tke match --gpu-type`` and ``run --gpu-type``: the same, one item of the comma-separated list at a time;
- ``-l``/``--selector`` (``top``, ``doctor``): the last requirement of the selector, as kubectl would take it:
  the label keys GPU nodes carry (Karpenter's, EKS's, NVIDIA's GPU Feature Discovery and MIG manager's), then the
  values kgpu knows for a key (instance types, GPU names, capacity types, MIG states).

Completion never talks to a cluster (a TAB must not wait on an API server): node names (``-l
kubernetes.io/hostname=``) come from the snapshot or ``kubectl get -o json`` file the line reads, if any.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import msgspec
from click.shell_completion import CompletionItem


def _aws_types() -> list[Any]:
    from kgpu.catalog.aws import aws_catalog  # only when a TAB asks: the verbs' start-up stays as it was

    return [t for t in aws_catalog().types() if t.has_gpu]


def _aws_gpus() -> list[tuple[str, str]]:
    """(name, help) for every GPU of the AWS catalog: the catalog's name (``A100-80GB``), and Karpenter's label
    form (``a100``) where it is not the same name in another case."""
    out: dict[str, tuple[str, str]] = {}
    for t in _aws_types():
        if t.gpu_display_name:
            out.setdefault(t.gpu_display_name.lower(), (t.gpu_display_name, f"AWS, e.g. {t.name}"))
    for t in _aws_types():
        out.setdefault(t.gpu_name.lower(), (t.gpu_name, f"AWS, e.g. {t.name}"))
    return sorted(out.values(), key=lambda kv: kv[0].lower())


def _tke_gpus() -> list[tuple[str, str]]:
    from kgpu.catalog.tke import tke_gpu_types

    return [(name, f"TKE, {g.model} {g.gpu_memory_gib} GiB") for name, g in sorted(tke_gpu_types().items())]


def _matching(pairs: list[tuple[str, str]], incomplete: str, prefix: str = "") -> list[CompletionItem]:
    low = incomplete.lower()
    return [
        CompletionItem(prefix + name, help=help_) for name, help_ in pairs if name.lower().startswith(low)
    ]


def complete_gpu(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``catalog --gpu``: TKE's types with ``--provider tke``, else AWS's GPUs."""
    pairs = _tke_gpus() if ctx.params.get("provider") == "tke" else _aws_gpus()
    return _matching(pairs, incomplete)


def _last_item(incomplete: str) -> tuple[str, str]:
    head, comma, last = incomplete.rpartition(",")
    return (head + comma, last)


def complete_tke_gpu_types(
    _ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """``tke match --gpu-type T4,V<TAB>``: the list's last item among TKE's gpu-type values."""
    prefix, last = _last_item(incomplete)
    return _matching(_tke_gpus(), last, prefix)


def complete_any_gpu_types(
    _ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """``run --gpu-type``: TKE's annotation values and AWS's GPU names (node affinity elsewhere)."""
    prefix, last = _last_item(incomplete)
    pairs: dict[str, tuple[str, str]] = {}
    for name, help_ in _tke_gpus() + _aws_gpus():
        pairs.setdefault(name.lower(), (name, help_))
    return _matching(list(pairs.values()), last, prefix)


_KEYS: dict[str, str] = {
    "karpenter.sh/nodepool": "Karpenter NodePool",
    "karpenter.sh/capacity-type": "spot or on-demand",
    "karpenter.k8s.aws/instance-gpu-name": "GPU name (Karpenter, AWS)",
    "karpenter.k8s.aws/instance-gpu-count": "GPUs per node (Karpenter, AWS)",
    "node.kubernetes.io/instance-type": "instance type",
    "topology.kubernetes.io/zone": "zone",
    "eks.amazonaws.com/nodegroup": "EKS managed node group",
    "eks.amazonaws.com/capacityType": "SPOT or ON_DEMAND (EKS)",
    "alpha.eksctl.io/nodegroup-name": "eksctl node group",
    "nvidia.com/gpu.product": "GPU model (GPU Feature Discovery)",
    "nvidia.com/gpu.count": "GPUs (GPU Feature Discovery)",
    "nvidia.com/mig.config.state": "MIG manager: success, pending, failed",
    "nvidia.com/gpu.deploy.device-plugin": "GPU Operator: true, false, paused-for-mig-change",
    "kubernetes.io/hostname": "node name",
}
_STATIC: dict[str, list[str]] = {
    "karpenter.sh/capacity-type": ["on-demand", "spot", "reserved"],
    "eks.amazonaws.com/capacityType": ["ON_DEMAND", "SPOT"],
    "nvidia.com/mig.config.state": ["failed", "pending", "rebooting", "success"],
    "nvidia.com/gpu.deploy.device-plugin": ["false", "paused-for-mig-change", "true"],
}
_OPERATOR = re.compile(r"^(?P<key>!?[^=!\s,()]+)(?P<op>==|!=|=)(?P<value>[^,]*)$")


_NODE_FILE_LIMIT = 512 * 2**20  # larger files are not read on a TAB


class _Meta(msgspec.Struct):
    name: str = ""


class _Item(msgspec.Struct):
    kind: str = ""
    metadata: _Meta | None = None


class _Doc(msgspec.Struct):
    items: list[_Item] = []


def _file_nodes(ctx: click.Context) -> list[str]:
    """The node names of the file the line reads (``doctor --snapshot FILE``, ``top -f FILE``), if it is a JSON
    snapshot or ``kubectl get -o json`` output of at most 512 MiB; nothing otherwise."""
    path = ctx.params.get("snapshot") or ctx.params.get("file")
    if not path or str(path) == "-":
        return []
    try:
        p = Path(str(path))
        if p.stat().st_size > _NODE_FILE_LIMIT:
            return []
        doc = msgspec.json.decode(p.read_bytes(), type=_Doc)
    except (OSError, msgspec.DecodeError):
        return []
    return sorted({i.metadata.name for i in doc.items if i.kind == "Node" and i.metadata and i.metadata.name})


def _values(key: str, ctx: click.Context) -> list[str]:
    if key == "kubernetes.io/hostname":
        return _file_nodes(ctx)
    if key in _STATIC:
        return _STATIC[key]
    gpu_types = _aws_types()
    if key == "node.kubernetes.io/instance-type":
        return sorted(t.name for t in gpu_types)
    if key == "karpenter.k8s.aws/instance-gpu-name":
        return sorted({t.gpu_name for t in gpu_types})
    if key in ("karpenter.k8s.aws/instance-gpu-count", "nvidia.com/gpu.count"):
        return sorted({str(t.gpu_count) for t in gpu_types}, key=int)
    return []


def complete_selector(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``-l``: the selector's last requirement, a label key (with ``=``) or, after ``key=``, its values."""
    prefix, last = _last_item(incomplete)
    m = _OPERATOR.match(last)
    if m is not None:
        head = prefix + m.group("key") + m.group("op")
        return [
            CompletionItem(head + v)
            for v in _values(m.group("key").lstrip("!"), ctx)
            if v.lower().startswith(m.group("value").lower())
        ]
    bang = "!" if last.startswith("!") else ""
    return [
        CompletionItem(f"{prefix}{bang}{key}" + ("" if bang else "="), help=help_)
        for key, help_ in _KEYS.items()
        if key.startswith(last.lstrip("!"))
    ]
