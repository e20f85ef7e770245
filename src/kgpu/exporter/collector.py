"""The scrape-time collector: NVML readings -> Prometheus metric families, built fresh on every scrape.

Names, labels and units follow nvidia_gpu_exporter (utkuozdemir/nvidia_gpu_exporter), so seed 002's alert
rules and Grafana dashboard 14574 work unchanged. Its naming rule (see ``reference/monitoring``): metric
``nvidia_smi_<nvidia-smi query field>`` with dots as underscores, ``[%]`` -> ``_ratio`` (x0.01), ``[MiB]`` ->
``_bytes``, ``[MHz]`` -> ``_clock_hz``, ``[W]`` -> ``_watts``; one label, ``uuid``, lower case without the
``GPU-`` prefix; a field the GPU cannot report has no series. HELP texts are the nvidia-smi field names, as
there. kgpu reads the same quantities from NVML in NVML's units (mW, mJ, MHz, percent, bytes) and converts.

Beyond that set, with the same prefix so one dashboard variable finds them all: the energy counter, XID
counters, MIG devices, per-process memory, the pod that holds each GPU, GPM SM and tensor activity per GPU
and MIG GPU instance (Hopper and newer, :mod:`kgpu.exporter.gpm`), and the exporter's own health.

``--metrics dcgm`` (or ``all``) also emits the DCGM exporter's names for the fields NVML can provide, with
dcgm-exporter's labels and units, so NVIDIA's dashboard 12239 works too.

The collector itself (``GpuCollector``) runs one collection at a time, keeps the exporter's health across
them and re-initialises NVML after a fatal error; it reads NVML as :mod:`kgpu.exporter.readings` says and
names the series as :mod:`kgpu.exporter.families` does, both after the tables in
:mod:`kgpu.exporter.metric_tables`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import Metric

from kgpu.exporter.families import ExporterStats, GpuFamilies
from kgpu.exporter.gpm import GpmSampler
from kgpu.exporter.metric_tables import NAME_SETS
from kgpu.exporter.metric_tables import CollectorOptions as CollectorOptions
from kgpu.exporter.nvml import Nvml, NvmlUnavailable
from kgpu.exporter.podresources import PodResources
from kgpu.exporter.readings import DeviceInfo, GpuReader, GpuReading
from kgpu.exporter.xid import XidWatcher

log = logging.getLogger(__name__)


# NVML's return codes (nvmlReturn_t in nvml.h) by the name pynvml's NVMLError_* classes carry, for
# nvidia_smi_nvml_return_code as nvidia_gpu_exporter's NVML backend reports it
NVML_RETURN = {
    "Uninitialized": 1, "InvalidArgument": 2, "NotSupported": 3, "NoPermission": 4, "AlreadyInitialized": 5,
    "NotFound": 6, "InsufficientSize": 7, "InsufficientPower": 8, "DriverNotLoaded": 9, "Timeout": 10,
    "IrqIssue": 11, "LibraryNotFound": 12, "FunctionNotFound": 13, "CorruptedInforom": 14, "GpuIsLost": 15,
    "ResetRequired": 16, "OperatingSystem": 17, "LibRmVersionMismatch": 18, "InUse": 19, "Memory": 20,
    "NoData": 21, "VgpuEccNotSupported": 22, "InsufficientResources": 23, "FreqNotSupported": 24,
    "ArgumentVersionMismatch": 25, "Deprecated": 26, "NotReady": 27, "GpuNotFound": 28, "InvalidState": 29,
    "Unknown": 999,
}  # fmt: skip


def nvml_return_code(error: BaseException | None) -> int:
    """0 for success; NVML's code for an NVML failure (999 for one it does not name); -1 for a failure
    that carries no NVML status (kgpu could not read an answer), as nvidia_gpu_exporter reports it."""
    if error is None:
        return 0
    if isinstance(error, NvmlUnavailable):
        return NVML_RETURN.get(error.kind, 999) if error.kind else -1
    return -1


def node_hostname() -> str:
    """The DCGM ``Hostname`` label: the node's name from ``NODE_NAME`` (the DaemonSet sets it from
    ``spec.nodeName``), else the host name; inside a pod the host name is the pod's name, which no one
    looks for on a dashboard."""
    return os.environ.get("NODE_NAME", "").strip() or socket.gethostname()


class GpuCollector(GpuReader, GpuFamilies):
    """A prometheus_client custom collector over an :class:`~kgpu.exporter.nvml.Nvml` facade."""

    def __init__(
        self,
        nvml: Nvml,
        *,
        options: CollectorOptions | None = None,
        xid: XidWatcher | None = None,
        pods: PodResources | None = None,
        stats: ExporterStats | None = None,
        hostname: str | None = None,
    ) -> None:
        self.nvml = nvml
        self.options = options or CollectorOptions()
        if self.options.metrics not in NAME_SETS:
            raise ValueError(f"metrics must be one of {', '.join(NAME_SETS)}")
        self.xid = xid
        self.pods = pods
        self.stats = stats or ExporterStats()
        self.hostname = hostname if hostname is not None else node_hostname()
        self._devices: dict[int, DeviceInfo] = {}  # by index, for NVML generation _devices_generation
        self._devices_generation = -1
        self._device_count = 0
        self._versions: tuple[str | None, str | None] = (None, None)  # driver, CUDA
        self._lost: NvmlUnavailable | None = None  # a GPU lost while enumerating, this collection
        self._next_lost_reinit = 0.0  # monotonic time before which a lost GPU alone does not re-init NVML
        self._pcie_last: dict[tuple[str, str], tuple[int, int, float | None]] = {}  # (uuid, key) -> reading
        self._lock = threading.Lock()
        # GPM keeps samples between collections; it relies on self._lock for one collection at a time.
        self.gpm = GpmSampler(nvml) if self.options.gpm else None

    # -- prometheus_client interface ------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        return iter(self.build())

    # -- one scrape -----------------------------------------------------------------------------------
    def build(self) -> list[Metric]:
        with self._lock:  # one collection at a time; the HTTP layer coalesces concurrent scrapes
            start = time.perf_counter()
            readings: list[GpuReading] = []
            error: Exception | None = None
            try:
                devices = self._device_infos()
                error = self._lost
                for device in devices:
                    try:
                        readings.append(self._read(device))
                    except NvmlUnavailable as exc:
                        error = exc
                        if exc.kind != "GpuIsLost":  # a lost GPU spoils only itself; anything else, all
                            break
                    except Exception as exc:  # an answer kgpu cannot read: this GPU's series are absent
                        log.exception("reading GPU %s failed", device.uuid)
                        error = error or exc
            except NvmlUnavailable as exc:
                error = exc
            except Exception as exc:
                log.exception("NVML collection failed")
                error = exc
            if isinstance(error, NvmlUnavailable):
                self._recover(error)
            duration = time.perf_counter() - start
            with self.stats.lock:
                self.stats.last_success = error is None
                self.stats.last_error = "" if error is None else str(error)
                self.stats.last_duration = duration
                self.stats.last_return_code = nvml_return_code(error)
                if error is None:
                    self.stats.last_success_time = time.time()
                if error is not None:
                    self.stats.failed_collections += 1
            families = self._families(readings)
            if self.options.metrics in ("dcgm", "all"):
                dcgm = self._dcgm_families(readings)
                families = dcgm if self.options.metrics == "dcgm" else families + dcgm
            return families + self._health_families()

    # A GPU that stays lost after a re-initialisation re-initialises NVML again at most this often: every
    # re-initialisation restarts the XID watcher and GPM sampling of the healthy GPUs too.
    LOST_REINIT_INTERVAL = 60.0

    def _recover(self, error: NvmlUnavailable) -> None:
        """After a fatal NVML error: shut NVML down so that the next collection initialises it afresh."""
        now = time.monotonic()
        if error.kind == "GpuIsLost":
            if now < self._next_lost_reinit:
                log.warning(
                    "NVML collection: %s (GPU still lost; next NVML re-initialisation attempt later)", error
                )
                return
            self._next_lost_reinit = now + self.LOST_REINIT_INTERVAL
        log.warning("NVML collection failed: %s; NVML will be re-initialised on the next scrape", error)
        if self.gpm is not None:
            self.gpm.close()  # free GPM buffers while the NVML session that allocated them is alive
        self.nvml.invalidate()
        self._devices_generation = -1

    def close(self, timeout: float = 1.0) -> None:
        """Release what the collector holds in NVML (GPM sample buffers), for exporter shutdown. Waits at most
        ``timeout`` seconds for a running collection (a hung NVML call must not hold up the exit)."""
        if self._lock.acquire(timeout=timeout):
            try:
                if self.gpm is not None:
                    self.gpm.close()
            finally:
                self._lock.release()
