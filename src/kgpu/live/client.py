"""The one adapter between kgpu and a Kubernetes API server.

lightkube resolves the configuration and builds the TLS context (``kgpu.live.kubeconfig``); requests go
through one ``httpx.Client`` and one request path, :meth:`ApiClient.request`, and bodies are decoded with
msgspec into plain dicts: kgpu reads objects as ``kubectl get -o json`` prints them, and building typed
models for tens of thousands of pods would cost more than the transfer.

Every request is bounded (docs/live.md, Limits):

- in time: ``--request-timeout`` bounds the whole exchange, from connecting to the last byte of the
  answer, not each read: a watchdog shuts the client's sockets down when the deadline passes, so a server
  that drips its answer or never ends a chunked one is cut off;
- in size: the answer is read in chunks, decoded (``Content-Encoding``) as it comes, and refused as soon as
  it passes :data:`MAX_BODY` (a gzip bomb stops there, not when memory runs out);
- in shape: the JSON reader's limits (depth, integer digits) apply to every answer, as to files;
- in number: a list follows at most :data:`MAX_PAGES` pages and :data:`MAX_LIST_ITEMS` objects, at most
  :data:`MAX_EMPTY_PAGES` pages in a row without an object (a server handing out ever new ``continue``
  tokens is cut off in seconds, not after 10,000 pages), and for at most :data:`MAX_LIST_SECONDS`; a
  ``continue`` token seen before ends it with an error. Each error names the limit hit.

The watchdog and the chunked read are :mod:`kgpu.live.exchange`'s, shared with the Prometheus client.

Every failure becomes one ``ClusterError`` line: unreachable server, timeout, 401, 403 (naming the verb
and resource, pointing at ``kgpu render --target rbac``), 404, 409, 429 (retried after its Retry-After),
5xx (reads and deletes retried; a create is not, and a create whose outcome is unknown raises
``Ambiguous``). A 404 on a list means the API is not served (a CRD that is not installed): callers get
``NotServed`` and treat it as normal where it is.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.config.models import User
from lightkube.core.exceptions import ConfigError

from kgpu.errors import InputError
from kgpu.live.exchange import Watchdog, _kind, _message, _read, _short, _size, _TooLarge
from kgpu.live.kubeconfig import ClusterError, Target, check_token
from kgpu.model.safeyaml import load_json

READ_HINT = "grant kgpu's read access with `kgpu render --target rbac` (the kgpu-doctor ClusterRole)"
WRITE_HINT = ("bind the kgpu-run ClusterRole of `kgpu render --target rbac` (create, get, delete on pods, "
              "get on pods/log) in this namespace")
RBAC_HINT = READ_HINT
RETRIES = 3  # tries of a read or a delete (and of any request answered 429)
MAX_RETRY_AFTER = 30.0
MAX_BODY = 256 * 1024 * 1024  # bytes of one answer, after Content-Encoding is decoded
MAX_LOG_BYTES = 8 * 1024 * 1024  # of a pod's log that `run` reads
MAX_LOG_LINE = 64 * 1024  # characters of one log line kept
MAX_PAGES = 10_000  # pages of one list
MAX_LIST_ITEMS = 1_000_000  # objects of one list
MAX_TOKEN = 16 * 1024  # characters of a continue token
MAX_EMPTY_PAGES = 50  # pages in a row without an object: the API server sends none but the last
MAX_LIST_SECONDS = 900.0  # of one list, all its pages (150,000 pods list in about a minute)


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """As RBAC and kubectl name it: pods, daemonsets.apps, nodepools.karpenter.sh."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


NODE = Resource("", "v1", "Node", "nodes", namespaced=False)
POD = Resource("", "v1", "Pod", "pods")
POD_LOG = Resource("", "v1", "Pod", "pods/log")
EVENT = Resource("", "v1", "Event", "events")
DAEMONSET = Resource("apps", "v1", "DaemonSet", "daemonsets")
PRIORITY_CLASS = Resource("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False)
NODEPOOL = Resource("karpenter.sh", "v1", "NodePool", "nodepools", namespaced=False)
NODECLAIM = Resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims", namespaced=False)
EC2NODECLASS = Resource("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses", namespaced=False)
RAYCLUSTER = Resource("ray.io", "v1", "RayCluster", "rayclusters")
NODEOVERLAY = Resource("karpenter.sh", "v1alpha1", "NodeOverlay", "nodeoverlays", namespaced=False)
DEVICECLASS = Resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", namespaced=False)
RESOURCECLAIM = Resource("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims")
RESOURCECLAIMTEMPLATE = Resource("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates")
RESOURCESLICE = Resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", namespaced=False)
IMAGECACHE = Resource("eks.cloud.tencent.com", "v1", "ImageCache", "imagecaches", namespaced=False)  # TKE
PVC = Resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
PV = Resource("", "v1", "PersistentVolume", "persistentvolumes", namespaced=False)
STORAGECLASS = Resource("storage.k8s.io", "v1", "StorageClass", "storageclasses", namespaced=False)
NAMESPACE = Resource("", "v1", "Namespace", "namespaces", namespaced=False)  # labels: ClusterQueue namespaceSelector
# Kueue (kueue.x-k8s.io/v1beta2, served from Kueue v0.15): what `kgpu queue` reads
KUEUE_RESOURCES = (
    Resource("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", "resourceflavors", namespaced=False),
    Resource("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues", namespaced=False),
    Resource("kueue.x-k8s.io", "v1beta2", "Cohort", "cohorts", namespaced=False),
    Resource("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
    Resource("kueue.x-k8s.io", "v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", namespaced=False),
    Resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads"),
)
CONFIGMAP = Resource("", "v1", "ConfigMap", "configmaps")  # only the device plugin's, by name (snapshot)


class NotServed(ClusterError):
    """404 on a collection: the API (usually a CRD) is not installed."""


class Forbidden(ClusterError):
    """403: RBAC does not grant the request."""


class NotFound(ClusterError):
    """404 on a named object."""


class Ambiguous(ClusterError):
    """A write whose outcome is unknown: the server may have done it (a 5xx, or no complete answer)."""


_VERBS = {"GET": "get", "POST": "create", "DELETE": "delete", "PUT": "update", "PATCH": "patch"}
_IDEMPOTENT = ("GET", "DELETE")
# Transport failures before anything was sent: a write that failed so was not done.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol,
             httpx.ProxyError)


class _BearerAuth(httpx.Auth):
    """A bearer token, given or read from a file (``tokenFile``: read again after a 401, as it rotates)."""

    def __init__(self, token: str | None, token_file: str | None, where: str) -> None:
        self.token_file = token_file
        self.where = where
        self.token = token if token is not None else self._read()
        check_token(self.token, where)

    def _read(self) -> str:
        assert self.token_file is not None
        try:
            with open(self.token_file, "rb") as fh:
                data = fh.read(MAX_TOKEN + 1)
        except OSError as exc:
            raise ClusterError(f"cannot read the token file: {exc.strerror or exc}",
                               where=f"{self.where}: tokenFile {self.token_file}") from None
        try:
            return data.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ClusterError("the token file is not UTF-8 text",
                               where=f"{self.where}: tokenFile {self.token_file}") from None

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401 and self.token_file is not None:
            token = self._read()
            if token != self.token:
                check_token(token, self.where)
                self.token = token
                request.headers["Authorization"] = f"Bearer {token}"
                yield request


class ApiClient(Watchdog):
    def __init__(self, target: Target, *, timeout: float = 30.0) -> None:
        super().__init__()
        self.target = target
        self.timeout = timeout
        config = target.config
        user = config.user if config.user is not None else User()
        where = f"{target.source}: user {config.context.user}" if config.context.user else target.source
        try:
            verify = verify_cluster(config.cluster, user, config.abs_file)
            auth: httpx.Auth | None
            if target.exec_auth is not None:
                auth = target.exec_auth
            elif user.token is not None or user.token_file is not None:
                auth = _BearerAuth(user.token, user.token_file, where)
            else:
                auth = user_auth(user)
        except (OSError, ValueError, ConfigError) as exc:  # unreadable CA / client certificate files
            raise ClusterError(f"cannot load credentials: {_short(exc)}", where=target.source) from None
        self.http = httpx.Client(base_url=str(config.cluster.server), verify=verify, auth=auth,
                                 timeout=httpx.Timeout(timeout), trust_env=True)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def server(self) -> str:
        return self.target.server  # without userinfo

    # --- requests ------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, *, resource: Resource, params: dict[str, Any] | None = None,
                body: Any = None, collection: bool = False, verb: str | None = None,
                limit: int = MAX_BODY) -> bytes:
        """One request and its whole answer (at most ``limit`` bytes), each try within the timeout; 429 is
        retried after its Retry-After, reads and deletes also on 5xx and dropped connections."""
        verb = verb or ("list" if collection and method == "GET" else _VERBS.get(method, method.lower()))
        what = f"{verb} {resource.name}"
        content = msgspec.json.encode(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        retry = method in _IDEMPOTENT
        attempt = 0
        while True:
            attempt += 1
            try:
                resp, data = self._exchange(method, path, params, content, headers, limit)
            except _TooLarge:
                raise ClusterError(f"{what}: the answer from {self.server} is larger than "
                                   f"{_size(limit)} (size limit)") from None
            except httpx.HTTPError as exc:
                timed_out = self._expired or isinstance(exc, httpx.TimeoutException)
                not_sent = isinstance(exc, _NOT_SENT) and not self._expired
                if isinstance(exc, httpx.DecodingError):
                    raise ClusterError(f"{what}: the answer from {self.server} does not decode "
                                       f"(Content-Encoding): {_short(exc)}") from None
                if isinstance(exc, httpx.LocalProtocolError):  # its message may quote a header: never print it
                    raise ClusterError(f"{what}: cannot send the request to {self.server} (a header value "
                                       "the HTTP library refuses; is a credential malformed?)",
                                       where=self.target.source) from None
                if retry and attempt < RETRIES and (method == "DELETE" or not (timed_out or not_sent)):
                    time.sleep(0.2 * attempt)
                    continue
                if timed_out:
                    error = f"{what}: no answer from {self.server} within {self.timeout:g}s"
                    hint = "raise --request-timeout"
                else:
                    error, hint = f"{what}: cannot reach {self.server}: {_short(exc)}", ""
                if method not in _IDEMPOTENT and not not_sent:
                    raise Ambiguous(error + " (it may have been done)", hint=hint) from None
                raise ClusterError(error, hint=hint, where="" if timed_out else self.target.source) from None
            except httpx.InvalidURL as exc:
                raise ClusterError(f"invalid server URL: {_short(exc)}", where=self.target.source) from None
            code = resp.status_code
            if code < 300:
                return data
            if code == 429 and attempt < RETRIES:
                time.sleep(_retry_after(resp, attempt))
                continue
            if code >= 500 and retry and attempt < RETRIES:
                time.sleep(0.5 * attempt)
                continue
            if code == 404 and method == "GET":
                if collection:
                    raise NotServed(f"{what}: the server does not serve {resource.api_version} {resource.kind} "
                                    f"(404 on {path})")
                raise NotFound(f"{what}: {_message(resp, data) or 'not found'} (404)")
            if code == 404 and method == "DELETE":
                raise NotFound(f"{what}: already gone (404)")
            failure = self._error(resp, data, verb, resource, attempt)
            if code >= 500 and method not in _IDEMPOTENT:
                raise Ambiguous(failure.message + " (it may have been done)", hint=failure.hint)
            raise failure

    def _exchange(self, method: str, path: str, params: dict[str, Any] | None, content: bytes | None,
                  headers: dict[str, str] | None, limit: int) -> tuple[httpx.Response, bytes]:
        request = self.http.build_request(method, path, params=params, content=content, headers=headers,
                                          extensions={"trace": self._trace})
        with self._deadline(self.timeout):
            resp = self.http.send(request, stream=True)
            try:
                return resp, _read(resp, limit)
            finally:
                resp.close()

    def _error(self, resp: httpx.Response, data: bytes, verb: str, resource: Resource, attempts: int) -> ClusterError:
        code = resp.status_code
        message = _message(resp, data)
        server = self.server
        if code == 401:
            return ClusterError(f"401 Unauthorized: {server} rejected the credentials",
                                where=self.target.source,
                                hint="refresh them, e.g. `aws eks update-kubeconfig --name CLUSTER`")
        if code == 403:
            hint = READ_HINT if verb in ("get", "list", "watch") and resource != POD_LOG else WRITE_HINT
            return Forbidden(f"403 Forbidden: cannot {verb} {resource.name}: {message}", hint=hint)
        if code == 404:
            return ClusterError(f"404 Not Found: {verb} {resource.name}: {message}".rstrip(": "),
                                hint="check the namespace (-n)" if resource.namespaced else "")
        if code == 409:
            return ClusterError(f"409 Conflict: {verb} {resource.name}: {message}")
        if code == 429:
            return ClusterError(f"429 Too Many Requests: {verb} {resource.name}: still throttled after "
                                f"{attempts} tries", hint="try again later")
        return ClusterError(f"{code} {resp.reason_phrase}: {verb} {resource.name}: {message}".rstrip(": "))

    def _json(self, data: bytes, what: str) -> Any:
        try:
            return load_json(data, what)
        except InputError as exc:
            raise ClusterError(f"{what}: the answer from {self.server} is not valid: {exc.message}") from None

    # --- verbs ---------------------------------------------------------------------------------------------

    def list(self, resource: Resource, namespace: str | None = None, *, page_size: int = 500,
             field_selector: str | None = None, label_selector: str | None = None,
             progress: Callable[[int], None] | None = None, max_pages: int = MAX_PAGES,
             max_items: int = MAX_LIST_ITEMS) -> list[dict[str, Any]]:
        """Every object of a kind, page by page (limit/continue); items carry apiVersion and kind."""
        return list(self.iter_list(resource, namespace, page_size=page_size, field_selector=field_selector,
                                   label_selector=label_selector, progress=progress, max_pages=max_pages,
                                   max_items=max_items))

    def iter_list(self, resource: Resource, namespace: str | None = None, *, page_size: int = 500,
                  field_selector: str | None = None, label_selector: str | None = None,
                  progress: Callable[[int], None] | None = None, max_pages: int = MAX_PAGES,
                  max_items: int = MAX_LIST_ITEMS, prefetch: bool = False,
                  max_seconds: float = MAX_LIST_SECONDS) -> Iterator[dict[str, Any]]:
        """The objects of a kind as their pages arrive. With ``prefetch``, the next page is requested (in a
        thread: the request alone, each answer is decoded and checked here) while the caller works on this
        one, so the server's time and the caller's overlap; the caller must make no other request of this
        client until the list ends. A list given up part-way leaves its request to end within its timeout."""
        params: dict[str, Any] = {"limit": page_size}
        if field_selector:
            params["fieldSelector"] = field_selector
        if label_selector:
            params["labelSelector"] = label_selector
        what = f"list {resource.name}"
        path = resource.path(namespace)

        def fetch(page_params: dict[str, Any]) -> bytes:
            return self.request("GET", path, resource=resource, params=page_params, collection=True)

        seen = empty = 0
        tokens: set[str] = set()
        deadline = time.monotonic() + max_seconds
        data = fetch(dict(params))
        for page in range(max_pages):
            body = self._json(data, what)
            data = b""  # the raw page is not held while its items stream by (the next one may be on its way)
            if not isinstance(body, dict):
                raise ClusterError(f"{what}: the answer is a {_kind(body)}, not a list object")
            items = body.get("items")
            if items is None:
                items = []
            if not isinstance(items, list):
                raise ClusterError(f"{what}: items is a {_kind(items)}, not a list")
            meta = body.get("metadata")
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                raise ClusterError(f"{what}: metadata is a {_kind(meta)}, not an object")
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ClusterError(f"{what}: items[{seen + i}] is a {_kind(item)}, not an object")
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
            seen_now = len(items)
            seen += seen_now
            if seen > max_items:
                raise ClusterError(f"{what}: more than {max_items:,} objects (list limit)")
            token = meta.get("continue")
            error = _token_error(token, tokens, seen)
            ahead: _Ahead | None = None
            if token and error is None:
                tokens.add(token)
                params["continue"] = token
                if prefetch and page + 1 < max_pages:
                    ahead = _Ahead(fetch, dict(params))
            del body, meta
            yield from items
            del items
            if progress is not None:
                progress(seen)
            if token is None or token == "":
                return
            if error is not None:
                raise ClusterError(f"{what}: {error}")
            empty = empty + 1 if not seen_now else 0
            if empty >= MAX_EMPTY_PAGES:
                raise ClusterError(f"{what}: {empty} pages in a row without an object, each with a new continue "
                                   f"token (empty-page limit)")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what}: still more after {max_seconds:.0f}s and {page + 1:,} pages "
                                   f"(time limit of one list)", hint="raise --page-size")
            if page + 1 < max_pages:
                data = ahead.result() if ahead is not None else fetch(dict(params))
        raise ClusterError(f"{what}: still more after {max_pages:,} pages of {page_size} (page limit)",
                           hint="raise --page-size")

    def get(self, resource: Resource, name: str, namespace: str | None = None, sub: str | None = None) -> Any:
        what = f"get {resource.name}"
        return self._json(self.request("GET", resource.path(namespace, name, sub), resource=resource), what)

    def create(self, resource: Resource, body: dict[str, Any], namespace: str | None = None) -> Any:
        data = self.request("POST", resource.path(namespace), resource=resource, body=body)
        try:
            return load_json(data, "create")
        except InputError:
            return None  # created (2xx): what the server echoed is not needed

    def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
               grace_seconds: int | None = None) -> None:
        """Delete one object (retried like a read); one that is already gone is not an error."""
        params = {"gracePeriodSeconds": grace_seconds} if grace_seconds is not None else None
        with contextlib.suppress(NotFound):
            self.request("DELETE", resource.path(namespace, name), resource=resource, params=params)

    def logs(self, name: str, namespace: str, *, container: str | None = None, follow: bool = False,
             until: float | None = None, max_bytes: int = MAX_LOG_BYTES) -> Iterator[str]:
        """A pod's log, line by line. ``follow`` streams until the container ends or the monotonic time
        ``until`` comes (then the stream just ends); at most ``max_bytes`` are read, lines are cut at
        :data:`MAX_LOG_LINE` characters."""
        params: dict[str, Any] = {}
        if container:
            params["container"] = container
        if follow:
            params["follow"] = "true"
        path = POD.path(namespace, name, "log")
        seconds = None if until is None else until - time.monotonic()
        if not follow:
            seconds = self.timeout if seconds is None else min(seconds, self.timeout)
        timeout = httpx.Timeout(self.timeout, read=None) if follow else httpx.Timeout(self.timeout)
        request = self.http.build_request("GET", path, params=params, timeout=timeout,
                                          extensions={"trace": self._trace})
        what = "get pods/log"
        try:
            with self._deadline(seconds):
                resp = self.http.send(request, stream=True)
                try:
                    if resp.status_code >= 300:
                        data = _read(resp, 64 * 1024)
                        raise self._error(resp, data, "get", POD_LOG, 1)
                    yield from _lines(resp, max_bytes)
                finally:
                    resp.close()
        except _TooLarge:  # pragma: no cover - _lines stops at max_bytes itself
            return
        except httpx.HTTPError as exc:
            if until is not None and self._expired:
                return  # the run's deadline: the stream ends, the caller says why
            if self._expired or isinstance(exc, httpx.TimeoutException):
                raise ClusterError(f"{what}: no answer from {self.server} within {self.timeout:g}s") from None
            raise ClusterError(f"{what}: {_short(exc)}") from None


def _token_error(token: Any, tokens: set[str], seen: int) -> str | None:
    """What is wrong with a list's ``metadata.continue`` (None or "": the list ends), or None."""
    if token is None or token == "":
        return None
    if not isinstance(token, str):
        return f"metadata.continue is not a token (a {_kind(token)})"
    if len(token) > MAX_TOKEN:
        return f"metadata.continue is not a token ({len(token):,} characters; continue token limit: {MAX_TOKEN:,})"
    if token in tokens:
        return f"the server repeated a continue token after {seen:,} objects (paging would never end)"
    return None


class _Ahead:
    """The next page's answer, requested in a daemon thread while the caller works on this one. The
    request is the client's own (its deadline, tries and errors); its error is raised where the answer is
    taken."""

    def __init__(self, fetch: Callable[[dict[str, Any]], bytes], params: dict[str, Any]) -> None:
        self._data = b""
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fetch, params), name="kgpu-next-page", daemon=True)
        self._thread.start()

    def _run(self, fetch: Callable[[dict[str, Any]], bytes], params: dict[str, Any]) -> None:
        try:
            self._data = fetch(params)
        except BaseException as exc:  # handed to the caller's thread, raised there
            self._error = exc

    def result(self) -> bytes:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._data


def _lines(resp: httpx.Response, max_bytes: int) -> Iterator[str]:
    """Text lines of a streamed body; at most ``max_bytes`` read, each line cut at MAX_LOG_LINE characters."""
    pending = bytearray()
    total = 0
    cut = False
    for chunk in resp.iter_bytes():
        total += len(chunk)
        if total > max_bytes:
            chunk = chunk[: len(chunk) - (total - max_bytes)]
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                break
            line = bytes(pending[:end])
            del pending[: end + 1]
            if cut:
                cut = False
                continue
            yield _text(line)
        if len(pending) > MAX_LOG_LINE * 4:  # a line without end: keep its start, drop the rest of it
            yield _text(bytes(pending))
            pending.clear()
            cut = True
        if total > max_bytes:
            if pending and not cut:
                yield _text(bytes(pending))
            yield f"[kgpu: the log goes on; only its first {_size(max_bytes)} were read]"
            return
    if pending and not cut:
        yield _text(bytes(pending))


def _text(line: bytes) -> str:
    text = line.decode("utf-8", "replace").rstrip("\r")
    return text if len(text) <= MAX_LOG_LINE else text[:MAX_LOG_LINE] + "…"


def _retry_after(resp: httpx.Response, attempt: int) -> float:
    try:
        value = float(resp.headers.get("Retry-After", ""))
    except ValueError:
        value = float(attempt)
    if value != value:  # NaN
        value = float(attempt)
    return max(0.0, min(value, MAX_RETRY_AFTER))
