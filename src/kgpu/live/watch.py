"""Watching the API server: one kind's objects kept current by a list, then a watch, as client-go's reflector
keeps them (k8s.io/client-go tools/cache/reflector.go, ``ListAndWatch``), for ``kgpu top --watch``.

- The watch starts at the resourceVersion of a one-item list made just before the paged list (the paged list's
  own version is not kept by :meth:`ApiClient.list`): every change after it is replayed in order onto the listed
  objects, so they converge on the server's state; an object listed and then replayed is only replaced.
- ``GET <kind>?watch=true&resourceVersion=V&allowWatchBookmarks=true&timeoutSeconds=300``: the server ends the
  stream after ``timeoutSeconds``, and the watch resumes from the last version seen (an event's or a BOOKMARK's).
- ``410 Gone`` (an ERROR event with code 410, or the answer's status): the version was compacted away; list
  again (the reflector's relist).
- Any other failure (the server unreachable, a broken stream) is said in ``Cluster.notes`` and tried again
  after 1, 2, 5, then every 10 seconds; a kind the cluster does not serve or the role may not watch (DRA's) is
  left alone.

Each kind has its own thread and its own client: a list's deadline (``ApiClient``'s watchdog shuts down every
socket of its client when it passes) then never cuts another kind's stream. Every event is one line of JSON of
at most :data:`MAX_EVENT` bytes, read with the JSON reader's limits; a stream is bounded in time by its
``timeoutSeconds`` plus the request timeout of silence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

from kgpu.errors import InputError
from kgpu.live.client import ApiClient, Forbidden, NotServed, Resource
from kgpu.live.kubeconfig import ClusterError, Target
from kgpu.model.safeyaml import load_json

WATCH_SECONDS = 300  # the server ends a watch after this long (timeoutSeconds); it is resumed
MAX_EVENT = 16 * 1024 * 1024  # bytes of one watch event (one object)
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0)


class Gone(ClusterError):
    """410 Gone: the resourceVersion asked for is no longer in the server's history (list again)."""


def _version(client: ApiClient, resource: Resource, label_selector: str | None) -> str:
    """The collection's resourceVersion now: a one-item list, made before the full one."""
    params: dict[str, Any] = {"limit": 1}
    if label_selector:
        params["labelSelector"] = label_selector
    body = load_json(
        client.request("GET", resource.path(), resource=resource, params=params, collection=True),
        f"list {resource.name}",
    )
    rv = _dig(body, "metadata").get("resourceVersion")
    if not isinstance(rv, str) or not rv:
        raise ClusterError(f"list {resource.name}: the answer has no metadata.resourceVersion to watch from")
    return rv


def watch_events(
    client: ApiClient,
    resource: Resource,
    version: str,
    *,
    label_selector: str | None = None,
    seconds: int = WATCH_SECONDS,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(type, object) of each event of one watch from ``version`` until the server ends it: ADDED, MODIFIED,
    DELETED, BOOKMARK. An ERROR event is raised (:class:`Gone` for 410); each event is at most
    :data:`MAX_EVENT` bytes and is read with the JSON reader's limits."""
    params: dict[str, Any] = {
        "watch": "true",
        "resourceVersion": version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": seconds,
    }
    if label_selector:
        params["labelSelector"] = label_selector
    what = f"watch {resource.name}"
    request = client.http.build_request(
        "GET",
        resource.path(),
        params=params,
        timeout=httpx.Timeout(client.timeout, read=seconds + client.timeout),
    )
    try:
        resp = client.http.send(request, stream=True)
    except httpx.HTTPError as exc:
        raise ClusterError(f"{what}: cannot reach {client.server}: {type(exc).__name__}") from None
    try:
        code = resp.status_code
        if code >= 300:
            error = {410: Gone, 403: Forbidden, 404: NotServed}.get(code, ClusterError)
            raise error(f"{what}: {code} {resp.reason_phrase} from {client.server}")
        pending = bytearray()
        for chunk in resp.iter_bytes():
            pending += chunk
            while (end := pending.find(b"\n")) >= 0:
                line = bytes(pending[:end])
                del pending[: end + 1]
                if line.strip():
                    yield _event(line, what)
            if len(pending) > MAX_EVENT:
                raise ClusterError(f"{what}: an event larger than {MAX_EVENT >> 20} MiB (size limit)")
        if pending.strip():
            yield _event(bytes(pending), what)
    except httpx.HTTPError as exc:
        raise ClusterError(f"{what}: the stream from {client.server} broke: {type(exc).__name__}") from None
    finally:
        resp.close()


def _event(line: bytes, what: str) -> tuple[str, dict[str, Any]]:
    try:
        event = load_json(line, what)
    except InputError as exc:
        raise ClusterError(f"{what}: an event is not valid: {exc.message}") from None
    kind = event.get("type") if isinstance(event, dict) else None
    obj = _dig(event, "object")
    if kind == "ERROR":
        code = obj.get("code")
        message = f"{what}: {code} {obj.get('reason') or ''}: {obj.get('message') or ''}".rstrip(": ")
        raise Gone(message) if code == 410 else ClusterError(message)
    if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") or not obj:
        raise ClusterError(f"{what}: an event of type {kind!r} without an object")
    return str(kind), obj


def _dig(obj: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else {}


def _uid(obj: dict[str, Any]) -> str:
    meta = _dig(obj, "metadata")
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class Cluster:
    """Objects by kind, kept current by one watcher thread per kind; ``changed`` is set on every change."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}
        self.changed = threading.Event()
        self.stopped = threading.Event()
        self.notes: dict[str, str] = {}
        self.events = 0
        self.relists = 0

    def replace(self, kind: str, items: Iterable[dict[str, Any]]) -> None:
        with self.lock:
            self.objects[kind] = {_uid(o): o for o in items}
        self.changed.set()

    def apply(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        with self.lock:
            store = self.objects.setdefault(kind, {})
            if event == "DELETED":
                store.pop(_uid(obj), None)
            else:
                obj.setdefault("kind", kind)
                store[_uid(obj)] = obj
            self.events += 1
        self.changed.set()

    def say(self, kind: str, note: str) -> None:
        with self.lock:
            if self.notes.get(kind, "") == note:
                return
            self.notes[kind] = note
        self.changed.set()

    @property
    def note(self) -> str:
        with self.lock:
            return "; ".join(n for n in self.notes.values() if n)

    def items(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.objects.get(kind, {}).values())


def follow(
    target: Target,
    cluster: Cluster,
    resource: Resource,
    *,
    timeout: float,
    page_size: int = 500,
    label_selector: str | None = None,
    started: threading.Event | None = None,
    optional: bool = False,
) -> threading.Thread:
    """A daemon thread that lists ``resource`` into ``cluster`` and follows its watch until ``cluster.stopped``,
    with its own client. ``started`` is set after the first list, or when it failed (``cluster.note`` says
    why). An ``optional`` kind that is not served or not allowed ends the thread quietly."""

    def run() -> None:
        version = ""
        failures = 0
        try:
            with ApiClient(target, timeout=timeout) as client:
                while not cluster.stopped.is_set():
                    try:
                        if not version:
                            version = _version(client, resource, label_selector)
                            items = client.list(resource, page_size=page_size, label_selector=label_selector)
                            cluster.replace(resource.kind, items)
                            cluster.relists += 1
                            cluster.say(resource.kind, "")
                            if started is not None:
                                started.set()
                        began, seen = time.monotonic(), 0
                        for event, obj in watch_events(
                            client, resource, version, label_selector=label_selector
                        ):
                            version = str(_dig(obj, "metadata").get("resourceVersion") or version)
                            if event != "BOOKMARK":
                                cluster.apply(resource.kind, event, obj)
                            if failures:
                                cluster.say(resource.kind, "")
                            failures, seen = 0, seen + 1
                        if (
                            not seen and time.monotonic() - began < 1.0
                        ):  # a server that ends every watch at once
                            cluster.stopped.wait(1.0)
                    except Gone:
                        version = ""  # list again
                    except (NotServed, Forbidden) as exc:
                        if not optional:
                            cluster.say(resource.kind, exc.line())
                        return  # an optional kind (DRA) the cluster does not serve or the role may not watch
                    except ClusterError as exc:
                        if cluster.stopped.is_set():
                            return
                        cluster.say(resource.kind, f"{exc.line()}; trying again")
                        if started is not None and not version:
                            started.set()  # the first list failed: the view says why
                        cluster.stopped.wait(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
                        failures += 1
        finally:
            if started is not None:
                started.set()

    thread = threading.Thread(target=run, name=f"kgpu-watch-{resource.plural}", daemon=True)
    thread.start()
    return thread


def wait_change(cluster: Cluster, gather: float, most: float | None = None) -> None:
    """Until something changed, then ``gather`` seconds more to take what comes with it in one go; at most
    ``most`` seconds when nothing changes (None: no limit). Short waits, so Ctrl-C is taken at once."""
    deadline = None if most is None else time.monotonic() + most
    while not cluster.changed.wait(0.5):
        if deadline is not None and time.monotonic() >= deadline:
            return
    time.sleep(gather)
    cluster.changed.clear()
