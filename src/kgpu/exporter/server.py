"""The exporter's HTTP server: ``/metrics`` and ``/healthz``, answered by the stdlib's request handler.

Decisions:

- Concurrent scrapes share one collection ("single flight"): a scrape that arrives while a collection is
  running waits for that one instead of starting another, so N scrapers cost one NVML pass, not N, and NVML
  sees one caller at a time.
- The collection runs in its own thread and every scrape waits for it at most ``timeout`` seconds. A hung
  NVML call (the failure mode of forked nvidia-smi that seed 002's exporter suffers from) then costs a 503
  for that scrape, not a stuck connection; later scrapes join the still-running collection rather than piling
  up threads behind it.
- With ``max_age`` > 0 a successful collection is served to every scrape for ``max_age`` seconds (counted
  from the collection's start, so no scrape sees values older than that), and once half of that window has
  passed the next scrape starts a fresh collection in the background and is answered from the current one.
  Under steady load (an HA Prometheus pair, agents, people with curl) scrapes then never wait for NVML; a
  lone scraper every 15 s always finds the window expired and gets a fresh collection. NVML's own figures
  are averages over sampling windows of 1/6 s to 1 s (utilization; power on Ampere and newer), so a window
  of 1 s loses no information. A failed collection is never reused: the next scrape collects (and so
  re-initialises NVML) again.
- Conventions of Prometheus exporters (nvidia_gpu_exporter, node_exporter): the metrics path is settable
  (``--web.telemetry-path``); a scraper that sends ``Accept-Encoding: gzip`` gets a gzip body (a reused
  collection is compressed once); TLS, client certificates, basic auth and extra response headers come from
  an exporter-toolkit web configuration file (``exporter.webconfig``).
- ``/healthz`` (alias ``/-/healthy``) never touches NVML: it answers whether the server is up and reports the
  last collection's outcome in the body, so a broken driver does not make Kubernetes restart the exporter in
  a loop. The one exception is a hung collection: an NVML call that never returns keeps every scrape at 503
  and only a restart clears it, so once the running collection is older than ``hung_after`` seconds
  ``/healthz`` answers 503 and the liveness probe restarts the exporter.
- Connections are bounded, and idle or slow ones cannot lock a scraper out, as against node_exporter
  behind exporter-toolkit (Go's ``net/http``: a goroutine per connection, ``ReadHeaderTimeout``, the TLS
  handshake bounded by it). Every connection without a request in progress (accepted, in its TLS
  handshake, sending its headers, idle between keep-alive requests) sits in one selector loop
  (``exporter.connections``, which has the rules and the measurements that led to it: a thread per
  connection let 1,100 silent connections delay the next scrape by up to 1.45 s on 2 cores); a worker
  thread is taken only to answer a complete request head. The TLS handshake and then the request line
  and headers each get ``header_timeout`` (``--web.read-header-timeout``); the head is at most
  ``MAX_HEAD_BYTES`` (431 beyond); every send of an answer times out after ``header_timeout`` too (a
  client that stops reading). At most ``max_connections`` are open, kept under the process's open-files
  limit, whose soft value ``make_server`` raises to the hard one at start, as every Go program does
  (``syscall/rlimit.go``). When all are open, the one waiting longest for a request is closed to make
  room, so a scraper that sends its request at once is always served; only when every one is busy
  (scrapes waiting on a hung NVML call) is the newcomer refused at once: ``503 too many connections`` on
  a plain HTTP port, closed without a byte on a TLS port. A client going away mid-response is logged at
  debug level, without a traceback. HEAD is answered like GET, without the body.
- At most ``max_requests`` scrapes of the metrics path run at once (nvidia_gpu_exporter's
  ``--web.max-requests``); the next get 503 at once.
- ``/-/ready`` answers like ``/-/healthy``: both are process-level, as in nvidia_gpu_exporter, so a host
  whose NVML fails stays scrapeable and the failure stays visible in the health metrics.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any

from kgpu.errors import quote
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.connections import Connection, Connections, open_files_limit, raise_open_files_limit
from kgpu.exporter.exposition import CONTENT_TYPE, TextWriter
from kgpu.exporter.webconfig import BUSY

if TYPE_CHECKING:
    from kgpu.exporter.webconfig import WebConfig

log = logging.getLogger(__name__)

# Default reuse window (``max_age``) of collections, for the library and ``kgpu exporter --max-age`` alike:
# NVML's utilization and power figures are averages over windows of up to 1 s, so collecting more often than
# this adds cost, not information.
DEFAULT_MAX_AGE = 1.0
DEFAULT_TELEMETRY_PATH = "/metrics"


def accepts_gzip(header: str | None) -> bool:
    """Whether an Accept-Encoding header allows gzip (``gzip;q=0`` refuses it)."""
    for part in (header or "").split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            q = params.strip().lower()
            if q.startswith("q="):
                try:
                    return float(q[2:]) > 0
                except ValueError:
                    return False
            return True
    return False


class _Flight:
    __slots__ = ("body", "done", "error", "started")

    def __init__(self, started: float) -> None:
        self.started = started
        self.done = threading.Event()
        self.body: bytes | None = None
        self.error: BaseException | None = None


class ScrapeTimeout(Exception):
    """The collection did not finish within the per-scrape timeout."""


class Scraper:
    """Single-flight, time-bounded rendering of the collector's families, with an optional reuse window."""

    REFRESH_AFTER = 0.5  # fraction of max_age after which a scrape triggers a background refresh

    def __init__(
        self,
        collector: GpuCollector,
        *,
        timeout: float = 5.0,
        max_age: float = DEFAULT_MAX_AGE,
        hung_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.collector = collector
        self.timeout = check_seconds(timeout, "timeout")
        self.max_age = check_seconds(
            max_age, "max_age"
        )  # reuse a successful collection this young (0: every scrape collects afresh)
        # a collection running longer than this is hung: /healthz answers 503 so that the exporter is restarted
        self.hung_after = max(30.0, 6 * timeout) if hung_after is None else hung_after
        self._clock = clock
        self._writer = TextWriter()
        self._lock = threading.Lock()
        self._flight: _Flight | None = None
        self._last: tuple[float, bytes] | None = None  # (collection start, body) of the last good one
        self._waiting = 0  # scrapes now waiting for a collection

    @property
    def waiting(self) -> int:
        """How many scrapes are waiting for a running collection right now."""
        with self._lock:
            return self._waiting

    def collection_running_seconds(self) -> float:
        """How long the current collection has been running (0 when none is)."""
        with self._lock:
            flight = self._flight
        return 0.0 if flight is None else max(0.0, self._clock() - flight.started)

    def _start(self) -> _Flight:
        """A new collection in its own thread; the caller holds ``_lock``."""
        flight = self._flight = _Flight(self._clock())
        threading.Thread(target=self._run, args=(flight,), name="kgpu-collect", daemon=True).start()
        return flight

    def _run(self, flight: _Flight) -> None:
        ok = False
        try:
            flight.body = self._writer.render(self.collector.build())
            with self.collector.stats.lock:
                ok = self.collector.stats.last_success
        except BaseException as exc:  # reported to every waiter, never kills the server
            flight.error = exc
        finally:
            with self._lock:
                if self._flight is flight:
                    self._flight = None
                if self.max_age > 0:
                    self._last = (flight.started, flight.body) if ok and flight.body is not None else None
            flight.done.set()

    def scrape(self, timeout: float | None = None) -> bytes:
        with self._lock:
            last = self._last
            if last is not None:
                age = self._clock() - last[0]
                if age < self.max_age:
                    if self._flight is None and age >= self.max_age * self.REFRESH_AFTER:
                        self._start()  # refresh ahead; this scrape is answered from ``last``
                    return last[1]
            flight = self._flight or self._start()
            self._waiting += 1
        wait = self.timeout if timeout is None else timeout
        try:
            finished = flight.done.wait(wait)
        finally:
            with self._lock:
                self._waiting -= 1
        if not finished:
            with self.collector.stats.lock:
                self.collector.stats.scrape_timeouts += 1
            raise ScrapeTimeout(f"collection did not finish within {wait:g}s")
        if flight.error is not None:
            raise flight.error
        assert flight.body is not None
        return flight.body


DEFAULT_HEADER_TIMEOUT = 10.0  # seconds for a request line and headers; a scrape sends them at once
HEALTH_PATHS = ("/healthz", "/-/healthy", "/-/ready")
DEFAULT_MAX_CONNECTIONS = 512  # concurrent connections; Prometheus HA pairs and agents need a handful
FD_RESERVE = 64  # descriptors kept for the rest of the process (NVML, the kubelet socket, logs)
ACCEPT_BACKLOG = 4096  # the kernel's accept queue (capped by net.core.somaxconn), as net.Listen asks for
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 20\r\n"
    b"Connection: close\r\n\r\ntoo many connections"
)


def parse_listen(address: str) -> tuple[str, int]:
    """``:9835``, ``0.0.0.0:9835``, ``127.0.0.1:0``, ``[::]:9835`` -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or len(port) > 5 or int(port) > 65535:
        raise ValueError(
            f"listen address must be [HOST]:PORT with a port from 0 to 65535, got {quote(address)}"
        )
    host = host.strip("[]")
    return host, int(port)


def check_seconds(value: float, name: str) -> float:
    """A finite, non-negative number of seconds (``inf`` would wait forever, ``nan`` compares false)."""
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value}")
    return value


class _Writer(io.BufferedIOBase):
    """The answer's way out: every write is sent whole (``sendall``), each send bounded by the socket's
    timeout."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any, /) -> int:
        self._sock.sendall(data)
        return len(memoryview(data))


class _Handler(BaseHTTPRequestHandler):
    """Answers one request whose head the connection loop has read (``exporter.connections``)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as Prometheus scrapes
    server: ExporterHTTPServer
    server_version = "kgpu-exporter"

    head_only = False

    def __init__(self, conn: Connection, head: bytes, server: ExporterHTTPServer) -> None:
        # BaseRequestHandler.__init__ would serve the whole connection; this serves one request
        self.request = self.connection = conn.sock
        self.client_address = conn.peer
        self.server = server
        self.rfile = io.BytesIO(head)  # the complete head, never more: the socket is not read here
        self.wfile = _Writer(conn.sock)

    def answer(self) -> bool:
        """Answer the request; True when the connection stays open for the next one."""
        self.close_connection = True
        self.handle_one_request()
        return not self.close_connection

    def do_HEAD(self) -> None:
        self.head_only = True
        try:
            self.do_GET()
        finally:
            self.head_only = False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        web = self.server.web
        if web is not None:
            verdict = web.check(self.headers.get("Authorization"))
            if verdict is not True:
                busy = verdict == BUSY
                self._send(
                    429 if busy else 401,
                    b"Too many authentication attempts, retry\n" if busy else b"Unauthorized\n",
                    "text/plain; charset=utf-8",
                    {"Retry-After": "1"} if busy else {"WWW-Authenticate": 'Basic realm="kgpu exporter"'},
                )
                return
        if path == self.server.telemetry_path:
            if not self.server.begin_scrape():
                self._send(
                    503,
                    f"too many concurrent scrapes (limit {self.server.max_requests})\n".encode(),
                    "text/plain; charset=utf-8",
                )
                return
            try:
                self._metrics()
            finally:
                self.server.end_scrape()
        elif path in HEALTH_PATHS:
            self._health()
        elif path == "/":
            target = self.server.telemetry_path
            page = (
                f'<html><body><h1>kgpu exporter</h1><a href="{target}">{target}</a></body></html>\n'.encode()
            )
            self._send(200, page, "text/html")
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _metrics(self) -> None:
        try:
            body = self.server.scraper.scrape()
        except ScrapeTimeout as exc:
            self._send(503, f"scrape failed: {exc}\n".encode(), "text/plain; charset=utf-8")
            return
        except Exception as exc:
            log.exception("scrape failed")
            self._send(500, f"scrape failed: {exc}\n".encode(), "text/plain; charset=utf-8")
            return
        if accepts_gzip(self.headers.get("Accept-Encoding")):
            self._send(
                200,
                self.server.gzipped(body),
                CONTENT_TYPE,
                {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"},
            )
        else:
            self._send(200, body, CONTENT_TYPE, {"Vary": "Accept-Encoding"})

    def _health(self) -> None:
        """200 while the server runs, whatever NVML says; 503 once the running collection is hung."""
        scraper = self.server.scraper
        running = scraper.collection_running_seconds()
        hung = running > scraper.hung_after
        stats = scraper.collector.stats
        with stats.lock:
            status: dict[str, Any] = {
                "status": "collection hung" if hung else "ok",
                "last_collect_success": stats.last_success,
                "last_error": stats.last_error,
                "failed_collections": stats.failed_collections,
                "collection_running_seconds": round(running, 3),
            }
        if hung:
            status["hung_after_seconds"] = scraper.hung_after
            status["error"] = (
                f"the current NVML collection has been running for {running:.0f}s "
                f"(limit {scraper.hung_after:g}s); scrapes answer 503 while it runs"
            )
            log.warning("healthz: %s", status["error"])
        self._send(503 if hung else 200, (json.dumps(status) + "\n").encode(), "application/json")

    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.server.web is not None:
            for name, value in self.server.web.headers.items():
                self.send_header(name, value)
        self.end_headers()
        if not self.head_only:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class ExporterHTTPServer(HTTPServer):
    """Binds and listens like the stdlib server; connections are served by ``exporter.connections``."""

    request_queue_size = ACCEPT_BACKLOG  # connections beyond the table wait here, at no cost to the exporter

    def __init__(
        self,
        address: tuple[str, int],
        scraper: Scraper,
        *,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        telemetry_path: str = DEFAULT_TELEMETRY_PATH,
        web: WebConfig | None = None,
        max_requests: int = 0,
    ) -> None:
        host = address[0]
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.scraper = scraper
        self.header_timeout = check_seconds(header_timeout, "header_timeout") or DEFAULT_HEADER_TIMEOUT
        self.max_connections = max(1, max_connections)
        files = open_files_limit()
        if files is not None and self.max_connections > files - FD_RESERVE:
            fitting = max(1, files - FD_RESERVE)
            log.warning(
                "the open files limit (ulimit -n) is %d: serving %d connections at once instead of %d",
                files,
                fitting,
                self.max_connections,
            )
            self.max_connections = fitting
        self._lock = threading.Lock()
        self.max_requests = max(0, max_requests)  # concurrent scrapes of the metrics path; 0: no limit
        self._scrapes = 0
        self.telemetry_path = telemetry_path
        self.web = web
        self._gz: tuple[bytes, bytes] | None = None  # (body, its gzip) of the last compressed scrape
        super().__init__(address, BaseHTTPRequestHandler)
        self.connections = Connections(
            self.socket,
            self._answer,
            limit=self.max_connections,
            header_timeout=self.header_timeout,
            tls=web.ssl_context if web is not None else None,
            refusal=REFUSAL,
        )

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self.connections.run(poll_interval)

    def shutdown(self) -> None:
        self.connections.stop()

    def server_close(self) -> None:
        self.connections.close()
        super().server_close()

    def _answer(self, conn: Connection, head: bytes) -> bool:
        return _Handler(conn, head, self).answer()

    # --- bounds on connections -----------------------------------------------------------------------

    def begin_scrape(self) -> bool:
        """Count a scrape of the metrics path in; False when ``max_requests`` are already running."""
        with self._lock:
            if self.max_requests and self._scrapes >= self.max_requests:
                return False
            self._scrapes += 1
            return True

    def end_scrape(self) -> None:
        with self._lock:
            self._scrapes -= 1

    @property
    def active_connections(self) -> int:
        return self.connections.open

    @property
    def evicted_connections(self) -> int:
        return self.connections.evicted

    @property
    def refused_connections(self) -> int:
        return self.connections.refused

    def gzipped(self, body: bytes) -> bytes:
        """gzip of ``body``; the same body object (a reused collection) is compressed once."""
        last = self._gz
        if last is not None and last[0] is body:
            return last[1]
        packed = gzip.compress(body, compresslevel=6, mtime=0)
        self._gz = (body, packed)
        return packed

    @property
    def listening(self) -> str:
        """Where the server really listens, for the start-up log line: the bound address, and in words
        which interfaces that is (``0.0.0.0``: every IPv4 interface; ``::``: every interface)."""
        host, port = str(self.server_address[0]), int(self.server_address[1])
        scheme = "https" if self.web is not None and self.web.ssl_context is not None else "http"
        shown = f"[{host}]" if ":" in host else host
        where = {
            "0.0.0.0": "every IPv4 interface",
            "::": "every interface, IPv6 and IPv4",
        }.get(host, "this address only")
        return f"{scheme}://{shown}:{port} ({where})"

    @property
    def url(self) -> str:
        """A URL a client on this host can use (the wildcard addresses become loopback)."""
        host, port = str(self.server_address[0]), int(self.server_address[1])
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        scheme = "https" if self.web is not None and self.web.ssl_context is not None else "http"
        return f"{scheme}://{host}:{port}"


def make_server(
    collector: GpuCollector,
    listen: str = ":9835",
    *,
    timeout: float = 5.0,
    max_age: float = DEFAULT_MAX_AGE,
    telemetry_path: str = DEFAULT_TELEMETRY_PATH,
    web: WebConfig | None = None,
    max_requests: int = 0,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
) -> ExporterHTTPServer:
    """A bound server; ``max_age=0`` collects afresh on every scrape (concurrent ones still share one)."""
    host, port = parse_listen(listen)
    raise_open_files_limit()
    scraper = Scraper(collector, timeout=timeout, max_age=max_age)
    return ExporterHTTPServer(
        (host, port),
        scraper,
        telemetry_path=telemetry_path,
        web=web,
        max_requests=max_requests,
        header_timeout=header_timeout,
    )


def serve_in_thread(server: ExporterHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    return thread


def wait_until_serving(url: str, deadline_s: float = 5.0) -> None:
    """Poll ``url``/healthz until it answers (for tests and the bench)."""
    import urllib.request

    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)
