"""Builders of cluster objects as ``kubectl get -o json`` prints them, for doctor's snapshot fixtures.

The objects carry what a real API server returns (uid, creationTimestamp, the default tolerations admission
adds, status conditions, nodeInfo, containerStatuses), not just what doctor reads, so the fixtures exercise
the reader on realistic input. ``tests/fixtures/snapshots/generate.py`` writes the fixture files from them.
"""

from __future__ import annotations

import hashlib
from typing import Any

T0 = "2026-11-22T08:00:00Z"
T1 = "2026-11-22T09:58:12Z"
REGION = "us-west-2"

DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
EXPORTER_IMAGE = "ghcr.io/kgpu/kgpu:0.1.0"

# instance type -> (vCPU, memory Ki capacity, allocatable cpu, allocatable memory, pods, GPUs, GPU product)
SHAPES: dict[str, tuple[int, str, str, str, int, int, str]] = {
    "m5.xlarge": (4, "16059904Ki", "3920m", "15034880Ki", 58, 0, ""),
    "m5.2xlarge": (8, "32408520Ki", "7910m", "31389640Ki", 58, 0, ""),
    "g4dn.xlarge": (4, "16069112Ki", "3920m", "15146852Ki", 29, 1, "Tesla-T4"),
    "g5.xlarge": (4, "16088736Ki", "3920m", "15166476Ki", 58, 1, "NVIDIA-A10G"),
    "g5.12xlarge": (48, "195065200Ki", "47810m", "188195312Ki", 234, 4, "NVIDIA-A10G"),
    "p3.8xlarge": (32, "251754764Ki", "31850m", "245024100Ki", 234, 4, "Tesla-V100-SXM2-16GB"),
}


def uid(*parts: str) -> str:
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def node(
    name: str,
    instance_type: str = "m5.xlarge",
    *,
    zone: str = "us-west-2a",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    gpus: int | None = None,
    gpu_capacity: int | None = None,
    ready: bool = True,
    driver: str | None = None,
    os_image: str = "Amazon Linux 2023.6.20241010",
    nodepool: str | None = None,
    capacity_type: str = "on-demand",
    gfd: bool = True,
) -> dict[str, Any]:
    """A node; GPU nodes advertise ``gpus`` allocatable (default: the type's count; None in the shape = none)."""
    vcpu, mem, acpu, amem, pods, type_gpus, product = SHAPES[instance_type]
    lab = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": instance_type,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": zone,
        "topology.k8s.aws/zone-id": "usw2-az"
        + zone[-1].replace("a", "1").replace("b", "2").replace("c", "3"),
    }
    if nodepool:
        lab.update(
            {
                "karpenter.sh/nodepool": nodepool,
                "karpenter.sh/capacity-type": capacity_type,
                "karpenter.sh/initialized": "true",
                "karpenter.sh/registered": "true",
                "karpenter.k8s.aws/ec2nodeclass": "default",
                "karpenter.k8s.aws/instance-family": instance_type.split(".")[0],
                "karpenter.k8s.aws/instance-gpu-count": str(type_gpus),
            }
        )
    if type_gpus and gfd:
        lab.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(type_gpus),
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.machine": instance_type,
            }
        )
        if driver:
            major, minor, *rest = driver.split(".")
            lab.update(
                {
                    "nvidia.com/cuda.driver.major": major,
                    "nvidia.com/cuda.driver.minor": minor,
                    "nvidia.com/cuda.driver.rev": rest[0] if rest else "",
                    "nvidia.com/cuda.driver-version.full": driver,
                }
            )
    lab.update(labels or {})
    capacity = {
        "cpu": str(vcpu),
        "ephemeral-storage": "104845292Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": mem,
        "pods": str(pods),
    }
    allocatable = {
        "cpu": acpu,
        "ephemeral-storage": "95551679124",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": amem,
        "pods": str(pods),
    }
    if type_gpus:
        advertised = type_gpus if gpus is None else gpus
        if advertised >= 0:
            capacity["nvidia.com/gpu"] = str(type_gpus if gpu_capacity is None else gpu_capacity)
            allocatable["nvidia.com/gpu"] = str(advertised)
    spec: dict[str, Any] = {"providerID": f"aws:///{zone}/i-{uid(name)[:17].replace('-', '')}"}
    if taints:
        spec["taints"] = taints
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": f"KubeletHas{r}",
            "message": m,
            "lastHeartbeatTime": T1,
            "lastTransitionTime": T0,
        }
        for t, r, m in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "container runtime network not ready",
            "lastHeartbeatTime": T1,
            "lastTransitionTime": T0,
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": "192.168.10.5",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": T0,
            "labels": lab,
            "name": name,
            "resourceVersion": "1234567",
            "uid": uid("node", name),
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"address": "192.168.10.5", "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": uid("boot", name),
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.112-122.189.amzn2023.x86_64",
                "kubeProxyVersion": "v1.31.2-eks-94953ac",
                "kubeletVersion": "v1.31.2-eks-94953ac",
                "machineID": uid("m", name).replace("-", ""),
                "operatingSystem": "linux",
                "osImage": os_image,
                "systemUUID": uid("s", name),
            },
        },
    }


def container(
    name: str,
    image: str,
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    gpus: int | None = None,
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    req = dict(requests or {"cpu": "100m", "memory": "128Mi"})
    lim = dict(limits or {})
    if gpus is not None:
        lim["nvidia.com/gpu"] = str(gpus)
        req["nvidia.com/gpu"] = str(gpus)
    if req:
        res["requests"] = req
    if lim:
        res["limits"] = lim
    return {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "name": name,
        "resources": res,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
            }
        ],
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    containers: list[dict[str, Any]] | None = None,
    image: str = "nginx:1.27",
    gpus: int | None = None,
    node_name: str | None = None,
    phase: str | None = None,
    ready: bool = True,
    tolerations: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    owner: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    waiting: tuple[str, str] | None = None,
    priority: int = 0,
) -> dict[str, Any]:
    """A pod; bound when ``node_name`` is given (Running unless ``phase``), else Pending + Unschedulable."""
    cs = containers or [container(name.rsplit("-", 1)[0] if owner else name, image, gpus=gpus)]
    meta: dict[str, Any] = {
        "creationTimestamp": T0,
        "labels": dict(labels or {"app": name.rsplit("-", 2)[0]}),
        "name": name,
        "namespace": namespace,
        "resourceVersion": "2345678",
        "uid": uid("pod", namespace, name),
    }
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["generateName"] = name.rsplit("-", 1)[0] + "-"
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": owner[0],
                "name": owner[1],
                "uid": uid(owner[0], namespace, owner[1]),
            }
        ]
    spec: dict[str, Any] = {
        "containers": cs,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": priority,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": list(tolerations or []) + DEFAULT_TOLERATIONS,
        "volumes": [
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "defaultMode": 420,
                    "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                },
            }
        ],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
        phase = phase or "Running"
        statuses = []
        for c in cs:
            st: dict[str, Any] = {
                "containerID": f"containerd://{uid('c', name, c['name']).replace('-', '')}",
                "image": c["image"],
                "imageID": c["image"].split(":")[0] + "@sha256:" + "0" * 64,
                "lastState": {},
                "name": c["name"],
                "ready": ready,
                "restartCount": 0 if ready else 7,
                "started": ready,
                "state": {"running": {"startedAt": T0}},
            }
            if waiting:
                st["state"] = {"waiting": {"reason": waiting[0], "message": waiting[1]}}
            statuses.append(st)
        status: dict[str, Any] = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": T0,
                    "status": "True",
                    "type": "PodReadyToStartContainers",
                },
                {"lastProbeTime": None, "lastTransitionTime": T0, "status": "True", "type": "Initialized"},
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": T0,
                    "status": "True" if ready else "False",
                    "type": "Ready",
                },
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": T0,
                    "status": "True" if ready else "False",
                    "type": "ContainersReady",
                },
                {"lastProbeTime": None, "lastTransitionTime": T0, "status": "True", "type": "PodScheduled"},
            ],
            "containerStatuses": statuses,
            "hostIP": "192.168.10.5",
            "phase": phase,
            "podIP": "192.168.33.17",
            "qosClass": "Burstable",
            "startTime": T0,
        }
    else:
        status = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": T1,
                    "message": "0/1 nodes are available",
                    "reason": "Unschedulable",
                    "status": "False",
                    "type": "PodScheduled",
                }
            ],
            "phase": "Pending",
            "qosClass": "Burstable",
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def daemonset(
    name: str,
    namespace: str,
    image: str,
    *,
    tolerations: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    desired: int = 0,
    ready: int | None = None,
    container_name: str = "main",
    args: list[str] | None = None,
) -> dict[str, Any]:
    sel = dict(labels or {"name": name})
    c: dict[str, Any] = {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "name": container_name,
        "resources": {},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if args:
        c["args"] = args
    spec: dict[str, Any] = {
        "containers": [c],
        "dnsPolicy": "ClusterFirst",
        "priorityClassName": "system-node-critical",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
    }
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    ready = desired if ready is None else ready
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "annotations": {"deprecated.daemonset.template.generation": "1"},
            "creationTimestamp": T0,
            "generation": 1,
            "labels": dict(sel),
            "name": name,
            "namespace": namespace,
            "resourceVersion": "3456789",
            "uid": uid("DaemonSet", namespace, name),
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": sel},
            "template": {"metadata": {"labels": dict(sel)}, "spec": spec},
            "updateStrategy": {
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                "type": "RollingUpdate",
            },
        },
        "status": {
            "currentNumberScheduled": desired,
            "desiredNumberScheduled": desired,
            "numberAvailable": ready,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "observedGeneration": 1,
            "updatedNumberScheduled": desired,
            **({"numberUnavailable": desired - ready} if ready < desired else {}),
        },
    }


def daemon_pod(
    ds: dict[str, Any], node_name: str, *, ready: bool = True, waiting: tuple[str, str] | None = None
) -> dict[str, Any]:
    meta = ds["metadata"]
    tmpl = ds["spec"]["template"]
    suffix = uid(meta["name"], node_name)[:5]
    p = pod(
        f"{meta['name']}-{suffix}",
        meta["namespace"],
        containers=[dict(c) for c in tmpl["spec"]["containers"]],
        node_name=node_name,
        ready=ready,
        tolerations=tmpl["spec"].get("tolerations"),
        owner=("DaemonSet", meta["name"]),
        labels=dict(tmpl["metadata"]["labels"]),
        waiting=waiting,
        priority=2000001000,
    )
    p["spec"]["priorityClassName"] = "system-node-critical"
    p["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            }
        }
    }
    return p


def plugin_ds(
    image: str = PLUGIN_IMAGE,
    *,
    tolerations: list[dict[str, Any]] | None = None,
    desired: int = 0,
    ready: int | None = None,
    name: str = "nvidia-device-plugin-daemonset",
    namespace: str = "kube-system",
    **kw: Any,
) -> dict[str, Any]:
    tol = (
        tolerations
        if tolerations is not None
        else [{"key": "CriticalAddonsOnly", "operator": "Exists"}, GPU_TOLERATION]
    )
    return daemonset(
        name,
        namespace,
        image,
        tolerations=tol,
        labels={"name": "nvidia-device-plugin-ds"},
        desired=desired,
        ready=ready,
        container_name="nvidia-device-plugin-ctr",
        **kw,
    )


def exporter_ds(desired: int = 0, ready: int | None = None) -> dict[str, Any]:
    return daemonset(
        "kgpu-exporter",
        "kgpu-system",
        EXPORTER_IMAGE,
        tolerations=[GPU_TOLERATION],
        labels={"app.kubernetes.io/name": "kgpu-exporter", "app.kubernetes.io/component": "gpu-exporter"},
        desired=desired,
        ready=ready,
        container_name="exporter",
        args=["exporter", "--listen", ":9835"],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                            ]
                        }
                    ]
                }
            }
        },
    )


def event(
    pod_doc: dict[str, Any], message: str, *, reason: str = "FailedScheduling", count: int = 4
) -> dict[str, Any]:
    meta = pod_doc["metadata"]
    kind = pod_doc["kind"]
    name = meta["name"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "count": count,
        "firstTimestamp": T0,
        "involvedObject": {
            "apiVersion": pod_doc.get("apiVersion", "v1"),
            "kind": kind,
            "name": name,
            "namespace": meta["namespace"],
            "resourceVersion": "2345678",
            "uid": meta.get("uid", ""),
        },
        "lastTimestamp": T1,
        "message": message,
        "metadata": {
            "creationTimestamp": T0,
            "name": f"{name}.1879f3a2c0d9e8b7",
            "namespace": meta["namespace"],
            "resourceVersion": "4567890",
            "uid": uid("ev", name, reason),
        },
        "reason": reason,
        "reportingComponent": "default-scheduler"
        if reason == "FailedScheduling"
        else "replicaset-controller",
        "reportingInstance": "",
        "source": {
            "component": "default-scheduler" if reason == "FailedScheduling" else "replicaset-controller"
        },
        "type": "Warning",
    }


def nodepool(
    name: str,
    *,
    requirements: list[dict[str, Any]] | None = None,
    taints: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    limits: dict[str, Any] | None = None,
    used: dict[str, str] | None = None,
) -> dict[str, Any]:
    reqs = requirements or [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "g4dn"]},
    ]
    tmpl_spec: dict[str, Any] = {
        "expireAfter": "720h",
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": reqs,
    }
    if taints:
        tmpl_spec["taints"] = taints
    spec: dict[str, Any] = {
        "disruption": {
            "budgets": [{"nodes": "10%"}],
            "consolidateAfter": "1m",
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
        },
        "template": {"metadata": {"labels": dict(labels or {})}, "spec": tmpl_spec},
    }
    if limits:
        spec["limits"] = limits
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "creationTimestamp": T0,
            "generation": 1,
            "name": name,
            "resourceVersion": "5678901",
            "uid": uid("np", name),
            "annotations": {
                "karpenter.sh/nodepool-hash": "6821555240594823858",
                "karpenter.sh/nodepool-hash-version": "v3",
            },
        },
        "spec": spec,
        "status": {
            "conditions": [
                {
                    "lastTransitionTime": T0,
                    "message": "",
                    "observedGeneration": 1,
                    "reason": "Ready",
                    "status": "True",
                    "type": "Ready",
                }
            ],
            "resources": dict(used or {"cpu": "0", "memory": "0", "nodes": "0", "pods": "0"}),
        },
    }


def snapshot(items: list[dict[str, Any]], *, absent: list[str] | None = None) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for it in items:
        counts[it["kind"]] = counts.get(it["kind"], 0) + 1
    return {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterSnapshot",
        "metadata": {
            "createdAt": "2026-11-22T10:00:00Z",
            "context": "arn:aws:eks:us-west-2:111122223333:cluster/gpu-cluster",
            "server": "https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com",
            "kgpuVersion": "0.1.0",
            "counts": dict(sorted(counts.items())),
            "absent": absent if absent is not None else ["ray.io/v1 RayCluster"],
        },
        "items": items,
    }


def v1_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
