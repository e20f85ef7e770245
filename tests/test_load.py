"""Reading Kubernetes documents: formats, workload expansion, API defaulting, and bad input."""

from __future__ import annotations

import json

import pytest

from builders import node_dict, pod_dict
from kgpu.errors import InputError
from kgpu.model.load import parse_documents, parse_text


def names(objects):
    return [p.name for p in objects.pods]


def template(spec_extra: dict | None = None) -> dict:
    return {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}], **(spec_extra or {})}}


@pytest.mark.parametrize(
    ("kind", "spec", "expected"),
    [
        ("Deployment", {"replicas": 3, "template": template()}, ["w-0", "w-1", "w-2"]),
        ("Deployment", {"template": template()}, ["w-0"]),  # replicas defaults to 1
        ("ReplicaSet", {"replicas": 2, "template": template()}, ["w-0", "w-1"]),
        ("StatefulSet", {"replicas": 2, "template": template()}, ["w-0", "w-1"]),
        ("Job", {"parallelism": 4, "completions": 2, "template": template()}, ["w-0", "w-1"]),
        ("Job", {"template": template()}, ["w-0"]),
        ("CronJob", {"jobTemplate": {"spec": {"parallelism": 2, "template": template()}}}, ["w-0", "w-1"]),
        ("Deployment", {"replicas": 0, "template": template()}, []),
    ],
)
def test_workloads_expand_to_their_pods(kind, spec, expected):
    api = {"Job": "batch/v1", "CronJob": "batch/v1"}.get(kind, "apps/v1")
    doc = {"apiVersion": api, "kind": kind, "metadata": {"name": "w", "namespace": "ml"}, "spec": spec}
    objects = parse_documents([doc], "w.yaml")
    assert names(objects) == expected
    assert all(p.namespace == "ml" and p.owner_kind == kind and p.spec.gpus == 1 for p in objects.pods)


def test_raycluster_expands_head_and_workers():
    doc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "raycluster"},
           "spec": {"headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": template()},
                    "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
                                          "rayStartParams": {}, "template": template()}]}}
    assert names(parse_documents([doc], "r.yaml")) == ["raycluster-head-0", "raycluster-gpu-worker-0", "raycluster-gpu-worker-1"]


def test_requests_default_to_limits_and_init_containers_and_overhead_count():
    doc = pod_dict("p")
    doc["spec"]["containers"] = [
        {"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}},
        {"name": "b", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
    ]
    doc["spec"]["initContainers"] = [
        {"name": "sidecar", "image": "x", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
        {"name": "setup", "image": "x", "resources": {"requests": {"cpu": "3", "memory": "100Mi"}}},
    ]
    doc["spec"]["overhead"] = {"cpu": "250m"}
    spec = parse_documents([doc], "p.yaml").pods[0].spec
    # containers: cpu 1 + 0.5 + sidecar 0.1 = 1.6; init: setup 3 + sidecar 0.1 = 3.1 -> max 3.1; + overhead 0.25
    assert spec.request("cpu") == 3350
    # memory: 1Gi (defaulted from limit) + 512Mi; init: 100Mi -> 1.5Gi
    assert spec.request("memory") == 1536 * 2**20


def test_kubectl_v1_list_json():
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        node_dict("n1", gpus=2), pod_dict("running", node_name="n1", phase="Running"), pod_dict("pending"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}},
    ]}).encode()
    objects = parse_text(data, "snapshot.json")
    assert [n.name for n in objects.nodes] == ["n1"]
    assert objects.nodes[0].alloc("nvidia.com/gpu") == 2
    assert [(p.name, p.node_name, p.phase) for p in objects.pods] == [("running", "n1", "Running"), ("pending", "", "Pending")]
    assert objects.ignored == {"Service": 1}


def test_identical_pod_specs_share_one_spec_object():
    data = json.dumps({"kind": "List", "items": [pod_dict(f"p{i}", cpu="1") for i in range(3)]}).encode()
    pods = parse_text(data, "l.json").pods
    assert pods[0].spec is pods[1].spec is pods[2].spec


def test_priority_class_resolves():
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    doc = pod_dict("p")
    doc["spec"]["priorityClassName"] = "high"
    crit = pod_dict("q")
    crit["spec"]["priorityClassName"] = "system-node-critical"
    pods = parse_documents([doc, pc, crit], "x.yaml").pods
    assert [p.priority for p in pods] == [1000, 2000001000]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"kind: Pod\nmetadata: {name: [\n", "x.yaml: invalid YAML at line"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: []}\n",
         "x.yaml: Pod (document 1): metadata.name: object without metadata.name"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {memory: 40GB}}\n",
         "x.yaml: Pod default/p: spec.containers[0].resources.requests.memory: invalid quantity '40GB'"),
        (b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: two}\n",
         "x.yaml: Deployment default/d: spec.replicas: Expected `int | null`, got `str`"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  tolerations: [{key: a, operator: Equals}]\n  containers: []\n",
         "x.yaml: Pod default/p: spec.tolerations[0].operator: 'Equals' is not one of Equal, Exists"),
        (b"apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec:\n  taints: [{key: a, effect: NoSchedul}]\n",
         "x.yaml: Node n: spec.taints[0].effect: 'NoSchedul' is not one of NoSchedule, PreferNoSchedule, NoExecute"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}\n",
         "x.yaml: Pod default/p: spec.containers[0].resources.requests.nvidia.com/gpu: must be equal to nvidia.com/gpu limit of 2"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: []\n  affinity: {nodeAffinity: "
         b"{preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, preference: {}}]}}\n",
         "x.yaml: Pod default/p: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
         "0: must be in the range 1-100"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: []\n  affinity: {nodeAffinity: "
         b"{preferredDuringSchedulingIgnoredDuringExecution: [{weight: 5, preference: {matchExpressions: "
         b"[{key: zone, operator: In}]}}]}}\n",
         "x.yaml: Pod default/p: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
         ".preference.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'"),
        (b"- just\n- a list\n", "x.yaml: document 1: expected a Kubernetes object"),
        (b"{\"kind\": \"Pod\", ", "x.yaml: invalid JSON"),
    ],
)
def test_bad_input_names_file_object_and_field(text, message):
    with pytest.raises(InputError) as info:
        parse_text(text, "x.yaml")
    assert info.value.line().startswith(message), info.value.line()


def test_40G_is_not_40Gi():
    g = parse_documents([pod_dict("a", memory="40G")], "x").pods[0].spec.request("memory")
    gi = parse_documents([pod_dict("b", memory="40Gi")], "x").pods[0].spec.request("memory")
    assert (g, gi) == (40 * 10**9, 40 * 2**30)


def test_node_overlays_are_read_for_the_karpenter_provisioner() -> None:
    """A snapshot carries Karpenter NodeOverlays: they are kept, with their file, for simulate's Karpenter
    (not "unknown kind", no warning); another apiVersion is ignored with a warning naming it."""
    from kgpu.model.load import parse_text

    doc = (
        b'{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "karpenter.sh/v1alpha1", '
        b'"kind": "NodeOverlay", "metadata": {"name": "shared"}, "spec": {"capacity": {"nvidia.com/gpu": "4"}}}, '
        b'{"apiVersion": "karpenter.sh/v1", "kind": "NodeOverlay", "metadata": {"name": "future"}, "spec": {}}]}'
    )
    objects = parse_text(doc, "s.json")
    assert [(d["metadata"]["name"], where) for d, where in objects.nodeoverlays] == [("shared", "s.json")]
    assert [w for w in objects.warnings if "NodeOverlay" in w] == [
        "s.json: NodeOverlay future: apiVersion 'karpenter.sh/v1' ignored; kgpu reads karpenter.sh/v1alpha1"
    ]
    assert not any("unknown kind" in w for w in objects.warnings)


def _daemon_pod(name: str, node: str, **extra: object) -> dict:
    """A DaemonSet's pod as the API server holds it: bound, and pinned to its node by node affinity."""
    doc = pod_dict(name, cpu="100m", memory="64Mi", node_name=node, phase="Running", namespace="kube-system",
                   labels={"k8s-app": "kube-proxy"}, affinity_terms=[
                       {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}])
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "kube-proxy", "uid": "0d5c", "controller": True}]
    doc["spec"].update(extra)
    return doc


def test_bound_pods_read_with_their_node_name_put_back():
    """Bound pods' specs differ only in the node they name: JSON reads each shape once and puts each pod's
    node back (nodeName, a DaemonSet pod's matchFields); where the name also stands elsewhere (a hostname
    selector, a toleration, a claim, a resource name) the spec is read whole. Either way the specs equal
    those read one document at a time."""
    docs = []
    for i in range(4):
        node = f"ip-10-0-{i}-7.us-west-2.compute.internal"
        docs.append(_daemon_pod(f"kube-proxy-{i}", node))
        docs.append(_daemon_pod(f"odd-{i}", node, nodeSelector={"kubernetes.io/hostname": node},
                                tolerations=[{"key": "dedicated", "operator": "Equal", "value": node}],
                                volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": node}}]))
        docs.append(pod_dict(f"web-{i}", cpu="1", node_name=node, phase="Running"))
    docs.append(pod_dict("zero", cpu="0", node_name="cpu", phase="Running"))  # a node named as a resource
    nul = pod_dict("nul", cpu="1", node_name="n0", phase="Running", labels={"a": "b"})
    nul["spec"]["nodeSelector"] = {"note": "x\u0000y"}  # a NUL of its own: read whole
    docs.append(nul)
    fast = parse_text(json.dumps({"kind": "List", "items": docs}).encode(), "cluster.json").pods
    one_by_one = [parse_documents([d], "cluster.json").pods[0] for d in docs]
    assert [p.spec for p in fast] == [p.spec for p in one_by_one]
    assert fast[0].spec.node_name == "ip-10-0-0-7.us-west-2.compute.internal"
    assert fast[3].spec.affinity.terms[0].match_fields[0].values == ("ip-10-0-1-7.us-west-2.compute.internal",)
    assert fast[-1].spec.node_selector == (("note", "x\u0000y"),)
    assert len({p.spec for p in fast}) == len(fast)  # each pod's own node


def test_a_bad_bound_pod_spec_is_named_with_its_pod_and_field():
    docs = [_daemon_pod("kube-proxy-a", "n1"), _daemon_pod("kube-proxy-b", "n2")]
    docs[1]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64MB"
    with pytest.raises(InputError) as info:
        parse_text(json.dumps({"kind": "List", "items": docs}).encode(), "cluster.json")
    assert info.value.line().startswith(
        "cluster.json: Pod kube-system/kube-proxy-b: spec.containers[0].resources.requests.memory: invalid quantity '64MB'"
    ), info.value.line()
