"""The cluster profile (``kgpu.yaml``): one declarative description of a GPU cluster's capacity.

Everything else is derived from it: the manifests ``kgpu render`` writes, the capacity ``kgpu simulate``
provisions from, the cost ``kgpu plan`` reports. It is a pydantic model so that ``kgpu profile schema`` can
print its JSON Schema and every error names its field path
(``pools[1].taints[0].effect: 'NoSchedul' is not one of NoSchedule, PreferNoSchedule, NoExecute``).

Field names are camelCase in YAML (like the Kubernetes objects users already write) and snake_case in
Python. Unknown fields are errors: a typo must not silently drop a taint.

This module holds the document itself (``Profile``: metadata, provider, autoscaler, the checks across its
sections), reading it with errors that name the field, the built-in templates, and Karpenter NodePools read
as pools. Its sections live beside it: ``profile_pool`` (a pool), ``profile_nodes`` (a pool's nodes: kinds,
requirements, taints, static nodes), ``profile_sharing`` (shared GPUs), ``profile_cluster`` (the cluster
and its add-ons), ``profile_queues`` (teams sharing the pools through Kueue), ``profile_base`` (what every
section shares). ``Pool`` and ``PoolKind``, which most readers of a profile name, are importable from here
too.
"""

from __future__ import annotations

import re
from enum import StrEnum
from importlib import resources
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from kgpu.errors import InputError, quote
from kgpu.model.names import DNS1123_LABEL_PATTERN
from kgpu.model.profile_base import _Model
from kgpu.model.profile_cluster import (
    Cluster,
    DevicePlugin,
    DraDriver,
    KubeRay,
    Monitoring,
    SpotInterruptions,
)
from kgpu.model.profile_nodes import _UNION_TAGS
from kgpu.model.profile_nodes import PoolKind as PoolKind
from kgpu.model.profile_pool import Pool as Pool
from kgpu.model.profile_queues import Queues
from kgpu.model.safeyaml import load_document
from kgpu.model.storage import Storage

API_VERSION = "kgpu.dev/v1alpha1"
# The taint TKE puts on every super node (https://cloud.tencent.com/document/product/457/54754).
TKE_SUPERNODE_TAINT = "eks.tke.cloud.tencent.com/eklet"


TEMPLATES = ("eks-karpenter", "eks-eksctl", "onprem", "tke-supernode", "kuberay", "kueue-two-teams")
DEFAULT_TEMPLATE = "eks-karpenter"


class Provider(StrEnum):
    EKS = "eks"
    TKE = "tke"
    GENERIC = "generic"


class Autoscaler(StrEnum):
    KARPENTER = "karpenter"
    CLUSTER_AUTOSCALER = "cluster-autoscaler"
    NONE = "none"


class Metadata(_Model):
    name: str = Field(pattern=DNS1123_LABEL_PATTERN)
    description: str = ""


class CatalogOverrides(_Model):
    """Instance types outside kgpu's catalog (seed 001's quick start: t3.micro), or corrected rows: the
    columns of ``kgpu catalog --file`` (instance_type, region, vcpus, memory_gib, gpu_count, gpu_name,
    gpu_memory_gib, ondemand_usd_per_hour, spot_usd_per_hour_min/median, zones, max_pods)."""

    file: str | None = Field(
        default=None,
        min_length=1,
        description="a CSV or YAML file of rows, relative to the profile (kgpu render/plan/simulate --catalog FILE adds one)",
    )
    instance_types: list[dict[str, str | int | float]] = Field(
        default_factory=list, max_length=10000, description="rows given inline, merged before the file's"
    )


class Profile(_Model):
    api_version: Literal["kgpu.dev/v1alpha1"] = "kgpu.dev/v1alpha1"
    kind: Literal["ClusterProfile"] = "ClusterProfile"
    metadata: Metadata
    provider: Provider
    cluster: Cluster = Field(default_factory=Cluster)
    autoscaler: Autoscaler
    pools: list[Pool] = Field(min_length=1)
    device_plugin: DevicePlugin = Field(default_factory=DevicePlugin)
    monitoring: Monitoring = Field(default_factory=Monitoring)
    dra_driver: DraDriver = Field(
        default_factory=DraDriver,
        description="NVIDIA's DRA driver, for pools with gpuAllocation: dra (chart version, namespace, driver root)",
    )
    kuberay: KubeRay | None = Field(
        default=None, description="render a RayCluster (kgpu render --target kuberay)"
    )
    spot_interruptions: SpotInterruptions = Field(default_factory=SpotInterruptions)
    workloads: list[str] = Field(
        default_factory=list, description="workload manifest files, relative to the profile; used by plan"
    )
    catalog: CatalogOverrides = Field(
        default_factory=CatalogOverrides,
        description="instance types the built-in catalog lacks or gets wrong, for render, plan and simulate",
    )
    storage: Storage = Field(
        default_factory=Storage,
        description="persistent volumes for datasets, checkpoints and logs: EBS, EFS, FSx for Lustre (kgpu render --target storage)",
    )

    queues: Queues | None = Field(
        default=None,
        description="teams sharing the pools through Kueue: a ResourceFlavor per pool, a ClusterQueue per team "
        "with its GPU quota per pool, LocalQueues in its namespaces (kgpu render --target kueue)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        names = [p.name for p in self.pools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"pool names must be unique, repeated: {', '.join(dupes)}")
        pods = [n for p in self.pools for n in p.verify_pod_names()]
        twice = sorted({n for n in pods if pods.count(n) > 1})
        if twice:
            raise ValueError(f"verifyPods: pod names must be unique across pools, repeated: {', '.join(twice)}")
        classes = [p.node_class for p in self.pools if p.kind == PoolKind.KARPENTER]
        shared = sorted({c for c in classes if classes.count(c) > 1})
        if shared:
            raise ValueError(
                f"EC2NodeClass names must be unique (nodeClassName, else the pool's name), repeated: "
                f"{', '.join(shared)}: kgpu renders one EC2NodeClass per Karpenter pool"
            )
        for i, pool in enumerate(self.pools):
            unknown = [z for z in pool.zones if self.cluster.zones and z not in self.cluster.zones]
            if unknown:
                raise ValueError(f"pools[{i}].zones: {unknown} not in cluster.zones {self.cluster.zones}")
            if pool.kind == PoolKind.KARPENTER and self.autoscaler != Autoscaler.KARPENTER:
                raise ValueError(f"pools[{i}]: a karpenter pool needs autoscaler: karpenter")
            if pool.kind == PoolKind.TKE_SUPERNODE and self.provider != Provider.TKE:
                raise ValueError(f"pools[{i}]: a tke-supernode pool needs provider: tke")
        keys: dict[str, Pool] = {}
        for i, pool in enumerate(self.pools):
            key = pool.plugin_config_key
            if key is None:
                continue
            other = keys.setdefault(key, pool)
            if other is not pool and other.sharing != pool.sharing:
                raise ValueError(
                    f"pools[{i}].sharing: config {key} is also pool {other.name}'s, with other settings; "
                    "give one of them its own configName"
                )
            if key == "default":
                raise ValueError(f"pools[{i}].sharing.configName: 'default' is the plugin's own default config")
        gpu = self.gpu_pools
        if self.monitoring.enabled and gpu and all(p.kind == PoolKind.TKE_SUPERNODE for p in gpu):
            raise ValueError(
                "monitoring.enabled: TKE super nodes run no DaemonSets, so the GPU exporter has no node to run "
                "on; set monitoring.enabled: false"
            )
        dra = [i for i, p in enumerate(self.pools) if p.gpu_allocation == "dra"]
        if dra and tuple(int(x) for x in self.cluster.kubernetes_version.split(".")) < (1, 34):
            raise ValueError(
                f"pools[{dra[0]}].gpuAllocation: dra needs cluster.kubernetesVersion 1.34 or later (resource.k8s.io/v1, "
                f"DRA GA), not {self.cluster.kubernetes_version}"
            )
        if dra and self.provider == Provider.TKE:
            raise ValueError(f"pools[{dra[0]}].gpuAllocation: dra: TKE clusters are not set up for NVIDIA's DRA driver by kgpu")
        storage = self.storage.check(self.provider, self.cluster.zones)
        if storage:
            raise ValueError(storage)
        if self.kuberay and self.kuberay.head_pool and self.kuberay.head_pool not in names:
            raise ValueError(
                f"kuberay.headPool: {quote(self.kuberay.head_pool)} is not a pool ({', '.join(names)})"
            )
        queues = self.queues.check(names) if self.queues else None
        if queues:
            raise ValueError(queues)
        return self

    @property
    def gpu_pools(self) -> list[Pool]:
        return [p for p in self.pools if p.is_gpu]

    @property
    def dra_pools(self) -> list[Pool]:
        """GPU pools whose GPUs NVIDIA's DRA driver publishes (``gpuAllocation: dra``)."""
        return [p for p in self.pools if p.gpu_allocation == "dra" and p.is_gpu]

    def pool(self, name: str) -> Pool:
        for p in self.pools:
            if p.name == name:
                return p
        raise KeyError(name)


# --- loading -------------------------------------------------------------------------------------------


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if part in _UNION_TAGS:  # the requirements union's member names are not fields
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def _pool_fields() -> frozenset[str]:
    from kgpu.model.profile_pool import Pool

    return frozenset(f.alias or name for name, f in Pool.model_fields.items())


_POOL_FIELDS = _pool_fields()


def _message(err: Any) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    given = err.get("input")
    if kind in ("literal_error", "enum"):
        expected = ctx.get("expected", "")
        options = re.findall(r"'([^']*)'", expected)
        return f"{quote(given)} is not one of {', '.join(options)}"
    if kind == "extra_forbidden":
        loc: tuple[Any, ...] = tuple(err.get("loc") or ())
        if len(loc) == 1 and loc[0] in _POOL_FIELDS:  # a pool's field written at the top (iamPolicyARNs)
            return f"unknown field here; it belongs under a pool: pools[].{loc[0]}"
        return "unknown field"
    if kind == "missing":
        return "required field missing"
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")


def _explained(exc: ValidationError) -> list[tuple[Any, str]]:
    """Each error with its text, a misspelt field first and named with the required sibling it stands for
    (it is why that one is missing)."""
    import difflib

    errors = exc.errors(include_url=False)
    out = [(e, _message(e)) for e in errors]
    for i, (e, text) in enumerate(out):
        if e.get("type") != "extra_forbidden":
            continue
        loc = tuple(e["loc"])
        missing = [str(m["loc"][-1]) for m in errors
                   if m.get("type") == "missing" and tuple(m["loc"][:-1]) == loc[:-1]]
        close = difflib.get_close_matches(str(loc[-1]), missing, n=1)
        if close:
            out.pop(i)
            out.insert(0, (e, f"{text}; did you mean {close[0]}?"))
            break
    return out


def format_validation_error(exc: ValidationError, source: str) -> InputError:
    """The first error (:func:`_explained`'s order) as one line with its field path; the next three named
    after it with theirs, any beyond counted."""
    explained = _explained(exc)
    first, message = explained[0]
    path = _loc(tuple(first["loc"]))
    others = [f"{_loc(tuple(e['loc'])) or 'the profile'}: {text}" for e, text in explained[1:4]]
    rest = len(explained) - 1 - len(others)
    more = f" (and {'; '.join(others)}{f'; and {rest} more' if rest else ''})" if others else ""
    where = f"{source}: {path}" if path else source
    return InputError(message + more, where=where)


def all_validation_errors(exc: ValidationError) -> list[str]:
    return [f"{_loc(tuple(e['loc']))}: {text}" for e, text in _explained(exc)]


def parse_profile(data: object, *, source: str = "kgpu.yaml") -> Profile:
    if not isinstance(data, dict):
        raise InputError(
            "a profile is a mapping (apiVersion, kind, metadata, provider, pools, ...)", where=source
        )
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(exc, source) from None


def load_profile_text(text: str, *, source: str = "kgpu.yaml") -> Profile:
    return parse_profile(load_document(text, source), source=source)


def template_text(name: str) -> str:
    """The commented YAML of a built-in template (package data)."""
    if name not in TEMPLATES:
        import difflib

        close = difflib.get_close_matches(name, TEMPLATES, n=2)
        hint = f"did you mean {' or '.join(close)}?" if close else f"one of {', '.join(TEMPLATES)}"
        raise InputError(f"unknown template {quote(name)}", hint=hint)
    return (resources.files("kgpu.model") / "templates" / f"{name}.yaml").read_text(encoding="utf-8")


def builtin_profile(name: str = DEFAULT_TEMPLATE) -> Profile:
    return load_profile_text(template_text(name), source=f"<built-in template {name}>")


def profile_json_schema() -> dict[str, Any]:
    schema = Profile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kgpu cluster profile"
    return schema


# --- Karpenter objects as pools ------------------------------------------------------------------------

# Where a profile pool's fields come from in a NodePool, for errors that name the object's own field.
_NODEPOOL_FIELDS = {
    "name": "metadata.name",
    "requirements": "spec.template.spec.requirements",
    "labels": "spec.template.metadata.labels",
    "taints": "spec.template.spec.taints",
    "limits": "spec.limits",
    "weight": "spec.weight",
    "consolidation": "spec.disruption",
    "amiFamily": "spec.template.spec.nodeClassRef",
    "userData": "spec.template.spec.nodeClassRef",
}
DEFAULT_REGION = "us-west-2"


def profile_with_nodepools(
    nodepools: list[tuple[dict[str, Any], str]],
    nodeclasses: dict[str, dict[str, Any]],
    base: Profile | None = None,
    region: str | None = None,
) -> tuple[Profile, list[str]]:
    """``base`` (or an EKS/Karpenter profile for ``region``) with one Karpenter pool per NodePool object;
    a NodePool named like a profile pool replaces it (the cluster's object is what Karpenter runs). Bad
    NodePools are InputErrors naming the object and its field. Returns the profile and notes."""
    from kgpu.model.nodepool import pool_from_nodepool

    notes: list[str] = []
    pools: list[Pool] = []
    seen: dict[str, str] = {}
    for obj, where in nodepools:
        data, more = pool_from_nodepool(obj, nodeclasses, where)
        notes.extend(more)
        try:
            pool = Pool.model_validate(data)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            loc = tuple(err["loc"])
            head = str(loc[0]) if loc else ""
            path = _NODEPOOL_FIELDS.get(to_camel(head), head)
            rest = _loc(loc[1:])
            if rest:
                path = (
                    f"{_NODEPOOL_FIELDS.get(to_camel(head), head)}{'' if rest.startswith('[') else '.'}{rest}"
                )
            raise InputError(_message(err), where=f"{where}: {path}" if path else where) from None
        if pool.name in seen:
            raise InputError(f"NodePool {quote(pool.name)} is also in {seen[pool.name]}", where=where)
        seen[pool.name] = where
        pools.append(pool)
    if base is not None:
        if base.provider != Provider.EKS or base.autoscaler != Autoscaler.KARPENTER:
            raise InputError(
                "NodePools in the input need a profile with provider: eks and autoscaler: karpenter",
                where=nodepools[0][1],
            )
        replaced = [p.name for p in base.pools if p.name in seen]
        notes.extend(f"{seen[n]}: replaces the profile's pool {quote(n)}" for n in replaced)
        kept = [p for p in base.pools if p.name not in seen]
        return base.model_copy(update={"pools": kept + pools}), notes
    profile = Profile(
        metadata=Metadata(name="nodepools"),
        provider=Provider.EKS,
        autoscaler=Autoscaler.KARPENTER,
        cluster=Cluster(region=region or DEFAULT_REGION),
        pools=pools,
        monitoring=Monitoring(enabled=False),
    )
    return profile, notes
