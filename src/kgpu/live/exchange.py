"""One bounded HTTP exchange, as both of kgpu's clients make it: the API server's (:mod:`kgpu.live.client`)
and Prometheus's (:mod:`kgpu.live.prometheus`).

- In time: a ``Watchdog`` notes every socket the HTTP client opens (httpcore's trace hook) and shuts them
  down when the exchange's deadline passes, so the deadline bounds the whole exchange, from connecting to
  the last byte, not each read: a server that drips its answer or never ends a chunked one is cut off.
- In size: :func:`_read` takes the body in chunks, decoded (``Content-Encoding``) as they come, and refuses
  it as soon as it passes its limit (a gzip bomb stops there, not when memory runs out).

Errors quote what the server said (:func:`_message`) or what failed (:func:`_short`) in one line, with any
credentials in a URL removed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec

from kgpu.live.kubeconfig import strip_userinfo

_SOCKET_EVENTS = ("connect_tcp.complete", "start_tls.complete", "connect_unix_socket.complete")


class _TooLarge(Exception):
    pass


class Watchdog:
    """The deadline of one exchange: every socket the HTTP client opens is noted (httpcore's trace hook),
    and shut down when the deadline passes, so no answer outlives it (a drip, an endless chunked body)."""

    def __init__(self) -> None:
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._expired = False

    # --- the deadline --------------------------------------------------------------------------------------

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: note every socket the client opens, so the watchdog can shut it down."""
        if event.endswith(_SOCKET_EVENTS):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with self._lock:
                    self._sockets.add(sock)
                    expired = self._expired
                if expired:  # opened after the deadline passed
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    @contextlib.contextmanager
    def _deadline(self, seconds: float | None) -> Iterator[None]:
        """Within ``seconds`` (None: no deadline), or the client's sockets are shut down under the request."""
        with self._lock:
            self._expired = False
        if seconds is None:
            yield
            return
        if seconds <= 0:
            self._expire()
        timer = threading.Timer(max(seconds, 0.0), self._expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


def _read(resp: httpx.Response, limit: int) -> bytes:
    """The decoded body, refused as soon as it passes ``limit`` bytes."""
    length = resp.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > limit and not resp.headers.get("Content-Encoding"):
        raise _TooLarge
    buf = bytearray()
    for chunk in resp.iter_bytes():
        buf += chunk
        if len(buf) > limit:
            raise _TooLarge
    return bytes(buf)


def _message(resp: httpx.Response, data: bytes) -> str:
    """The Status message of an error answer (or the start of its text)."""
    with contextlib.suppress(msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        doc = msgspec.json.decode(data[:1024 * 1024])
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return strip_userinfo(doc["message"][:500])
    return strip_userinfo(data[:200].decode("utf-8", "replace").strip())


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", int: "number", float: "number", bool: "boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return strip_userinfo(text.splitlines()[0][:300])
