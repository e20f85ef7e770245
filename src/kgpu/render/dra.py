"""NVIDIA's DRA driver for the pools that ask for it (``gpuAllocation: dra``): Helm values, DeviceClasses
and the claim side of the example workloads.

Facts from NVIDIA/k8s-dra-driver-gpu at tag v25.8.1 (chart ``deployments/helm/nvidia-dra-driver-gpu``,
its values.yaml packaged in ``schemas/`` and checked key by key like the device plugin's):

- The chart refuses ``resources.gpus.enabled: true`` (its default) unless ``gpuResourcesEnabledOverride:
  true`` is set too (``templates/validation.yaml``): kgpu sets both, since GPU allocation is the point.
  ``resources.computeDomains.enabled`` (IMEX channels, multi-node NVLink) follows the profile's
  ``draDriver.computeDomains``; without it the chart runs no controller Deployment.
- ``nvidiaDriverRoot``: ``/`` for a driver installed on the host (EKS GPU AMIs, kgpu's on-prem bootstrap),
  ``/run/nvidia/driver`` under the GPU Operator's driver container.
- The kubelet plugin DaemonSet (``nvidia-dra-driver-gpu-kubelet-plugin``) runs where its node affinity
  says; the chart's default needs Node Feature Discovery's ``feature.node.kubernetes.io/pci-10de.present``
  or ``nvidia.com/gpu.present`` labels, which EKS nodes do not carry without NFD/GFD. kgpu replaces the
  terms with one per DRA pool (the pool's labels, as the device plugin's affinity is built) and adds a
  toleration for every taint of those pools, so the plugin runs on exactly the nodes whose GPUs it
  publishes. Helm replaces lists, so the chart's default terms are gone.
- The chart creates the DeviceClasses ``gpu.nvidia.com`` and ``mig.nvidia.com`` (``templates/
  deviceclass-gpu.yaml``, ``deviceclass-mig.yaml``). kgpu renders the same objects (target ``dra-driver``)
  carrying Helm's ownership label and annotations for the release, so they can be applied before the
  chart (for ``kgpu simulate`` and review) and Helm adopts them on install instead of failing on
  "invalid ownership metadata".
- The namespace is the release's (``helm install -n``): the chart fails on a ``namespace`` value and on
  the ``default`` namespace.

The device plugin stays off DRA pools (``kgpu.render.uses_device_plugin_daemonset``): two advertisers of
one GPU hand it to two pods.
"""

from __future__ import annotations

import copy
from typing import Any

from kgpu.catalog.dra import device_classes
from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.render import (
    EKSCTL_GROUP_LABEL,
    GPU_RESOURCE,
    POOL_ANNOTATION,
    group_names,
    pool_selector,
    tolerations,
)

CHART = "nvidia-dra-driver-gpu"
REPO = "https://helm.ngc.nvidia.com/nvidia"
KUBELET_PLUGIN = f"{CHART}-kubelet-plugin"  # the DaemonSet the chart creates
CONTROLLER = f"{CHART}-controller"  # the Deployment (with computeDomains only)
IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu"
CLAIM_NAME = "gpu"  # the pod-level resourceClaims entry the rendered workloads use
API_VERSION = "resource.k8s.io/v1"


def dra_pools(profile: Profile) -> list[Pool]:
    """GPU pools of real nodes whose GPUs the DRA driver publishes."""
    return [p for p in profile.dra_pools if p.kind != PoolKind.TKE_SUPERNODE]


def _term(profile: Profile, pool: Pool) -> dict[str, Any]:
    selector = pool_selector(pool)
    exprs: list[dict[str, Any]] = [{"key": k, "operator": "In", "values": [v]} for k, v in selector.items()]
    if not selector:
        if pool.kind == PoolKind.STATIC:
            exprs.append({"key": "kubernetes.io/hostname", "operator": "In", "values": [n.name for n in pool.nodes]})
        else:
            exprs.append({"key": EKSCTL_GROUP_LABEL, "operator": "In", "values": group_names(profile, pool)})
    return {"matchExpressions": exprs}


def kubelet_plugin_terms(profile: Profile) -> list[dict[str, Any]]:
    """One node selector term per DRA pool (ORed)."""
    terms: list[dict[str, Any]] = []
    for pool in dra_pools(profile):
        term = _term(profile, pool)
        if term not in terms:
            terms.append(term)
    return terms


def kubelet_plugin_tolerations(profile: Profile) -> list[dict[str, str]]:
    """The taints of the DRA pools, each tolerated exactly, plus nvidia.com/gpu (the taint GPU nodes carry
    most often), sorted after it."""
    out = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    for pool in dra_pools(profile):
        for tol in tolerations(pool):
            if tol not in out and not (tol.get("key") == GPU_RESOURCE and tol.get("effect") == "NoSchedule"):
                out.append(tol)
    return out[:1] + sorted(out[1:], key=lambda t: (t["key"], t.get("value", ""), t.get("effect", "")))


def chart_values(profile: Profile) -> list[dict[str, Any]]:
    """Values for NVIDIA's nvidia-dra-driver-gpu chart (one document)."""
    d = profile.dra_driver
    values: dict[str, Any] = {
        "nvidiaDriverRoot": d.nvidia_driver_root,
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": d.compute_domains}},
        "kubeletPlugin": {
            "tolerations": kubelet_plugin_tolerations(profile),
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": kubelet_plugin_terms(profile)}
                }
            },
        },
    }
    return [values]


def chart_notes(profile: Profile) -> list[str]:
    d = profile.dra_driver
    pools = ", ".join(p.name for p in dra_pools(profile))
    return [
        f"Helm values for NVIDIA's DRA driver chart {CHART} {d.version} (GPUs of pools {pools}):",
        f"  helm repo add nvidia {REPO}",
        f"  helm upgrade --install {CHART} nvidia/{CHART} --version {d.version} -n {d.namespace} "
        "--create-namespace -f dra-driver-chart-values.yaml",
        "The chart creates the DeviceClasses gpu.nvidia.com and mig.nvidia.com (dra-driver.yaml: the same, adoptable).",
        "The device plugin is left off these pools: a GPU advertised by both is handed to two pods.",
    ]


def render(profile: Profile) -> list[dict[str, Any]]:
    """The DeviceClasses the chart creates, with Helm's ownership metadata for the release."""
    d = profile.dra_driver
    out = []
    for dc in device_classes():
        doc = copy.deepcopy(dc)
        doc["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
        doc["metadata"]["annotations"] = {"meta.helm.sh/release-name": CHART, "meta.helm.sh/release-namespace": d.namespace}
        out.append(doc)
    return out


def notes(profile: Profile) -> list[str]:
    return [
        f"The DeviceClasses the {CHART} chart creates, labelled for Helm to adopt them into release "
        f"{CHART} in {profile.dra_driver.namespace}; install the driver with dra-driver-chart-values.yaml.",
    ]


def template_name(pool: Pool, count: int) -> str:
    return f"gpu-claim-{pool.name}" if count == 1 else f"gpu-claim-{pool.name}-x{count}"


def claim_template(pool: Pool, count: int) -> dict[str, Any]:
    """A ResourceClaimTemplate for ``count`` whole GPUs of the pool's nodes (DeviceClass gpu.nvidia.com)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": template_name(pool, count), "labels": {"app.kubernetes.io/managed-by": "kgpu", POOL_ANNOTATION: pool.name}},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": count}},
        ]}}},
    }


def _pod_specs(doc: dict[str, Any], pools: dict[str, Pool]) -> list[tuple[dict[str, Any], Pool]]:
    """The pod specs of ``doc`` that run on a DRA pool, with the pool: a workload labelled with its pool, or a
    RayCluster's worker groups (their templates carry the pool annotation)."""
    kind = doc.get("kind")
    if kind == "RayCluster":
        out = []
        for group in doc["spec"].get("workerGroupSpecs", []):
            pool = pools.get(((group["template"].get("metadata") or {}).get("annotations") or {}).get(POOL_ANNOTATION, ""))
            if pool is not None:
                out.append((group["template"]["spec"], pool))
        return out
    labels = (doc.get("metadata") or {}).get("labels") or {}
    pool = pools.get(str(labels.get(POOL_ANNOTATION, "")))
    if pool is None:
        return []
    if kind == "Pod":
        return [(doc["spec"], pool)]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return [(doc["spec"]["template"]["spec"], pool)]
    return []


def _claim(spec: dict[str, Any]) -> int:
    """Move the containers' nvidia.com/gpu into a claim; the GPUs they asked for."""
    count = 0
    for c in spec.get("containers", []):
        res = c.get("resources") or {}
        n = int((res.get("limits") or {}).get(GPU_RESOURCE, 0) or (res.get("requests") or {}).get(GPU_RESOURCE, 0))
        for part in ("requests", "limits"):
            if part in res:
                res[part].pop(GPU_RESOURCE, None)
                if not res[part]:
                    del res[part]
        if n:
            res["claims"] = [{"name": CLAIM_NAME}]
            c["resources"] = res
            count += n
        elif not res and "resources" in c:
            del c["resources"]
    return count


def claim_workloads(profile: Profile, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workloads of DRA pools (the example workloads, RayCluster worker groups) ask for their GPUs
    through a ResourceClaimTemplate instead of ``nvidia.com/gpu`` limits (the device plugin is not on those
    nodes to advertise them): each pod's GPU count becomes a claim (the containers' ``resources.claims``) on a
    template of that many gpu.nvidia.com devices, and the templates come first."""
    pools = {p.name: p for p in dra_pools(profile)}
    if not pools:
        return docs
    templates: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not _pod_specs(doc, pools):
            out.append(doc)
            continue
        doc = copy.deepcopy(doc)
        for spec, pool in _pod_specs(doc, pools):
            count = _claim(spec)
            if count:
                name = template_name(pool, count)
                templates.setdefault(name, claim_template(pool, count))
                spec["resourceClaims"] = [{"name": CLAIM_NAME, "resourceClaimTemplateName": name}]
        out.append(doc)
    return list(templates.values()) + out
