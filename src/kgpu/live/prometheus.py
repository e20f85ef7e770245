"""Instant queries to Prometheus's HTTP API (``GET /api/v1/query``), bounded as every request to an API
server is (kgpu.live.client): the whole exchange within ``--request-timeout`` (a watchdog shuts the socket
down), the answer refused past :data:`MAX_BODY` as it is read (after ``Content-Encoding``), the readers'
depth and integer limits, 3 tries on 5xx and dropped connections, the URL's userinfo (basic auth, which
httpx sends) never printed."""

from __future__ import annotations

import base64
import re
import time
from urllib.parse import unquote, urlsplit

import httpx

from kgpu.errors import InputError
from kgpu.live.client import RETRIES
from kgpu.live.exchange import Watchdog, _kind, _message, _read, _short, _size, _TooLarge
from kgpu.live.kubeconfig import ClusterError, strip_userinfo
from kgpu.model.safeyaml import load_json

# a header a server's error page may quote back: its value is a credential
_AUTH = re.compile(r"((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:basic\s+|bearer\s+)?)[^\s\"',;]+", re.I)

MAX_BODY = 64 * 1024 * 1024  # bytes of one query's answer
MAX_SERIES = 1_000_000


class PrometheusClient(Watchdog):
    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        super().__init__()
        self.url = url.rstrip("/")
        self.shown = strip_userinfo(self.url)
        self.timeout = timeout
        if not self.url.startswith(("http://", "https://")):
            raise InputError(f"{self.shown!r} is not an http:// or https:// URL", where="--prometheus")
        try:
            self.http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout), trust_env=True)
        except (httpx.InvalidURL, ValueError) as exc:
            raise InputError(f"invalid URL: {_short(exc)}", where="--prometheus") from None

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant vector query: (labels, value) per series; NaN values are left out. An error's text never
        carries the URL's credentials, whatever the server's answer quotes of the request."""
        try:
            return self._query(expr)
        except ClusterError as exc:
            raise ClusterError(self._scrub(exc.message), where=exc.where, hint=exc.hint) from None

    def _scrub(self, text: str) -> str:
        """``text`` without the URL's user:password, in clear or as the Basic Authorization header's base64."""
        parts = urlsplit(self.url)
        secrets = []
        if parts.password:
            user, password = unquote(parts.username or ""), unquote(parts.password)
            pair = f"{user}:{password}"
            secrets += [base64.b64encode(pair.encode()).decode(), pair, password]
        for secret in secrets:
            if secret:
                text = text.replace(secret, "<redacted>")
        return _AUTH.sub(r"\1<redacted>", text)

    def _query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        what = f"Prometheus query {expr}"
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self.http.build_request("GET", "/api/v1/query", params={"query": expr},
                                                  extensions={"trace": self._trace})
                with self._deadline(self.timeout):
                    resp = self.http.send(request, stream=True)
                    try:
                        data = _read(resp, MAX_BODY)
                    finally:
                        resp.close()
            except _TooLarge:
                raise ClusterError(f"{what}: the answer from {self.shown} is larger than {_size(MAX_BODY)} "
                                   "(size limit)") from None
            except httpx.DecodingError as exc:
                raise ClusterError(f"{what}: the answer from {self.shown} does not decode: {_short(exc)}") from None
            except httpx.HTTPError as exc:
                timed_out = self._expired or isinstance(exc, httpx.TimeoutException)
                if attempt < RETRIES and not timed_out and not isinstance(exc, httpx.ConnectError):
                    time.sleep(0.2 * attempt)
                    continue
                if timed_out:
                    raise ClusterError(f"{what}: no answer from {self.shown} within {self.timeout:g}s",
                                       hint="raise --request-timeout") from None
                raise ClusterError(f"{what}: cannot reach {self.shown}: {_short(exc)}") from None
            if resp.status_code >= 500 and attempt < RETRIES:
                time.sleep(0.5 * attempt)
                continue
            if resp.status_code >= 300 and resp.status_code != 400 and resp.status_code != 422:
                raise ClusterError(f"{what}: {resp.status_code} {resp.reason_phrase} from {self.shown}: "
                                   f"{_message(resp, data)}".rstrip(": "))
            return _vector(data, what, self.shown)


def _vector(data: bytes, what: str, where: str) -> list[tuple[dict[str, str], float]]:
    try:
        doc = load_json(data, what)
    except InputError as exc:
        raise ClusterError(f"{what}: the answer from {where} is not valid: {exc.message}") from None
    if not isinstance(doc, dict):
        raise ClusterError(f"{what}: the answer from {where} is a {_kind(doc)}, not an object")
    if doc.get("status") != "success":
        raise ClusterError(f"{what}: {where} answered {doc.get('errorType') or 'error'}: "
                           f"{str(doc.get('error') or '')[:300]}".rstrip(": "))
    body = doc.get("data")
    result = body.get("result") if isinstance(body, dict) else None
    if not isinstance(body, dict) or body.get("resultType") != "vector" or not isinstance(result, list):
        raise ClusterError(f"{what}: the answer from {where} is not an instant vector (data.resultType, "
                           "data.result)")
    if len(result) > MAX_SERIES:
        raise ClusterError(f"{what}: more than {MAX_SERIES:,} series (limit)")
    out: list[tuple[dict[str, str], float]] = []
    for i, series in enumerate(result):
        metric = series.get("metric") if isinstance(series, dict) else None
        value = series.get("value") if isinstance(series, dict) else None
        if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
            raise ClusterError(f"{what}: data.result[{i}] is not a series (metric, value [time, \"number\"])")
        try:
            number = float(value[1])
        except (TypeError, ValueError):
            raise ClusterError(f"{what}: data.result[{i}].value[1] is not a number") from None
        if number == number:  # NaN: no sample
            out.append(({str(k): str(v) for k, v in metric.items()}, number))
    return out
