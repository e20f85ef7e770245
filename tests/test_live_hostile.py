"""The live verbs against a hostile API server, hostile kubeconfigs and signals.

The server is tests/fake_apiserver.py on 127.0.0.1, told to misbehave (its ``Fault``: raw answers of the
wrong shape, bad encodings, gzip bombs, answers that drip or never end, continue tokens that never end,
writes done and then answered 504 or never answered). kgpu's request path is the production one: nothing in
the client is patched. Every case must end by itself, quickly, with one line and exit 2 (or the verdict's
code), never a traceback or a hang; signals are sent to a real ``kgpu`` process.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from fake_apiserver import CORE, FakeApiServer, Fault, Request
from kgpu.cli.main import cli
from kgpu.live.client import MAX_BODY, MAX_EMPTY_PAGES, NODE, ApiClient
from kgpu.live.kubeconfig import Access, ClusterError, resolve
from kgpu.live.snapshot import redact
from launch import launched
from test_live import _lifecycle, _terminated, cluster_objects, node, pod, write_kubeconfig

SERVED = (*CORE, "nodepools", "rayclusters")


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer(cluster_objects(), served=SERVED)
    with server.running():
        yield server


def kgpu(args: list[str], env: dict[str, str] | None = None) -> Result:
    base = {"KUBECONFIG": "", "HOME": "/nonexistent"}
    return CliRunner().invoke(cli, args, env={**base, **(env or {})})


def one_error_line(res: Result) -> str:
    """The result's stderr is exactly one `error: ...` line and nothing went to a traceback."""
    assert ("Traceback" not in res.output and res.exception is None) or isinstance(res.exception, SystemExit), res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


def snapshot(api: FakeApiServer, tmp_path: Path, *extra: str, cfg: dict[str, Any] | None = None) -> Result:
    kc = write_kubeconfig(tmp_path / "kc", cfg or api.kubeconfig())
    return kgpu(["snapshot", "--kubeconfig", str(kc), *extra])


def run(api: FakeApiServer, tmp_path: Path, *args: str) -> Result:
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig(namespace="gpu-test"))
    return kgpu(["run", "--kubeconfig", str(kc), *args])


def list_body(items: list[dict[str, Any]], meta: Any) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "NodeList", "metadata": meta, "items": items}).encode()


def smoke_pods(api: FakeApiServer) -> list[dict[str, Any]]:
    return [p for p in api.of_kind("Pod") if p["metadata"]["name"].startswith("kgpu-")]


# --- 404s and names ----------------------------------------------------------------------------------------


def test_run_in_a_namespace_that_does_not_exist_is_one_line(api: FakeApiServer, tmp_path: Path) -> None:
    # What kube-apiserver answers a create in a missing namespace (NamespaceLifecycle admission).
    api.faults.append(Fault("POST", r"/namespaces/gpu-tset/pods$", 404, message='namespaces "gpu-tset" not found'))
    res = run(api, tmp_path, "-n", "gpu-tset", "--timeout", "5")
    assert res.exit_code == 2
    line = one_error_line(res)
    assert '404 Not Found: create pods: namespaces "gpu-tset" not found' in line and "check the namespace" in line


def test_a_core_list_that_is_not_served_is_one_line(tmp_path: Path) -> None:
    server = FakeApiServer(cluster_objects(), served=("nodes", "pods", "events", "priorityclasses"))
    with server.running():
        res = snapshot(server, tmp_path)
    assert res.exit_code == 2
    assert "list daemonsets.apps: the server does not serve apps/v1 DaemonSet" in one_error_line(res)


@pytest.mark.parametrize("verb", ["snapshot", "doctor", "run"])
@pytest.mark.parametrize("namespace", ["a/b", "..", "ML", "x" * 64, "-lead"])
def test_namespaces_are_validated_before_any_request(api: FakeApiServer, tmp_path: Path, verb: str,
                                                     namespace: str) -> None:
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    res = kgpu([verb, "--kubeconfig", str(kc), "-n", namespace])
    assert res.exit_code == 2
    assert "-n/--namespace: " in one_error_line(res) and "not a valid namespace name" in res.stderr
    assert not api.requests


def test_a_context_namespace_is_validated_too(api: FakeApiServer, tmp_path: Path) -> None:
    res = snapshot(api, tmp_path, cfg=api.kubeconfig(namespace="team/../../nodes"))
    assert res.exit_code == 2 and "contexts[fake].namespace" in one_error_line(res)
    assert not api.requests


# --- relative paths in a kubeconfig named by a relative path -----------------------------------------------


def test_relative_paths_resolve_against_a_relatively_named_kubeconfig(api: FakeApiServer, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import certifi

    conf = tmp_path / "conf"
    (conf / "bin").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    shutil.copy(certifi.where(), conf / "ca.crt")  # any valid PEM bundle
    (conf / "token").write_text(api.token + "\n")
    script = conf / "bin" / "get-token"
    script.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{'apiVersion': "
                      f"'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
                      f"'status': {{'token': {api.token!r}}}}}))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    cfg = api.kubeconfig()
    cfg["clusters"][0]["cluster"]["certificate-authority"] = "ca.crt"
    cfg["users"] = [{"name": "me", "user": {"tokenFile": "token"}},
                    {"name": "plugin", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                          "command": "./bin/get-token"}}}]
    cfg["contexts"].append({"name": "exec", "context": {"cluster": "fake", "user": "plugin"}})
    write_kubeconfig(conf / "config", cfg)
    monkeypatch.chdir(tmp_path / "work")  # neither the kubeconfig's folder nor its parent
    target = resolve(Access(kubeconfig="../conf/config"), {})
    assert target.config.cluster.certificate_auth == str(conf / "ca.crt")
    assert target.config.user is not None and target.config.user.token_file == str(conf / "token")
    for context in ("fake", "exec"):
        res = kgpu(["snapshot", "--kubeconfig", "../conf/config", "--context", context, "-f", f"{context}.json"])
        assert res.exit_code == 0, res.output
        assert json.loads((tmp_path / "work" / f"{context}.json").read_text())["metadata"]["counts"]["Node"] == 2


def test_a_context_without_a_user_talks_without_credentials(tmp_path: Path) -> None:
    server = FakeApiServer(cluster_objects(), token=None, served=SERVED)  # e.g. kubectl proxy's port
    with server.running():
        cfg = server.kubeconfig()
        del cfg["contexts"][0]["context"]["user"], cfg["users"]
        res = snapshot(server, tmp_path, cfg=cfg)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["metadata"]["counts"]["Node"] == 2
    assert all("authorization" not in r.headers for r in server.requests)


def test_a_missing_token_file_is_one_line(api: FakeApiServer, tmp_path: Path) -> None:
    res = snapshot(api, tmp_path, cfg=api.kubeconfig(user={"tokenFile": "no-such-token"}))
    assert res.exit_code == 2
    line = one_error_line(res)
    assert "cannot read the token file" in line and str(tmp_path / "no-such-token") in line


# --- objects and answers of the wrong shape ----------------------------------------------------------------


def hostile_objects() -> list[dict[str, Any]]:
    odd = pod("odd", ns="ml", node_name="cpu-1")
    odd["spec"]["containers"][0]["env"] = 5
    odd["spec"]["initContainers"] = [{"name": "i", "image": "busybox", "env": ["PASSWORD=init-secret-1"]},
                                     "not-a-container"]
    odd["metadata"]["annotations"] = "token=annotation-secret-2"
    odd["metadata"]["labels"] = {"env": "prod"}
    odd["spec"]["containers"][0]["args"] = ["--db=postgres://app:db-pass-8@db.ml:5432/runs", "--mirror",
                                            "https://mirror-user:mirror-pass-9@pypi.internal/simple"]
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": "ml"},
           "spec": {"headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0",
                                                         "redis-password": "ray-redis-secret-3",
                                                         "auth-token": "ray-token-4"},
                                      "template": {"spec": {"containers": [{"name": "head", "image": "rayproject/ray:2.9.0"}]}}},
                    "workerGroupSpecs": 3}}
    deep_template = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc2", "namespace": "ml"},
                     "spec": {"headGroupSpec": None, "workerGroupSpecs": [
                         7, {"groupName": "gpu", "rayStartParams": {"num-gpus": "1", "Secret": "ray-secret-5"},
                             "template": {"spec": {"containers": [
                                 {"name": "w", "image": "rayproject/ray:2.9.0",
                                  "env": [{"name": "RAY_PASSWORD", "value": "ray-secret-6"}, None]}]}}}]}}
    return [node("cpu-1"), node("gpu-1", gpus=4), odd, ray, deep_template]


def test_objects_of_any_shape_are_redacted_not_crashed_on(tmp_path: Path) -> None:
    server = FakeApiServer(hostile_objects(), served=SERVED)
    out = tmp_path / "snap.json"
    with server.running():
        res = snapshot(server, tmp_path, "-f", str(out))
    assert res.exit_code == 0, res.output
    text = out.read_text()
    for secret in ("init-secret-1", "annotation-secret-2", "ray-redis-secret-3", "ray-token-4", "ray-secret-5",
                   "ray-secret-6", "db-pass-8", "mirror-pass-9"):
        assert secret not in text, secret
    doc = json.loads(text)
    by_name = {o["metadata"]["name"]: o for o in doc["items"]}
    assert by_name["odd"]["metadata"]["labels"] == {"env": "prod"}  # a label named env is not an env list
    assert by_name["odd"]["spec"]["containers"][0]["args"] == ["--db=postgres://db.ml:5432/runs", "--mirror",
                                                               "https://pypi.internal/simple"]
    params = by_name["rc"]["spec"]["headGroupSpec"]["rayStartParams"]
    assert params == {"dashboard-host": "0.0.0.0", "redis-password": "<redacted>", "auth-token": "<redacted>"}
    assert by_name["rc2"]["spec"]["workerGroupSpecs"][1]["rayStartParams"]["num-gpus"] == "1"
    assert by_name["rc"]["spec"]["workerGroupSpecs"] == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgres://u:p@ss@w0rd@db:5432/runs", "postgres://db:5432/runs"),  # '@' left unencoded in a password
        ("redis://:s3cr@t@redis:6379 and https://u:pw@h/x?to=a@b", "redis://redis:6379 and https://h/x?to=a@b"),
        ("https://admin:pw@10.0.0.1:6443", "https://10.0.0.1:6443"),
        ("mail ops@example.com, see https://h/a@b", "mail ops@example.com, see https://h/a@b"),
    ],
)
def test_url_userinfo_is_stripped_up_to_the_last_at_sign(text: str, expected: str) -> None:
    """A password with an unencoded '@' is stripped whole, not up to its first '@'; an '@' in a path or
    query, or outside a URL, stays."""
    from kgpu.live.kubeconfig import strip_userinfo

    assert strip_userinfo(text) == expected


def test_secrets_in_volume_attributes_and_parameters_of_any_shape_are_redacted() -> None:
    """A CSI driver's volumeAttributes (SMB's mountOptions), opaque DRA parameters given as a string, a
    StorageClass's parameters as a list: the values of password=/token= pairs go, the rest stays."""
    pv = {"kind": "PersistentVolume", "spec": {"csi": {"driver": "smb.csi.k8s.io", "volumeAttributes": {
        "source": "//fs.ml/share", "mountOptions": "username=bob,password=hunter2-7", "token": "tok-8"}}}}
    claim = {"kind": "ResourceClaim", "spec": {"devices": {"config": [{"opaque": {
        "driver": "gpu.nvidia.com", "parameters": "token=s3cr3t-9 mode=exclusive"}}]}}}
    sc = {"kind": "StorageClass", "provisioner": "ebs.csi.aws.com",
          "parameters": ["password=hunter2-10", "type=gp3", {"apiKey": "k-11"}]}
    text = json.dumps([redact(o) for o in (pv, claim, sc)])
    for secret in ("hunter2-7", "tok-8", "s3cr3t-9", "hunter2-10", "k-11"):
        assert secret not in text, secret
    assert pv["spec"]["csi"]["volumeAttributes"]["source"] == "//fs.ml/share"
    assert "username=bob" in text and "mode=exclusive" in text and "type=gp3" in text


@pytest.mark.parametrize("value", [5, "x", None, [1, [2, {"env": 3}]], {"metadata": [], "spec": {"env": {"a": 1}}},
                                   {"kind": "Pod", "spec": "containers"}, {"metadata": {"annotations": ["a"]}}])
def test_redaction_is_total_over_any_json_shape(value: Any) -> None:
    redact(value)  # no exception, whatever the shape


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (list_body([], "a string"), "list nodes: metadata is a string, not an object"),
        (list_body([node("n1"), "a string"], {}), "list nodes: items[1] is a string, not an object"),
        (json.dumps({"items": 3}).encode(), "list nodes: items is a number, not a list"),
        (b"[1, 2]", "list nodes: the answer is a list, not a list object"),
        (list_body([], {"continue": 7}), "metadata.continue is not a token"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than"),
        (b'{"items": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested deeper than"),
        (b'{"items": [' + b"9" * 5000 + b"]}", "out of range"),
        (b"not json", "is not valid: invalid JSON"),
    ],
)
def test_answers_of_the_wrong_shape_are_one_line(api: FakeApiServer, tmp_path: Path, body: bytes, expected: str) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, body=body))
    res = snapshot(api, tmp_path)
    assert res.exit_code == 2
    assert expected in one_error_line(res)


def test_a_content_encoding_that_does_not_decode(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, body=list_body([], {}),
                            headers={"Content-Encoding": "gzip"}))
    res = snapshot(api, tmp_path)
    assert res.exit_code == 2
    assert "list nodes: the answer from" in one_error_line(res) and "does not decode" in res.stderr


def test_a_gzip_encoded_answer_is_read(api: FakeApiServer, tmp_path: Path) -> None:
    """kube-apiserver compresses large answers when asked (Accept-Encoding: gzip): that must keep working."""
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, body=gzip.compress(list_body([node("zipped")], {})),
                            headers={"Content-Encoding": "gzip"}))
    res = snapshot(api, tmp_path)
    assert res.exit_code == 0, res.output
    assert [o["metadata"]["name"] for o in json.loads(res.stdout)["items"] if o["kind"] == "Node"] == ["zipped"]


# --- paging, time and size ---------------------------------------------------------------------------------


def test_a_repeated_continue_token_ends_the_list(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, times=1000,
                            body=lambda req: list_body([node("n")], {"continue": "same"})))
    res = snapshot(api, tmp_path)
    assert res.exit_code == 2
    assert "list nodes: the server repeated a continue token" in one_error_line(res)
    assert len([r for r in api.requests if r.path == "/api/v1/nodes"]) == 2


def test_ever_new_continue_tokens_end_at_the_page_limit(api: FakeApiServer, tmp_path: Path) -> None:
    pages = iter(range(10**9))
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, times=10**6,
                            body=lambda req: list_body([], {"continue": f"t{next(pages)}"})))
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    with ApiClient(resolve(Access(kubeconfig=str(kc)), {})) as client:
        with pytest.raises(ClusterError, match=r"still more after 40 pages of 500 \(page limit\)"):
            client.list(NODE, max_pages=40)
        with pytest.raises(ClusterError, match=r"more than 3 objects \(list limit\)"):
            api.faults.insert(0, Fault("GET", r"^/api/v1/nodes$", 200, times=100,
                                       body=lambda req: list_body([node("a"), node("b")], {"continue": f"u{next(pages)}"})))
            client.list(NODE, max_items=3)


def test_ever_new_continue_tokens_on_empty_pages_end_within_the_empty_page_limit(
    api: FakeApiServer, tmp_path: Path
) -> None:
    """A server answering every page with no object and a new token is cut off after MAX_EMPTY_PAGES pages,
    not after the 10,000-page limit (about 8 minutes at the rate a real client pages); a list that takes
    longer than its time limit ends too, naming that limit."""
    pages = iter(range(10**9))
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, times=10**6,
                            body=lambda req: list_body([], {"continue": f"t{next(pages)}"})))
    res = snapshot(api, tmp_path)
    assert res.exit_code == 2
    assert f"list nodes: {MAX_EMPTY_PAGES} pages in a row without an object" in one_error_line(res)
    # (a snapshot asks for the next page while it reads one: one more request may be on its way)
    assert MAX_EMPTY_PAGES <= len([r for r in api.requests if r.path == "/api/v1/nodes"]) <= MAX_EMPTY_PAGES + 1
    api.faults.insert(0, Fault("GET", r"^/api/v1/nodes$", 200, times=10**6,
                               body=lambda req: list_body([node("n")], {"continue": f"v{next(pages)}"})))
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    with (
        ApiClient(resolve(Access(kubeconfig=str(kc)), {})) as client,
        pytest.raises(ClusterError, match=r"list nodes: still more after 0s and 1 pages \(time limit of one list\)"),
    ):
        list(client.iter_list(NODE, max_seconds=0.0))


def drip(piece: bytes, every: float, first: bytes = b"") -> Callable[[Request], Iterator[bytes]]:
    def body(_req: Request) -> Iterator[bytes]:
        yield first
        for _ in range(100_000):
            time.sleep(every)
            yield piece
    return body


@pytest.mark.parametrize(
    "body",
    [drip(b" ", 0.05, b'{"items": ['), drip(b" " * 1024, 0.005, b'{"items": [')],
    ids=["a slow drip", "a never-ending chunked answer"],
)
def test_request_timeout_bounds_the_whole_answer(api: FakeApiServer, tmp_path: Path, body: Any) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, body=body))
    start = time.monotonic()
    res = snapshot(api, tmp_path, "--request-timeout", "0.6")
    took = time.monotonic() - start
    assert res.exit_code == 2
    assert "list nodes: no answer from" in one_error_line(res) and "within 0.6s" in res.stderr
    assert took < 5, took


def test_a_gzip_bomb_stops_at_the_size_limit(api: FakeApiServer, tmp_path: Path) -> None:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    mib = b"\0" * (1 << 20)
    bomb = b"".join(squeeze.compress(mib) for _ in range((MAX_BODY >> 20) + 64)) + squeeze.flush()
    assert len(bomb) < 1 << 20  # under a MiB on the wire, more than the limit once decoded
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, body=bomb, headers={"Content-Encoding": "gzip"}))
    res = snapshot(api, tmp_path)
    assert res.exit_code == 2
    assert f"larger than {MAX_BODY >> 20} MiB (size limit)" in one_error_line(res)


def test_a_huge_answer_is_refused_before_it_is_read(api: FakeApiServer, tmp_path: Path) -> None:
    endless = drip(b"\0" * (1 << 16), 0.0)
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 200, headers={"Content-Length": str(1 << 40)}, body=b"{}"))
    api.faults.append(Fault("GET", r"^/api/v1/pods$", 200, body=endless))
    res = snapshot(api, tmp_path)
    assert res.exit_code == 2 and "list nodes: the answer" in one_error_line(res) and "size limit" in res.stderr
    api.faults.pop(0)
    start = time.monotonic()
    res = snapshot(api, tmp_path, "--request-timeout", "60")
    assert res.exit_code == 2 and "list pods: the answer" in one_error_line(res) and "size limit" in res.stderr
    assert time.monotonic() - start < 30


# --- what snapshot writes, doctor reads --------------------------------------------------------------------


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


def test_snapshot_writes_only_what_doctor_reads(tmp_path: Path) -> None:
    from kgpu.model.safeyaml import MAX_DEPTH

    ok = pod("deep-ok", node_name="cpu-1")
    ok["status"]["extra"] = nested(MAX_DEPTH - 10)  # a field kgpu does not read, within the depth limit
    too_deep = pod("deep-bad", node_name="cpu-1")
    too_deep["status"]["extra"] = nested(MAX_DEPTH)
    out = tmp_path / "snap.json"
    server = FakeApiServer([node("cpu-1"), ok], served=SERVED)
    with server.running():
        assert snapshot(server, tmp_path, "-f", str(out)).exit_code == 0
    res = kgpu(["doctor", "--snapshot", str(out), "-o", "json"])
    assert res.exit_code in (0, 1), res.output
    server = FakeApiServer([node("cpu-1"), too_deep], served=SERVED)
    out.unlink()
    with server.running():
        res = snapshot(server, tmp_path, "-f", str(out))
    assert res.exit_code == 2 and "nested deeper than" in one_error_line(res)
    assert not out.exists()


# --- run: deletes, ambiguous creates, log streams ----------------------------------------------------------


def test_a_refused_delete_is_an_error_with_the_write_hint(api: FakeApiServer, tmp_path: Path) -> None:
    _lifecycle(api, _terminated(0), "Test PASSED\n")
    api.faults.append(Fault("DELETE", r"/pods/kgpu-", 403, times=5,
                            message='pods "kgpu-vector-add-1" is forbidden: User "dev" cannot delete resource "pods"'))
    res = run(api, tmp_path, "--timeout", "30")
    assert res.exit_code == 2, res.output
    assert "1/1 passed" in res.stdout
    line = one_error_line(res)
    assert "could not be deleted: 403 Forbidden: cannot delete pods" in line
    assert "kgpu-run" in line and "read access" not in line and "kubectl delete pod -n gpu-test kgpu-" in line
    assert len(smoke_pods(api)) == 1


def test_a_failed_delete_is_retried(api: FakeApiServer, tmp_path: Path) -> None:
    _lifecycle(api, _terminated(0), "Test PASSED\n")
    api.faults.append(Fault("DELETE", r"/pods/kgpu-", 503, times=2))
    res = run(api, tmp_path, "--timeout", "30")
    assert res.exit_code == 0, res.output
    assert not smoke_pods(api)
    assert len([r for r in api.requests if r.method == "DELETE"]) == 3


@pytest.mark.parametrize("how", ["504", "no answer"])
def test_an_ambiguous_create_is_deleted(api: FakeApiServer, tmp_path: Path, how: str) -> None:
    fault = Fault("POST", r"/pods$", 504, after=True, hang=how == "no answer",
                  message="Timeout: request did not complete within requested timeout")
    api.faults.append(fault)
    res = run(api, tmp_path, "--timeout", "30", "--request-timeout", "1")
    assert res.exit_code == 2
    line = one_error_line(res)
    assert "create pods" in line and "it may have been done" in line
    assert [r.method for r in api.requests] == ["POST", "DELETE"]
    assert not smoke_pods(api)


def test_run_timeout_bounds_a_log_stream_that_stays_open(api: FakeApiServer, tmp_path: Path) -> None:
    running = {"phase": "Running", "containerStatuses": [{"name": "test", "state": {"running": {}}}]}
    _lifecycle(api, running, "")
    api.faults.append(Fault("GET", r"/log$", 200, headers={"Content-Type": "text/plain"},
                            body=drip(b"still running\n", 0.1)))
    start = time.monotonic()
    res = run(api, tmp_path, "--timeout", "4")
    took = time.monotonic() - start
    assert res.exit_code == 1, res.output
    assert "  | still running" in res.stdout and "timed out after 4s (Running)" in res.stdout
    assert took < 10, took
    assert not smoke_pods(api)


# --- secrets -----------------------------------------------------------------------------------------------


def test_a_token_with_a_newline_is_never_quoted(api: FakeApiServer, tmp_path: Path) -> None:
    res = snapshot(api, tmp_path, cfg=api.kubeconfig(user={"token": "abc\nsuper-secret-tail"}))
    assert res.exit_code == 2
    line = one_error_line(res)
    assert "bearer token contains a newline" in line and "super-secret-tail" not in res.output


def test_an_exec_plugin_token_with_a_newline_is_never_quoted(api: FakeApiServer, tmp_path: Path) -> None:
    script = tmp_path / "get-token"
    script.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{'apiVersion': "
                      "'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
                      "'status': {'token': 'abc\\r\\nexec-secret-tail'}}))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}}
    res = snapshot(api, tmp_path, cfg=api.kubeconfig(user=user))
    assert res.exit_code == 2
    assert "bearer token contains a newline" in one_error_line(res) and "exec-secret-tail" not in res.output


def test_a_password_in_the_server_url_is_never_printed_or_saved(api: FakeApiServer, tmp_path: Path) -> None:
    cfg = api.kubeconfig()
    cfg["clusters"][0]["cluster"]["server"] = api.url.replace("http://", "http://admin:url-pass-9@")
    out = tmp_path / "snap.json"
    res = snapshot(api, tmp_path, "-f", str(out), cfg=cfg)
    assert res.exit_code == 0, res.output
    assert "url-pass-9" not in res.output and "url-pass-9" not in out.read_text()
    assert json.loads(out.read_text())["metadata"]["server"] == api.url and api.url in res.stderr
    cfg["clusters"][0]["cluster"]["server"] = "http://admin:url-pass-9@127.0.0.1:9"
    res = snapshot(api, tmp_path, cfg=cfg)
    assert res.exit_code == 2 and "cannot reach http://127.0.0.1:9" in one_error_line(res)
    assert "url-pass-9" not in res.output


# --- signals: a real kgpu process ----------------------------------------------------------------------------


def spawn(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "KUBECONFIG": "", "HOME": "/nonexistent", "NO_COLOR": "1"}
    # the interrupting signals at their default, as a terminal or a CI runner starts a command, even when the
    # tests themselves run with one ignored (under nohup, which kgpu honours by leaving it ignored)
    return subprocess.Popen(launched([sys.executable, "-m", "kgpu.cli.main", *args], default_signals=True),
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def wait_for(check: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"kgpu did not end after the signal: {err}")
    return proc.returncode, out, err


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_run_deletes_its_pod_on_every_interrupting_signal(api: FakeApiServer, tmp_path: Path, sig: int,
                                                          code: int) -> None:
    _lifecycle(api, _terminated(0), "", stay_pending=True)
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig(namespace="gpu-test"))
    proc = spawn(["run", "--kubeconfig", str(kc), "--timeout", "120"])
    wait_for(lambda: any(r.method == "GET" and "/pods/kgpu-" in r.path for r in api.requests), "the first poll")
    assert smoke_pods(api)
    proc.send_signal(sig)
    rc, out, err = finish(proc)
    assert rc == code, err
    assert not smoke_pods(api), "the test pod was left running"
    assert f"interrupted ({signal.Signals(sig).name})" in err and "Traceback" not in err
    assert "deleted" in out


@pytest.mark.parametrize(("verb", "sig", "code"), [("snapshot", signal.SIGINT, 130), ("doctor", signal.SIGINT, 130),
                                                   ("snapshot", signal.SIGTERM, 143), ("doctor", signal.SIGHUP, 129),
                                                   ("top", signal.SIGTERM, 143)])
def test_an_interrupted_read_exits_with_the_interrupt_code(api: FakeApiServer, tmp_path: Path, verb: str, sig: int,
                                                           code: int) -> None:
    api.faults.append(Fault("GET", r"^/api/v1/pods$", 200, hang=True))
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
    out = tmp_path / "snap.json"
    proc = spawn([verb, "--kubeconfig", str(kc), *(["-f", str(out)] if verb == "snapshot" else [])])
    wait_for(lambda: any(r.path == "/api/v1/pods" for r in api.requests), "the pods list")
    proc.send_signal(sig)
    rc, _out, err = finish(proc)
    assert rc == code, err
    assert err.strip().splitlines() == [f"interrupted ({signal.Signals(sig).name})"]
    assert not out.exists()


def test_a_second_signal_does_not_stop_the_cleanup(api: FakeApiServer, tmp_path: Path) -> None:
    _lifecycle(api, _terminated(0), "", stay_pending=True)
    # The first delete is answered 503 after a second (nothing deleted): only its retry deletes the pod.
    api.faults.append(Fault("DELETE", r"/pods/kgpu-", 503, delay=1.0))
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig(namespace="gpu-test"))
    proc = spawn(["run", "--kubeconfig", str(kc), "--timeout", "120"])
    wait_for(lambda: any(r.method == "GET" and "/pods/kgpu-" in r.path for r in api.requests), "the first poll")
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: any(r.method == "DELETE" for r in api.requests), "the delete")
    proc.send_signal(signal.SIGINT)  # while the delete is in flight
    rc, _out, err = finish(proc)
    assert rc == 143, err
    assert not smoke_pods(api)
    assert "Traceback" not in err


def test_a_signal_while_the_create_is_in_flight_still_deletes_the_pod(api: FakeApiServer, tmp_path: Path) -> None:
    api.faults.append(Fault("POST", r"/pods$", 201, after=True, hang=True))  # created, never answered
    kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig(namespace="gpu-test"))
    proc = spawn(["run", "--kubeconfig", str(kc), "--timeout", "120", "--request-timeout", "60"])
    wait_for(lambda: bool(smoke_pods(api)), "the create")
    proc.send_signal(signal.SIGTERM)
    rc, _out, err = finish(proc)
    assert rc == 143, err
    assert not smoke_pods(api), "the pod created by the unanswered request was left running"
