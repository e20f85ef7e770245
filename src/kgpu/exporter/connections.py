"""The exporter's connections: one selector loop holds every connection that has no request in progress,
and a thread is taken only to answer a request.

Why not a thread per connection (the stdlib ``ThreadingHTTPServer``, which this replaces): starting a
Python thread cost 0.3 to 1.3 ms on a 2-core node under load (measured: 1,100 threads blocked in ``recv``
started in 0.33 to 1.3 s), and an idle connection holds its thread. 1,100 TCP connections opened in 60 ms
and left silent then sat in the accept queue ahead of the next scrape, which waited 0.23 to 1.45 s for
their threads to start and be shut again; 4,000 would have taken longer than Prometheus's scrape timeout.
Go's ``net/http`` (node_exporter behind exporter-toolkit) pays about a microsecond per goroutine. Here an
idle connection costs a selector entry and its buffers; the same flood is accepted in tens of
milliseconds and the scrape after it answered in a few (``tests/test_exporter_flood.py`` measures it).

A connection's life:

- *accepted*: non-blocking, registered with the selector. With TLS the handshake runs here, a step each
  time the socket is readable (or writable, when OpenSSL asks), so a client that stalls mid-handshake costs
  nothing but its slot.
- *head*: the request line and headers are read into the connection's buffer until the blank line that
  ends them, at most ``MAX_HEAD_BYTES`` (431 beyond, as ``net/http`` answers past ``MaxHeaderBytes``).
- *busy*: the head is complete; the connection leaves the selector and a worker thread answers it (the
  handler reads the head from memory, never from the socket, and writes with ``header_timeout`` on each
  send, for a client that stops reading). A keep-alive connection then comes back to the selector,
  waiting for its next request; any bytes past the head (a pipelined request) stay in its buffer.

Deadlines follow ``net/http``: the TLS handshake gets ``header_timeout`` from the accept
(``Server.tlsHandshakeTimeout`` is the smallest of its read timeouts), the request head then gets
``header_timeout`` of its own, counted from the end of the handshake (or from the accept, or the end of
the previous response), so a header dribbled a byte at a time does not extend it. Overdue connections
are closed, checked ten times a second.

Bounds: at most ``limit`` connections are open. When a new one arrives and all are, the one that has
waited longest without a request (silent since its accept, a handshake stalled or finished and followed
by nothing, headers dribbled, an idle keep-alive) is closed on the spot to make room; waiting connections
are kept in the order they started waiting, so that choice is O(1) and never has to wait for anything.
Only when every open connection is busy (scrapes waiting on a hung NVML call) is the newcomer turned
away: ``refusal`` is written on a plain HTTP port, and on a TLS port the connection is just closed (a
client there expects a ServerHello; plain text would only read as a broken handshake). So the exporter
holds at most ``limit`` sockets, ``limit`` head buffers and ``limit`` worker threads, whatever its clients
do, and a scraper that sends its request at once is served however many idle or slow connections there
are: to push it out, clients would have to open ``limit`` new connections while its handshake and request
are in flight (a few milliseconds).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import re
import selectors
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024  # request line and headers; a scrape sends a few hundred bytes
ACCEPT_BURST = 64  # connections accepted per turn of the loop before the others are looked at again
EXPIRE_EVERY = 0.1  # seconds between deadline checks
WORKER_IDLE = 60.0  # seconds an idle worker thread waits for work before it ends
READ_CHUNK = 16 * 1024
_HEAD_END = re.compile(rb"\n\r?\n")  # the blank line after the headers (http.client accepts bare LF)
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\nContent-Length: 26\r\n"
    b"Connection: close\r\n\r\nrequest head is too large\n"
)

HANDSHAKE, HEAD, BUSY = "handshake", "head", "busy"


@dataclass(slots=True, eq=False)
class Connection:
    """One accepted connection, from accept to close."""

    sock: socket.socket  # the TLS socket on a TLS port
    peer: Any
    since: float  # waiting for a request since (accepted, or the end of the last response)
    deadline: float  # closed after this monotonic time while waiting
    phase: str = HEAD
    buf: bytearray = field(default_factory=bytearray)  # bytes of the next request head
    scanned: int = 0  # how much of buf is known not to hold the blank line (a dribbled head is scanned once)
    events: int = 0  # what the selector watches it for (0: not registered)


class Workers:
    """Daemon threads that each answer one request at a time; a new one starts only when none is idle,
    and one idle for ``WORKER_IDLE`` seconds ends, so there are never more than requests in progress."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self.started = 0

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1  # promised to an idle worker
            self._tasks.put(task)
        if spawn:
            self.started += 1
            threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                task = self._tasks.get(timeout=WORKER_IDLE)
            except queue.Empty:
                with self._lock:
                    if self._tasks.empty():  # nothing was promised to this worker: it may end
                        self._idle -= 1
                        return
                continue
            try:
                task()
            except BaseException:  # a task reports its own errors; never lose the worker silently
                log.exception("request worker")
            with self._lock:
                self._idle += 1


class Connections:
    """The selector loop over the listening socket and every waiting connection (see the module doc)."""

    def __init__(
        self,
        listener: socket.socket,
        serve: Callable[[Connection, bytes], bool],
        *,
        limit: int,
        header_timeout: float,
        tls: ssl.SSLContext | None = None,
        refusal: bytes = b"",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.listener = listener
        self.serve = serve  # answers one request head (in a worker); True keeps the connection open
        self.limit = max(1, limit)
        self.header_timeout = header_timeout
        self.tls = tls
        self.refusal = refusal
        self._clock = clock
        self._sel = selectors.DefaultSelector()
        self._waiting: OrderedDict[Connection, None] = OrderedDict()  # oldest first
        self._busy: set[Connection] = set()
        self._back: queue.SimpleQueue[tuple[Connection, bool]] = queue.SimpleQueue()  # from workers
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._lock = threading.Lock()  # _stopping, _closed and the wake-up
        self._stopping = False
        self._closed = False
        self._running = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self.workers = Workers("kgpu-http")
        self.evicted = 0  # closed to make room
        self.expired = 0  # closed because their handshake or request head was overdue
        self.refused = 0  # turned away: every open connection was busy
        self.accepted = 0

    @property
    def open(self) -> int:
        with self._lock:
            return len(self._waiting) + len(self._busy)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    # --- the loop ----------------------------------------------------------------------------------

    def run(self, poll_interval: float = 0.5) -> None:
        """Serve until :meth:`stop`."""
        self._stopped.clear()
        self.listener.setblocking(False)
        self._sel.register(self.listener, selectors.EVENT_READ, "listener")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        next_expire = self._clock() + EXPIRE_EVERY
        self._running.set()
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        break
                wait = max(0.0, min(poll_interval, next_expire - self._clock()))
                for key, events in self._sel.select(wait):
                    if key.data == "listener":
                        self._accept()
                    elif key.data == "wake":
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    else:
                        self._step(key.data, events)
                self._take_back()
                now = self._clock()
                if now >= next_expire:
                    self._expire(now)
                    next_expire = now + EXPIRE_EVERY
        finally:
            self._sel.unregister(self.listener)
            self._sel.unregister(self._wake_r)
            self._running.clear()
            self._stopped.set()

    def stop(self) -> None:
        """Make :meth:`run` return, and wait until it has."""
        with self._lock:
            self._stopping = True
        self._wake()
        if self._running.is_set():
            self._stopped.wait()

    def close(self) -> None:
        """Close every waiting connection; busy ones are closed when their workers are done."""
        self.stop()
        with self._lock:
            self._closed = True
            waiting = list(self._waiting)
        for conn in waiting:
            self._drop(conn)
        self._take_back()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        with self._lock:
            if self._closed:
                return
            with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
                self._wake_w.send(b"\0")

    # --- accepting ---------------------------------------------------------------------------------

    def _accept(self) -> None:
        for _ in range(ACCEPT_BURST):
            try:
                sock, peer = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors or memory: the listener stays readable, so make room or the loop
                    # would spin (net/http backs off from 5 ms on such errors)
                    log.warning("accept: %s; closing the connection idle longest", exc.strerror)
                    if not self._evict_oldest():
                        time.sleep(0.005)
                return
            self.accepted += 1
            self._admit(sock, peer)

    def _admit(self, sock: socket.socket, peer: Any) -> None:
        with self._lock:
            full = len(self._waiting) + len(self._busy) >= self.limit
        if full and not self._evict_oldest():
            self.refused += 1
            self._refuse(sock)
            return
        now = self._clock()
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK waits
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        except (OSError, ssl.SSLError) as exc:
            log.debug("%s: %s", peer, exc)
            sock.close()
            return
        conn = Connection(sock, peer, now, now + self.header_timeout, HANDSHAKE if self.tls else HEAD)
        with self._lock:
            self._waiting[conn] = None
        self._watch(conn, selectors.EVENT_READ)

    def _refuse(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if self.tls is None and self.refusal:
                sock.setblocking(False)
                sock.send(self.refusal)  # a fresh socket's send buffer takes it whole: never waits
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def _evict_oldest(self) -> bool:
        with self._lock:
            victim = next(iter(self._waiting), None)
        if victim is None:
            return False
        self.evicted += 1
        self._drop(victim)
        return True

    def _expire(self, now: float) -> None:
        with self._lock:
            overdue = [c for c in self._waiting if c.deadline < now]
        self.expired += len(overdue)
        for conn in overdue:
            self._drop(conn)

    # --- handshake and request head ----------------------------------------------------------------

    def _step(self, conn: Connection, events: int) -> None:
        if conn.phase == HANDSHAKE:
            assert isinstance(conn.sock, ssl.SSLSocket)
            try:
                conn.sock.do_handshake()
            except ssl.SSLWantReadError:
                self._watch(conn, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._watch(conn, selectors.EVENT_WRITE)
                return
            except (ssl.SSLError, OSError, ValueError) as exc:
                log.debug("TLS handshake with %s failed: %s", conn.peer, exc)
                self._drop(conn)
                return
            conn.phase = HEAD
            conn.deadline = self._clock() + self.header_timeout  # the head's own deadline, as net/http
            self._watch(conn, selectors.EVENT_READ)
        if conn.phase == HEAD:
            self._read_head(conn)

    def _read_head(self, conn: Connection) -> None:
        """Read what there is; hand the connection to a worker once its head is complete."""
        while True:
            found = _HEAD_END.search(conn.buf, max(0, conn.scanned - 2))
            if found is not None:
                head = bytes(conn.buf[: found.end()])
                del conn.buf[: found.end()]
                conn.scanned = 0
                self._dispatch(conn, head)
                return
            conn.scanned = len(conn.buf)
            room = MAX_HEAD_BYTES - len(conn.buf)
            if room <= 0:
                log.debug("%s: request head over %d bytes", conn.peer, MAX_HEAD_BYTES)
                with contextlib.suppress(OSError, ssl.SSLError):
                    conn.sock.send(_TOO_LARGE)
                self._drop(conn)
                return
            try:
                data = conn.sock.recv(min(room, READ_CHUNK))
            except (BlockingIOError, ssl.SSLWantReadError):
                self._watch(conn, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._watch(conn, selectors.EVENT_WRITE)
                return
            except (OSError, ssl.SSLError, ValueError) as exc:
                log.debug("%s: %s", conn.peer, exc)
                self._drop(conn)
                return
            if not data:  # the client is gone
                self._drop(conn)
                return
            conn.buf += data

    def _dispatch(self, conn: Connection, head: bytes) -> None:
        self._watch(conn, 0)
        with self._lock:
            self._waiting.pop(conn, None)
            self._busy.add(conn)
        conn.phase = BUSY
        try:
            conn.sock.settimeout(
                self.header_timeout
            )  # each send of the answer, for a client that stops reading
        except OSError:
            self._finish(conn, False)
            return
        self.workers.submit(lambda: self._answer(conn, head))

    def _answer(self, conn: Connection, head: bytes) -> None:
        """In a worker thread: answer ``head``, then hand the connection back to the loop."""
        keep = False
        try:
            keep = self.serve(conn, head)
        except (ConnectionError, TimeoutError, ssl.SSLError) as exc:
            log.debug("%s: connection ended: %s", conn.peer, exc)
        except Exception:
            log.exception("error serving %s", conn.peer)
        with self._lock:
            closed = self._closed
            if not closed:
                self._back.put((conn, keep))
        if closed:
            self._finish(conn, False)
        else:
            self._wake()

    def _take_back(self) -> None:
        """Connections whose answer is sent: keep-alive ones wait for their next request."""
        while True:
            try:
                conn, keep = self._back.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                keep = keep and not self._stopping
            self._finish(conn, keep)

    def _finish(self, conn: Connection, keep: bool) -> None:
        with self._lock:
            self._busy.discard(conn)
            if keep:
                now = self._clock()
                conn.since, conn.deadline, conn.phase = now, now + self.header_timeout, HEAD
                self._waiting[conn] = None  # the newest
        if not keep:
            self._close(conn)
            return
        try:
            conn.sock.setblocking(False)
        except OSError:
            self._drop(conn)
            return
        self._read_head(conn)  # a pipelined request may be in the buffer (or in OpenSSL's) already

    # --- bookkeeping -------------------------------------------------------------------------------

    def _watch(self, conn: Connection, events: int) -> None:
        if events == conn.events:
            return
        try:
            if conn.events == 0:
                self._sel.register(conn.sock, events, conn)
            elif events == 0:
                self._sel.unregister(conn.sock)
            else:
                self._sel.modify(conn.sock, events, conn)
        except (KeyError, ValueError, OSError):  # closed meanwhile
            events = 0
        conn.events = events

    def _drop(self, conn: Connection) -> None:
        """Close a waiting connection."""
        with self._lock:
            self._waiting.pop(conn, None)
        self._watch(conn, 0)
        self._close(conn)

    def _close(self, conn: Connection) -> None:
        with contextlib.suppress(OSError):
            conn.sock.close()
        conn.buf = bytearray()


def open_files_limit() -> int | None:
    """The process's soft limit on open descriptors (``ulimit -n``); None when there is none."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def raise_open_files_limit() -> None:
    """Raise the soft limit on open descriptors to the hard one, as the Go runtime does for every program
    at start (``syscall/rlimit.go``), so that an exporter started under a soft limit of 1024 (systemd's
    default) has the room its hard limit allows."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
