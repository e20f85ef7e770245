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
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from kgpu.exporter.gpm import GpmSampler, GpmValues
from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text, strip_uuid
from kgpu.exporter.podresources import PodResources
from kgpu.exporter.xid import XID_TEXT, XidWatcher

log = logging.getLogger(__name__)

P = "nvidia_smi_"
MIB = 1024 * 1024
NAME_SETS = ("nvidia-smi", "dcgm", "all")

# Per-GPU gauges, in output order: family suffix -> HELP (the nvidia-smi field, as nvidia_gpu_exporter has it).
GPU_GAUGES: dict[str, str] = {
    "index": "index",
    "count": "count",
    "compute_cap": "compute_cap",
    "serial": "serial",
    "pci_domain": "pci.domain",
    "pci_bus": "pci.bus",
    "pci_device": "pci.device",
    "pci_device_id": "pci.device_id",
    "pci_sub_device_id": "pci.sub_device_id",
    "pci_base_class": "pci.baseClass",
    "pci_sub_class": "pci.subClass",
    "inforom_oem": "inforom.oem",
    "inforom_ecc": "inforom.ecc",
    "platform_gpu_fabric_guid": "platform.gpu_fabric_guid",
    "platform_slot_number": "platform.slot_number",
    "platform_tray_index": "platform.tray_index",
    "platform_host_id": "platform.host_id",
    "platform_module_id": "platform.module_id",
    "gsp_mode_current": "gsp.mode.current",
    "gsp_mode_default": "gsp.mode.default",
    "c2c_mode": "c2c.mode",
    "accounting_mode": "accounting.mode",
    "accounting_buffer_size": "accounting.buffer_size",
    "display_attached": "display_attached",
    "display_active": "display_active",
    "utilization_gpu_ratio": "utilization.gpu [%]",
    "utilization_memory_ratio": "utilization.memory [%]",
    "utilization_encoder_ratio": "utilization.encoder [%]",
    "utilization_decoder_ratio": "utilization.decoder [%]",
    "utilization_jpeg_ratio": "utilization.jpeg [%]",
    "utilization_ofa_ratio": "utilization.ofa [%]",
    "encoder_stats_session_count": "encoder.stats.sessionCount",
    "encoder_stats_average_fps": "encoder.stats.averageFps",
    "encoder_stats_average_latency": "encoder.stats.averageLatency",
    "memory_total_bytes": "memory.total [MiB]",
    "memory_reserved_bytes": "memory.reserved [MiB]",
    "memory_used_bytes": "memory.used [MiB]",
    "memory_free_bytes": "memory.free [MiB]",
    "temperature_gpu": "temperature.gpu",
    "temperature_gpu_tlimit": "temperature.gpu.tlimit",
    "temperature_memory": "temperature.memory",
    "fan_speed_ratio": "fan.speed [%]",
    "power_draw_watts": "power.draw [W]",
    "power_draw_average_watts": "power.draw.average [W]",
    "power_draw_instant_watts": "power.draw.instant [W]",
    "power_limit_watts": "power.limit [W]",
    "enforced_power_limit_watts": "enforced.power.limit [W]",
    "power_default_limit_watts": "power.default_limit [W]",
    "power_min_limit_watts": "power.min_limit [W]",
    "power_max_limit_watts": "power.max_limit [W]",
    "edpp_multiplier_ratio": "edpp_multiplier [%]",
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
    # ecc_errors_{corrected,uncorrected}_{volatile,aggregate}_{device_memory,dram,sram}: added below
    "ecc_errors_uncorrected_volatile_sram_parity": "ecc.errors.uncorrected.volatile.sram.parity",
    "ecc_errors_uncorrected_volatile_sram_secded": "ecc.errors.uncorrected.volatile.sram.secded",
    "ecc_errors_uncorrected_aggregate_sram_parity": "ecc.errors.uncorrected.aggregate.sram.parity",
    "ecc_errors_uncorrected_aggregate_sram_secded": "ecc.errors.uncorrected.aggregate.sram.secded",
    "ecc_errors_uncorrected_aggregate_sram_threshold_exceeded": "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded",
    "ecc_errors_uncorrected_aggregate_sram_l2": "ecc.errors.uncorrected.aggregate.sram.l2",
    "ecc_errors_uncorrected_aggregate_sram_sm": "ecc.errors.uncorrected.aggregate.sram.sm",
    "ecc_errors_uncorrected_aggregate_sram_mcu": "ecc.errors.uncorrected.aggregate.sram.mcu",
    "ecc_errors_uncorrected_aggregate_sram_pcie": "ecc.errors.uncorrected.aggregate.sram.pcie",
    "ecc_errors_uncorrected_aggregate_sram_other": "ecc.errors.uncorrected.aggregate.sram.other",
    "remapped_rows_correctable": "remapped_rows.correctable",
    "remapped_rows_uncorrectable": "remapped_rows.uncorrectable",
    "remapped_rows_pending": "remapped_rows.pending",
    "remapped_rows_failure": "remapped_rows.failure",
    "remapped_rows_histogram_max": "remapped_rows.histogram.max",
    "remapped_rows_histogram_high": "remapped_rows.histogram.high",
    "remapped_rows_histogram_partial": "remapped_rows.histogram.partial",
    "remapped_rows_histogram_low": "remapped_rows.histogram.low",
    "remapped_rows_histogram_none": "remapped_rows.histogram.none",
    "persistence_mode": "persistence_mode",
    "compute_mode": "compute_mode",
    "pcie_link_gen_current": "pcie.link.gen.current",
    "pcie_link_gen_max": "pcie.link.gen.max",
    "pcie_link_gen_gpucurrent": "pcie.link.gen.gpucurrent",
    "pcie_link_gen_gpumax": "pcie.link.gen.gpumax",
    "pcie_link_width_current": "pcie.link.width.current",
    "pcie_link_width_max": "pcie.link.width.max",
    # not an nvidia-smi query field; dashboard 14574 (head) charts them
    "pcie_throughput_tx_bytes_per_second": "PCIe bytes transmitted per second since the previous collection",
    "pcie_throughput_rx_bytes_per_second": "PCIe bytes received per second since the previous collection",
    "fabric_state": "fabric.state",
    "fabric_clique_id": "fabric.cliqueId",
    "gpu_recovery_action": "gpu_recovery_action",
    "protected_memory_total_bytes": "protected_memory.total [MiB]",
    "protected_memory_used_bytes": "protected_memory.used [MiB]",
    "protected_memory_free_bytes": "protected_memory.free [MiB]",
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

# Per-scrape readings that come from the one nvmlDeviceGetFieldValues call per GPU:
# NVML_FI_* constant -> (its value, used when the module lacks the constant; family suffix; factor from NVML's unit).
FIELD_GAUGES: dict[str, tuple[int, str, float]] = {
    "NVML_FI_DEV_POWER_AVERAGE": (185, "power_draw_average_watts", 1e-3),  # mW
    "NVML_FI_DEV_POWER_INSTANT": (186, "power_draw_instant_watts", 1e-3),  # mW
    "NVML_FI_DEV_MEMORY_TEMP": (82, "temperature_memory", 1.0),  # C
    "NVML_FI_DEV_EDPP_MULTIPLIER": (274, "edpp_multiplier_ratio", 0.01),  # percent
    "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION": (230, "gpu_recovery_action", 1.0),  # NVML_GPU_RECOVERY_ACTION_*
}
# Time spent in each clock event reason since the driver loaded; NVML counts ns (nvidia-smi prints us), served in s.
_COUNTER_FIELDS = {
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP": (74, "sw_power_cap"),
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST": (76, "sync_boost"),
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN": (269, "sw_thermal_slowdown"),
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN": (270, "hw_thermal_slowdown"),
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN": (271, "hw_power_brake_slowdown"),
}
for _const, (_fid, _suffix) in _COUNTER_FIELDS.items():
    _key = f"clocks_event_reasons_counters_{_suffix}_seconds"
    GPU_GAUGES[_key] = f"clocks_event_reasons_counters.{_suffix} [us]"
    FIELD_GAUGES[_const] = (_fid, _key, 1e-9)
# c_nvmlFieldValue_t.value is a union; valueType (NVML_VALUE_TYPE_*) names the member that holds the value.
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

# ECC error counts by memory location (nvmlDeviceGetMemoryErrorCounter). nvidia-smi's device_memory and dram
# are one location, NVML_MEMORY_LOCATION_DRAM (= NVML_MEMORY_LOCATION_DEVICE_MEMORY, 2), under its old and new
# name; sram is NVML_MEMORY_LOCATION_SRAM (7). location constant -> (its value, family suffixes).
ECC_LOCATIONS: dict[str, tuple[int, tuple[str, ...]]] = {
    "NVML_MEMORY_LOCATION_DRAM": (2, ("device_memory", "dram")),
    "NVML_MEMORY_LOCATION_SRAM": (7, ("sram",)),
}
for _err in ("corrected", "uncorrected"):
    for _counter in ("volatile", "aggregate"):
        for _, _suffixes in ECC_LOCATIONS.values():
            for _loc in _suffixes:
                GPU_GAUGES[f"ecc_errors_{_err}_{_counter}_{_loc}"] = f"ecc.errors.{_err}.{_counter}.{_loc}"
# c_nvmlEccSramErrorStatus_v1_t field -> family suffix (nvmlDeviceGetSramEccErrorStatus).
SRAM_ECC_FIELDS = {
    "volatileUncParity": "ecc_errors_uncorrected_volatile_sram_parity",
    "volatileUncSecDed": "ecc_errors_uncorrected_volatile_sram_secded",
    "aggregateUncParity": "ecc_errors_uncorrected_aggregate_sram_parity",
    "aggregateUncSecDed": "ecc_errors_uncorrected_aggregate_sram_secded",
    "bThresholdExceeded": "ecc_errors_uncorrected_aggregate_sram_threshold_exceeded",
    "aggregateUncBucketL2": "ecc_errors_uncorrected_aggregate_sram_l2",
    "aggregateUncBucketSm": "ecc_errors_uncorrected_aggregate_sram_sm",
    "aggregateUncBucketMcu": "ecc_errors_uncorrected_aggregate_sram_mcu",
    "aggregateUncBucketPcie": "ecc_errors_uncorrected_aggregate_sram_pcie",
    "aggregateUncBucketOther": "ecc_errors_uncorrected_aggregate_sram_other",
}
# PCIe throughput is the rate of NVML's cumulative PCIe byte counters between two collections, read in the
# same field-values call as the gauges above. (nvmlDeviceGetPcieThroughput would count bytes over a 20 ms window
# inside the call: two calls per GPU would add some 40 ms per GPU to every collection.)
# NVML_FI_* constant -> (its value, used when the module lacks the constant; family suffix).
PCIE_COUNTER_FIELDS: dict[str, tuple[int, str]] = {
    "NVML_FI_DEV_PCIE_COUNT_TX_BYTES": (197, "pcie_throughput_tx_bytes_per_second"),
    "NVML_FI_DEV_PCIE_COUNT_RX_BYTES": (198, "pcie_throughput_rx_bytes_per_second"),
}
_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # how nvidia_gpu_exporter reads a text field as a number

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
DCGM_MIG_LABELS = ("GPU_I_PROFILE", "GPU_I_ID")  # dcgm-exporter's labels of a MIG GPU instance's series

# GPM activity (kgpu.exporter.gpm), averaged over the interval since the previous collection, 0..1:
# GPM metric key -> HELP. Served as nvidia_smi_<key>{uuid} per GPU, nvidia_smi_mig_<key>{uuid,gpu_instance_id}
# per MIG GPU instance.
ACTIVITY_GAUGES: dict[str, str] = {
    "sm_activity_ratio": "Fraction of SMs busy (at least one warp resident), averaged over the interval since "
    "the previous collection (NVML GPM SM utilization) [0..1]",
    "sm_occupancy_ratio": "Resident warps relative to the SMs' maximum, averaged over the interval since the "
    "previous collection (NVML GPM SM occupancy) [0..1]",
    "tensor_activity_ratio": "Fraction of time the SMs' tensor cores were busy with any tensor operation, "
    "averaged over the interval since the previous collection (NVML GPM any-tensor utilization) [0..1]",
}
# DCGM profiling names for the same GPM metrics: name -> (GPM metric key, help). dcgm-exporter serves them as
# ratios (0..1), as here.
DCGM_PROF_GAUGES: dict[str, tuple[str, str]] = {
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_activity_ratio", "Ratio of cycles an SM has at least 1 warp assigned."),
    "DCGM_FI_PROF_SM_OCCUPANCY": (
        "sm_occupancy_ratio",
        "Ratio of resident warps on an SM to the maximum it supports.",
    ),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (
        "tensor_activity_ratio",
        "Ratio of cycles any tensor pipe is active.",
    ),
}


@dataclass(frozen=True)
class CollectorOptions:
    """Collector toggles (``kgpu exporter --metrics/--no-*``)."""

    metrics: str = "nvidia-smi"  # nvidia-smi | dcgm | all
    processes: bool = False
    mig: bool = True
    pods: bool = True
    gpm: bool = True  # GPM activity (Hopper and newer): ACTIVITY_GAUGES, DCGM_PROF_GAUGES


@dataclass
class ExporterStats:
    """Counters the exporter keeps across scrapes (everything else is read fresh)."""

    failed_collections: int = 0
    scrape_timeouts: int = 0
    last_success: bool = True
    last_error: str = ""
    last_duration: float = 0.0
    last_success_time: float = 0.0  # unix time of the last successful collection (0: none yet)
    last_return_code: int = 0  # NVML's return code of the last collection (0 success, -1 no NVML status)
    lock: threading.Lock = field(default_factory=threading.Lock)


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


@dataclass
class ReadPlan:
    """How one GPU's per-scrape reads go, resolved once per NVML generation (constants, call variants)."""

    fields: list[tuple[int, str, float]] = field(default_factory=list)  # FIELD_GAUGES: (id, key, factor)
    field_ids: list[int] = field(default_factory=list)
    ecc: list[tuple[tuple[Any, ...], tuple[str, ...]]] = field(default_factory=list)  # (call args, keys)
    sram: Any = None  # the SRAM ECC status struct, when the module has it
    pcie: list[tuple[int, str]] = field(default_factory=list)  # PCIE_COUNTER_FIELDS: (id, key), after fields
    fabric: tuple[str, Any] | None = None  # the fabric-info call that answers for this GPU, and its struct
    fabric_states: tuple[int, int] = (0, 3)  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, _COMPLETED


@dataclass
class DeviceInfo:
    """What does not change while NVML stays initialised; read once per NVML generation."""

    index: int
    handle: Any
    raw_uuid: str
    uuid: str
    name: str
    info_labels: dict[str, str]
    static: dict[str, float] = field(default_factory=dict)  # gauges that stay put: PCI ids, inforom, ...
    plan: ReadPlan = field(default_factory=ReadPlan)


@dataclass
class GpuReading:
    device: DeviceInfo
    values: dict[str, float]
    migs: list[dict[str, Any]] = field(default_factory=list)
    processes: list[tuple[int, str, float | None]] = field(default_factory=list)
    processes_ok: bool = True
    activity: GpmValues = field(default_factory=GpmValues)  # GPM, since the previous collection


def _na(value: Any) -> str:
    return "[N/A]" if value is None else as_text(value)


def _number(text: str) -> float | None:
    """A text field as nvidia_gpu_exporter serves it: ``"7.16"`` -> 7.16, ``"1650123456789"`` -> that; else None."""
    text = text.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


def _raw(struct: Any, name: str, size: int) -> bytes:
    """The first ``size`` bytes of a ``c_char`` field, NULs included. Reading the attribute is no good: it stops at
    a NUL, and pynvml's structs decode it to ``str`` (failing on bytes >= 0x80)."""
    offset = getattr(type(struct), name).offset
    return bytes(struct)[offset : offset + size]


def _instance_ids(migs: list[dict[str, Any]]) -> list[int]:
    """The MIG GPU instances present (several MIG devices, one per compute instance, may share one)."""
    return sorted({int(m["gpu_instance_id"]) for m in migs if m["gpu_instance_id"].isdigit()})


def _gi_profile(profile: str) -> str:
    """A GPU instance's profile from its MIG device's: ``1c.3g.40gb`` (one compute slice of it) -> ``3g.40gb``."""
    head, _, rest = profile.partition(".")
    return rest if rest and head.endswith("c") and head[:-1].isdigit() else profile


def node_hostname() -> str:
    """The DCGM ``Hostname`` label: the node's name from ``NODE_NAME`` (the DaemonSet sets it from
    ``spec.nodeName``), else the host name; inside a pod the host name is the pod's name, which no one
    looks for on a dashboard."""
    return os.environ.get("NODE_NAME", "").strip() or socket.gethostname()


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

    def _device_infos(self) -> list[DeviceInfo]:
        """The GPUs, read once per NVML generation. A GPU lost while being enumerated is skipped and looked for
        again on the next collection; the others stay cached (and keep their state)."""
        nv = self.nvml
        nv.ensure_init()
        if self._devices_generation != nv.generation:
            self._devices = {}
            self._device_count = nv.device_count()
            self._versions = (nv.driver_version(), nv.cuda_driver_version())
            self._devices_generation = nv.generation
        self._lost = None
        for index in range(self._device_count):
            if index not in self._devices:
                try:
                    self._devices[index] = self._device_info(index)
                except NvmlUnavailable as exc:
                    if exc.kind != "GpuIsLost":
                        raise
                    self._lost = exc
        return [self._devices[i] for i in sorted(self._devices)]

    def _device_info(self, index: int) -> DeviceInfo:
        nv = self.nvml
        driver, cuda = self._versions
        handle = nv.handle(index)
        raw_uuid = nv.uuid(handle)
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
        device = DeviceInfo(index, handle, raw_uuid, labels["uuid"], name, labels)
        self._read_static(device, pci)
        return device

    def _fill(self, fn: str, handle: Any, struct: Any) -> bool:
        """Call an NVML function that fills a struct the caller allocates (passed by reference, as the C
        function takes it); False when NVML cannot report it (NotSupported and the like, or a pynvml without
        the function). Fatal errors raise, as from :meth:`Nvml.query`."""
        nv = self.nvml
        try:
            nv.call(fn, handle, ctypes.byref(struct))
        except NvmlUnavailable:
            raise
        except (nv.const("NVMLError", Exception), AttributeError):
            return False
        return True

    def _read_static(self, d: DeviceInfo, pci: Any) -> None:
        """Read what stays put while NVML is initialised into ``d``: the ``static`` gauges, and the ``plan``
        of the per-scrape reads (NVML constants resolved, the fabric-info call this GPU answers)."""
        nv, h, s = self.nvml, d.handle, d.static

        def put(key: str, value: Any) -> None:
            if value is not None:
                s[key] = float(value)

        put("serial", _number(d.info_labels["serial"]))  # "[N/A]", or a serial with letters: absent
        if pci is not None:
            put("pci_domain", pci.domain)
            put("pci_bus", pci.bus)
            put("pci_device", pci.device)
            put("pci_device_id", pci.pciDeviceId)  # 0x233010DE: device id << 16 | vendor id, as one number
            put("pci_sub_device_id", pci.pciSubSystemId)
        ext_struct = nv.const("nvmlPciInfoExt_v1_t")
        if ext_struct is not None:
            ext = ext_struct()
            ext.version = nv.const("nvmlPciInfoExt_v1", 0x1000040)
            if self._fill("nvmlDeviceGetPciInfoExt", h, ext):
                put("pci_base_class", ext.baseClass)
                put("pci_sub_class", ext.subClass)
        for key, const, default in (
            ("inforom_oem", "NVML_INFOROM_OEM", 0),
            ("inforom_ecc", "NVML_INFOROM_ECC", 1),
        ):
            text = nv.query("nvmlDeviceGetInforomVersion", h, nv.const(const, default))
            put(key, None if text is None else _number(as_text(text)))  # "7.16" -> 7.16
        platform_struct = nv.const("c_nvmlPlatformInfo_v2_t")  # its constructor sets the version
        if platform_struct is not None:
            info = platform_struct()
            if self._fill("nvmlDeviceGetPlatformInfo", h, info):
                # nvidia-smi prints the GUID's 8 significant bytes as hex; here their number (a float: the low
                # bits of a GUID above 2**53 round)
                put("platform_gpu_fabric_guid", int.from_bytes(_raw(info, "ibGuid", 8), "big"))
                put("platform_slot_number", _raw(info, "slotNumber", 1)[0])
                put("platform_tray_index", _raw(info, "trayIndex", 1)[0])
                put("platform_host_id", _raw(info, "hostId", 1)[0])
                put("platform_module_id", _raw(info, "moduleId", 1)[0])
        gsp = nv.query("nvmlDeviceGetGspFirmwareMode", h)
        if gsp is not None:
            put("gsp_mode_current", gsp[0])
            put("gsp_mode_default", gsp[1])
        c2c = nv.query("nvmlDeviceGetC2cModeInfoV", h)
        put("c2c_mode", None if c2c is None else c2c.isC2cEnabled)
        put("accounting_buffer_size", nv.query("nvmlDeviceGetAccountingBufferSize", h))
        put("pcie_link_gen_gpumax", nv.query("nvmlDeviceGetGpuMaxPcieLinkGeneration", h))

        plan = d.plan
        plan.fields = [(int(nv.const(c, fid)), key, factor) for c, (fid, key, factor) in FIELD_GAUGES.items()]
        plan.pcie = [(int(nv.const(c, fid)), key) for c, (fid, key) in PCIE_COUNTER_FIELDS.items()]
        plan.field_ids = [fid for fid, _, _ in plan.fields] + [fid for fid, _ in plan.pcie]
        for err, err_const in (
            ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
            ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        ):
            for counter, counter_const in (
                ("volatile", "NVML_VOLATILE_ECC"),
                ("aggregate", "NVML_AGGREGATE_ECC"),
            ):
                for loc_const, (loc_default, suffixes) in ECC_LOCATIONS.items():
                    plan.ecc.append(
                        (
                            (nv.const(err_const), nv.const(counter_const), nv.const(loc_const, loc_default)),
                            tuple(f"ecc_errors_{err}_{counter}_{suffix}" for suffix in suffixes),
                        )
                    )
        plan.sram = nv.const("c_nvmlEccSramErrorStatus_v1_t")  # its constructor sets the version
        plan.fabric_states = (
            int(nv.const("NVML_GPU_FABRIC_STATE_NOT_SUPPORTED", 0)),
            int(nv.const("NVML_GPU_FABRIC_STATE_COMPLETED", 3)),
        )
        for fn, struct_name in (
            ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
            ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),  # drivers before the versioned call
        ):
            struct = nv.const(struct_name)
            if struct is not None and self._fill(fn, h, struct()):
                plan.fabric = (fn, struct)
                break

    def _pcie_rate(self, uuid: str, key: str, fv: Any) -> float | None:
        """Bytes/s between this and the previous collection from one PCIe byte-counter field value.

        The first reading (after start-up or re-initialisation) only sets the baseline. A counter that went
        backwards starts a new baseline with no series that time (a GPU reset), except a 32-bit counter, which
        is taken to have wrapped once. A reading with the previous one's timestamp (NVML's cached value)
        repeats the last rate. The timestamps are NVML's own (microseconds). The baselines are kept by GPU
        uuid, so they survive an NVML re-initialisation.
        """
        slot = (uuid, key)
        if fv.nvmlReturn != 0 or not 0 <= fv.valueType < len(_VALUE_MEMBERS):
            self._pcie_last.pop(slot, None)
            return None
        count = int(getattr(fv.value, _VALUE_MEMBERS[fv.valueType]))
        stamp = int(fv.timestamp)
        last = self._pcie_last.get(slot)
        if last is not None and stamp == last[0]:
            return last[2]
        rate: float | None = None
        if last is not None and stamp > last[0]:
            moved = count - last[1]
            if moved < 0 and _VALUE_MEMBERS[fv.valueType] == "uiVal":
                moved += 1 << 32
            if moved >= 0:
                rate = moved * 1e6 / (stamp - last[0])
        self._pcie_last[slot] = (stamp, count, rate)
        return rate

    def _read_more(self, d: DeviceInfo, v: dict[str, float]) -> None:
        """The per-scrape readings beyond the classic set: field values (one call for all), ECC by location,
        SRAM ECC detail, row remapping, fabric, PCIe throughput, engines, display, accounting."""
        nv, h, plan = self.nvml, d.handle, d.plan
        query = nv.query

        if plan.field_ids:
            values = query("nvmlDeviceGetFieldValues", h, plan.field_ids)
            values = values or []
            for (_, key, factor), fv in zip(plan.fields, values, strict=False):
                # each field carries its own status: one NVML cannot report is absent, the others stay
                if fv.nvmlReturn == 0 and 0 <= fv.valueType < len(_VALUE_MEMBERS):
                    v[key] = float(getattr(fv.value, _VALUE_MEMBERS[fv.valueType])) * factor
            for (_, key), fv in zip(plan.pcie, values[len(plan.fields) :], strict=False):
                rate = self._pcie_rate(d.uuid, key, fv)
                if rate is not None:
                    v[key] = rate

        if v.get("ecc_mode_current") == 1.0:  # counters are meaningless with ECC off
            for args, keys in plan.ecc:
                n = query("nvmlDeviceGetMemoryErrorCounter", h, *args)
                if n is not None:
                    for key in keys:
                        v[key] = float(n)
            if plan.sram is not None:
                sram = plan.sram()
                if self._fill("nvmlDeviceGetSramEccErrorStatus", h, sram):
                    for name, key in SRAM_ECC_FIELDS.items():
                        v[key] = float(getattr(sram, name))

        rows = query("nvmlDeviceGetRemappedRows", h)
        if rows is not None:
            v["remapped_rows_correctable"] = float(rows[0])
            v["remapped_rows_uncorrectable"] = float(rows[1])
            v["remapped_rows_pending"] = float(rows[2])  # 0/1
            v["remapped_rows_failure"] = float(rows[3])  # 0/1
        hist = query("nvmlDeviceGetRowRemapperHistogram", h)
        if hist is not None:
            v["remapped_rows_histogram_max"] = float(hist.max)
            v["remapped_rows_histogram_high"] = float(hist.high)
            v["remapped_rows_histogram_partial"] = float(hist.partial)
            v["remapped_rows_histogram_low"] = float(hist.low)
            v["remapped_rows_histogram_none"] = float(hist.none)

        if plan.fabric is not None:
            fn, struct = plan.fabric
            fabric = struct()
            if self._fill(fn, h, fabric):
                state = int(fabric.state)
                not_supported, completed = plan.fabric_states
                if state != not_supported:
                    v["fabric_state"] = float(state)  # NVML_GPU_FABRIC_STATE_*: 1 not started .. 3 completed
                    if state == completed and int(fabric.status) == 0:
                        v["fabric_clique_id"] = float(fabric.cliqueId)

        if "pcie_link_gen_current" in v:  # nvidia-smi's gpucurrent is the same reading under its newer name
            v["pcie_link_gen_gpucurrent"] = v["pcie_link_gen_current"]

        jpg = query("nvmlDeviceGetJpgUtilization", h)
        if jpg is not None:
            v["utilization_jpeg_ratio"] = jpg[0] * 0.01
        ofa = query("nvmlDeviceGetOfaUtilization", h)
        if ofa is not None:
            v["utilization_ofa_ratio"] = ofa[0] * 0.01
        enc = query("nvmlDeviceGetEncoderStats", h)
        if enc is not None:
            v["encoder_stats_session_count"] = float(enc[0])
            v["encoder_stats_average_fps"] = float(enc[1])
            v["encoder_stats_average_latency"] = float(enc[2])  # us, as nvidia-smi prints it
        for key, fn in (
            ("temperature_gpu_tlimit", "nvmlDeviceGetMarginTemperature"),  # C below the slowdown threshold
            ("display_attached", "nvmlDeviceGetDisplayMode"),
            ("display_active", "nvmlDeviceGetDisplayActive"),
            ("accounting_mode", "nvmlDeviceGetAccountingMode"),
        ):
            value = query(fn, h)
            if value is not None:
                v[key] = float(value)
        protected = query("nvmlDeviceGetConfComputeProtectedMemoryUsage", h)
        if protected is not None:
            v["protected_memory_total_bytes"] = float(protected.total)
            v["protected_memory_used_bytes"] = float(protected.used)
            v["protected_memory_free_bytes"] = float(protected.free)

    def _read(self, d: DeviceInfo) -> GpuReading:
        nv, h = self.nvml, d.handle
        v: dict[str, float] = {"index": float(d.index), "count": float(self._device_count)}
        v.update(d.static)

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
        self._read_more(d, v)

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
        if self.gpm is not None:
            reading.activity = self.gpm.read(
                h, d.uuid, _instance_ids(reading.migs), mig=v.get("mig_mode_current") == 1.0
            )
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
        energy_sample = energy.name + "_total"
        for r in readings:
            info.add_metric([r.device.info_labels[k] for k in GPU_INFO_LABELS], 1.0)
            # Samples are appended directly, all of one GPU sharing one label dict: add_metric would build a
            # dict per sample, the largest cost of a collection after NVML itself.
            labels = {"uuid": r.device.uuid}
            for key, value in r.values.items():
                if key == "energy_joules_total":
                    energy.samples.append(Sample(energy_sample, labels, value))
                else:
                    family = gauges[key]
                    family.samples.append(Sample(family.name, labels, value))
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
        out.extend(self._activity_families(readings))
        return out

    def close(self, timeout: float = 1.0) -> None:
        """Release what the collector holds in NVML (GPM sample buffers), for exporter shutdown. Waits at most
        ``timeout`` seconds for a running collection (a hung NVML call must not hold up the exit)."""
        if self._lock.acquire(timeout=timeout):
            try:
                if self.gpm is not None:
                    self.gpm.close()
            finally:
                self._lock.release()

    def _activity_families(self, readings: list[GpuReading]) -> list[Metric]:
        gauges = {
            key: GaugeMetricFamily(P + key, help_, labels=["uuid"]) for key, help_ in ACTIVITY_GAUGES.items()
        }
        for r in readings:
            for key, value in r.activity.gpu.items():
                gauges[key].add_metric([r.device.uuid], value)
        return [g for g in gauges.values() if g.samples]

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
        activity = {
            key: GaugeMetricFamily(
                P + "mig_" + key,
                help_ + ", of one MIG GPU instance",
                labels=["uuid", "gpu_instance_id"],
            )
            for key, help_ in ACTIVITY_GAUGES.items()
        }
        for r in readings:
            for m in r.migs:
                gi = m["gpu_instance_id"]
                info.add_metric(
                    [r.device.uuid, gi, m["compute_instance_id"], m["mig_uuid"], m["profile"]], 1.0
                )
                if m["used"] is not None:
                    used.add_metric([r.device.uuid, gi], m["used"])
                    total.add_metric([r.device.uuid, gi], m["total"])
            for gi_id, values in r.activity.instances.items():
                for key, value in values.items():
                    activity[key].add_metric([r.device.uuid, str(gi_id)], value)
        return [f for f in (info, used, total, *activity.values()) if f.samples]

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
            "Unix time of the most recent XID error on the GPU, by XID code.",
            labels=["uuid", "xid"],
        )
        for (uuid, xid), ts in sorted(snap.last_timestamp.items()):
            last.add_metric([uuid, str(xid)], ts)
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
            success, failed, timeouts, duration, success_time, code = (
                s.last_success,
                s.failed_collections,
                s.scrape_timeouts,
                s.last_duration,
                s.last_success_time,
                s.last_return_code,
            )
        return [
            GaugeMetricFamily(
                P + "last_collect_success",
                "Whether the most recent collection succeeded (1) or not (0)",
                value=1.0 if success else 0.0,
            ),
            GaugeMetricFamily(  # nvidia_gpu_exporter's nvidia-smi exit code; last_collect_success's twin
                P + "command_exit_code",
                "Exit code of the most recent collection: 0 succeeded, 1 failed (the nvidia-smi-compatible twin "
                "of nvidia_smi_last_collect_success)",
                value=0.0 if success else 1.0,
            ),
            CounterMetricFamily(P + "failed_scrapes", "Number of failed collections", value=float(failed)),
            # nvidia_gpu_exporter's collection health (docs/METRICS.md there), its NVML backend's status code
            GaugeMetricFamily(
                P + "last_collect_success_timestamp_seconds",
                "Unix timestamp of the most recent successful collection",
                value=success_time,
            ),
            GaugeMetricFamily(
                P + "last_collect_duration_seconds", "Duration of the most recent collection", value=duration
            ),
            GaugeMetricFamily(
                P + "nvml_return_code",
                "NVML's return code of the most recent collection: 0 succeeded, -1 no NVML status",
                value=float(code),
            ),
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
        # dcgm-exporter labels the last XID with its code and meaning (err_code, err_msg), which its users'
        # alerts select on: DCGM_FI_DEV_XID_ERRORS{err_code=~"48|79|..."} (NVIDIA/dcgm-exporter#309)
        xid_gauge = GaugeMetricFamily(
            "DCGM_FI_DEV_XID_ERRORS",
            "Value of the last XID error encountered.",
            labels=[*labels, "err_code", "err_msg"],
        )
        # Profiling (GPM) series of MIG GPU instances carry dcgm-exporter's GPU_I_PROFILE/GPU_I_ID; whole-GPU
        # series leave them empty, which Prometheus reads as absent, as dcgm-exporter has them.
        with_gi = any(r.activity.instances for r in readings)
        prof_labels = (
            list(DCGM_LABELS) + (list(DCGM_MIG_LABELS) if with_gi else []) + labels[len(DCGM_LABELS) :]
        )
        prof = {
            name: GaugeMetricFamily(name, help_, labels=prof_labels)
            for name, (_, help_) in DCGM_PROF_GAUGES.items()
        }

        def pod_values(*uuids: str) -> list[str]:
            if not with_pods:
                return []
            refs = next((refs for u in uuids if (refs := mapping.get(u.lower(), []))), [])
            return [refs[0].namespace, refs[0].pod, refs[0].container] if refs else ["", "", ""]

        last_xid = self.xid.snapshot().last_xid if self.xid is not None else {}
        for r in readings:
            d = r.device
            ident = [
                str(d.index),
                d.raw_uuid,
                d.info_labels["pci_bus_id"],
                f"nvidia{d.index}",
                d.name,
                self.hostname,
                d.info_labels["driver_version"],
            ]
            vals = ident + pod_values(d.uuid)
            for name, (key, factor, _) in DCGM_GAUGES.items():
                if key in r.values:
                    gauges[name].add_metric(vals, r.values[key] * factor)
            if "energy_joules_total" in r.values:
                energy.add_metric(vals, r.values["energy_joules_total"] * 1000.0)
            code = last_xid.get(d.uuid, 0)
            xid_gauge.add_metric([*vals, str(code), XID_TEXT.get(code, "")], float(code))
            gpu_vals = ident + (["", ""] if with_gi else []) + pod_values(d.uuid)
            for name, (key, _) in DCGM_PROF_GAUGES.items():
                if key in r.activity.gpu:
                    prof[name].add_metric(gpu_vals, r.activity.gpu[key])
            for gi_id, values in r.activity.instances.items():
                migs = [m for m in r.migs if m["gpu_instance_id"] == str(gi_id)]
                profile = _gi_profile(migs[0]["profile"]) if migs else ""
                gi_vals = [*ident, profile, str(gi_id), *pod_values(*(m["mig_uuid"] for m in migs))]
                for name, (key, _) in DCGM_PROF_GAUGES.items():
                    if key in values:
                        prof[name].add_metric(gi_vals, values[key])
        out: list[Metric] = [g for g in gauges.values() if g.samples]
        out += [f for f in (energy, xid_gauge, *prof.values()) if f.samples]
        return out
