"""Wiring of the exporter: facade + XID watcher + pod-resources + collector + HTTP server.

Shared by ``kgpu exporter`` and the benchmark, which passes a fake NVML module instead of ``pynvml``.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.podresources import DEFAULT_SOCKET, PodResources
from kgpu.exporter.server import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_AGE,
    DEFAULT_TELEMETRY_PATH,
    ExporterHTTPServer,
    make_server,
)
from kgpu.exporter.webconfig import WebConfig
from kgpu.exporter.xid import XidWatcher

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExporterConfig:
    listen: str = ":9835"
    timeout: float = 5.0
    max_age: float = DEFAULT_MAX_AGE
    options: CollectorOptions = field(default_factory=CollectorOptions)
    xid: bool = True
    pod_resources_socket: str = DEFAULT_SOCKET
    telemetry_path: str = DEFAULT_TELEMETRY_PATH
    web: WebConfig | None = None
    max_requests: int = 40  # concurrent scrapes (nvidia_gpu_exporter's --web.max-requests default)
    header_timeout: float = DEFAULT_HEADER_TIMEOUT


def build(config: ExporterConfig, *, lib: Any | None = None) -> tuple[ExporterHTTPServer, XidWatcher | None]:
    """The server (bound, not yet serving) and the XID watcher (not yet started)."""
    nvml = Nvml(lib)
    xid = XidWatcher(nvml) if config.xid else None
    pods = PodResources(socket_path=config.pod_resources_socket) if config.options.pods else None
    collector = GpuCollector(nvml, options=config.options, xid=xid, pods=pods)
    server = make_server(
        collector,
        config.listen,
        timeout=config.timeout,
        max_age=config.max_age,
        telemetry_path=config.telemetry_path,
        web=config.web,
        max_requests=config.max_requests,
        header_timeout=config.header_timeout,
    )
    return server, xid


def run(
    config: ExporterConfig,
    *,
    lib: Any | None = None,
    ready: Callable[[ExporterHTTPServer], None] | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT (or ``server.shutdown()``); ``ready`` is called with the bound server."""
    # A collection is short CPU work among many I/O-bound request threads: hand the GIL over sooner.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    server, xid = build(config, lib=lib)
    if xid is not None:
        xid.start()

    def stop(signum: int, _frame: Any) -> None:
        log.info("signal %d: shutting down", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    log.info("kgpu exporter listening on %s, metrics at %s", server.listening, server.telemetry_path)
    if ready is not None:
        ready(server)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        if xid is not None:
            xid.stop(timeout=2)
        collector = server.scraper.collector
        collector.close()  # NVML-allocated GPM sample buffers
        if collector.pods is not None:
            collector.pods.close()
        sys.setswitchinterval(switch_interval)
