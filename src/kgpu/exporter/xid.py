"""XID errors from NVML's event API, counted by a background thread.

XIDs are events, not state: NVML cannot be asked "how many XIDs so far", only told to deliver them as they
happen (``nvmlDeviceRegisterEvents`` with ``nvmlEventTypeXidCriticalError``, then ``nvmlEventSetWait``). So a
thread waits for them and keeps counts that the collector reads at scrape time. The counts start at zero when
the exporter starts; ``nvidia_smi_xid_last_timestamp_seconds`` exists so alerts can see a series' very first
event, which ``increase()`` on a fresh counter cannot.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text, strip_uuid

log = logging.getLogger(__name__)

# What an XID code means, from NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors): dcgm-exporter labels
# DCGM_FI_DEV_XID_ERRORS with it as err_msg (NVIDIA/dcgm-exporter#309), beside err_code.
XID_TEXT: dict[int, str] = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    38: "Driver firmware error",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
}


@dataclass
class XidCounts:
    """A consistent copy of the counters, for one scrape."""

    counts: dict[tuple[str, int], int] = field(default_factory=dict)  # (uuid, xid) -> events
    # (uuid, xid) -> unix time of the latest event: labelled by code as nvidia_gpu_exporter's
    # nvidia_smi_xid_last_timestamp_seconds{uuid, xid}, whose recommended alert selects codes (xid=~"48|79|...")
    last_timestamp: dict[tuple[str, int], float] = field(default_factory=dict)
    last_xid: dict[str, int] = field(default_factory=dict)  # uuid -> code of the latest event


class XidWatcher:
    """Waits for XID events on every GPU and counts them per (uuid, xid)."""

    def __init__(
        self, nvml: Nvml, *, wait_ms: int = 1000, retry_s: float = 5.0, max_retry_s: float = 300.0
    ) -> None:
        self._nvml = nvml
        self._wait_ms = wait_ms
        self._retry_s = retry_s
        self._max_retry_s = max(max_retry_s, retry_s)
        self.failures = 0  # consecutive failed attempts to register (reset once events flow)
        self._lock = threading.Lock()
        self._counts = XidCounts()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.running = False  # registered and waiting (for /healthz and tests)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kgpu-xid", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def snapshot(self) -> XidCounts:
        with self._lock:
            c = self._counts
            return XidCounts(dict(c.counts), dict(c.last_timestamp), dict(c.last_xid))

    def record(self, uuid: str, xid: int, when: float | None = None) -> None:
        with self._lock:
            key = (uuid, xid)
            self._counts.counts[key] = self._counts.counts.get(key, 0) + 1
            self._counts.last_timestamp[key] = time.time() if when is None else when
            self._counts.last_xid[uuid] = xid

    # -- the thread -----------------------------------------------------------------------------------
    def retry_delay(self, failures: int) -> float:
        """Seconds before the next attempt after ``failures`` consecutive failures: ``retry_s`` doubling up to
        ``max_retry_s``. A driver that is gone for good (no GPU, NVML library removed) then costs an attempt
        every five minutes, not every five seconds; a brief outage (driver reload) is retried quickly."""
        return float(min(self._max_retry_s, self._retry_s * 2.0 ** max(0, failures - 1)))

    def _failed(self, what: str, level: int) -> float:
        """Count a failure and log it: every one at DEBUG, but at ``level`` only the first and the one that
        reaches the ceiling, so a lasting outage leaves two lines in the log, not one per retry."""
        self.failures += 1
        delay = self.retry_delay(self.failures)
        first = self.failures == 1
        capped = delay >= self._max_retry_s > self.retry_delay(self.failures - 1)
        if first or capped:
            more = f"; backing off, retrying at most every {self._max_retry_s:.0f}s" if capped else ""
            log.log(level, "XID watcher: %s; retrying in %.0fs%s", what, delay, more)
        else:
            log.debug("XID watcher: %s (attempt %d); retrying in %.0fs", what, self.failures, delay)
        return delay

    def _run(self) -> None:
        while not self._stop.is_set():
            event_set = None
            generation = -1
            delay = self._retry_s
            try:
                self._nvml.ensure_init()
                generation = self._nvml.generation  # the session the event set belongs to
                event_set = self._register()
                self.running = True
                if self.failures:
                    log.info("XID watcher: watching again after %d failed attempt(s)", self.failures)
                self.failures = 0
                self._wait_loop(event_set)
            except NvmlUnavailable as exc:
                delay = self._failed(f"NVML unavailable ({exc})", logging.INFO)
            except Exception as exc:  # the thread must not die: XID counting is a side feature
                delay = self._failed(str(exc), logging.WARNING)
            finally:
                self.running = False
                # An event set of an NVML session that has been shut down died with it: not freed.
                nv = self._nvml
                if event_set is not None and nv.initialised and nv.generation == generation:
                    with contextlib.suppress(NvmlUnavailable):
                        nv.query("nvmlEventSetFree", event_set)
            self._stop.wait(delay)

    def _register(self) -> Any:
        nv = self._nvml
        event_set = nv.call("nvmlEventSetCreate")
        xid_type = nv.const("nvmlEventTypeXidCriticalError", 0x8)
        registered = 0
        for index in range(nv.device_count()):
            handle = nv.handle(index)
            try:
                nv.call("nvmlDeviceRegisterEvents", handle, xid_type, event_set)
                registered += 1
            except NvmlUnavailable:
                raise
            except Exception as exc:  # NotSupported on some GPUs (e.g. older consumer boards)
                log.info("XID events not supported on GPU %d: %s", index, exc)
        if registered == 0:
            raise RuntimeError("no GPU supports XID events")
        return event_set

    def _wait_loop(self, event_set: Any) -> None:
        nv = self._nvml
        generation = nv.generation
        while not self._stop.is_set():
            if nv.generation != generation or not nv.initialised:
                raise NvmlUnavailable("NVML was re-initialised", kind="Reinitialised")
            try:
                data = nv.blocking_call("nvmlEventSetWait", event_set, self._wait_ms)
            except NvmlUnavailable:
                raise
            except Exception as exc:
                if nv.is_error(exc, "NVMLError_Timeout"):
                    continue
                raise
            uuid = strip_uuid(as_text(nv.call("nvmlDeviceGetUUID", data.device)))
            self.record(uuid, int(data.eventData))
