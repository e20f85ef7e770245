"""The real Kueue on the rig's API server: ``minimalkueue`` from sigs.k8s.io/kueue (conformance/kueue).

``minimalkueue`` is Kueue's own minimal manager for its scheduler performance tests
(test/performance/scheduler/minimalkueue): the core controllers (ResourceFlavor, AdmissionCheck,
LocalQueue, Cohort, ClusterQueue, Workload), the scheduler cache, the queue manager and the scheduler,
with Kueue's default feature gates and an empty ``Configuration`` (no fair sharing, no waitForPodsReady),
no webhooks and no job integrations. So Workloads are created directly, as Kueue's performance runner
does (test/performance/scheduler/runner), and this rig plays the part of the job integration:

- finishing a Workload applies the ``Finished`` condition with server-side apply, as the runner does
  (field manager ``kueue-job-controller-Finished``, the name ``workload.UpdateStatus`` uses), with the reason
  and message a batch/v1 Job that completed gives (``Succeeded``, the Job's ``Complete`` message);
- an evicted Workload (``Evicted`` true while quota is still reserved) gets its quota released as
  jobframework's reconciler does once the job is stopped (pkg/controller/jobframework/reconciler.go, "handle
  eviction"): ``Requeued`` set (true for preemption) and ``QuotaReserved`` false with reason ``Pending``
  and the eviction's message, ``status.admission`` cleared, ``Admitted`` false. Until that happens
  Kueue's preemptor waits ("Pending the preemption of N workload(s)").

The CRDs come from the module's config/components/crd/bases. v0.15 stores v1beta1 and serves v1beta2 through
a conversion webhook that minimalkueue does not run, so the rig installs them with v1beta2 as the stored
and only served version (the objects are created and read in v1beta2, as minimalkueue reads them).

``wait_settled`` watches every Workload and returns when none has changed for a quiet period, no eviction
waits for its release, and the caller's readiness check holds (e.g. every pending Workload carries a
``QuotaReserved`` condition); the wait is bounded.
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from cluster import LocalCluster

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API = f"{GROUP}/{VERSION}"
MODULE = Path(__file__).resolve().parents[1] / "kueue"
BINARY = ("kueue", "minimalkueue")  # conftest.binary(*BINARY)
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Workload": "workloads",
    "Namespace": "namespaces",
}
NAMESPACED = {"LocalQueue", "Workload"}
FINISHED = ("Succeeded", "Reached expected number of succeeded pods")  # a completed batch/v1 Job
Key = tuple[str, str]


def kueue_module_dir() -> Path:
    """Where Go keeps sigs.k8s.io/kueue at the version conformance/kueue/go.mod pins."""
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue"],
        cwd=MODULE,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def crds(module_dir: Path) -> list[dict[str, Any]]:
    """Kueue's CRDs with v1beta2 stored and the only version served (no conversion webhook runs)."""
    out = []
    for path in sorted((module_dir / "config" / "components" / "crd" / "bases").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        crd["spec"].pop("conversion", None)
        versions = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
        assert len(versions) == 1, f"{path.name}: no {VERSION}"
        versions[0]["served"] = versions[0]["storage"] = True
        crd["spec"]["versions"] = versions
        out.append(crd)
    return out


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(obj: dict[str, Any], ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def set_condition(obj: dict[str, Any], ctype: str, status: str, reason: str, message: str) -> None:
    """apimeta.SetStatusCondition: the transition time moves only when the status changes."""
    conds = obj.setdefault("status", {}).setdefault("conditions", [])
    new = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": obj["metadata"].get("generation", 1),
        "lastTransitionTime": now_rfc3339(),
    }
    for i, c in enumerate(conds):
        if c["type"] == ctype:
            if c["status"] == status:
                new["lastTransitionTime"] = c["lastTransitionTime"]
            conds[i] = new
            return
    conds.append(new)


def material(obj: dict[str, Any]) -> Any:
    """A Workload less what changes without a decision: the message of a QuotaReserved condition that stays
    False (see ``KueueRig.flapping``) and the condition's transition time."""
    if not obj:
        return None
    status = copy.deepcopy(obj.get("status", {}))
    for c in status.get("conditions") or []:
        if c.get("type") == "QuotaReserved" and c.get("status") == "False":
            c.pop("message", None)
            c.pop("lastTransitionTime", None)
    return obj.get("spec"), status


class ApiError(RuntimeError):
    def __init__(self, code: int, method: str, path: str, text: str) -> None:
        super().__init__(f"{method} {path}: HTTP {code}: {text[:500]}")
        self.code = code


def key(obj: dict[str, Any]) -> Key:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


class ApiServer(LocalCluster):
    """The rig's etcd and kube-apiserver (``cluster.LocalCluster``) without kube-scheduler and kwok: Kueue
    needs no nodes and places no pods."""

    def _spawn(self, name: str, argv: list[str]) -> None:
        if name in ("etcd", "kube-apiserver"):
            super()._spawn(name, argv)

    def stop(self) -> None:
        # kube-apiserver before etcd: stopped together, its graceful shutdown waits for the gone etcd until
        # it is killed 15 s later; alone it takes about a second
        for name, proc in self.procs:
            if name == "kube-apiserver" and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
        super().stop()


def start_api_server(bin_dir: Path, work: Path) -> ApiServer:
    kwok = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=MODULE.parent / "kwok",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    server = ApiServer(bin_dir, work, Path(kwok))
    server.start()
    return server


class KueueRig:
    """minimalkueue against ``cluster``'s API server, with the Workload watch and the job integration's part."""

    def __init__(self, cluster: LocalCluster, binary: Path, work: Path, log_level: str = "error") -> None:
        self.cluster = cluster
        self.binary = binary
        self.work = work
        self.log_level = log_level  # minimalkueue's --zap-log-level (error, info, or a number for more)
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.workloads: dict[Key, dict[str, Any]] = {}
        self.last_change = time.monotonic()
        self.evictions: dict[Key, dict[str, Any]] = {}  # every eviction released, by workload
        self.released: dict[Key, str] = {}  # workload -> resourceVersion whose eviction was released
        self.changes: Counter[Key] = Counter()  # changes per Workload (``material``)
        self.previous: dict[Key, dict[str, Any]] = {}  # each Workload's version before its last change
        self.written: dict[Key, int] = {}  # Workloads this rig wrote -> the resourceVersion it wrote
        # Kueue retries a StrictFIFO head every cycle and lists a pod set's failing resources in Go map order
        # (flavorassigner.findFlavorForPodSets stops at the first that cannot fit), so a head that two resources
        # keep out gets a new message with most retries and never settles on one. ``wait_settled`` ignores such
        # message-only changes and puts here the messages a Workload carried during its last quiet period,
        # where there were two or more.
        self.message_log: dict[Key, list[tuple[float, str]]] = {}
        self.flapping: dict[Key, set[str]] = {}
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None
        self._stream_socket: socket.socket | None = None
        self._local = threading.local()  # one kept-alive connection per thread
        self._ssl: ssl.SSLContext | None = None
        self.pool = ThreadPoolExecutor(max_workers=8)

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self, module_dir: Path | None = None) -> KueueRig:
        try:
            for crd in crds(module_dir or kueue_module_dir()):
                self.cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            self.cluster.wait_for("Kueue's CRDs to be served", self._crds_served, timeout=60)
            log = (self.work / "minimalkueue.log").open("wb")
            self.proc = subprocess.Popen(
                [
                    str(self.binary),
                    "--kubeconfig",
                    str(self.cluster.admin),
                    "--zap-log-level",
                    self.log_level,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            time.sleep(0.5)
            if self.proc.poll() is not None:
                raise RuntimeError(f"minimalkueue exited at start: {self.tail()}")
            self._watch = threading.Thread(target=self._watch_loop, name="workload-watch", daemon=True)
            self._watch.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _crds_served(self) -> bool:
        try:
            names = {r["name"] for r in self.cluster.get(f"/apis/{API}").get("resources", [])}
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return set(PLURALS.values()) - {"namespaces"} <= names

    def tail(self, lines: int = 20) -> str:
        path = self.work / "minimalkueue.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        self._stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self._stream_socket is not None:
            # the API server's graceful shutdown would wait for this watch
            with contextlib.suppress(OSError):
                self._stream_socket.shutdown(socket.SHUT_RDWR)
        if self._watch is not None:
            self._watch.join(timeout=5)
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)

    def alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"minimalkueue is not running: {self.tail()}")

    # --- objects ---------------------------------------------------------------------------------------

    @staticmethod
    def path(obj: dict[str, Any]) -> str:
        kind, api = obj["kind"], obj["apiVersion"]
        base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
        if kind in NAMESPACED:
            base += f"/namespaces/{obj['metadata']['namespace']}"
        return f"{base}/{PLURALS[kind]}"

    def api(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        """One request to the API server as admin, on this thread's kept-alive connection (the rig's
        ``LocalCluster.request`` opens a TLS connection per request: a third of the run went there)."""
        if self._ssl is None:
            self._ssl = self.cluster._context()
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                host, port = self.cluster.server.removeprefix("https://").rsplit(":", 1)
                conn = self._local.conn = http.client.HTTPSConnection(
                    host, int(port), context=self._ssl, timeout=30
                )
            try:
                conn.request(method, path, body=data, headers={"Content-Type": content_type})
                resp = conn.getresponse()
                text = resp.read().decode()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
                continue
            if resp.status >= 300:
                raise ApiError(resp.status, method, path, text)
            out: dict[str, Any] = json.loads(text)
            return out
        raise AssertionError("unreachable")

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = self.api("POST", self.path(obj), obj)
        self._wrote(out)
        return out

    def create_each(self, batches: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        """Each list created in its order, the lists side by side (a scenario's objects never wait for
        another scenario's)."""
        return list(self.pool.map(lambda objs: [self.create(o) for o in objs], batches))

    def _wrote(self, obj: dict[str, Any]) -> None:
        """``wait_settled`` waits until the watch has seen this write, and counts its quiet period from it."""
        with self.lock:
            self.last_change = time.monotonic()
            if obj.get("kind") == "Workload":
                self.written[key(obj)] = int(obj["metadata"]["resourceVersion"])

    def create_all(self, objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.create(o) for o in objs]

    def list(self, kind: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.api("GET", f"/apis/{API}/{PLURALS[kind]}").get("items", [])
        return items

    def wait_active(self, names: dict[str, set[str]], timeout: float = 60) -> None:
        """Until every named ClusterQueue / LocalQueue ("ns/name") reports its ``Active`` condition true."""

        def ready() -> bool:
            for kind, want in names.items():
                active = {("/".join(k for k in key(o) if k)) for o in self.list(kind) if is_true(o, "Active")}
                if not want <= active:
                    return False
            return True

        self.cluster.wait_for("the ClusterQueues and LocalQueues to be active", ready, timeout=timeout)

    def finish(self, ns: str, name: str) -> dict[str, Any]:
        """The ``Finished`` condition, applied as Kueue's performance runner applies it (server-side apply)."""
        with self.lock:
            obj = self.workloads[(ns, name)]
        reason, message = FINISHED
        patch = {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "uid": obj["metadata"]["uid"]},
            "status": {
                "conditions": [
                    {
                        "type": "Finished",
                        "status": "True",
                        "reason": reason,
                        "message": message,
                        "observedGeneration": obj["metadata"].get("generation", 1),
                        "lastTransitionTime": now_rfc3339(),
                    }
                ]
            },
        }
        out = self.api(
            "PATCH",
            f"/apis/{API}/namespaces/{ns}/workloads/{name}/status?fieldManager=kueue-job-controller-Finished",
            patch,
            "application/apply-patch+yaml",
        )
        self._wrote(out)
        return out

    # --- the Workload watch ----------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    listed = self.cluster.get(f"/apis/{API}/workloads")
                    with self.lock:
                        self.workloads = {key(o): o for o in listed.get("items", [])}
                        self.last_change = time.monotonic()
                    rv = listed["metadata"]["resourceVersion"]
                rv = self._stream(rv)
            except (OSError, urllib.error.URLError, ValueError):
                if self._stop.is_set():
                    return
                time.sleep(0.2)
                rv = ""

    def _stream(self, rv: str) -> str:
        url = (
            f"{self.cluster.server}/apis/{API}/workloads?watch=1&allowWatchBookmarks=true"
            f"&timeoutSeconds=300&resourceVersion={rv}"
        )
        with urllib.request.urlopen(
            urllib.request.Request(url), context=self.cluster._context(), timeout=330
        ) as resp:
            self._stream_socket = resp.fp.raw._sock
            for line in resp:
                if self._stop.is_set():
                    break
                ev = json.loads(line)
                obj = ev["object"]
                if ev["type"] == "ERROR":
                    return ""  # e.g. 410 Gone: list again
                rv = obj["metadata"]["resourceVersion"]
                if ev["type"] == "BOOKMARK":
                    continue
                k = key(obj)
                with self.lock:
                    old = self.workloads.pop(k, {})
                    if ev["type"] != "DELETED":
                        self.workloads[k] = obj
                        pending = condition(obj, "QuotaReserved")
                        if pending is not None and pending["status"] == "False":
                            log = self.message_log.setdefault(k, [])
                            log.append((time.monotonic(), pending.get("message", "")))
                            del log[:-50]
                    if ev["type"] == "DELETED" or material(old) != material(obj):
                        self.previous[k] = old
                        self.changes[k] += 1
                        self.last_change = time.monotonic()
        return rv

    def snapshot(self) -> dict[Key, dict[str, Any]]:
        """The Workloads as the watch last delivered them. The watch replaces an object, never changes one,
        so the objects are shared: callers must not change them either."""
        with self.lock:
            return dict(self.workloads)

    # --- the job integration's part: release evicted workloads -----------------------------------------

    def _release_evictions(self) -> int:
        with self.lock:
            todo = [
                copy.deepcopy(o)
                for o in self.workloads.values()
                if is_true(o, "Evicted")
                and is_true(o, "QuotaReserved")
                and self.released.get(key(o)) != o["metadata"]["resourceVersion"]
            ]
        for obj in todo:
            self._release(obj)
        return len(todo)

    def _release(self, obj: dict[str, Any]) -> None:
        k = key(obj)
        for _ in range(10):
            ev = condition(obj, "Evicted")
            if ev is None or ev.get("status") != "True" or not is_true(obj, "QuotaReserved"):
                return
            self.evictions[k] = ev
            new = copy.deepcopy(obj)
            requeued = "True" if ev["reason"] in ("Preempted", "NodeFailures") else "False"
            set_condition(new, "Requeued", requeued, ev["reason"], ev["message"])
            set_condition(new, "QuotaReserved", "False", "Pending", ev["message"])
            new["status"].pop("admission", None)
            if is_true(new, "Admitted"):
                set_condition(new, "Admitted", "False", "NoReservation", "The workload has no reservation")
            try:
                out = self.api("PUT", f"{self.path(obj)}/{obj['metadata']['name']}/status", new)
                self.released[k] = out["metadata"]["resourceVersion"]
                self._wrote(out)
                return
            except ApiError as exc:
                if exc.code != 409:
                    raise
                obj = self.api("GET", f"{self.path(obj)}/{obj['metadata']['name']}")
        raise RuntimeError(f"could not release the eviction of {k}")

    # --- settling --------------------------------------------------------------------------------------

    def wait_settled(
        self,
        ready: Callable[[dict[Key, dict[str, Any]]], str | None],
        *,
        quiet: float = 1.0,
        timeout: float = 120,
    ) -> dict[Key, dict[str, Any]]:
        """The Workloads once Kueue is done: ``quiet`` seconds without a change, no eviction left to release,
        and ``ready(workloads)`` None (else it says what is missing); RuntimeError after ``timeout``."""
        deadline = time.monotonic() + timeout
        why = ""
        while time.monotonic() < deadline:
            self.alive()
            if self._release_evictions():
                continue
            with self.lock:
                idle = time.monotonic() - self.last_change
            if idle >= quiet:
                snap = self.snapshot()
                why = ready(snap) or ""
                if not why:
                    with self.lock:
                        if not self._changed_since(snap):
                            since = time.monotonic() - quiet
                            self.flapping = {}
                            for k, log in self.message_log.items():
                                seen = {m for t, m in log if t >= since}
                                if len(seen) > 1:
                                    self.flapping[k] = seen
                            return snap
            time.sleep(0.05)
        raise RuntimeError(f"Kueue did not settle in {timeout:.0f}s: {why or self._unsettled()}")

    def held(self, k: Key) -> float:
        """Seconds since the watch last delivered Workload ``k`` with its QuotaReserved condition False (the
        API server sends no event for a write that changes nothing, so a message Kueue writes again and again
        counts from the first time)."""
        with self.lock:
            log = self.message_log.get(k)
            return time.monotonic() - log[-1][0] if log else 0.0

    def _unsettled(self) -> str:
        with self.lock:
            unseen = [
                f"{ns}/{n}"
                for (ns, n), rv in self.written.items()
                if int(self.workloads.get((ns, n), {}).get("metadata", {}).get("resourceVersion", 0)) < rv
            ]
            evicting = [
                f"{ns}/{n}"
                for (ns, n), o in self.workloads.items()
                if is_true(o, "Evicted") and is_true(o, "QuotaReserved")
            ]
            idle = time.monotonic() - self.last_change
            busiest = self.changes.most_common(3)
            diff = ""
            if busiest:
                k = busiest[0][0]
                before, after = (
                    self.previous.get(k, {}).get("status"),
                    self.workloads.get(k, {}).get("status"),
                )
                diff = f"; its last change: {json.dumps(before)} -> {json.dumps(after)}"
        return (
            f"Workloads kept changing (idle {idle:.1f}s; writes the watch has not delivered: {unseen[:5]}; "
            f"evicted and still holding quota: {evicting[:5]}; most changed: {busiest}{diff})"
        )

    def _changed_since(self, snap: dict[Key, dict[str, Any]]) -> bool:
        if snap.keys() != self.workloads.keys():
            return True
        if any(int(snap[k]["metadata"]["resourceVersion"]) < rv for k, rv in self.written.items()):
            return True  # the watch has not delivered one of this rig's writes yet
        return any(material(o) != material(snap[k]) for k, o in self.workloads.items())
