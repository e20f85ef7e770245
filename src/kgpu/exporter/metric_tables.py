"""The series the exporter can serve, as tables, and the options that choose among them.

nvidia_gpu_exporter's ``nvidia_smi_*`` families (family suffix -> HELP, the nvidia-smi field), the NVML
constants each per-scrape reading comes from (field values, ECC by memory location, SRAM ECC detail, PCIe
byte counters, clock event reasons), the GPU info labels, the DCGM exporter's names for what NVML can serve,
and GPM activity. :mod:`kgpu.exporter.readings` reads NVML by them and :mod:`kgpu.exporter.families` names
the series by them; the naming rule is in :mod:`kgpu.exporter.collector`'s docstring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
