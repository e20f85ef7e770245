"""`kgpu snapshot` streams: each page is redacted and encoded to a spool file as it arrives, the document is
written whole at the end (a temporary sibling renamed into place), and the bytes are those the in-memory
snapshot wrote before it streamed.

``reference_take`` / ``reference_encode`` below are that in-memory snapshot as it was (list every kind whole,
redact, sort the events, encode the document at once): the new path must write the same bytes for the same
cluster, over HTTP from the fake API server, in small pages, with secrets in every place, optional kinds
absent or forbidden (also on a later page), plugin ConfigMaps, and more events than are kept, with ties.
"""

from __future__ import annotations

import io
import json
import logging
import re
import signal
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

import kgpu.live.snapshot as snapshot
from fake_apiserver import CORE, RESOURCES, FakeApiServer, Fault
from kgpu.cli.main import cli
from kgpu.live.client import DAEMONSET, EVENT, POD, ApiClient
from kgpu.live.kubeconfig import Access, ClusterError, resolve
from kgpu.model.safeyaml import MAX_BYTES, check_depth
from test_live import cluster_objects, write_kubeconfig
from test_live_hostile import finish, hostile_objects, spawn, wait_for
from test_live_snapshot_sources import cluster as sources_cluster

NOW = datetime(2026, 11, 25, 6, 0, 0, tzinfo=UTC)
STAMP = re.compile(rb'"createdAt":"[0-9TZ:-]+"')


# --- the snapshot as it was written before it streamed (the reference) -------------------------------------


def reference_take(client: ApiClient, namespace: str | None, page_size: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    absent: list[str] = []
    forbidden: list[str] = []
    left_out: list[str] = []
    pods: list[dict[str, Any]] = []
    daemonsets: list[dict[str, Any]] = []
    for resource, optional in snapshot.SOURCES:
        try:
            got = client.list(resource, namespace if resource.namespaced else None, page_size=page_size)
        except snapshot.NotServed:
            if not optional:
                raise
            absent.append(f"{resource.api_version} {resource.kind}")
            continue
        except snapshot.Forbidden as exc:
            if not optional:
                raise
            forbidden.append(exc.message)
            continue
        for obj in got:
            snapshot.redact(obj)
        if resource.kind in snapshot.VALIDATED_KINDS:
            left_out += [why for obj in got if (why := snapshot.unreadable(obj))]
            got = [obj for obj in got if snapshot.unreadable(obj) is None]
        items.extend(got)
        counts[resource.kind] = len(got)
        if resource is POD:
            pods = got
        elif resource is DAEMONSET:
            daemonsets = got
    configs = snapshot._plugin_configmaps(client, daemonsets, forbidden)
    items.extend(configs)
    if configs:
        counts["ConfigMap"] = len(configs)
    events = _reference_events(client, namespace, snapshot.EVENT_REASONS, page_size)
    in_snapshot = {snapshot._pod_key(p.get("metadata")) for p in pods}
    pulls = [ev for ev in _reference_events(client, namespace, snapshot.PULL_REASONS, page_size)
             if snapshot._involved(ev) in in_snapshot]
    events = events[:snapshot.MAX_EVENTS] + pulls[:snapshot.MAX_EVENTS]
    for ev in events:
        snapshot.redact(ev)
    items.extend(events)
    counts["Event"] = len(events)
    return {
        "apiVersion": snapshot.API_VERSION,
        "kind": snapshot.KIND,
        "metadata": {"createdAt": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"), "context": client.target.context,
                     "server": client.target.server, "namespace": namespace, "kgpuVersion": snapshot.__version__,
                     "counts": counts, "absent": absent, "forbidden": forbidden,
                     "leftOut": left_out},
        "items": items,
    }


def _reference_events(client: ApiClient, namespace: str | None, reasons: tuple[str, ...],
                      page_size: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for reason in reasons:
        events.extend(client.list(EVENT, namespace, page_size=page_size, field_selector=f"reason={reason}"))
    events.sort(key=snapshot._event_time, reverse=True)
    return events


def reference_encode(doc: dict[str, Any]) -> bytes:
    check_depth({k: v for k, v in doc.items() if k != "items"}, "the snapshot")
    data = msgspec.json.encode(doc)
    assert len(data) + 1 <= MAX_BYTES
    return data + b"\n"


# --- fixtures ----------------------------------------------------------------------------------------------


def ev(name: str, ns: str, reason: str, pod: str, when: str | None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Event",
                           "metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-11-25T05:00:00Z",
                                        "managedFields": [{"manager": "kube-scheduler", "operation": "Update"}]},
                           "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": ns},
                           "reason": reason, "type": "Warning" if reason.startswith("Failed") else "Normal",
                           "message": f"{reason} {pod}", "source": {"component": "default-scheduler"}, **extra}
    if when is not None:
        out["lastTimestamp"] = when
    return out


def many_events() -> list[dict[str, Any]]:
    """More events of each group than are kept (MAX_EVENTS is set to 4), with equal times (the one listed
    first is kept), times missing (the creation time counts), events of pods not in the snapshot (dropped)
    and a secret in a message URL."""
    out = []
    for i in range(7):  # FailedScheduling: three share the newest time
        out.append(ev(f"train-{i % 3}.fs{i}", "ml", "FailedScheduling", f"train-{i % 3}",
                      "2026-11-25T05:59:00Z" if i in (1, 3, 5) else f"2026-11-25T05:0{i}:00Z"))
    out.append(ev("web.fc", "default", "FailedCreate", "web", "2026-11-25T05:59:00Z",
                  message="pull from https://bot:tok-123@registry.internal/v2 failed"))
    out.append(ev("web.fc2", "default", "FailedCreate", "web", None))
    for i in range(6):
        out.append(ev(f"infer.p{i}", "ml", "Pulling" if i % 2 else "Pulled", "infer", "2026-11-25T05:30:00Z"))
    out.append(ev("ghost.p", "ml", "Pulling", "ghost-0", "2026-11-25T05:58:00Z"))  # a pod not in the snapshot
    return out


def fixture_cluster() -> list[dict[str, Any]]:
    """test_live's cluster (secrets in every place), test_live_hostile's objects of odd shapes, the device
    plugin's DaemonSet and ConfigMaps, DRA objects and image-cache events of test_live_snapshot_sources, and
    :func:`many_events`; the first object of each kind, namespace and name."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for obj in cluster_objects() + hostile_objects() + sources_cluster() + many_events():
        meta = obj["metadata"]
        out.setdefault((obj["kind"], meta.get("namespace", ""), meta["name"]), obj)
    return list(out.values())


ALL = tuple(RESOURCES)


def served(objs: list[dict[str, Any]], kinds: tuple[str, ...] = ALL) -> FakeApiServer:
    return FakeApiServer(objs, served=kinds)


def kgpu(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, env={"KUBECONFIG": "", "HOME": "/nonexistent"})


def reference_bytes(api: FakeApiServer, tmp_path: Path, page_size: int, namespace: str | None = None) -> bytes:
    kc = write_kubeconfig(tmp_path / "kc-ref", api.kubeconfig())
    with ApiClient(resolve(Access(kubeconfig=str(kc)), {})) as client:
        return reference_encode(reference_take(client, namespace, page_size))


def streamed_bytes(api: FakeApiServer, tmp_path: Path, page_size: int, namespace: str | None = None) -> bytes:
    kc = write_kubeconfig(tmp_path / "kc-new", api.kubeconfig())
    out = io.BytesIO()
    with ApiClient(resolve(Access(kubeconfig=str(kc)), {})) as client, (tmp_path / "spool").open("w+b") as fh:
        spool = snapshot.Spool(fh)
        head = snapshot.collect(client, spool, namespace, page_size=page_size, now=NOW)
        spool.write(head, out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def few_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "MAX_EVENTS", 4)


# --- the same bytes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("page_size", [1, 2, 3, 500])
def test_the_streamed_snapshot_is_byte_for_byte_the_in_memory_one(tmp_path: Path, page_size: int) -> None:
    api = served(fixture_cluster())
    with api.running():
        want = reference_bytes(api, tmp_path, page_size)
        got = streamed_bytes(api, tmp_path, page_size)
        kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
        out = tmp_path / "snap.json"
        res = kgpu(["snapshot", "--kubeconfig", str(kc), "-f", str(out), "--page-size", str(page_size)])
        assert res.exit_code == 0, res.output
        stdout = kgpu(["snapshot", "--kubeconfig", str(kc), "--page-size", str(page_size)])
        assert stdout.exit_code == 0, stdout.output
    assert got == want
    stamp = b'"createdAt":"2026-11-25T06:00:00Z"'
    assert STAMP.sub(stamp, out.read_bytes()) == want  # the command: the same bytes but its own time
    assert STAMP.sub(stamp, stdout.stdout_bytes) == want
    doc = json.loads(want)
    counts = doc["metadata"]["counts"]
    # what the fixture holds reached the file: every kind, 4 + 4 events, the plugin's ConfigMap
    assert counts == {"Node": 4, "Pod": 8, "DaemonSet": 3, "PriorityClass": 0, "NodePool": 2, "NodeClaim": 0,
                      "EC2NodeClass": 0, "NodeOverlay": 1, "RayCluster": 2, "DeviceClass": 1, "ResourceClaim": 1,
                      "ResourceClaimTemplate": 1, "ResourceSlice": 1, "ImageCache": 1, "PersistentVolumeClaim": 0,
                      "PersistentVolume": 0, "StorageClass": 0, "Namespace": 0, "ResourceFlavor": 0,
                      "ClusterQueue": 0, "Cohort": 0, "LocalQueue": 0, "WorkloadPriorityClass": 0, "Workload": 0,
                      "ConfigMap": 1, "Event": 8}
    names = [e["metadata"]["name"] for e in doc["items"] if e["kind"] == "Event"]
    assert names[:4] == ["train-1.fs1", "train-0.fs3", "train-2.fs5", "web.fc"]  # ties: as listed
    assert "ghost.p" not in names and "tok-123" not in want.decode()
    for secret in ("hunter2", "AKIAFAKEKEY", "vault-token-xyz", "ray-secret-42", "ray-redis-secret-3",
                   "db-pass-8", "wandb-secret-123"):
        assert secret not in want.decode(), secret


def test_the_in_memory_snapshot_doctor_takes_holds_the_same_objects(tmp_path: Path) -> None:
    api = served(fixture_cluster())
    with api.running():
        want = reference_bytes(api, tmp_path, 2)
        kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
        with ApiClient(resolve(Access(kubeconfig=str(kc)), {})) as client:
            doc = snapshot.take(client, None, page_size=2, now=NOW)
    assert msgspec.json.encode(doc) + b"\n" == want


def test_one_namespace_is_the_same_bytes_too(tmp_path: Path) -> None:
    api = served(fixture_cluster())
    with api.running():
        assert streamed_bytes(api, tmp_path, 2, "ml") == reference_bytes(api, tmp_path, 2, "ml")


@pytest.mark.parametrize("status", [403, 404])
def test_an_optional_kind_refused_on_a_later_page_is_left_out_whole(tmp_path: Path, status: int) -> None:
    """Its first page was spooled already: it is taken back, as the in-memory snapshot never kept it."""
    objs = fixture_cluster() + [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": f"extra-{i}", "namespace": "ml"},
         "spec": {"headGroupSpec": {"rayStartParams": {"redis-password": "pw"}}}} for i in range(4)]
    api = served(objs)
    original = api.handle
    refused: list[str] = []

    def later_page_refused(req: Any) -> Any:
        if req.path == "/apis/ray.io/v1/rayclusters" and req.query.get("continue"):
            refused.append(req.query["continue"][0])
            return api._status(status, 'rayclusters.ray.io is forbidden: User "viewer" cannot list resource '
                               '"rayclusters" in API group "ray.io" at the cluster scope')
        return original(req)

    api.handle = later_page_refused  # type: ignore[method-assign]
    with api.running():
        got = streamed_bytes(api, tmp_path, 2)
        assert refused == ["2"]  # after the first page of two
        want = reference_bytes(api, tmp_path, 2)
    assert got == want
    doc = json.loads(got)
    assert "RayCluster" not in doc["metadata"]["counts"]
    assert not [o for o in doc["items"] if o["kind"] == "RayCluster"]
    if status == 403:
        assert doc["metadata"]["forbidden"] and "rayclusters" in doc["metadata"]["forbidden"][0]
    else:
        assert "ray.io/v1 RayCluster" in doc["metadata"]["absent"]


# --- streaming ---------------------------------------------------------------------------------------------


def pods_cluster(n: int) -> list[dict[str, Any]]:
    objs = [o for o in cluster_objects() if o["kind"] == "Node"]
    for i in range(n):
        objs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"svc-{i:05d}", "namespace": "payments", "uid": f"{i:08x}-0000-4000-8000-000000000000",
                                  "labels": {"app.kubernetes.io/name": "svc", "pod-template-hash": "7d9f8b6c5"},
                                  "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                                                     "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
                     "spec": {"nodeName": "cpu-1", "containers": [
                         {"name": "app", "image": "ghcr.io/example/svc:1.4.2", "args": ["--port=8080"] * 8,
                          "env": [{"name": "API_TOKEN", "value": f"tok-{i}"}],
                          "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
                     "status": {"phase": "Running", "podIP": f"10.1.{i // 250}.{i % 250}"}})
    return objs


class Recorder:
    """An items sink that notes, for each object, how many pod pages the server had been asked for."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.at: list[int] = []

    def add(self, obj: dict[str, Any]) -> None:
        if obj["kind"] == "Pod":
            self.at.append(sum(1 for r in self.api.requests if r.path == "/api/v1/pods"))

    def mark(self) -> int:
        return 0

    def rollback(self, mark: int) -> None:
        pass  # the optional kinds the server does not serve


def test_each_page_goes_on_before_the_one_after_the_next_is_asked_for(tmp_path: Path) -> None:
    api = served(pods_cluster(40), CORE)
    rec = Recorder(api)
    with api.running():
        kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
        with ApiClient(resolve(Access(kubeconfig=str(kc)), {})) as client:
            snapshot.collect(client, rec, None, page_size=10)
    # page k's pods go on while page k + 1 is requested at most: never after the last page was asked for
    assert len(rec.at) == 40
    assert all(page <= rec.at[i] <= page + 1 for page in (1, 2, 3, 4) for i in range((page - 1) * 10, page * 10)), rec.at
    assert rec.at[0] < 4


def test_the_spool_holds_the_items_on_disk_not_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Peak traced memory while 10,000 pods are spooled (a page and the spool's buffer: 64 KiB here) stays a
    fraction of what holding them takes."""
    monkeypatch.setattr(snapshot.Spool, "FLUSH", 64 * 1024)
    # Not the log records pytest would hold: with DEBUG on (left by an earlier test in the same process), the
    # HTTP library's per-request trace records are captured for the report and count as traced memory.
    for name in (None, "httpcore", "httpx"):
        caplog.set_level(logging.WARNING, logger=name)
    api = served(pods_cluster(10_000), CORE)
    with api.running(), ApiClient(resolve(Access(kubeconfig=str(write_kubeconfig(tmp_path / "kc", api.kubeconfig()))),
                                          {})) as client:
        # first-time costs outside the measure: the server's, the modules the ConfigMaps step imports
        assert snapshot.take(client, None, page_size=100)["metadata"]["counts"]["Pod"] == 10_000
        tracemalloc.start()
        try:
            with (tmp_path / "spool").open("w+b") as fh:
                spool = snapshot.Spool(fh)
                snapshot.collect(client, spool, None, page_size=100)
                _, streamed = tracemalloc.get_traced_memory()
                spooled = spool.mark()[0]
            tracemalloc.reset_peak()
            held = snapshot.take(client, None, page_size=100)
            _, in_memory = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert held["metadata"]["counts"]["Pod"] == 10_000 and spooled > 5_000_000
    assert streamed < in_memory / 5, (streamed, in_memory)
    assert streamed < spooled, (streamed, spooled)


# --- nothing half-written ----------------------------------------------------------------------------------


def test_a_failure_after_pages_were_spooled_leaves_the_old_file_and_nothing_else(tmp_path: Path) -> None:
    api = served(pods_cluster(30), CORE)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "snap.json"
    out.write_text("the previous snapshot\n")
    with api.running():
        api.faults.append(Fault("GET", r"^/api/v1/events$", 500, times=3, message="etcdserver: request timed out"))
        kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
        res = kgpu(["snapshot", "--kubeconfig", str(kc), "-f", str(out), "--page-size", "5"])
    assert res.exit_code == 2
    assert "500" in res.stderr and "list events" in res.stderr and "Traceback" not in res.output
    assert sorted(p.name for p in out_dir.iterdir()) == ["snap.json"]
    assert out.read_text() == "the previous snapshot\n"


def test_a_snapshot_over_the_readers_size_limit_is_not_written(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "MAX_BYTES", 40_000)
    api = served(pods_cluster(200), CORE)
    out = tmp_path / "snap.json"
    with api.running():
        kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
        res = kgpu(["snapshot", "--kubeconfig", str(kc), "-f", str(out), "--page-size", "20"])
        pages = sum(1 for r in api.requests if r.path == "/api/v1/pods")
        stdout = kgpu(["snapshot", "--kubeconfig", str(kc), "--page-size", "20"])
    assert res.exit_code == 2 and stdout.exit_code == 2
    assert "size limit" in res.stderr and "0 MiB size limit" in res.stderr and "-n" in res.stderr
    assert pages < 10  # refused as soon as the items alone passed it, not after the last page
    assert not stdout.stdout_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kc"]


def test_the_envelope_within_the_limit_but_the_whole_over_it_is_refused_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = snapshot.Spool(io.BytesIO())
    spool.add({"kind": "Pod", "metadata": {"name": "x" * 500}})
    monkeypatch.setattr(snapshot, "MAX_BYTES", spool.size + len(b'{"items":[]}\n') + 600)
    head = {"apiVersion": snapshot.API_VERSION, "kind": snapshot.KIND, "metadata": {"counts": {"Pod": 1}}}
    out = io.BytesIO()
    with pytest.raises(ClusterError, match=r"it would be 0 MiB, more than the readers take \(0 MiB size limit\)"):
        spool.write(head, out)
    assert out.getvalue() == b""


@pytest.mark.parametrize(("sig", "hang"), [(signal.SIGTERM, "daemonsets"), (signal.SIGINT, "daemonsets"),
                                         (signal.SIGTERM, "pods page 3"), (signal.SIGHUP, "pods page 3")])
def test_an_interrupt_after_pages_were_spooled_leaves_nothing(tmp_path: Path, sig: int, hang: str) -> None:
    """Interrupted while a list waits for its first page (the DaemonSets', after every pod page was spooled)
    or for a page requested ahead (the third of pods, while the second is spooled)."""
    api = served(pods_cluster(30), CORE)
    original = api.handle
    hung: list[str] = []

    def hanging(req: Any) -> Any:
        if (hang == "daemonsets" and req.path == "/apis/apps/v1/daemonsets") or (
                hang == "pods page 3" and req.path == "/api/v1/pods" and req.query.get("continue") == ["10"]):
            hung.append(req.path)
            api.stopping.wait(60)
            return None
        return original(req)

    api.handle = hanging  # type: ignore[method-assign]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with api.running():
        kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
        proc = spawn(["snapshot", "--kubeconfig", str(kc), "-f", str(out_dir / "snap.json"), "--page-size", "5"])
        wait_for(lambda: bool(hung), hang)
        proc.send_signal(sig)
        rc, out, err = finish(proc)
    assert rc == 128 + sig, err
    assert err.strip().splitlines() == [f"interrupted ({signal.Signals(sig).name})"] and out == ""
    assert list(out_dir.iterdir()) == []


def test_a_continue_token_over_its_limit_names_the_limit(tmp_path: Path) -> None:
    api = served(pods_cluster(2), CORE)
    original = api.handle

    def long_token(req: Any) -> Any:
        if req.path == "/api/v1/pods":
            body = {"apiVersion": "v1", "kind": "PodList", "metadata": {"continue": "c" * 20_000}, "items": []}
            return 200, {}, json.dumps(body).encode()
        return original(req)

    api.handle = long_token  # type: ignore[method-assign]
    with api.running():
        kc = write_kubeconfig(tmp_path / "kc", api.kubeconfig())
        res = kgpu(["snapshot", "--kubeconfig", str(kc), "-f", str(tmp_path / "snap.json")])
    assert res.exit_code == 2
    assert ("list pods: metadata.continue is not a token (20,000 characters; continue token limit: 16,384)"
            in res.stderr), res.stderr
    assert not (tmp_path / "snap.json").exists()


def test_a_full_disk_under_the_spool_is_one_line_naming_the_output() -> None:
    """The spool sits beside the output: a write to it that fails (ENOSPC, as on /dev/full) is an error
    naming the output it was for, not one about standard output, and no traceback."""
    from kgpu.errors import InputError

    with open("/dev/full", "wb", buffering=0) as full:
        spool = snapshot.Spool(full, where="/data/cluster.json")  # type: ignore[arg-type]
        spool.add({"kind": "Pod", "metadata": {"name": "p"}})
        with pytest.raises(InputError) as err:
            spool.mark()
    assert err.value.where == "/data/cluster.json"
    assert "cannot spool the snapshot: No space left on device" in str(err.value)
