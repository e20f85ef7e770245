"""`kgpu top --watch` against the fake API server: one list of each kind, then watches
(`?watch=true&resourceVersion=`) whose events redraw the view (a pod bound to the idle p4d, a node going
NotReady, a node deleted), a relist on `410 Gone` and nothing else listed again; Ctrl-C ends it with 130 and
one line. The watch's event reader refuses an oversized or malformed event in one line."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_apiserver import CORE, FakeApiServer, Fault, Request
from kgpu.live.client import NODE, ApiClient
from kgpu.live.kubeconfig import Access, ClusterError, resolve
from kgpu.live.watch import Gone, watch_events
from launch import launched
from test_top_view import G5_BUSY, P4D_IDLE, eks_cluster, trainer

WATCH_PATHS = r"^/api/v1/(nodes|pods)$"


class Streams:
    """The watch answers of the fake server: each kind's events come from a queue the test fills."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.queues: dict[str, queue.Queue[bytes | None]] = {"nodes": queue.Queue(), "pods": queue.Queue()}
        self.watches: list[Request] = []

    def answer(self, req: Request) -> Any:
        if req.query.get("watch") != ["true"]:
            return self.api._serve(req)[2]  # a list: the server's own answer
        self.watches.append(req)
        return self.stream(self.queues[req.path.rsplit("/", 1)[1]])

    def stream(self, q: queue.Queue[bytes | None]) -> Iterator[bytes]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                line = q.get(timeout=0.1)
            except queue.Empty:
                yield b""  # the server checks whether it is stopping
                continue
            if line is None:  # the server ends this watch
                return
            yield line

    def send(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        self.queues[kind].put(json.dumps({"type": event, "object": obj}).encode() + b"\n")


class Output:
    """What the process prints, read as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.text = ""
        self.lock = threading.Lock()
        assert proc.stdout is not None
        stdout = proc.stdout
        threading.Thread(target=self._read, args=(stdout,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self.lock:
                self.text += line

    def frame(self) -> str:
        """The last frame drawn (frames start with the time and the server watched)."""
        with self.lock:
            return self.text.rsplit("watching ", 1)[-1]


def wait_for(check: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def line_of(frame: str, node: str) -> list[str]:
    return next((ln.split() for ln in frame.splitlines() if ln.startswith(node)), [])


def lists(api: FakeApiServer, path: str) -> int:
    return len([r for r in api.requests if r.path == path and r.query.get("watch") != ["true"]])


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Streams, subprocess.Popen[str], Output]]:
    items = [i for i in eks_cluster()["items"] if i["kind"] in ("Node", "Pod")]
    api = FakeApiServer(items, served=CORE)
    streams = Streams(api)
    api.faults.append(Fault("GET", WATCH_PATHS, 200, times=10**6, body=streams.answer))
    kc = tmp_path / "kc"
    with api.running():
        kc.write_text(yaml.safe_dump(api.kubeconfig()))
        env = {**os.environ, "KUBECONFIG": "", "HOME": "/nonexistent", "NO_COLOR": "1", "COLUMNS": "200"}
        proc = subprocess.Popen(
            # Ctrl-C reaches it even when the tests run with SIGINT ignored
            launched(
                [sys.executable, "-m", "kgpu.cli.main", "top", "--kubeconfig", str(kc), "--watch"],
                default_signals=True,
            ),
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            yield api, streams, proc, Output(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            for q in streams.queues.values():
                q.put(None)


def test_watch_redraws_on_events_and_stops_on_ctrl_c(
    watched: tuple[FakeApiServer, Streams, subprocess.Popen[str], Output],
) -> None:
    api, streams, proc, out = watched
    wait_for(lambda: "Idle" in line_of(out.frame(), P4D_IDLE), "the first frame")
    wait_for(lambda: len(streams.watches) == 2, "a watch on nodes and one on pods")
    assert {r.query["resourceVersion"][0] for r in streams.watches} == {"1"}  # the version listed before
    assert all(r.query["allowWatchBookmarks"] == ["true"] for r in streams.watches)

    # a pod bound to the idle p4d: it is no longer idle
    streams.send(
        "pods",
        "ADDED",
        trainer("big-0", P4D_IDLE, "nvidia.com/gpu", 8)
        | {"metadata": {"name": "big-0", "namespace": "ml", "resourceVersion": "7"}},
    )
    wait_for(lambda: line_of(out.frame(), P4D_IDLE)[-2:] == ["$32.773", "Ready"], "the p4d in use")
    assert "8/8" in line_of(out.frame(), P4D_IDLE)

    # the busy g5 goes NotReady, then a bookmark moves the version on
    busy = next(o for o in api.objects if o["kind"] == "Node" and o["metadata"]["name"] == G5_BUSY)
    busy = json.loads(json.dumps(busy))
    next(c for c in busy["status"]["conditions"] if c["type"] == "Ready")["status"] = "False"
    busy["metadata"]["resourceVersion"] = "9"
    streams.send("nodes", "MODIFIED", busy)
    wait_for(lambda: line_of(out.frame(), G5_BUSY)[-1:] == ["NotReady"], "the g5 NotReady")
    streams.send(
        "nodes", "BOOKMARK", {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "12"}}
    )

    # the server ends the node watch: it is resumed from the bookmark's version, not listed again
    streams.queues["nodes"].put(None)
    wait_for(lambda: len(streams.watches) == 3, "the node watch resumed")
    assert streams.watches[-1].query["resourceVersion"] == ["12"]

    # 410 Gone on the pods' watch: the pods are listed again (big-0 was never in the server's list)
    pods_listed = lists(api, "/api/v1/pods")
    streams.send(
        "pods",
        "ERROR",
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 410,
            "reason": "Expired",
            "message": "too old resource version: 1 (41)",
        },
    )
    wait_for(lambda: lists(api, "/api/v1/pods") > pods_listed, "the pods listed again")
    wait_for(lambda: "Idle" in line_of(out.frame(), P4D_IDLE), "the p4d idle again, as listed")

    # over all this, the nodes were listed once (and their version asked once): a watch, not a poll
    assert lists(api, "/api/v1/nodes") == 2
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["interrupted (SIGINT)"]


def test_watch_refuses_a_file_and_machine_output(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kgpu.cli.main import cli

    (tmp_path / "c.json").write_text(json.dumps(eks_cluster()))
    res = CliRunner().invoke(cli, ["top", "--watch", "-f", str(tmp_path / "c.json")])
    assert res.exit_code == 2 and "a file does not change" in res.output
    res = CliRunner().invoke(cli, ["top", "--watch", "-o", "json"], env={"KUBECONFIG": "/nonexistent"})
    assert res.exit_code == 2 and "--watch draws the table" in res.output


@pytest.mark.parametrize(
    argnames=("body", "error", "words"),
    ids=["huge", "deep", "unknown-type", "gone"],
    argvalues=[
        (
            b'{"type": "ADDED", "object": {"kind": "Node"' + b" " * (17 * 1024 * 1024),
            ClusterError,
            "size limit",
        ),
        (b"[" * 10_000 + b"\n", ClusterError, "an event is not valid"),
        (b'{"type": "SURPRISE", "object": {"a": 1}}\n', ClusterError, "'SURPRISE'"),
        (
            b'{"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "too old"}}\n',
            Gone,
            "410 Expired",
        ),
    ],
)
def test_a_hostile_watch_stream_is_one_error(
    tmp_path: Path, body: bytes, error: type[Exception], words: str
) -> None:
    api = FakeApiServer([], served=CORE)
    api.faults.append(
        Fault(
            "GET",
            r"^/api/v1/nodes$",
            200,
            body=lambda _req: iter([body[i : i + 65536] for i in range(0, len(body), 65536)]),
        )
    )
    with api.running():
        (tmp_path / "kc").write_text(yaml.safe_dump(api.kubeconfig()))
        target = resolve(Access(str(tmp_path / "kc"), None, None, False, 5.0))
        with ApiClient(target, timeout=5.0) as client, pytest.raises(error) as caught:
            list(watch_events(client, NODE, "1", seconds=5))
    assert words in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_watch_whose_first_list_fails_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kgpu.cli.main import cli

    api = FakeApiServer([], served=CORE)
    api.faults.append(Fault("GET", r"^/api/v1/nodes$", 403, times=10, message='nodes is forbidden: User "u"'))
    with api.running():
        (tmp_path / "kc").write_text(yaml.safe_dump(api.kubeconfig()))
        res = CliRunner().invoke(
            cli,
            ["top", "--watch", "--kubeconfig", str(tmp_path / "kc")],
            env={"KUBECONFIG": "", "HOME": "/nonexistent"},
        )
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        'error: 403 Forbidden: cannot list nodes: nodes is forbidden: User "u" (grant kgpu\'s read access with '
        "`kgpu render --target rbac` (the kgpu-doctor ClusterRole))"
    ]
