"""A small Kubernetes API server on 127.0.0.1 for what a real one will not do on demand.

It serves objects as ``kubectl get -o json`` prints them, over the real REST paths and HTTP/1.1 with
keep-alive, with ``limit`` / ``continue`` paging, ``fieldSelector=reason=...`` on events, create / get /
delete of pods and pod logs, bearer-token auth, and scripted faults: 401, 403, 404, 429 with Retry-After,
5xx, slow answers, and the hostile ones (:class:`Fault`'s ``body``, ``after``, ``hang``, ``drop``): any raw
answer (a wrong shape, a bad ``Content-Encoding``, a gzip bomb, a 100,000-deep document, a ``continue``
token that never ends), an answer streamed in chunks as slowly as wanted or forever, a write done and then
answered 504 or never answered. kgpu's client talks to it exactly as to a real server; the conformance
suite covers the real kube-apiserver.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

# plural -> (apiVersion, kind, namespaced)
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "nodes": ("v1", "Node", False),
    "pods": ("v1", "Pod", True),
    "events": ("v1", "Event", True),
    "daemonsets": ("apps/v1", "DaemonSet", True),
    "priorityclasses": ("scheduling.k8s.io/v1", "PriorityClass", False),
    "nodepools": ("karpenter.sh/v1", "NodePool", False),
    "nodeclaims": ("karpenter.sh/v1", "NodeClaim", False),
    "ec2nodeclasses": ("karpenter.k8s.aws/v1", "EC2NodeClass", False),
    "rayclusters": ("ray.io/v1", "RayCluster", True),
    "nodeoverlays": ("karpenter.sh/v1alpha1", "NodeOverlay", False),
    "deviceclasses": ("resource.k8s.io/v1", "DeviceClass", False),
    "resourceclaims": ("resource.k8s.io/v1", "ResourceClaim", True),
    "resourceclaimtemplates": ("resource.k8s.io/v1", "ResourceClaimTemplate", True),
    "resourceslices": ("resource.k8s.io/v1", "ResourceSlice", False),
    "imagecaches": ("eks.cloud.tencent.com/v1", "ImageCache", False),
    "configmaps": ("v1", "ConfigMap", True),
    "persistentvolumeclaims": ("v1", "PersistentVolumeClaim", True),
    "persistentvolumes": ("v1", "PersistentVolume", False),
    "storageclasses": ("storage.k8s.io/v1", "StorageClass", False),
    "namespaces": ("v1", "Namespace", False),
    "resourceflavors": ("kueue.x-k8s.io/v1beta2", "ResourceFlavor", False),
    "clusterqueues": ("kueue.x-k8s.io/v1beta2", "ClusterQueue", False),
    "cohorts": ("kueue.x-k8s.io/v1beta2", "Cohort", False),
    "localqueues": ("kueue.x-k8s.io/v1beta2", "LocalQueue", True),
    "workloadpriorityclasses": ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", False),
    "workloads": ("kueue.x-k8s.io/v1beta2", "Workload", True),
}
CORE = ("nodes", "pods", "events", "daemonsets", "priorityclasses", "persistentvolumeclaims", "persistentvolumes", "storageclasses")
PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any = None


Body = bytes | Iterator[bytes]  # an iterator is sent chunked (Transfer-Encoding: chunked), piece by piece
HANG_LIMIT = 60.0  # seconds a hanging answer waits at most (or until the server stops)


@dataclass
class Fault:
    """Answer the next ``times`` matching requests with ``status`` (after ``delay`` seconds).

    ``body``: the raw answer instead of a Status (bytes, or a function of the request returning bytes or
    an iterator of chunks); ``after``: do the request's real work first (a create that happened, then a
    504); ``hang``: never answer (until the client goes away); ``drop``: close the connection unanswered.
    """

    method: str
    path: str  # regex on the path
    status: int
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""
    delay: float = 0.0
    body: bytes | Callable[[Request], Body] | None = None
    after: bool = False
    hang: bool = False
    drop: bool = False


class FakeApiServer:
    def __init__(self, objects: list[dict[str, Any]] | None = None, *, token: str | None = "s3cret-token",
                 served: tuple[str, ...] = CORE) -> None:
        self.token = token
        self.served = set(served)
        self.objects: list[dict[str, Any]] = [json.loads(json.dumps(o)) for o in objects or []]
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.logs: dict[str, str] = {}
        self.on_get_pod: Callable[[dict[str, Any]], None] | None = None
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # --- set-up ----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self, *, context: str = "fake", namespace: str | None = None,
                   user: dict[str, Any] | None = None) -> dict[str, Any]:
        ctx: dict[str, Any] = {"cluster": "fake", "user": "me"}
        if namespace:
            ctx["namespace"] = namespace
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "contexts": [{"name": context, "context": ctx}],
            "users": [{"name": "me", "user": user if user is not None else {"token": self.token}}],
        }

    @contextmanager
    def running(self) -> Iterator[FakeApiServer]:
        handler = _handler(self)
        self._server = _QuietServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopping.set()
            self._server.shutdown()
            self._server.server_close()

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]

    # --- serving ---------------------------------------------------------------------------------------

    def handle(self, req: Request) -> tuple[int, dict[str, str], Body] | None:
        """The answer (status, headers, body), or None to close the connection without one."""
        with self.lock:
            self.requests.append(req)
            fault = next((f for f in self.faults if f.times > 0 and f.method == req.method
                          and re.search(f.path, req.path)), None)
            if fault is not None:
                fault.times -= 1
        if fault is None:
            return self._serve(req)
        if fault.after:
            self._serve(req)
        if fault.delay:
            self.stopping.wait(fault.delay)
        if fault.hang:
            self.stopping.wait(HANG_LIMIT)
            return None
        if fault.drop:
            return None
        if fault.body is not None:
            body = fault.body(req) if callable(fault.body) else fault.body
            return fault.status, dict(fault.headers), body
        return self._status(fault.status, fault.message or f"fault {fault.status}", fault.headers)

    def _serve(self, req: Request) -> tuple[int, dict[str, str], Body]:
        if self.token is not None and req.headers.get("authorization") != f"Bearer {self.token}":
            return self._status(401, "Unauthorized")
        m = PATH.match(req.path)
        if not m or m["plural"] not in RESOURCES or m["plural"] not in self.served:
            return self._status(404, "the server could not find the requested resource")
        api_version, kind, namespaced = RESOURCES[m["plural"]]
        ns, name, sub = m["ns"], m["name"], m["sub"]
        with self.lock:
            if req.method == "GET" and name is None:
                return self._list(kind, api_version, ns, req.query)
            if req.method == "POST" and name is None:
                return self._create(kind, ns, req.body)
            obj = next((o for o in self.objects if o.get("kind") == kind and o["metadata"]["name"] == name
                        and (not namespaced or o["metadata"].get("namespace", "default") == ns)), None)
            if obj is None:
                return self._status(404, f'{m["plural"]} "{name}" not found')
            if req.method == "DELETE":
                self.objects.remove(obj)
                return 200, {}, json.dumps(obj).encode()
            if sub == "log":
                return 200, {"Content-Type": "text/plain"}, self.logs.get(name, "").encode()
            if kind == "Pod" and self.on_get_pod is not None:
                self.on_get_pod(obj)
            return 200, {}, json.dumps(obj).encode()

    def _list(self, kind: str, api_version: str, ns: str | None, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
        items = [o for o in self.objects if o.get("kind") == kind
                 and (ns is None or o["metadata"].get("namespace", "default") == ns)]
        for sel in query.get("fieldSelector", []):
            key, _, value = sel.partition("=")
            if key == "reason":
                items = [o for o in items if o.get("reason") == value]
        start = int(query.get("continue", ["0"])[0])
        limit = int(query.get("limit", ["0"])[0]) or len(items) or 1
        page = items[start:start + limit]
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        listed = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in page]
        body = {"apiVersion": api_version, "kind": f"{kind}List", "metadata": meta, "items": listed}
        return 200, {}, json.dumps(body).encode()

    def _create(self, kind: str, ns: str | None, body: Any) -> tuple[int, dict[str, str], bytes]:
        if not isinstance(body, dict) or body.get("kind") != kind:
            return self._status(400, "bad body")
        meta = body.setdefault("metadata", {})
        if ns:
            meta["namespace"] = ns
        if any(o.get("kind") == kind and o["metadata"]["name"] == meta["name"] for o in self.objects):
            return self._status(409, f'{kind.lower()}s "{meta["name"]}" already exists')
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = "2026-11-22T10:00:00Z"
        body.setdefault("status", {"phase": "Pending"})
        self.objects.append(body)
        return 201, {}, json.dumps(body).encode()

    @staticmethod
    def _status(code: int, message: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message, "code": code}
        return code, headers or {}, json.dumps(body).encode()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (kgpu refusing a huge one) is expected: no traceback."""


def _handler(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        protocol_version = "HTTP/1.1"  # keep-alive and chunked answers, as a real API server

        def _serve(self) -> None:
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            req = Request(self.command, url.path, parse_qs(url.query),
                          {k.lower(): v for k, v in self.headers.items()}, body)
            answer = server.handle(req)
            if answer is None:
                self.close_connection = True
                return
            code, headers, data = answer
            with suppress(BrokenPipeError, ConnectionResetError, OSError):
                self.send_response(code)
                self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                for k, v in headers.items():
                    self.send_header(k, v)
                if isinstance(data, bytes):
                    if "Content-Length" not in headers:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in data:
                    if server.stopping.is_set():
                        break
                    if piece:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            self.close_connection = self.close_connection or not isinstance(data, bytes)

        do_GET = do_POST = do_DELETE = _serve

    return Handler
