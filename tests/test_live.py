"""The live commands against a local API server: kubeconfig resolution, paging, faults, secrets, run.

The server (tests/fake_apiserver.py) speaks the real REST protocol; kgpu's client code path is the one
used against real clusters (the conformance suite runs the same commands against a real kube-apiserver).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from fake_apiserver import CORE, FakeApiServer, Fault
from kgpu.cli.main import cli
from kgpu.live.kubeconfig import Access, ClusterError, resolve

SECRETS = ["hunter2", "AKIAFAKEKEY", "vault-token-xyz", "ray-secret-42", "tmpl-secret-7"]


def node(name: str, *, gpus: int = 0, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    alloc = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints or []}, "status": {"allocatable": alloc, "capacity": alloc}}


def pod(name: str, *, ns: str = "default", node_name: str | None = None, gpus: int = 0,
        env: list[dict[str, Any]] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                         "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}
    if env:
        c["env"] = env
    meta: dict[str, Any] = {"name": name, "namespace": ns,
                            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]}
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [c]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"}}


def cluster_objects() -> list[dict[str, Any]]:
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    last_applied = json.dumps({"spec": {"containers": [{"env": [{"name": "PASSWORD", "value": "hunter2"}]}]}})
    objs = [node("cpu-1"), node("gpu-1", gpus=4, taints=gpu_taint)]
    objs.append(pod("web", node_name="cpu-1", env=[{"name": "PASSWORD", "value": "hunter2"},
                                                   {"name": "AWS_ACCESS_KEY_ID", "value": "AKIAFAKEKEY"},
                                                   {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                    annotations={"kubectl.kubernetes.io/last-applied-configuration": last_applied,
                                 "vault.hashicorp.com/agent-inject-token": "vault-token-xyz",
                                 "team": "ml"}))
    objs += [pod(f"train-{i}", ns="ml", gpus=1) for i in range(3)]
    objs.append(pod("infer", ns="ml", node_name="gpu-1", gpus=1))
    objs.append({"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "agent", "namespace": "kube-system"},
                 "spec": {"template": {"metadata": {"annotations": {"api-key": "tmpl-secret-7"}},
                                       "spec": {"containers": [{"name": "a", "image": "agent:1",
                                                                "env": [{"name": "TOKEN", "value": "tmpl-secret-7"}]}]}}},
                 "status": {"desiredNumberScheduled": 2, "numberReady": 2}})
    objs.append({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": "ml"},
                 "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}},
                          "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "template": {"spec": {
                              "containers": [{"name": "w", "image": "ray",
                                              "env": [{"name": "RAY_SECRET", "value": "ray-secret-42"}]}]}}}]}})
    objs.append({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
                 "spec": {"template": {"spec": {"requirements": []}}}})
    objs.append({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "train-0.1", "namespace": "ml"},
                 "reason": "FailedScheduling", "type": "Warning", "lastTimestamp": "2026-11-22T09:00:00Z",
                 "involvedObject": {"kind": "Pod", "name": "train-0", "namespace": "ml"},
                 "message": "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)."})
    objs.append({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.2", "namespace": "default"},
                 "reason": "Pulled", "type": "Normal", "involvedObject": {"kind": "Pod", "name": "web"}})
    return objs


@pytest.fixture
def api() -> Any:
    server = FakeApiServer(cluster_objects(), served=(*CORE, "nodepools", "rayclusters"))
    with server.running():
        yield server


def write_kubeconfig(path: Path, cfg: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(cfg))
    return path


def kgpu(args: list[str], env: dict[str, str] | None = None) -> Result:
    base = {"KUBECONFIG": "", "HOME": "/nonexistent"}
    return CliRunner().invoke(cli, args, env={**base, **(env or {})})


# --- snapshot ----------------------------------------------------------------------------------------------


def test_snapshot_pages_strips_secrets_and_notes_missing_crds(api: FakeApiServer, tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    out = tmp_path / "snap.json"
    res = kgpu(["snapshot", "--kubeconfig", str(kc), "-f", str(out), "--page-size", "2"])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    for secret in SECRETS:
        assert secret not in text, secret
    assert "managedFields" not in text and "last-applied-configuration" not in text
    doc = json.loads(text)
    assert doc["kind"] == "ClusterSnapshot" and doc["apiVersion"] == "kgpu.dev/v1alpha1"
    meta = doc["metadata"]
    assert meta["counts"] == {"Node": 2, "Pod": 5, "DaemonSet": 1, "PriorityClass": 0, "NodePool": 1,
                              "RayCluster": 1, "PersistentVolumeClaim": 0, "PersistentVolume": 0, "StorageClass": 0,
                              "Event": 2}  # FailedScheduling, and web's Pulled
    assert sorted(meta["absent"]) == [
        "eks.cloud.tencent.com/v1 ImageCache", "karpenter.k8s.aws/v1 EC2NodeClass", "karpenter.sh/v1 NodeClaim",
        "karpenter.sh/v1alpha1 NodeOverlay",
        "kueue.x-k8s.io/v1beta2 ClusterQueue", "kueue.x-k8s.io/v1beta2 Cohort",
        "kueue.x-k8s.io/v1beta2 LocalQueue", "kueue.x-k8s.io/v1beta2 ResourceFlavor", "kueue.x-k8s.io/v1beta2 Workload",
        "kueue.x-k8s.io/v1beta2 WorkloadPriorityClass", "resource.k8s.io/v1 DeviceClass",
        "resource.k8s.io/v1 ResourceClaim", "resource.k8s.io/v1 ResourceClaimTemplate",
        "resource.k8s.io/v1 ResourceSlice", "v1 Namespace"]
    assert meta["forbidden"] == []
    assert meta["server"] == api.url and meta["context"] == "fake"
    web = next(o for o in doc["items"] if o["metadata"]["name"] == "web")
    env = {e["name"]: e for e in web["spec"]["containers"][0]["env"]}
    assert env["PASSWORD"]["value"] == "<redacted>" and "valueFrom" in env["FROM_SECRET"]
    assert web["metadata"]["annotations"]["team"] == "ml"
    assert all(o.get("apiVersion") and o.get("kind") for o in doc["items"])
    # 5 pods in pages of 2: three list requests, the 2nd and 3rd with the continue token.
    pod_lists = [r for r in api.requests if r.path == "/api/v1/pods"]
    assert [r.query.get("continue") for r in pod_lists] == [None, ["2"], ["4"]]
    assert all(r.query["limit"] == ["2"] for r in pod_lists)
    assert not [r for r in api.requests if r.method != "GET"], "snapshot must be read-only"
    assert "snapshot of" in res.stderr


def test_snapshot_is_what_simulate_reads(api: FakeApiServer, tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    out = tmp_path / "snap.json"
    assert kgpu(["snapshot", "--kubeconfig", str(kc), "-o", str(out)]).exit_code == 0
    res = kgpu(["simulate", "--cluster", str(out), "-o", "json"])
    data = json.loads(res.stdout)
    phases = {p["name"]: (p["phase"], p.get("pool")) for p in data["pods"]}
    # gpu-1 has 3 GPUs left but the 1-GPU training pods do not tolerate its taint; the snapshot's NodePool
    # "gpu" (no requirements, no taints) provisions nodes for them. The DaemonSet "agent" has no pod on
    # cpu-1, the one node it tolerates: its controller creates one there.
    assert phases == {**{f"train-{i}": ("Provisioned", "gpu") for i in range(3)}, "agent-cpu-1": ("Scheduled", None)}
    assert res.exit_code == 0


def test_snapshot_namespace_flag_limits_namespaced_kinds(api: FakeApiServer, tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    res = kgpu(["snapshot", "--kubeconfig", str(kc), "-n", "ml"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["metadata"]["counts"]["Pod"] == 4 and doc["metadata"]["counts"]["Node"] == 2
    assert "/api/v1/namespaces/ml/pods" in {r.path for r in api.requests}


def test_snapshot_output_flag_is_a_format_or_a_file(api: FakeApiServer, tmp_path: Path) -> None:
    kc = str(write_kubeconfig(tmp_path / "kc", api.kubeconfig()))
    res = kgpu(["snapshot", "--kubeconfig", kc, "-o", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["kind"] == "ClusterSnapshot"
    out = tmp_path / "as-file.json"
    res = kgpu(["snapshot", "--kubeconfig", kc, "-o", str(out)])
    assert res.exit_code == 0 and json.loads(out.read_text())["kind"] == "ClusterSnapshot" and not res.stdout
    res = kgpu(["snapshot", "--kubeconfig", kc, "-o", "yaml"])
    assert res.exit_code == 2 and "a snapshot is JSON" in res.stderr
    res = kgpu(["snapshot", "--kubeconfig", kc, "-o", str(tmp_path / "a.json"), "-f", str(tmp_path / "b.json")])
    assert res.exit_code == 2 and "give the file once" in res.stderr
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


# --- kubeconfig resolution ---------------------------------------------------------------------------------


def test_kubeconfig_list_merges_first_file_wins(api: FakeApiServer, tmp_path: Path) -> None:
    first = api.kubeconfig(context="a", namespace="team-a")
    first["users"] = [{"name": "me", "user": {"token": api.token}}]
    second = {"current-context": "b", "clusters": [{"name": "fake", "cluster": {"server": "http://127.0.0.1:1"}},
                                                  {"name": "other", "cluster": {"server": api.url}}],
              "contexts": [{"name": "a", "context": {"cluster": "other", "user": "nobody"}},
                           {"name": "b", "context": {"cluster": "other", "user": "me", "namespace": "team-b"}}],
              "users": [{"name": "me", "user": {"token": "wrong"}}]}
    f1 = write_kubeconfig(tmp_path / "one", first)
    f2 = write_kubeconfig(tmp_path / "two", second)
    env = {"KUBECONFIG": f"{f1}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{f2}"}
    t = resolve(Access(), env)
    assert (t.config.context_name, t.namespace, t.server) == ("a", "team-a", api.url)  # file one wins
    t = resolve(Access(context="b"), env)
    assert (t.namespace, t.server) == ("team-b", api.url)
    assert t.config.user is not None and t.config.user.token == api.token  # user "me" from file one
    assert resolve(Access(context="b", namespace="x"), env).namespace == "x"


def test_relative_paths_are_relative_to_their_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    cfg = {"current-context": "c", "clusters": [{"name": "k", "cluster": {"server": "https://k:6443",
                                                                         "certificate-authority": "ca.crt"}}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
           "users": [{"name": "u", "user": {"client-certificate": "u.crt", "client-key": "u.key"}}]}
    f = write_kubeconfig(tmp_path / "sub" / "config", cfg)
    t = resolve(Access(kubeconfig=str(f)), {})
    assert t.config.cluster.certificate_auth == str(tmp_path / "sub" / "ca.crt")
    assert t.config.user is not None and t.config.user.client_cert == str(tmp_path / "sub" / "u.crt")


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("none", "no kubeconfig found"),
        ("missing-file", "no such kubeconfig file"),
        ("bad-context", "context 'nope' not found (contexts: fake)"),
        ("garbage", "kubeconfig is not a mapping"),
    ],
)
def test_config_errors_are_one_line_exit_2(api: FakeApiServer, tmp_path: Path, setup: str, expected: str) -> None:
    args = ["snapshot"]
    if setup == "missing-file":
        args += ["--kubeconfig", str(tmp_path / "nope")]
    elif setup == "bad-context":
        args += ["--kubeconfig", str(write_kubeconfig(tmp_path / "kc", api.kubeconfig())), "--context", "nope"]
    elif setup == "garbage":
        (tmp_path / "kc").write_text("- just\n- a list\n")
        args += ["--kubeconfig", str(tmp_path / "kc")]
    res = kgpu(args)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], res.stderr
    assert "Traceback" not in res.output


# --- API errors --------------------------------------------------------------------------------------------


def _snapshot(api: FakeApiServer, tmp_path: Path, *extra: str, cfg: dict[str, Any] | None = None) -> Result:
    kc = write_kubeconfig(tmp_path / "kc", cfg or api.kubeconfig())
    return kgpu(["snapshot", "--kubeconfig", str(kc), *extra])


def test_401_says_credentials_were_rejected(api: FakeApiServer, tmp_path: Path) -> None:
    cfg = api.kubeconfig(user={"token": "expired"})
    res = _snapshot(api, tmp_path, cfg=cfg)
    assert res.exit_code == 2
    assert "401 Unauthorized" in res.stderr and "update-kubeconfig" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_403_names_verb_and_resource_and_points_at_rbac(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("GET", r"^/apis/apps/v1/daemonsets$", 403,
                            message='daemonsets.apps is forbidden: User "dev" cannot list resource "daemonsets"'))
    res = _snapshot(api, tmp_path)
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert line.startswith("error: 403 Forbidden: cannot list daemonsets.apps")
    assert "kgpu render --target rbac" in line


def test_429_is_retried_after_retry_after(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 429, times=2, headers={"Retry-After": "0"}))
    res = _snapshot(api, tmp_path)
    assert res.exit_code == 0, res.output
    assert len([r for r in api.requests if r.path == "/api/v1/nodes"]) == 3


def test_429_that_never_ends_is_one_clear_line(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 429, times=10, headers={"Retry-After": "0"}))
    res = _snapshot(api, tmp_path)
    assert res.exit_code == 2
    assert "429 Too Many Requests: list nodes: still throttled after 3 tries" in res.stderr


def test_5xx_on_a_read_is_retried(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/pods$", 503, times=1))
    assert _snapshot(api, tmp_path).exit_code == 0
    api.faults.append(Fault("GET", r"^/api/v1/pods$", 500, times=5, message="etcdserver: request timed out"))
    res = _snapshot(api, tmp_path)
    assert res.exit_code == 2 and "500 Internal Server Error: list pods: etcdserver: request timed out" in res.stderr


def test_slow_server_times_out_with_the_flag_to_raise(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, delay=1.5, times=1))
    res = _snapshot(api, tmp_path, "--request-timeout", "0.3")
    assert res.exit_code == 2
    assert "list nodes: no answer from" in res.stderr and "--request-timeout" in res.stderr


def test_unreachable_server(tmp_path: Path) -> None:
    kc = {"current-context": "c", "clusters": [{"name": "k", "cluster": {"server": "http://127.0.0.1:9"}}],
          "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}], "users": [{"name": "u", "user": {"token": "t"}}]}
    res = kgpu(["snapshot", "--kubeconfig", str(write_kubeconfig(tmp_path / "kc", kc))])
    assert res.exit_code == 2 and "cannot reach http://127.0.0.1:9" in res.stderr


# --- exec credential plugins -------------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"])
def test_exec_plugin_token(api: FakeApiServer, tmp_path: Path, api_version: str) -> None:
    seen = tmp_path / "exec-info.json"
    script = tmp_path / "get-token"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"open({str(seen)!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO'])\n"
        f"print(json.dumps({{'apiVersion': {api_version!r}, 'kind': 'ExecCredential',"
        f" 'status': {{'token': {api.token!r}, 'expirationTimestamp': '2099-01-01T00:00:00Z'}}}}))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    user = {"exec": {"apiVersion": api_version, "command": "./get-token", "args": ["--cluster", "x"],
                     "env": [{"name": "AWS_PROFILE", "value": "dev"}]}}
    res = _snapshot(api, tmp_path, cfg=api.kubeconfig(user=user))
    assert res.exit_code == 0, res.output
    info = json.loads(seen.read_text())
    assert info["apiVersion"] == api_version and info["spec"]["interactive"] is False


def test_exec_plugin_missing_gives_its_install_hint(api: FakeApiServer, tmp_path: Path) -> None:
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "no-such-aws-cli",
                     "installHint": "Install the AWS CLI: https://aws.amazon.com/cli/"}}
    res = _snapshot(api, tmp_path, cfg=api.kubeconfig(user=user))
    assert res.exit_code == 2
    assert "exec plugin 'no-such-aws-cli' not found on PATH" in res.stderr and "Install the AWS CLI" in res.stderr


def test_unsupported_exec_api_version(api: FakeApiServer, tmp_path: Path) -> None:
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v2", "command": "x"}}
    with pytest.raises(ClusterError, match=re.escape("apiVersion 'client.authentication.k8s.io/v2' is not supported")):
        resolve(Access(kubeconfig=str(write_kubeconfig(tmp_path / "kc", api.kubeconfig(user=user)))), {})


# --- run ---------------------------------------------------------------------------------------------------


def _lifecycle(api: FakeApiServer, final: dict[str, Any], log: str, *, stay_pending: bool = False) -> list[str]:
    """Each GET of a pod moves it on: Unschedulable, then ContainerCreating, Running, then ``final``."""
    steps: list[dict[str, Any]] = [
        {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                             "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]},
        {"phase": "Pending", "containerStatuses": [{"name": "test", "state": {"waiting": {"reason": "ContainerCreating"}}}]},
        {"phase": "Running", "containerStatuses": [{"name": "test", "state": {"running": {}}}]},
        final,
    ]
    seen: list[str] = []

    def advance(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        n = seen.count(name)
        seen.append(name)
        api.logs[name] = log
        obj["status"] = steps[0] if stay_pending else steps[min(n, len(steps) - 1)]
        if not stay_pending and n >= 1:
            obj["spec"]["nodeName"] = "gpu-1"

    api.on_get_pod = advance
    return seen


def _terminated(code: int) -> dict[str, Any]:
    return {"phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [{"name": "test", "state": {"terminated": {"exitCode": code,
                                                                            "reason": "Completed" if code == 0 else "Error"}}}]}


def _run(api: FakeApiServer, tmp_path: Path, *args: str) -> Result:
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig(namespace="gpu-test"))
    return kgpu(["run", "--kubeconfig", str(kc), *args])


def test_run_vector_add_passes_shows_progress_and_cleans_up(api: FakeApiServer, tmp_path: Path) -> None:
    _lifecycle(api, _terminated(0), "[Vector addition of 50000 elements]\nTest PASSED\nDone\n")
    res = _run(api, tmp_path, "--timeout", "30")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in out
    assert "ContainerCreating" in out and "  | Test PASSED" in out
    assert re.search(r"^RESULT +POD +NODE +REASON$", out, re.M), out
    assert re.search(r"^PASS +pod/kgpu-vector-add-[0-9a-f]{6} +gpu-\d +vector-add passed", out, re.M), out
    assert "1/1 passed" in out
    assert api.of_kind("Pod") == [p for p in api.of_kind("Pod") if not p["metadata"]["name"].startswith("kgpu-")]
    created = [r.body for r in api.requests if r.method == "POST"]
    assert len(created) == 1 and created[0]["metadata"]["namespace"] == "gpu-test"
    assert created[0]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_run_fails_on_exit_code_and_deletes(api: FakeApiServer, tmp_path: Path) -> None:
    _lifecycle(api, _terminated(1), "no CUDA-capable device is detected\n")
    res = _run(api, tmp_path, "--test", "nvidia-smi", "--count", "2", "-o", "json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["failed"] == 2 and {p["reason"] for p in data["pods"]} == {"exit code 1"}
    assert {p["exit_code"] for p in data["pods"]} == {1}
    from test_json_schemas import validate

    validate("run", data)
    assert not [p for p in api.of_kind("Pod") if p["metadata"]["name"].startswith("kgpu-")]


def test_run_without_marker_fails_and_keep_leaves_the_pod(api: FakeApiServer, tmp_path: Path) -> None:
    _lifecycle(api, _terminated(0), "some output\n")
    res = _run(api, tmp_path, "--keep")
    assert res.exit_code == 1 and "'Test PASSED' not in the log" in res.stdout
    assert [p for p in api.of_kind("Pod") if p["metadata"]["name"].startswith("kgpu-")]


def test_run_times_out_with_the_last_reason(api: FakeApiServer, tmp_path: Path) -> None:
    _lifecycle(api, _terminated(0), "", stay_pending=True)
    res = _run(api, tmp_path, "--timeout", "1")
    assert res.exit_code == 1
    assert "timed out after 1s (Pending: Unschedulable: 0/2 nodes are available" in res.stdout
    assert not [p for p in api.of_kind("Pod") if p["metadata"]["name"].startswith("kgpu-")]


def test_run_dry_run_creates_nothing(api: FakeApiServer, tmp_path: Path) -> None:
    res = _run(api, tmp_path, "--dry-run", "--image", "my/img:1", "--gpus", "2", "--", "python", "check.py")
    assert res.exit_code == 0
    pod_doc = yaml.safe_load(res.stdout)
    assert pod_doc["spec"]["containers"][0]["command"] == ["python", "check.py"]
    assert pod_doc["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert not api.requests


def test_run_with_a_tke_profile_uses_annotations(api: FakeApiServer, tmp_path: Path) -> None:
    prof = tmp_path / "kgpu.yaml"
    assert kgpu(["init", "--template", "tke-supernode", "--file", str(prof)]).exit_code == 0
    res = _run(api, tmp_path, "-f", str(prof), "--dry-run", "-o", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    ann = doc["metadata"].get("annotations", {})
    assert ann.get("eks.tke.cloud.tencent.com/gpu-type"), ann


def test_rendered_rbac_grants_every_read_a_snapshot_makes() -> None:
    """`kgpu render --target rbac` must cover every list `kgpu snapshot` makes (a 403 points users at it)."""
    from kgpu.live.client import EVENT
    from kgpu.live.snapshot import BY_NAME, SOURCES
    from kgpu.render.rbac import GET_ONLY, RULES

    granted = {(group, res) for group, resources in RULES for res in resources}
    needed = {(r.group, r.plural) for r, _ in SOURCES} | {(EVENT.group, EVENT.plural)}
    assert needed <= granted, needed - granted
    by_name = {(group, res) for group, resources in GET_ONLY for res in resources}
    assert {(r.group, r.plural) for r in BY_NAME} <= by_name


def test_doctor_reads_the_live_cluster_read_only(api: FakeApiServer, tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    res = kgpu(["doctor", "--kubeconfig", str(kc), "-o", "json"])
    assert res.exit_code in (0, 1), res.output
    data = json.loads(res.stdout)
    checks = {f["check"] for f in data["findings"]}
    # No device plugin DaemonSet on a cluster with a GPU node, and three pending GPU pods.
    assert any("device-plugin" in c for c in checks), checks
    assert any(f["object"] == "Pod/ml/train-0" for f in data["findings"]), data["findings"]
    assert not [r for r in api.requests if r.method != "GET"]
    # The same cluster through a saved snapshot gives the same findings.
    snap = tmp_path / "snap.json"
    assert kgpu(["snapshot", "--kubeconfig", str(kc), "-o", str(snap)]).exit_code == 0
    again = json.loads(kgpu(["doctor", "--snapshot", str(snap), "-o", "json"]).stdout)
    # the same findings, each speaking of what it read: the cluster live, the snapshot from the file
    live_words = json.dumps(data["findings"])
    assert "The cluster's NodePools" in live_words and "snapshot" not in live_words
    assert json.dumps(again["findings"]) == live_words.replace("The cluster's NodePools", "The snapshot's NodePools") \
        .replace("the cluster has no FailedScheduling", "the snapshot has no FailedScheduling")
