"""The scrape-time collector: NVML readings -> Prometheus metric families, built fresh on every scrape.

Names, labels and units follow nvidia_gpu_exporter (utkuozdemir/nvidia_gpu_exporter), so seed 002's alert
rules and Grafana dashboard 14574 work unchanged. Its naming rule (see ``reference/monitoring``): metric
``nvidia_smi_<nvidia-smi query field>`` with dots as underscores, ``[%]`` -> ``_ratio`` (x0.01), ``[MiB]`` ->
``_bytes``, ``[MHz]`` -> ``_clock_hz``, ``[W]`` -> ``_watts``; one label, ``uuid``, lower case without the
``GPU-`` prefix; a field the GPU cannot report has no series. HELP texts are the nvidia-smi field names, as
there. kgpu reads the same quantities from NVML in NVML's units (mW, mJ, MHz, percent, bytes) and converts.

Beyond that set, with the same prefix so one dashboard variable finds them all: the energy counter, XID
counters, MIG devices, per-process memory, the pod that holds each GPU, and the exporter's own health.

``--metrics dcgm`` (or ``all``) also emits the DCGM exporter's names for the fields NVML can provide, with
dcgm-exporter's labels and units, so NVIDIA's dashboard 12239 works too.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text, strip_uuid
from kgpu.exporter.podresources import PodResources
from kgpu.exporter.xid import XidWatcher

log = logging.getLogger(__name__)

P = "nvidia_smi_"
MIB = 1024 * 1024
NAME_SETS = ("nvidia-smi", "dcgm", "all")

# Per-GPU gauges, in output order: family suffix -> HELP (the nvidia-smi field, as nvidia_gpu_exporter has it).
GPU_GAUGES: dict[str, str] = {
    "index": "index",
    "count": "count",
    "compute_cap": "compute_cap",
    "utilization_gpu_ratio": "utilization.gpu [%]",
    "utilization_memory_ratio": "utilization.memory [%]",
    "utilization_encoder_ratio": "utilization.encoder [%]",
    "utilization_decoder_ratio": "utilization.decoder [%]",
    "memory_total_bytes": "memory.total [MiB]",
    "memory_reserved_bytes": "memory.reserved [MiB]",
    "memory_used_bytes": "memory.used [MiB]",
    "memory_free_bytes": "memory.free [MiB]",
    "temperature_gpu": "temperature.gpu",
    "fan_speed_ratio": "fan.speed [%]",
    "power_draw_watts": "power.draw [W]",
    "power_limit_watts": "power.limit [W]",
    "enforced_power_limit_watts": "enforced.power.limit [W]",
    "power_default_limit_watts": "power.default_limit [W]",
    "power_min_limit_watts": "power.min_limit [W]",
    "power_max_limit_watts": "power.max_limit [W]",
    "clocks_current_graphics_clock_hz": "clocks.current.graphics [MHz]",
    "clocks_current_sm_clock_hz": "clocks.current.sm [MHz]",
    "clocks_current_memory_clock_hz": "clocks.current.memory [MHz]",
    "clocks_current_video_clock_hz": "clocks.current.video [MHz]",
    "clocks_max_graphics_clock_hz": "clocks.max.graphics [MHz]",
    "clocks_max_sm_clock_hz": "clocks.max.sm [MHz]",
    "clocks_max_memory_clock_hz": "clocks.max.memory [MHz]",
    "pstate": "pstate",
    "ecc_mode_current": "ecc.mode.current",
    "ecc_mode_pending": "ecc.mode.pending",
    "ecc_errors_corrected_volatile_total": "ecc.errors.corrected.volatile.total",
    "ecc_errors_corrected_aggregate_total": "ecc.errors.corrected.aggregate.total",
    "ecc_errors_uncorrected_volatile_total": "ecc.errors.uncorrected.volatile.total",
    "ecc_errors_uncorrected_aggregate_total": "ecc.errors.uncorrected.aggregate.total",
    "persistence_mode": "persistence_mode",
    "compute_mode": "compute_mode",
    "pcie_link_gen_current": "pcie.link.gen.current",
    "pcie_link_gen_max": "pcie.link.gen.max",
    "pcie_link_width_current": "pcie.link.width.current",
    "pcie_link_width_max": "pcie.link.width.max",
    "mig_mode_current": "mig.mode.current",
    "mig_mode_pending": "mig.mode.pending",
}

# Clock event reasons: NVML bit constant -> nvidia-smi field suffix. nvidia-smi >= 535 calls them
# clocks_event_reasons; older ones (and dashboard 14574 up to v1.2.0) clocks_throttle_reasons. Both are served.
CLOCK_REASONS: dict[str, str] = {
    "nvmlClocksEventReasonGpuIdle": "gpu_idle",
    "nvmlClocksEventReasonApplicationsClocksSetting": "applications_clocks_setting",
    "nvmlClocksEventReasonSwPowerCap": "sw_power_cap",
    "nvmlClocksEventReasonHwSlowdown": "hw_slowdown",
    "nvmlClocksEventReasonHwThermalSlowdown": "hw_thermal_slowdown",
    "nvmlClocksEventReasonHwPowerBrakeSlowdown": "hw_power_brake_slowdown",
    "nvmlClocksEventReasonSwThermalSlowdown": "sw_thermal_slowdown",
    "nvmlClocksEventReasonSyncBoost": "sync_boost",
}
_REASON_BITS = {  # pynvml's values, used when the module lacks a constant
    "nvmlClocksEventReasonGpuIdle": 0x1,
    "nvmlClocksEventReasonApplicationsClocksSetting": 0x2,
    "nvmlClocksEventReasonSwPowerCap": 0x4,
    "nvmlClocksEventReasonHwSlowdown": 0x8,
    "nvmlClocksEventReasonSyncBoost": 0x10,
    "nvmlClocksEventReasonSwThermalSlowdown": 0x20,
    "nvmlClocksEventReasonHwThermalSlowdown": 0x40,
    "nvmlClocksEventReasonHwPowerBrakeSlowdown": 0x80,
}
for _prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
    GPU_GAUGES[f"{_prefix}_active"] = f"{_prefix}.active"
    GPU_GAUGES[f"{_prefix}_supported"] = f"{_prefix}.supported"
    for _suffix in CLOCK_REASONS.values():
        GPU_GAUGES[f"{_prefix}_{_suffix}"] = f"{_prefix}.{_suffix}"

GPU_INFO_LABELS = (
    "uuid",
    "name",
    "driver_model_current",
    "driver_model_pending",
    "vbios_version",
    "driver_version",
    "pci_bus_id",
    "serial",
    "compute_cap",
    "pci_sub_device_id",
    "index",
    "cuda_version",
)

# DCGM exporter names NVML can serve: name -> (nvidia_smi suffix, factor, help). Units as dcgm-exporter's.
DCGM_GAUGES: dict[str, tuple[str, float, str]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("clocks_current_sm_clock_hz", 1e-6, "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": ("clocks_current_memory_clock_hz", 1e-6, "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_gpu", 1.0, "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("power_draw_watts", 1.0, "Power draw (in W)."),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_watts", 1.0, "Power management limit (in W)."),
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_gpu_ratio", 100.0, "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("utilization_memory_ratio", 100.0, "Memory utilization (in %)."),
    "DCGM_FI_DEV_ENC_UTIL": ("utilization_encoder_ratio", 100.0, "Encoder utilization (in %)."),
    "DCGM_FI_DEV_DEC_UTIL": ("utilization_decoder_ratio", 100.0, "Decoder utilization (in %)."),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_bytes", 1 / MIB, "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", 1 / MIB, "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_RESERVED": ("memory_reserved_bytes", 1 / MIB, "Framebuffer memory reserved (in MiB)."),
    "DCGM_FI_DEV_FB_TOTAL": ("memory_total_bytes", 1 / MIB, "Framebuffer memory total (in MiB)."),
    "DCGM_FI_DEV_PSTATE": ("pstate", 1.0, "Performance state."),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": (
        "ecc_errors_corrected_volatile_total",
        1.0,
        "Volatile single-bit ECC errors.",
    ),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (
        "ecc_errors_uncorrected_volatile_total",
        1.0,
        "Volatile double-bit ECC errors.",
    ),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": (
        "ecc_errors_corrected_aggregate_total",
        1.0,
        "Aggregate single-bit ECC errors.",
    ),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": (
        "ecc_errors_uncorrected_aggregate_total",
        1.0,
        "Aggregate double-bit ECC errors.",
    ),
}
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")


@dataclass(frozen=True)
class CollectorOptions:
    """Collector toggles (``kgpu exporter --metrics/--no-*``)."""

    metrics: str = "nvidia-smi"  # nvidia-smi | dcgm | all
    processes: bool = False
    mig: bool = True
    pods: bool = True


@dataclass
class ExporterStats:
    """Counters the exporter keeps across scrapes (everything else is read fresh)."""

    failed_collections: int = 0
    scrape_timeouts: int = 0
    last_success: bool = True
    last_error: str = ""
    last_duration: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class DeviceInfo:
    """What does not change while NVML stays initialised; read once per NVML generation."""

    index: int
    handle: Any
    raw_uuid: str
    uuid: str
    name: str
    info_labels: dict[str, str]


@dataclass
class GpuReading:
    device: DeviceInfo
    values: dict[str, float]
    migs: list[dict[str, Any]] = field(default_factory=list)
    processes: list[tuple[int, str, float | None]] = field(default_factory=list)
    processes_ok: bool = True


def _na(value: Any) -> str:
    return "[N/A]" if value is None else as_text(value)


class GpuCollector:
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
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self._devices: list[DeviceInfo] = []
        self._devices_generation = -1
        self._lost: NvmlUnavailable | None = None
        self._lock = threading.Lock()

    # -- prometheus_client interface ------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        return iter(self.build())

    # -- one scrape -----------------------------------------------------------------------------------
    def build(self) -> list[Metric]:
        with self._lock:  # one collection at a time; the HTTP layer coalesces concurrent scrapes
            start = time.perf_counter()
            readings: list[GpuReading] = []
            error: NvmlUnavailable | None = None
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
            except NvmlUnavailable as exc:
                error = exc
            if error is not None:
                log.warning(
                    "NVML collection failed: %s; NVML will be re-initialised on the next scrape", error
                )
                self.nvml.invalidate()
                self._devices_generation = -1
            duration = time.perf_counter() - start
            with self.stats.lock:
                self.stats.last_success = error is None
                self.stats.last_error = "" if error is None else str(error)
                self.stats.last_duration = duration
                if error is not None:
                    self.stats.failed_collections += 1
            families = self._families(readings)
            if self.options.metrics in ("dcgm", "all"):
                dcgm = self._dcgm_families(readings)
                families = dcgm if self.options.metrics == "dcgm" else families + dcgm
            return families + self._health_families()

    def _device_infos(self) -> list[DeviceInfo]:
        nv = self.nvml
        nv.ensure_init()
        if self._devices_generation == nv.generation:
            return self._devices
        driver = nv.driver_version()
        cuda = nv.cuda_driver_version()
        devices = []
        self._lost = None
        for index in range(nv.device_count()):
            try:
                handle = nv.handle(index)
                raw_uuid = nv.uuid(handle)
            except NvmlUnavailable as exc:
                if exc.kind != "GpuIsLost":
                    raise
                self._lost = exc  # skip this GPU, keep the others; the device list is re-read next time
                continue
            name = _na(nv.query("nvmlDeviceGetName", handle))
            pci = nv.query("nvmlDeviceGetPciInfo", handle)
            cc = nv.query("nvmlDeviceGetCudaComputeCapability", handle)
            labels = {
                "uuid": strip_uuid(raw_uuid),
                "name": name,
                "driver_model_current": "[N/A]",  # a Windows-only notion (WDDM/TCC)
                "driver_model_pending": "[N/A]",
                "vbios_version": _na(nv.query("nvmlDeviceGetVbiosVersion", handle)),
                "driver_version": _na(driver),
                "pci_bus_id": "[N/A]" if pci is None else as_text(pci.busId),
                "serial": _na(nv.query("nvmlDeviceGetSerial", handle)),
                "compute_cap": "[N/A]" if cc is None else f"{cc[0]}.{cc[1]}",
                "pci_sub_device_id": "[N/A]" if pci is None else f"0x{int(pci.pciSubSystemId):08X}",
                "index": str(index),
                "cuda_version": _na(cuda),
            }
            devices.append(DeviceInfo(index, handle, raw_uuid, labels["uuid"], name, labels))
        self._devices = devices
        self._devices_generation = nv.generation if self._lost is None else -1
        return devices

    def _read(self, d: DeviceInfo) -> GpuReading:
        nv, h = self.nvml, d.handle
        v: dict[str, float] = {"index": float(d.index), "count": float(len(self._devices))}

        def put(key: str, value: Any, factor: float = 1.0) -> None:
            if value is not None:
                v[key] = float(value) * factor

        cc = d.info_labels["compute_cap"]
        if cc != "[N/A]":
            v["compute_cap"] = float(cc)
        util = nv.query("nvmlDeviceGetUtilizationRates", h)
        if util is not None:
            put("utilization_gpu_ratio", util.gpu, 0.01)
            put("utilization_memory_ratio", util.memory, 0.01)
        enc = nv.query("nvmlDeviceGetEncoderUtilization", h)
        put("utilization_encoder_ratio", None if enc is None else enc[0], 0.01)
        dec = nv.query("nvmlDeviceGetDecoderUtilization", h)
        put("utilization_decoder_ratio", None if dec is None else dec[0], 0.01)

        mem = nv.query("nvmlDeviceGetMemoryInfo", h, version=nv.const("nvmlMemory_v2"))
        if mem is None:  # drivers before 510 lack the v2 call (and so the reserved figure)
            mem = nv.query("nvmlDeviceGetMemoryInfo", h)
        if mem is not None:
            put("memory_total_bytes", mem.total)
            put("memory_reserved_bytes", getattr(mem, "reserved", None))
            put("memory_used_bytes", mem.used)
            put("memory_free_bytes", mem.free)

        put("temperature_gpu", nv.query("nvmlDeviceGetTemperature", h, nv.const("NVML_TEMPERATURE_GPU", 0)))
        put("fan_speed_ratio", nv.query("nvmlDeviceGetFanSpeed", h), 0.01)
        put("power_draw_watts", nv.query("nvmlDeviceGetPowerUsage", h), 1e-3)
        put("power_limit_watts", nv.query("nvmlDeviceGetPowerManagementLimit", h), 1e-3)
        put("enforced_power_limit_watts", nv.query("nvmlDeviceGetEnforcedPowerLimit", h), 1e-3)
        put("power_default_limit_watts", nv.query("nvmlDeviceGetPowerManagementDefaultLimit", h), 1e-3)
        limits = nv.query("nvmlDeviceGetPowerManagementLimitConstraints", h)
        if limits is not None:
            put("power_min_limit_watts", limits[0], 1e-3)
            put("power_max_limit_watts", limits[1], 1e-3)
        put("energy_joules_total", nv.query("nvmlDeviceGetTotalEnergyConsumption", h), 1e-3)

        for clock, const in (
            ("graphics", "NVML_CLOCK_GRAPHICS"),
            ("sm", "NVML_CLOCK_SM"),
            ("memory", "NVML_CLOCK_MEM"),
            ("video", "NVML_CLOCK_VIDEO"),
        ):
            kind = nv.const(const)
            put(f"clocks_current_{clock}_clock_hz", nv.query("nvmlDeviceGetClockInfo", h, kind), 1e6)
            if clock != "video":
                put(f"clocks_max_{clock}_clock_hz", nv.query("nvmlDeviceGetMaxClockInfo", h, kind), 1e6)

        pstate = nv.query("nvmlDeviceGetPerformanceState", h)
        if pstate is not None and 0 <= int(pstate) <= 15:  # 32 is NVML_PSTATE_UNKNOWN
            v["pstate"] = float(pstate)

        active = nv.query("nvmlDeviceGetCurrentClocksEventReasons", h)
        supported = nv.query("nvmlDeviceGetSupportedClocksEventReasons", h)
        for prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
            put(f"{prefix}_supported", supported)
            if active is not None:
                v[f"{prefix}_active"] = float(active)
                for const, suffix in CLOCK_REASONS.items():
                    bit = int(nv.const(const, _REASON_BITS[const]))
                    v[f"{prefix}_{suffix}"] = 1.0 if int(active) & bit else 0.0

        ecc_mode = nv.query("nvmlDeviceGetEccMode", h)
        if ecc_mode is not None:
            put("ecc_mode_current", ecc_mode[0])
            put("ecc_mode_pending", ecc_mode[1])
        if ecc_mode is not None and int(ecc_mode[0]) == 1:  # counters are meaningless with ECC off
            for err, err_const in (
                ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
                ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
            ):
                for counter, counter_const in (
                    ("volatile", "NVML_VOLATILE_ECC"),
                    ("aggregate", "NVML_AGGREGATE_ECC"),
                ):
                    put(
                        f"ecc_errors_{err}_{counter}_total",
                        nv.query(
                            "nvmlDeviceGetTotalEccErrors", h, nv.const(err_const), nv.const(counter_const)
                        ),
                    )

        put("persistence_mode", nv.query("nvmlDeviceGetPersistenceMode", h))
        put("compute_mode", nv.query("nvmlDeviceGetComputeMode", h))
        put("pcie_link_gen_current", nv.query("nvmlDeviceGetCurrPcieLinkGeneration", h))
        put("pcie_link_gen_max", nv.query("nvmlDeviceGetMaxPcieLinkGeneration", h))
        put("pcie_link_width_current", nv.query("nvmlDeviceGetCurrPcieLinkWidth", h))
        put("pcie_link_width_max", nv.query("nvmlDeviceGetMaxPcieLinkWidth", h))

        reading = GpuReading(d, v)
        mig = nv.query("nvmlDeviceGetMigMode", h)
        if mig is not None:
            put("mig_mode_current", mig[0])
            put("mig_mode_pending", mig[1])
            if self.options.mig and int(mig[0]) == int(nv.const("NVML_DEVICE_MIG_ENABLE", 1)):
                reading.migs = self._read_migs(h)
        if self.options.processes:
            procs = nv.query("nvmlDeviceGetComputeRunningProcesses", h)
            if procs is None:
                reading.processes_ok = False
            else:
                for p in procs:
                    name = nv.query("nvmlSystemGetProcessName", p.pid)
                    used = getattr(p, "usedGpuMemory", None)
                    reading.processes.append((int(p.pid), "" if name is None else as_text(name), used))
        return reading

    def _read_migs(self, h: Any) -> list[dict[str, Any]]:
        nv = self.nvml
        migs = []
        for i in range(int(nv.query("nvmlDeviceGetMaxMigDeviceCount", h) or 0)):
            mh = nv.query("nvmlDeviceGetMigDeviceHandleByIndex", h, i)
            if mh is None:  # slot not populated
                continue
            name = _na(nv.query("nvmlDeviceGetName", mh))
            mem = nv.query("nvmlDeviceGetMemoryInfo", mh)
            migs.append(
                {
                    "mig_uuid": _na(nv.query("nvmlDeviceGetUUID", mh)),
                    "gpu_instance_id": str(nv.query("nvmlDeviceGetGpuInstanceId", mh)),
                    "compute_instance_id": str(nv.query("nvmlDeviceGetComputeInstanceId", mh)),
                    # "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb"
                    "profile": name.rsplit("MIG ", 1)[-1] if "MIG " in name else name,
                    "used": None if mem is None else float(mem.used),
                    "total": None if mem is None else float(mem.total),
                }
            )
        return migs

    # -- families -------------------------------------------------------------------------------------
    def _families(self, readings: list[GpuReading]) -> list[Metric]:
        out: list[Metric] = []
        gauges = {
            key: GaugeMetricFamily(P + key, help_, labels=["uuid"]) for key, help_ in GPU_GAUGES.items()
        }
        energy = CounterMetricFamily(
            P + "energy_joules",
            "Energy the GPU consumed since the driver was loaded (NVML total energy consumption) [J]",
            labels=["uuid"],
        )
        info = GaugeMetricFamily(
            P + "gpu_info",
            "A metric with a constant '1' value labeled by gpu " + ", ".join(GPU_INFO_LABELS) + ".",
            labels=list(GPU_INFO_LABELS),
        )
        for r in readings:
            uuid = r.device.uuid
            info.add_metric([r.device.info_labels[k] for k in GPU_INFO_LABELS], 1.0)
            for key, value in r.values.items():
                if key == "energy_joules_total":
                    energy.add_metric([uuid], value)
                else:
                    gauges[key].add_metric([uuid], value)
        out.append(info)
        out.extend(g for g in gauges.values() if g.samples)
        if energy.samples:
            out.append(energy)
        if self.options.mig:
            out.extend(self._mig_families(readings))
        if self.options.processes:
            out.extend(self._process_families(readings))
        if self.xid is not None:
            out.extend(self._xid_families())
        if self.options.pods and self.pods is not None:
            out.extend(self._pod_families(readings))
        return out

    def _mig_families(self, readings: list[GpuReading]) -> list[Metric]:
        info = GaugeMetricFamily(
            P + "mig_info",
            "A metric with a constant '1' value for each MIG device, labeled by its parent GPU and profile.",
            labels=["uuid", "gpu_instance_id", "compute_instance_id", "mig_uuid", "profile"],
        )
        used = GaugeMetricFamily(
            P + "mig_memory_used_bytes", "MIG device memory used [bytes]", labels=["uuid", "gpu_instance_id"]
        )
        total = GaugeMetricFamily(
            P + "mig_memory_total_bytes",
            "MIG device memory total [bytes]",
            labels=["uuid", "gpu_instance_id"],
        )
        for r in readings:
            for m in r.migs:
                gi = m["gpu_instance_id"]
                info.add_metric(
                    [r.device.uuid, gi, m["compute_instance_id"], m["mig_uuid"], m["profile"]], 1.0
                )
                if m["used"] is not None:
                    used.add_metric([r.device.uuid, gi], m["used"])
                    total.add_metric([r.device.uuid, gi], m["total"])
        return [f for f in (info, used, total) if f.samples]

    def _process_families(self, readings: list[GpuReading]) -> list[Metric]:
        apps = GaugeMetricFamily(
            P + "compute_apps", "Number of processes with a compute context on the GPU.", labels=["uuid"]
        )
        app_info = GaugeMetricFamily(
            P + "compute_app_info",
            "A metric with a constant '1' value labeled by the identity of a process with a compute context on a GPU.",
            labels=["pid", "process_name", "uuid"],
        )
        app_mem = GaugeMetricFamily(
            P + "compute_app_used_memory_bytes",
            "GPU memory used by the process. Absent when the driver cannot report it.",
            labels=["pid", "process_name", "uuid"],
        )
        ok = True
        for r in readings:
            ok = ok and r.processes_ok
            if not r.processes_ok:
                continue
            apps.add_metric([r.device.uuid], float(len(r.processes)))
            for pid, name, used in r.processes:
                app_info.add_metric([str(pid), name, r.device.uuid], 1.0)
                if used is not None:
                    app_mem.add_metric([str(pid), name, r.device.uuid], float(used))
        success = GaugeMetricFamily(
            P + "compute_apps_last_collect_success",
            "Whether the most recent per-process collection succeeded (1) or not (0)",
            value=1.0 if ok and readings else 0.0,
        )
        return [apps, app_info, app_mem, success]

    def _xid_families(self) -> list[Metric]:
        assert self.xid is not None
        snap = self.xid.snapshot()
        total = CounterMetricFamily(
            P + "xid_errors",
            "XID errors NVML reported since the exporter started, by XID code.",
            labels=["uuid", "xid"],
        )
        for (uuid, xid), n in sorted(snap.counts.items()):
            total.add_metric([uuid, str(xid)], float(n))
        last = GaugeMetricFamily(
            P + "xid_last_timestamp_seconds",
            "Unix time of the most recent XID error on the GPU.",
            labels=["uuid"],
        )
        for uuid, ts in sorted(snap.last_timestamp.items()):
            last.add_metric([uuid], ts)
        return [total, last]

    def _pod_families(self, readings: list[GpuReading]) -> list[Metric]:
        assert self.pods is not None
        mapping = self.pods.mapping()
        fam = GaugeMetricFamily(
            P + "gpu_pod_info",
            "A metric with a constant '1' value for each container holding the GPU (kubelet pod-resources); "
            "join on uuid to label GPU series by pod.",
            labels=["uuid", "mig_uuid", "namespace", "pod", "container", "resource"],
        )
        for r in readings:
            for ref in mapping.get(r.device.uuid, []):
                fam.add_metric([r.device.uuid, "", ref.namespace, ref.pod, ref.container, ref.resource], 1.0)
            for m in r.migs:
                for ref in mapping.get(m["mig_uuid"].lower(), []):
                    fam.add_metric(
                        [r.device.uuid, m["mig_uuid"], ref.namespace, ref.pod, ref.container, ref.resource],
                        1.0,
                    )
        return [fam] if fam.samples else []

    def _health_families(self) -> list[Metric]:
        s = self.stats
        with s.lock:
            success, failed, timeouts, duration = (
                s.last_success,
                s.failed_collections,
                s.scrape_timeouts,
                s.last_duration,
            )
        return [
            GaugeMetricFamily(
                P + "last_collect_success",
                "Whether the most recent collection succeeded (1) or not (0)",
                value=1.0 if success else 0.0,
            ),
            CounterMetricFamily(P + "failed_scrapes", "Number of failed collections", value=float(failed)),
            CounterMetricFamily(
                "kgpu_exporter_scrape_timeouts",
                "Scrapes answered 503 because collection exceeded the per-scrape timeout",
                value=float(timeouts),
            ),
            GaugeMetricFamily(
                "kgpu_exporter_collect_duration_seconds",
                "Time the most recent NVML collection took",
                value=duration,
            ),
        ]

    def _dcgm_families(self, readings: list[GpuReading]) -> list[Metric]:
        with_pods = self.options.pods and self.pods is not None
        mapping = self.pods.mapping() if with_pods and self.pods is not None else {}
        labels = list(DCGM_LABELS) + (["namespace", "pod", "container"] if with_pods else [])
        gauges = {
            name: GaugeMetricFamily(name, help_, labels=labels) for name, (_, _, help_) in DCGM_GAUGES.items()
        }
        # dcgm-exporter types this a counter but names it without ``_total``; prometheus_client would add the
        # suffix to a counter family, so it is served as a gauge: queries do not see the type.
        energy = GaugeMetricFamily(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "Total energy consumption since boot (in mJ).",
            labels=labels,
        )
        xid_gauge = GaugeMetricFamily(
            "DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", labels=labels
        )
        last_xid = self.xid.snapshot().last_xid if self.xid is not None else {}
        for r in readings:
            d = r.device
            vals = [
                str(d.index),
                d.raw_uuid,
                d.info_labels["pci_bus_id"],
                f"nvidia{d.index}",
                d.name,
                self.hostname,
            ]
            vals.append(d.info_labels["driver_version"])
            if with_pods:
                refs = mapping.get(d.uuid, [])
                vals += [refs[0].namespace, refs[0].pod, refs[0].container] if refs else ["", "", ""]
            for name, (key, factor, _) in DCGM_GAUGES.items():
                if key in r.values:
                    gauges[name].add_metric(vals, r.values[key] * factor)
            if "energy_joules_total" in r.values:
                energy.add_metric(vals, r.values["energy_joules_total"] * 1000.0)
            xid_gauge.add_metric(vals, float(last_xid.get(d.uuid, 0)))
        out: list[Metric] = [g for g in gauges.values() if g.samples]
        out += [f for f in (energy, xid_gauge) if f.samples]
        return out
