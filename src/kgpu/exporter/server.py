"""The exporter's HTTP server: ``/metrics`` and ``/healthz`` on a stdlib ThreadingHTTPServer.

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
  an exporter-toolkit web configuration file (``exporter.webconfig``). The TLS handshake runs in the
  connection's own thread, so a client that never completes one cannot hold up others.
- ``/healthz`` (alias ``/-/healthy``) never touches NVML: it answers whether the server is up and reports the
  last collection's outcome in the body, so a broken driver does not make Kubernetes restart the exporter in
  a loop. The one exception is a hung collection: an NVML call that never returns keeps every scrape at 503
  and only a restart clears it, so once the running collection is older than ``hung_after`` seconds
  ``/healthz`` answers 503 and the liveness probe restarts the exporter.
- Connections are bounded, so that clients cannot hold the server: a request must arrive complete (request
  line and headers) within ``header_timeout`` seconds of the connection waiting for it, or the connection is
  shut (one check per poll of the accept loop, no thread per connection); every socket operation times out
  after the same time (a client that stops reading); at most ``max_connections`` are served at once, and
  the next ones get an immediate 503. A client going away mid-response is logged at debug level, without a
  traceback. HEAD is answered like GET, without the body.
- Idle connections cannot lock scrapers out: when every slot is taken, the connection that has waited
  longest without a request (idle keep-alive, headers never sent, a TLS handshake never finished or finished
  and followed by nothing) is shut to make room, so a scraper that sends its request at once is always
  served; only connections doing work count against the limit. At most ``max_requests`` scrapes of the
  metrics path run at once (nvidia_gpu_exporter's ``--web.max-requests``); the next get 503 at once.
- ``/-/ready`` answers like ``/-/healthy``: both are process-level, as in nvidia_gpu_exporter, so a host
  whose NVML fails stays scrapeable and the failure stays visible in the health metrics.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import math
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from kgpu.errors import quote
from kgpu.exporter.collector import GpuCollector
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
HANDSHAKE_TIMEOUT = 10.0  # seconds a client gets to complete the TLS handshake


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
MAX_CLOSING = 256  # connections shut to make room whose threads have not ended yet, beyond max_connections
DEFAULT_MAX_CONNECTIONS = 512  # concurrent connections; Prometheus HA pairs and agents need a handful


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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Prometheus scrapes
    server: ExporterHTTPServer
    server_version = "kgpu-exporter"
    disable_nagle_algorithm = (
        True  # headers and body in separate segments would wait out delayed ACKs (40 ms)
    )

    head_only = False

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.header_timeout)  # every read and write, a stalled peer

    def handle_one_request(self) -> None:
        self.server.watch(self.connection)  # until the request line and headers are in
        try:
            super().handle_one_request()
        finally:
            self.server.unwatch(self.connection)

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.server.unwatch(self.connection)  # the headers are in: the scrape may now take its time
        return ok

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


class ExporterHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many scrapers connecting at once must not overflow the accept backlog

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
        self._conn_lock = threading.Lock()
        self._active = 0
        # connections with no request in progress: socket -> (since, deadline)
        self._waiting_for_headers: dict[socket.socket, tuple[float, float]] = {}
        self.refused_connections = 0
        self.evicted_connections = 0
        self._closing: set[socket.socket] = set()  # shut to make room, their threads not ended yet
        self.max_requests = max(0, max_requests)  # concurrent scrapes of the metrics path; 0: no limit
        self._scrapes = 0
        self.telemetry_path = telemetry_path
        self.web = web
        self._gz: tuple[bytes, bytes] | None = None  # (body, its gzip) of the last compressed scrape
        super().__init__(address, _Handler)

    # --- bounds on connections -----------------------------------------------------------------------

    def watch(self, conn: socket.socket, timeout: float | None = None) -> None:
        """``conn`` waits for a request (or a TLS handshake): it is shut after ``timeout`` (default
        ``header_timeout``) seconds, or earlier to make room when every slot is taken."""
        now = time.monotonic()
        with self._conn_lock:
            since = self._waiting_for_headers.get(conn, (now, now))[0]  # idle since it was accepted
            self._waiting_for_headers[conn] = (since, now + (self.header_timeout if timeout is None else timeout))

    def unwatch(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._waiting_for_headers.pop(conn, None)

    def begin_scrape(self) -> bool:
        """Count a scrape of the metrics path in; False when ``max_requests`` are already running."""
        with self._conn_lock:
            if self.max_requests and self._scrapes >= self.max_requests:
                return False
            self._scrapes += 1
            return True

    def end_scrape(self) -> None:
        with self._conn_lock:
            self._scrapes -= 1

    @property
    def active_connections(self) -> int:
        with self._conn_lock:
            return self._active

    def service_actions(self) -> None:
        """Called by serve_forever on every poll: shut connections whose request is overdue."""
        now = time.monotonic()
        with self._conn_lock:
            overdue = [c for c, (_, deadline) in self._waiting_for_headers.items() if deadline < now]
            for c in overdue:
                del self._waiting_for_headers[c]
        for c in overdue:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)  # the handler's blocked read returns; it closes the socket

    def process_request(self, request: Any, client_address: Any) -> None:
        victim: socket.socket | None = None
        now = time.monotonic()
        with self._conn_lock:
            working = self._active - len(self._closing)
            full = working >= self.max_connections
            if full and self._waiting_for_headers and self._active < self.max_connections + MAX_CLOSING:
                # every slot taken: the connection idle longest makes room; until its thread has ended it
                # counts in _closing, not against the limit
                victim = min(self._waiting_for_headers, key=lambda c: self._waiting_for_headers[c][0])
                del self._waiting_for_headers[victim]
                self._closing.add(victim)
                full = False
            if not full:
                self._active += 1
                # idle from the start: until its request (or TLS handshake) is in, it may make room too
                self._waiting_for_headers[request] = (now, now + self.header_timeout)
        if victim is not None:
            self.evicted_connections += 1
            with contextlib.suppress(OSError):
                victim.shutdown(socket.SHUT_RDWR)  # its handler's blocked read returns; it closes the socket
        if full:
            self.refused_connections += 1
            with contextlib.suppress(OSError):
                request.settimeout(0.5)
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 20\r\n"
                    b"Connection: close\r\n\r\ntoo many connections"
                )
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self._conn_lock:
                self._active -= 1
                self._waiting_for_headers.pop(request, None)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._waiting_for_headers.pop(request, None)
                self._closing.discard(request)
                self._active -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away or stalled is routine: one debug line, no traceback on stderr."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            log.debug("%s: connection ended: %s", client_address, exc)
            return
        log.exception("error serving %s", client_address)

    def gzipped(self, body: bytes) -> bytes:
        """gzip of ``body``; the same body object (a reused collection) is compressed once."""
        last = self._gz
        if last is not None and last[0] is body:
            return last[1]
        packed = gzip.compress(body, compresslevel=6, mtime=0)
        self._gz = (body, packed)
        return packed

    def finish_request(self, request: Any, client_address: Any) -> None:
        """With TLS, the handshake happens here, in the connection's thread, bounded by a timeout."""
        ctx = self.web.ssl_context if self.web is not None else None
        if ctx is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT)
        self.watch(request, HANDSHAKE_TIMEOUT)  # a handshake never finished is idle too
        try:
            tls = ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log.debug("TLS handshake with %s failed: %s", client_address, exc)
            return
        finally:
            self.unwatch(request)
        try:
            tls.settimeout(None)
            super().finish_request(tls, client_address)
        finally:
            tls.close()

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
