"""What `kgpu snapshot` saves for doctor's newer checks and simulate's DRA, read over HTTP from the fake API
server: the device plugin's config ConfigMaps (by the names its DaemonSets mount, no other ConfigMap),
NodeOverlays, DRA objects, TKE ImageCaches, pods' Pulling/Pulled events and the visible-devices env values;
each skipped with a note when its API is not served (404) or RBAC forbids it (403)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from fake_apiserver import CORE, RESOURCES, FakeApiServer, Fault
from kgpu.cli.main import cli
from snapshot_builders import container, daemonset, event, node, nodepool, plugin_ds, pod, v1_list

GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
NS = "nvidia-device-plugin"
CONFIGS = "nvdp-nvidia-device-plugin-configs"  # the chart's <release>-nvidia-device-plugin-configs
TS_CONFIG = ("version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n"
             "    - name: nvidia.com/gpu\n      replicas: 4\n")
OTHER_SECRET = "db-pass-9f8e7d"


def chart_plugin_ds() -> dict[str, Any]:
    """The device plugin chart's DaemonSet with config.map set: the config-manager sidecar and the
    available-configs volume of the configs ConfigMap."""
    ds = plugin_ds(name="nvdp-nvidia-device-plugin", namespace=NS, desired=2)
    spec = ds["spec"]["template"]["spec"]
    spec["containers"][0]["command"] = ["nvidia-device-plugin"]
    spec["containers"].insert(0, {
        "name": "nvidia-device-plugin-sidecar", "image": spec["containers"][0]["image"],
        "command": ["config-manager"],
        "env": [{"name": "ONESHOT", "value": "false"},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "NODE_LABEL", "value": "nvidia.com/device-plugin.config"},
                {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
                {"name": "CONFIG_FILE_DST", "value": "/config/config.yaml"},
                {"name": "DEFAULT_CONFIG", "value": "default"}],
        "volumeMounts": [{"name": "available-configs", "mountPath": "/available-configs"},
                         {"name": "config", "mountPath": "/config"}]})
    spec["volumes"] = [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
                       {"name": "available-configs", "configMap": {"name": CONFIGS}},
                       {"name": "config", "emptyDir": {}}]
    return ds


def configmap(name: str, ns: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": "812",
                         "creationTimestamp": "2026-11-20T08:00:00Z",
                         "labels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
            "data": data}


def gpu_pod(name: str, node_name: str, env: list[dict[str, Any]], gpus: int = 1, **kw: Any) -> dict[str, Any]:
    c = container("train", "nvcr.io/nvidia/pytorch:24.05-py3", gpus=gpus)
    c["env"] = env
    return pod(name, "ml", containers=[c], node_name=node_name, tolerations=GPU_TOL, **kw)


def cluster() -> list[dict[str, Any]]:
    shared = {"nvidia.com/device-plugin.config": "a100-shared", "nvidia.com/gpu.replicas": "4",
              "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "1"}
    wrong = {"nvidia.com/device-plugin.config": "h100-shared"}  # no such key: config-manager fails
    taint = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    agent = daemonset("node-agent", "monitoring", "example.com/node-agent:1.4")
    agent["spec"]["template"]["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "agent-config"}}]
    p1 = gpu_pod("train-0", "gpu-a", [{"name": "CUDA_VISIBLE_DEVICES", "value": "1"},
                                      {"name": "WANDB_API_KEY", "value": "wandb-secret-123"}])
    p2 = gpu_pod("debug-0", "gpu-a", [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}], gpus=0)
    p3 = gpu_pod("infer-0", "gpu-b", [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}],
                 annotations={"eks.tke.cloud.tencent.com/use-image-cache": "auto"})
    gone = gpu_pod("old-0", "gpu-b", [])
    return [
        node("gpu-a", "g5.xlarge", labels=shared, taints=taint, nodepool="infer"),
        node("gpu-b", "g5.xlarge", labels=wrong, taints=taint, nodepool="infer"),
        chart_plugin_ds(), agent,
        configmap(CONFIGS, NS, {"default": TS_CONFIG.replace("replicas: 4", "replicas: 1"),
                                "a100-shared": TS_CONFIG}),
        configmap("agent-config", "monitoring", {"password": OTHER_SECRET}),
        configmap("unrelated", NS, {"db-password": OTHER_SECRET}),
        p1, p2, p3,
        nodepool("infer"),
        {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "infer-gpu-sharing"},
         "spec": {"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["infer"]}],
                  "capacity": {"nvidia.com/gpu": "4"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": "gpu-a-gpu.nvidia.com-x7k2p"},
         "spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-a",
                  "pool": {"name": "gpu-a", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one-gpu", "namespace": "ml"},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared-gpu", "namespace": "ml"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
        {"apiVersion": "eks.cloud.tencent.com/v1", "kind": "ImageCache", "metadata": {"name": "gpu-images-infer"},
         "spec": {"images": ["nvcr.io/nvidia/pytorch:24.05-py3"], "imageCacheSize": 100},
         "status": {"phase": "Ready", "imageCacheId": "imc-al38p4mq"}},
        event(p1, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", count=1),
        event(p3, 'Pulling image "nvcr.io/nvidia/pytorch:24.05-py3"', reason="Pulling", count=1),
        event(p3, "Successfully pulled image in 4m12s", reason="Pulled", count=1),
        event(gone, 'Pulling image "busybox:1.36"', reason="Pulling", count=1),  # a pod no longer there
        event(p1, "Started container train", reason="Started", count=1),
    ]


ALL = tuple(RESOURCES)


def snap(server: FakeApiServer, tmp_path: Path, *args: str) -> tuple[Any, Path]:
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump(server.kubeconfig()))
    out = tmp_path / "snap.json"
    res = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", str(kc), "-f", str(out), *args],
                             env={"KUBECONFIG": "", "HOME": "/nonexistent"})
    return res, out


def test_snapshot_saves_what_doctor_and_simulate_read(tmp_path: Path) -> None:
    server = FakeApiServer(cluster(), served=ALL)
    with server.running():
        res, out = snap(server, tmp_path, "--page-size", "2")
    assert res.exit_code == 0, res.output
    text = out.read_text()
    doc = json.loads(text)
    counts = doc["metadata"]["counts"]
    assert {k: counts[k] for k in ("NodeOverlay", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate",
                                   "ResourceSlice", "ImageCache", "ConfigMap")} == dict.fromkeys(
        ("NodeOverlay", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "ImageCache",
         "ConfigMap"), 1)
    assert doc["metadata"]["absent"] == [] and doc["metadata"]["forbidden"] == []
    # Only the plugin's ConfigMap, read by name: no ConfigMap list, no other ConfigMap's data.
    cms = [o for o in doc["items"] if o["kind"] == "ConfigMap"]
    assert [c["metadata"]["name"] for c in cms] == [CONFIGS] and cms[0]["data"]["a100-shared"] == TS_CONFIG
    cm_requests = [r.path for r in server.requests if "configmaps" in r.path]
    assert cm_requests == [f"/api/v1/namespaces/{NS}/configmaps/{CONFIGS}"]
    assert OTHER_SECRET not in text and "wandb-secret-123" not in text
    # Events: FailedScheduling, and the pull events of pods in the snapshot; not Started, not a gone pod's.
    reasons = sorted((e["reason"], e["involvedObject"]["name"]) for e in doc["items"] if e["kind"] == "Event")
    assert reasons == [("FailedScheduling", "train-0"), ("Pulled", "infer-0"), ("Pulling", "infer-0")]
    # The visible-devices values are kept, every other env value is not.
    env = {e["name"]: e.get("value") for o in doc["items"] if o["kind"] == "Pod"
           for c in o["spec"]["containers"] for e in c.get("env", [])}
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["NVIDIA_VISIBLE_DEVICES"] in ("all", "none")
    assert env["WANDB_API_KEY"] == "<redacted>"
    ds = next(o for o in doc["items"] if o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("nvdp"))
    sidecar = {e["name"]: e.get("value") for e in ds["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert sidecar["CONFIG_FILE_SRCDIR"] == "<redacted>"


def test_missing_apis_and_forbidden_kinds_are_skipped_with_a_note(tmp_path: Path) -> None:
    server = FakeApiServer(cluster(), served=(*CORE, "configmaps", "imagecaches", "resourceslices"))
    server.faults.append(Fault("GET", r"^/apis/eks\.cloud\.tencent\.com/v1/imagecaches$", 403,
                               message='imagecaches.eks.cloud.tencent.com is forbidden: User "viewer" cannot list'))
    server.faults.append(Fault("GET", r"/configmaps/", 403, message="configmaps is forbidden"))
    with server.running():
        res, out = snap(server, tmp_path)
    assert res.exit_code == 0, res.output
    meta = json.loads(out.read_text())["metadata"]
    assert "karpenter.sh/v1alpha1 NodeOverlay" in meta["absent"] and "resource.k8s.io/v1 DeviceClass" in meta["absent"]
    assert "resource.k8s.io/v1 ResourceSlice" not in meta["absent"] and meta["counts"]["ResourceSlice"] == 1
    assert len(meta["forbidden"]) == 2
    assert meta["forbidden"][0].startswith("403 Forbidden: cannot list imagecaches.eks.cloud.tencent.com")
    assert meta["forbidden"][1].startswith("403 Forbidden: cannot get configmaps")
    assert "ImageCache" not in meta["counts"] and "ConfigMap" not in meta["counts"]
    assert "skipped" in res.stderr and "kgpu render --target rbac" in res.stderr


def test_a_forbidden_core_kind_still_fails(tmp_path: Path) -> None:
    server = FakeApiServer(cluster(), served=ALL)
    server.faults.append(Fault("GET", r"^/api/v1/pods$", 403, message="pods is forbidden"))
    with server.running():
        res, out = snap(server, tmp_path)
    assert res.exit_code == 2 and not out.exists()
    assert "403 Forbidden: cannot list pods" in res.output


def test_a_hostile_configmap_name_is_not_requested(tmp_path: Path) -> None:
    objs = cluster()
    ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["namespace"] == NS)
    ds["spec"]["template"]["spec"]["volumes"][1]["configMap"]["name"] = "../../../api/v1/secrets"
    server = FakeApiServer(objs, served=ALL)
    with server.running():
        res, _ = snap(server, tmp_path)
    assert res.exit_code == 0, res.output
    assert not [r for r in server.requests if "configmaps" in r.path or "secrets" in r.path]


CHECKS = ("sharing-", "nvidia-visible-devices", "cuda-visible-devices", "nodepool-overlay", "tke-image-cache-")


def doctor(path: Path) -> set[tuple[str, str, str]]:
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(path), "-o", "json"])
    assert res.exit_code in (0, 1), res.output
    return {(f["check"], f["severity"], f["object"]) for f in json.loads(res.stdout)["findings"]}


def test_snapshot_then_doctor_finds_what_a_kubectl_list_gives(tmp_path: Path) -> None:
    objs = cluster()
    server = FakeApiServer(copy.deepcopy(objs), served=ALL)
    with server.running():
        res, out = snap(server, tmp_path)
    assert res.exit_code == 0, res.output
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(v1_list(objs)))
    from_snapshot, from_list = doctor(out), doctor(listed)
    wanted = {f for f in from_list if f[0].startswith(CHECKS)}
    assert ("sharing-config-missing", "error", "Node/gpu-b") in wanted
    assert ("cuda-visible-devices-conflict", "error", "Pod/ml/train-0") in wanted
    assert ("nvidia-visible-devices-in-spec", "warning", "Pod/ml/debug-0") in wanted
    assert ("nvidia-visible-devices-in-spec", "error", "Pod/ml/infer-0") in wanted
    assert ("tke-image-cache-not-used", "warning", "Pod/ml/infer-0") in wanted  # its Pulling event
    got = {f for f in from_snapshot if f[0].startswith(CHECKS)}
    assert got == wanted
    # The NodeOverlay came through: no nodepool-overlay finding from either.
    assert not [f for f in from_snapshot if f[0] == "nodepool-overlay"]


def test_simulate_reads_the_snapshot_without_complaining_of_what_it_saves(tmp_path: Path) -> None:
    server = FakeApiServer(cluster(), served=ALL)
    with server.running():
        res, out = snap(server, tmp_path)
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["simulate", "--cluster", str(out), "-o", "json"])
    assert res.exit_code == 0, res.output
    assert "ImageCache" not in res.stderr and "ConfigMap" not in res.stderr and "DeviceClass" not in res.stderr


def test_a_configmap_too_deep_for_the_readers_is_refused_not_written(tmp_path: Path) -> None:
    """A ConfigMap read by name sits two levels deeper in the snapshot than in its answer: one that the
    client's depth check passes but the file readers would refuse is an error (exit 2), nothing written."""
    objs = cluster()
    deep: Any = "x"
    for _ in range(98):  # within the answer's limit of 100, beyond it inside the snapshot
        deep = [deep]
    cm = configmap(CONFIGS, NS, {"a100-shared": TS_CONFIG})
    cm["deep"] = deep
    objs = [o for o in objs if not (o["kind"] == "ConfigMap" and o["metadata"]["name"] == CONFIGS)] + [cm]
    server = FakeApiServer(objs, served=ALL)
    with server.running():
        res, out = snap(server, tmp_path)
    assert res.exit_code == 2, res.output
    assert f"configmap {NS}/{CONFIGS}" in res.output and "depth limit" in res.output
    assert not out.exists()


def test_the_snapshot_holds_kueue_and_kgpu_queue_reads_it(tmp_path: Path) -> None:
    """Kueue's objects (the two-team example, with Namespaces and a running Workload) are saved as listed,
    and `kgpu queue -c` on the snapshot gives the verdict it gives on the files themselves."""
    root = Path(__file__).resolve().parent.parent / "examples" / "queue"
    kueue = [d for d in yaml.safe_load_all((root / "kueue.yaml").read_text()) if d]
    for i, d in enumerate(kueue):
        d["metadata"].update(uid=f"uid-kueue-{i}", resourceVersion="900", creationTimestamp="2026-11-28T08:00:00Z")
    server = FakeApiServer([*cluster(), *kueue], served=ALL)
    with server.running():
        res, out = snap(server, tmp_path)
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    counts = doc["metadata"]["counts"]
    assert (counts["ResourceFlavor"], counts["ClusterQueue"], counts["Namespace"]) == (4, 2, 2)
    jobs = str(root / "jobs.yaml")
    now = "2026-11-28T12:00:00Z"
    from_snapshot = CliRunner().invoke(cli, ["queue", "-c", str(out), "-w", jobs, "--now", now, "-o", "json"])
    from_files = CliRunner().invoke(cli, ["queue", "-c", str(root / "kueue.yaml"), "-w", jobs, "--now", now,
                                          "-o", "json"])
    assert from_snapshot.exit_code == from_files.exit_code == 0, from_snapshot.output
    got, want = json.loads(from_snapshot.stdout), json.loads(from_files.stdout)
    assert [(w["name"], w["admitted"], w["flavors"]) for w in got["workloads"]] == [
        (w["name"], w["admitted"], w["flavors"]) for w in want["workloads"]]
    assert got["cluster_queues"] == want["cluster_queues"]


def test_objects_kgpus_readers_refuse_are_left_out_and_said(tmp_path: Path) -> None:
    """An API server that serves what its own validation would refuse (a ResourceSlice whose devices is a
    number, one with 129 devices, a PersistentVolumeClaim whose spec is a number, a NodeOverlay with a
    negative capacity, a DeviceClass whose selector is over the CEL cost limit, as an older API server may have
    stored it): the snapshot leaves each out, says which object and why (stderr and metadata.leftOut), and
    stays readable: doctor and simulate read it."""
    objs = cluster()
    good_slice = next(o for o in objs if o["kind"] == "ResourceSlice")
    odd_slice = copy.deepcopy(good_slice)
    odd_slice["metadata"]["name"] = "gpu-b-odd"
    odd_slice["spec"]["devices"] = 5
    wide_slice = copy.deepcopy(good_slice)
    wide_slice["metadata"]["name"] = "gpu-c-wide"
    wide_slice["spec"]["devices"] = [{"name": f"gpu-{i}"} for i in range(129)]
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ml"},
           "spec": 5}
    overlay = copy.deepcopy(next(o for o in objs if o["kind"] == "NodeOverlay"))
    overlay["metadata"]["name"] = "negative"
    overlay["spec"]["capacity"] = {"nvidia.com/gpu": "-4"}
    costly = copy.deepcopy(next(o for o in objs if o["kind"] == "DeviceClass"))
    costly["metadata"]["name"] = "costly.nvidia.com"
    nums = "[" + ", ".join(str(i) for i in range(100)) + "]"
    costly["spec"]["selectors"] = [{"cel": {"expression": f"{nums}.all(x, {nums}.all(y, {nums}.all(z, x > z)))"}}]
    server = FakeApiServer([*objs, odd_slice, wide_slice, pvc, overlay, costly], served=ALL)
    with server.running():
        res, out = snap(server, tmp_path)
    assert res.exit_code == 0, res.output
    meta = json.loads(out.read_text())["metadata"]
    left = meta["leftOut"]
    assert len(left) == 5, left
    assert any(line.startswith("ResourceSlice gpu-b-odd: spec.devices") for line in left), left
    assert any("gpu-c-wide" in line and "128" in line for line in left), left
    assert any("PersistentVolumeClaim ml/data" in line for line in left), left
    assert any("NodeOverlay negative" in line for line in left), left
    assert any(line.startswith("DeviceClass costly.nvidia.com: spec.selectors[0].cel.expression: Forbidden: too "
                               "complex, exceeds cost limit") for line in left), left
    assert meta["counts"]["ResourceSlice"] == 1 and meta["counts"]["NodeOverlay"] == 1
    assert res.stderr.count("note: left out") == 5
    for verb in (["doctor", "--snapshot", str(out)], ["simulate", "-c", str(out)]):
        run = CliRunner().invoke(cli, verb)
        assert run.exit_code in (0, 1), run.output
