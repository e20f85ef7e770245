"""Which cluster, user and namespace: resolved exactly as kubectl resolves them.

Precedence (client-go's loading rules, which kubectl uses):

1. ``--kubeconfig FILE``: that file alone; it must exist.
2. ``KUBECONFIG``: a list of files (``:``-separated). Missing files are skipped; the rest are merged
   with the first file winning for every named cluster, user and context, and the first
   ``current-context`` set winning.
3. ``~/.kube/config``.
4. None of those: the in-cluster service account (``KUBERNETES_SERVICE_HOST`` and the mounted token).

``--context`` overrides ``current-context``; the namespace is ``-n`` if given, else the context's, else
``default``, and must be a valid namespace name. Relative file paths in a kubeconfig (certificate
authority, client certificate and key, token file, an exec ``command`` with a ``/``) are relative to the
folder of the file that names them, made absolute while merging, as client-go's ``ResolveLocalPaths``
does, whatever the current directory and however the file itself was named.

lightkube reads and validates the merged configuration (``KubeConfig.from_dict``) and builds the TLS
context; exec credential plugins are run here (``ExecAuth``) because lightkube rejects
``client.authentication.k8s.io/v1``, the version current ``aws eks update-kubeconfig`` and
``gke-gcloud-auth-plugin`` write, and does not pass ``KUBERNETES_EXEC_INFO``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError

from kgpu.errors import InputError, quote
from kgpu.model.names import is_dns1123_label
from kgpu.model.safeyaml import load_document

IN_CLUSTER_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024
MAX_EXEC_OUTPUT = 1024 * 1024
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")

# Keys whose values are file paths, by section (client-go's ResolvePaths).
_PATH_KEYS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


class ClusterError(InputError):
    """The cluster could not be reached or refused a request: one line, exit code 2."""


@dataclass(frozen=True)
class Access:
    """What the user said about which cluster to talk to (the kubectl flags)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    request_timeout: float = 30.0


@dataclass(frozen=True)
class Target:
    """The resolved cluster: a lightkube config, the namespace, and where it came from."""

    config: SingleConfig
    namespace: str
    source: str  # the file(s) or "in-cluster"
    exec_auth: ExecAuth | None = None

    @property
    def context(self) -> str | None:
        return None if self.source == "in-cluster" else self.config.context_name

    @property
    def server(self) -> str:
        """The server's URL as kgpu prints and saves it: without a ``user:password@``."""
        return strip_userinfo(str(self.config.cluster.server))


def strip_userinfo(text: str) -> str:
    """Every URL in ``text`` without its userinfo (``https://user:password@host`` -> ``https://host``)."""
    return _USERINFO.sub(r"\1", text) if "@" in text else text


def check_token(token: str, where: str) -> None:
    """A bearer token must fit in an HTTP header: printable ASCII. Never quoted in the error."""
    if not token:
        raise ClusterError("the bearer token is empty", where=where)
    if not (token.isascii() and token.isprintable()):
        bad = next(ch for ch in token if not (ch.isascii() and ch.isprintable()))
        what = "a newline" if bad in "\r\n" else "a non-ASCII character" if not bad.isascii() else "a control character"
        raise ClusterError(f"the bearer token contains {what}, which cannot be sent in an HTTP header",
                           where=where)


def check_server(server: str, where: str) -> None:
    """A cluster's ``server`` must be an http(s) URL with a host (``https://[::1`` does not parse), said
    before any request is made. Never printed with its ``user:password@``."""
    try:
        url = httpx.URL(server)
    except httpx.InvalidURL as exc:
        raise ClusterError(f"invalid server URL {quote(strip_userinfo(server))}: {strip_userinfo(str(exc))}",
                           where=where, hint="write https://HOST:PORT, an IPv6 address in brackets: "
                           "https://[::1]:6443") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ClusterError(f"invalid server URL {quote(strip_userinfo(server))}: not an http:// or https:// URL "
                           "with a host", where=where, hint="write https://HOST:PORT")


def _defined_in(files: list[tuple[Path, dict[str, Any]]], section: str, name: str) -> str:
    """The file whose ``section`` defines ``name`` (the first, as the merge keeps), else all of them."""
    for path, data in files:
        entries = data.get(section)
        if isinstance(entries, list) and any(isinstance(e, dict) and e.get("name") == name for e in entries):
            return str(path)
    return ":".join(str(p) for p, _ in files)


def check_namespace(namespace: str, where: str) -> str:
    if not is_dns1123_label(namespace):  # a namespace is a DNS-1123 label
        raise ClusterError(f"{quote(namespace)} is not a valid namespace name (lowercase letters, digits "
                           "and '-', starting and ending with a letter or digit, at most 63)", where=where)
    return namespace


def resolve(access: Access, environ: Mapping[str, str] | None = None) -> Target:
    env = os.environ if environ is None else environ
    if access.kubeconfig:
        files = [Path(access.kubeconfig).expanduser()]
        if not files[0].is_file():
            raise ClusterError("no such kubeconfig file", where=str(files[0]))
    elif env.get("KUBECONFIG"):
        files = [Path(p).expanduser() for p in env["KUBECONFIG"].split(os.pathsep) if p]
        files = [f for f in files if f.is_file()]
    else:
        home = Path(env.get("HOME", "~")).expanduser()
        files = [f for f in [home / ".kube" / "config"] if f.is_file()]
    if not files:
        if env.get("KUBERNETES_SERVICE_HOST") and (IN_CLUSTER_DIR / "token").is_file():
            return _in_cluster(access)
        raise ClusterError(
            "no kubeconfig found",
            hint="pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config "
            "(e.g. `aws eks update-kubeconfig --name CLUSTER`)",
        )
    read = [(f, _read(f)) for f in files]
    merged, exec_dirs = merge(read)
    source = ":".join(str(f) for f in files)
    try:
        kc = KubeConfig.from_dict(merged)
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ClusterError(f"invalid kubeconfig: {exc}", where=source) from None
    name = access.context or kc.current_context
    if not name:
        raise ClusterError("no current context", where=source, hint="pass --context NAME")
    if name not in kc.contexts:
        known = ", ".join(sorted(kc.contexts)) or "none"
        raise ClusterError(f"context {name!r} not found (contexts: {known})", where=source)
    ctx = kc.contexts[name]
    if ctx.cluster not in kc.clusters:
        raise ClusterError(f"context {name!r} names cluster {ctx.cluster!r}, which is not defined", where=source)
    if ctx.user and ctx.user not in kc.users:
        raise ClusterError(f"context {name!r} names user {ctx.user!r}, which is not defined", where=source)
    config = kc.get(name)
    assert config is not None
    check_server(str(config.cluster.server or ""), f"{_defined_in(read, 'clusters', ctx.cluster)}: "
                 f"clusters[{ctx.cluster}].cluster.server")
    exec_auth = None
    user = config.user
    if user is not None and user.exec is not None:
        raw_user = next(u["user"] for u in merged["users"] if u["name"] == ctx.user)
        exec_auth = ExecAuth(raw_user["exec"], directory=exec_dirs[str(ctx.user)], where=f"{source}: users[{ctx.user}].exec")
    if access.namespace is not None:
        namespace = check_namespace(access.namespace, "-n/--namespace")
    else:
        namespace = check_namespace(config.namespace, f"{source}: contexts[{name}].namespace")
    return Target(config, namespace, source, exec_auth)


def _in_cluster(access: Access) -> Target:
    try:
        kc = KubeConfig.from_service_account(str(IN_CLUSTER_DIR))
    except ConfigError as exc:
        raise ClusterError(f"in-cluster configuration: {exc}") from None
    config = kc.get()
    assert config is not None
    check_server(str(config.cluster.server or ""), "in-cluster: KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT")
    if access.namespace is not None:
        namespace = check_namespace(access.namespace, "-n/--namespace")
    else:
        namespace = check_namespace(config.namespace, f"{IN_CLUSTER_DIR / 'namespace'}")
    return Target(config, namespace, "in-cluster")


def _read(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_KUBECONFIG_BYTES:
            raise ClusterError(f"larger than {MAX_KUBECONFIG_BYTES >> 20} MiB", where=str(path))
        data = load_document(path.read_text(encoding="utf-8"), str(path))  # the bounded reader of every verb
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterError(f"cannot read kubeconfig: {exc}", where=str(path)) from None
    except InputError as exc:
        raise ClusterError(f"kubeconfig: {exc.message}", where=str(path)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ClusterError("kubeconfig is not a mapping", where=str(path))
    return data


def merge(files: list[tuple[Path, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Path]]:
    """client-go's merge of several kubeconfig files: first file wins, per named entry.

    Also returns, per user, the directory of the file that defined it (an exec plugin's relative command
    is relative to it)."""
    dirs: dict[str, Path] = {}
    out: dict[str, Any] = {"clusters": [], "users": [], "contexts": [], "current-context": None}
    seen: dict[str, set[str]] = {"clusters": set(), "users": set(), "contexts": set()}
    for path, data in files:
        base = Path(os.path.abspath(path)).parent  # client-go: filepath.Abs(filepath.Dir(LocationOfOrigin))
        if out["current-context"] is None and data.get("current-context"):
            out["current-context"] = data["current-context"]
        for section, item_key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            entries = data.get(section) or []
            if not isinstance(entries, list):
                raise ClusterError(f"{section} is not a list", where=str(path))
            for i, entry in enumerate(entries):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise ClusterError("entry without a name", where=f"{path}: {section}[{i}]")
                if entry["name"] in seen[section]:
                    continue
                seen[section].add(entry["name"])
                raw = entry.get(item_key)
                if raw is not None and not isinstance(raw, dict):
                    raise ClusterError(f"{item_key} is not a mapping", where=f"{path}: {section}[{i}]")
                body = dict(raw or {})
                for key in _PATH_KEYS.get(item_key, ()):
                    if isinstance(body.get(key), str) and body[key] and not Path(body[key]).is_absolute():
                        body[key] = str(base / body[key])
                if item_key == "user":
                    dirs[entry["name"]] = base
                out[section].append({"name": entry["name"], item_key: body})
    return out, dirs


class ExecAuth(httpx.Auth):
    """A client-go exec credential plugin (``users[].user.exec``), v1 and v1beta1.

    The plugin runs with ``KUBERNETES_EXEC_INFO`` set, its token is cached until its
    ``expirationTimestamp`` (or a 401), then the plugin runs again.
    """

    def __init__(self, spec: Mapping[str, Any], *, directory: Path, where: str) -> None:
        self.where = where
        self.api_version = str(spec.get("apiVersion", ""))
        if self.api_version not in EXEC_API_VERSIONS:
            raise ClusterError(
                f"exec plugin apiVersion {self.api_version!r} is not supported "
                f"(supported: {', '.join(EXEC_API_VERSIONS)})",
                where=where,
            )
        command = str(spec.get("command") or "")
        if not command:
            raise ClusterError("exec plugin without a command", where=where)
        if os.sep in command and not Path(command).is_absolute():  # client-go: only a path, not a PATH name
            command = os.path.normpath(directory / command)
        args, env = spec.get("args") or [], spec.get("env") or []
        if not isinstance(args, list) or not isinstance(env, list):
            raise ClusterError("exec plugin args and env must be lists", where=where)
        self.argv = [command, *[str(a) for a in args]]
        self.env = {str(e.get("name")): str(e.get("value", "")) for e in env if isinstance(e, dict)}
        self.install_hint = str(spec.get("installHint") or "")
        self._token: str | None = None
        self._expires = 0.0
        self._lock = threading.Lock()

    def token(self, *, refresh: bool = False) -> str:
        with self._lock:
            if refresh or self._token is None or time.time() >= self._expires:
                self._token, self._expires = self._run()
            return self._token

    def _run(self) -> tuple[str, float]:
        if shutil.which(self.argv[0]) is None:
            hint = self.install_hint.strip().splitlines()[0] if self.install_hint.strip() else ""
            raise ClusterError(f"exec plugin {self.argv[0]!r} not found on PATH", where=self.where, hint=hint)
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            done = subprocess.run(self.argv, env=env, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterError(f"exec plugin {self.argv[0]!r} failed: {exc}", where=self.where) from None
        if done.returncode != 0:
            last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
            raise ClusterError(f"exec plugin {self.argv[0]!r} exited {done.returncode}: {last[:300]}", where=self.where)
        try:
            cred = json.loads(done.stdout)
            status = cred["status"]
            token = status["token"]
        except (ValueError, KeyError, TypeError):
            raise ClusterError(
                f"exec plugin {self.argv[0]!r} printed no ExecCredential with status.token "
                "(client certificates from exec plugins are not supported)",
                where=self.where,
            ) from None
        if not isinstance(token, str) or not token:
            raise ClusterError(f"exec plugin {self.argv[0]!r} returned an empty token", where=self.where)
        check_token(token, f"{self.where}: exec plugin {self.argv[0]!r}")
        expires = float("inf")
        stamp = status.get("expirationTimestamp")
        if isinstance(stamp, str) and stamp:
            with contextlib.suppress(ValueError):
                expires = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - 10
        return token, expires

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = f"Bearer {self.token(refresh=True)}"
            yield request
