"""The one adapter between kgpu and a Kubernetes API server.

lightkube resolves the configuration and builds the TLS context and credentials
(``kgpu.live.kubeconfig``); requests go through the ``httpx.Client`` that lightkube's adapter configures,
and bodies are decoded with msgspec into plain dicts: kgpu reads objects as ``kubectl get -o json`` prints
them, and building typed models for tens of thousands of pods would cost more than the transfer.

Every failure becomes one ``ClusterError`` line: unreachable server, timeout, 401, 403 (naming the verb
and resource, pointing at ``kgpu render --target rbac``), 409, 429 (retried after its Retry-After), 5xx
(reads retried). A 404 on a list means the API is not served (a CRD that is not installed): callers get
``NotServed`` and treat it as normal.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
from lightkube.config.client_adapter import ConnectionParams, verify_cluster

from kgpu.live.kubeconfig import ClusterError, Target

RBAC_HINT = "grant kgpu's read access with `kgpu render --target rbac` (or ask a cluster admin)"
RETRIES = 3
MAX_RETRY_AFTER = 30.0
MAX_BODY = 512 * 1024 * 1024


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
EVENT = Resource("", "v1", "Event", "events")
DAEMONSET = Resource("apps", "v1", "DaemonSet", "daemonsets")
PRIORITY_CLASS = Resource("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False)
NODEPOOL = Resource("karpenter.sh", "v1", "NodePool", "nodepools", namespaced=False)
NODECLAIM = Resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims", namespaced=False)
EC2NODECLASS = Resource("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses", namespaced=False)
RAYCLUSTER = Resource("ray.io", "v1", "RayCluster", "rayclusters")


class NotServed(Exception):
    """404 on a collection: the API (usually a CRD) is not installed."""


class NotFound(Exception):
    """404 on a named object."""


_VERBS = {"GET": "get", "POST": "create", "DELETE": "delete", "PUT": "update", "PATCH": "patch"}
_decoder = msgspec.json.Decoder()


class ApiClient:
    def __init__(self, target: Target, *, timeout: float = 30.0) -> None:
        self.target = target
        self.timeout = timeout
        config = target.config
        if target.exec_auth is not None:
            assert config.user is not None
            self.http = httpx.Client(
                base_url=str(config.cluster.server),
                verify=verify_cluster(config.cluster, config.user, config.abs_file),
                auth=target.exec_auth,
                timeout=httpx.Timeout(timeout),
            )
        else:
            try:
                params = ConnectionParams(timeout=httpx.Timeout(timeout)).httpx_params(config)
            except (OSError, ValueError) as exc:  # unreadable CA / client certificate files
                raise ClusterError(f"cannot load credentials: {exc}", where=target.source) from None
            self.http = httpx.Client(**params)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- requests ----------------------------------------------------------------------------------------

    def request(self, method: str, path: str, *, resource: Resource, params: dict[str, Any] | None = None,
                body: Any = None, collection: bool = False, verb: str | None = None) -> httpx.Response:
        """One request, with Retry-After on 429 and retries of reads on 5xx and dropped connections."""
        verb = verb or ("list" if collection and method == "GET" else _VERBS.get(method, method.lower()))
        content = msgspec.json.encode(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = self.http.request(method, path, params=params, content=content, headers=headers)
            except httpx.TimeoutException:
                raise ClusterError(f"{verb} {resource.name}: no answer from {self.target.server} within "
                                   f"{self.timeout:g}s", hint="raise --request-timeout") from None
            except httpx.TransportError as exc:
                if method == "GET" and attempt < RETRIES and isinstance(exc, httpx.RemoteProtocolError):
                    time.sleep(0.2 * attempt)
                    continue
                raise ClusterError(f"cannot reach {self.target.server}: {_short(exc)}",
                                   where=self.target.source) from None
            code = resp.status_code
            if code < 300:
                return resp
            if code == 429 and attempt < RETRIES:
                time.sleep(_retry_after(resp, attempt))
                continue
            if code >= 500 and method == "GET" and attempt < RETRIES:
                time.sleep(0.5 * attempt)
                continue
            if code == 404:
                raise NotServed(path) if collection else NotFound(path)
            raise self._error(resp, verb, resource, attempt)

    def _error(self, resp: httpx.Response, verb: str, resource: Resource, attempts: int) -> ClusterError:
        code = resp.status_code
        try:
            message = str(_decoder.decode(resp.content).get("message", ""))
        except (msgspec.DecodeError, AttributeError):
            message = resp.text[:200].strip()
        server = self.target.server
        if code == 401:
            return ClusterError(f"401 Unauthorized: {server} rejected the credentials",
                                where=self.target.source,
                                hint="refresh them, e.g. `aws eks update-kubeconfig --name CLUSTER`")
        if code == 403:
            return ClusterError(f"403 Forbidden: cannot {verb} {resource.name}: {message}", hint=RBAC_HINT)
        if code == 409:
            return ClusterError(f"409 Conflict: {verb} {resource.name}: {message}")
        if code == 429:
            return ClusterError(f"429 Too Many Requests: {verb} {resource.name}: still throttled after "
                                f"{attempts} tries", hint="try again later")
        return ClusterError(f"{code} {resp.reason_phrase}: {verb} {resource.name}: {message}".rstrip(": "))

    def _json(self, resp: httpx.Response) -> Any:
        if len(resp.content) > MAX_BODY:
            raise ClusterError(f"response larger than {MAX_BODY >> 20} MiB from {self.target.server}")
        try:
            return _decoder.decode(resp.content)
        except msgspec.DecodeError as exc:
            raise ClusterError(f"{self.target.server} answered with invalid JSON: {exc}") from None

    # --- verbs -------------------------------------------------------------------------------------------

    def list(self, resource: Resource, namespace: str | None = None, *, page_size: int = 500,
             field_selector: str | None = None, label_selector: str | None = None,
             progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
        """Every object of a kind, page by page (limit/continue); items carry apiVersion and kind."""
        return list(self.iter_list(resource, namespace, page_size=page_size, field_selector=field_selector,
                                   label_selector=label_selector, progress=progress))

    def iter_list(self, resource: Resource, namespace: str | None = None, *, page_size: int = 500,
                  field_selector: str | None = None, label_selector: str | None = None,
                  progress: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
        params: dict[str, Any] = {"limit": page_size}
        if field_selector:
            params["fieldSelector"] = field_selector
        if label_selector:
            params["labelSelector"] = label_selector
        seen = 0
        while True:
            resp = self.request("GET", resource.path(namespace), resource=resource, params=params, collection=True)
            data = self._json(resp)
            items = data.get("items") if isinstance(data, dict) else None
            if not isinstance(items, list):
                raise ClusterError(f"list {resource.name}: the answer holds no items list")
            for item in items:
                if isinstance(item, dict):
                    item.setdefault("apiVersion", resource.api_version)
                    item.setdefault("kind", resource.kind)
                    yield item
            seen += len(items)
            if progress is not None:
                progress(seen)
            token = (data.get("metadata") or {}).get("continue")
            if not token:
                return
            params["continue"] = token

    def get(self, resource: Resource, name: str, namespace: str | None = None, sub: str | None = None) -> Any:
        return self._json(self.request("GET", resource.path(namespace, name, sub), resource=resource))

    def create(self, resource: Resource, body: dict[str, Any], namespace: str | None = None) -> Any:
        return self._json(self.request("POST", resource.path(namespace), resource=resource, body=body))

    def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
               grace_seconds: int | None = None) -> None:
        params = {"gracePeriodSeconds": grace_seconds} if grace_seconds is not None else None
        with contextlib.suppress(NotFound):
            self.request("DELETE", resource.path(namespace, name), resource=resource, params=params)

    def logs(self, name: str, namespace: str, *, container: str | None = None, follow: bool = False,
             since_bytes: int | None = None) -> Iterator[str]:
        """A pod's log, line by line (``follow`` streams until the container ends)."""
        params: dict[str, Any] = {}
        if container:
            params["container"] = container
        if follow:
            params["follow"] = "true"
        path = POD.path(namespace, name, "log")
        timeout = httpx.Timeout(self.timeout, read=None) if follow else httpx.Timeout(self.timeout)
        try:
            with self.http.stream("GET", path, params=params, timeout=timeout) as resp:
                if resp.status_code >= 300:
                    resp.read()
                    raise self._error(resp, "get", Resource("", "v1", "Pod", "pods/log"), 1)
                yield from resp.iter_lines()
        except httpx.TimeoutException:
            raise ClusterError(f"get pods/log: no answer from {self.target.server}") from None
        except httpx.TransportError as exc:
            raise ClusterError(f"get pods/log: {_short(exc)}") from None


def _retry_after(resp: httpx.Response, attempt: int) -> float:
    try:
        value = float(resp.headers.get("Retry-After", ""))
    except ValueError:
        value = float(attempt)
    return max(0.0, min(value, MAX_RETRY_AFTER))


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]
