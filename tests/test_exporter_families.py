"""The nvidia-smi families beyond the classic set: values and units from the fake NVML, absence when NVML
cannot report them, static values read once per NVML generation, and coverage of the reference H100 scrape
and of every family dashboard 14574 queries."""

from __future__ import annotations

import ctypes
import inspect
import re
import time
from pathlib import Path

import pynvml
import pytest
from prometheus_client.parser import text_string_to_metric_families

import fakes.fake_nvml as fake_module
from fakes.fake_nvml import FakeGpu, FakeMig, FakeNvml, make_gpus
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.exposition import TextWriter
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.xid import XidWatcher

UUID = "5d1b2d6e-0000-4a5b-8c9d-000000000000"

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def render(collector: GpuCollector) -> str:
    return TextWriter().render(collector.build()).decode()


def scrape(collector: GpuCollector) -> Samples:
    """sample name -> {sorted label items -> value}, parsed back from the exposition the server sends."""
    out: Samples = {}
    for family in text_string_to_metric_families(render(collector)):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str) -> float:
    assert name in samples, f"{name} missing"
    key = (("uuid", UUID),)
    assert key in samples[name], f"{name}{{uuid={UUID}}} missing; have {list(samples[name])}"
    return samples[name][key]


def make(gpus: list[FakeGpu] | None = None, **options: object) -> tuple[FakeNvml, GpuCollector]:
    fake = FakeNvml(gpus)
    opts = CollectorOptions(**({"pods": False} | options))  # type: ignore[arg-type]
    return fake, GpuCollector(Nvml(fake), options=opts, hostname="gpu-node-1")


def busy_h100() -> FakeGpu:
    """An H100 whose new readings are all distinct and non-zero, so a mixed-up source or unit shows."""
    return FakeGpu(
        bus_id="00000001:8A:1C.0",
        pcie_gen=(4, 5),
        gsp_mode=(1, 0),
        c2c_enabled=1,
        accounting_mode=1,
        accounting_buffer_size=4000,
        display_mode=1,
        display_active=0,
        platform=(bytes.fromhex("b8cef60300a1b2c3") + bytes(8), 2, 1, 3, 0, 7),
        sram_ecc={
            "aggregateUncParity": 11,
            "aggregateUncSecDed": 12,
            "aggregateCor": 13,
            "volatileUncParity": 14,
            "volatileUncSecDed": 15,
            "volatileCor": 16,
            "aggregateUncBucketL2": 17,
            "aggregateUncBucketSm": 18,
            "aggregateUncBucketPcie": 19,
            "aggregateUncBucketMcu": 20,
            "aggregateUncBucketOther": 21,
            "bThresholdExceeded": 1,
        },
        encoder_stats=(2, 60, 1250),
        fabric=(3, 0, 4),
        protected_memory=(1_073_741_824, 805_306_368, 268_435_456),
        remapped_rows=(3, 1, 1, 0),
        row_remapper_histogram=(2550, 7, 2, 1, 4),
        margin_temperature=26,
        util_jpeg=7,
        util_ofa=2,
        pcie_bytes=(41_000_000_000, 163_000_000_000),
        field_timestamp_us=1_700_000_000_000_000,
        power_average=612_340,
        power_instant=655_010,
        memory_temperature=54,
        edpp_multiplier=85,
        recovery_action=2,
        clocks_event_ns={74: 1_250_000_000, 76: 3_000_000_000, 269: 7_000_000, 270: 40_000_000, 271: 500},
    )


# family -> expected value for busy_h100(), in nvidia_gpu_exporter's unit (comment: NVML's reading)
EXPECTED = [
    ("nvidia_smi_serial", 1650123456789),  # "1650123456789" parsed as a number
    ("nvidia_smi_pci_domain", 1),  # bus id 00000001:8A:1C.0
    ("nvidia_smi_pci_bus", 0x8A),
    ("nvidia_smi_pci_device", 0x1C),
    ("nvidia_smi_pci_device_id", 0x233010DE),  # the reference's 5.90352606e+08
    ("nvidia_smi_pci_sub_device_id", 0x16C110DE),  # the reference's 3.81751518e+08
    ("nvidia_smi_pci_base_class", 3),
    ("nvidia_smi_pci_sub_class", 2),
    ("nvidia_smi_inforom_ecc", 7.16),  # "7.16"
    ("nvidia_smi_inforom_oem", 2.1),  # "2.1"
    ("nvidia_smi_platform_gpu_fabric_guid", float(0xB8CEF60300A1B2C3)),  # ibGuid's 8 bytes, big-endian
    ("nvidia_smi_platform_slot_number", 2),
    ("nvidia_smi_platform_tray_index", 1),
    ("nvidia_smi_platform_host_id", 3),
    ("nvidia_smi_platform_module_id", 7),
    ("nvidia_smi_gsp_mode_current", 1),
    ("nvidia_smi_gsp_mode_default", 0),
    ("nvidia_smi_c2c_mode", 1),
    ("nvidia_smi_accounting_mode", 1),
    ("nvidia_smi_accounting_buffer_size", 4000),
    ("nvidia_smi_display_attached", 1),
    ("nvidia_smi_display_active", 0),
    ("nvidia_smi_utilization_jpeg_ratio", 0.07),  # 7 %
    ("nvidia_smi_utilization_ofa_ratio", 0.02),  # 2 %
    ("nvidia_smi_encoder_stats_session_count", 2),
    ("nvidia_smi_encoder_stats_average_fps", 60),
    ("nvidia_smi_encoder_stats_average_latency", 1250),
    ("nvidia_smi_temperature_gpu_tlimit", 26),
    ("nvidia_smi_temperature_memory", 54),
    ("nvidia_smi_power_draw_average_watts", 612.34),  # 612340 mW
    ("nvidia_smi_power_draw_instant_watts", 655.01),  # 655010 mW
    ("nvidia_smi_edpp_multiplier_ratio", 0.85),  # 85 %
    ("nvidia_smi_gpu_recovery_action", 2),  # NVML_GPU_RECOVERY_ACTION_NODE_REBOOT
    ("nvidia_smi_clocks_event_reasons_counters_sw_power_cap_seconds", 1.25),  # 1.25e9 ns
    ("nvidia_smi_clocks_event_reasons_counters_sync_boost_seconds", 3.0),
    ("nvidia_smi_clocks_event_reasons_counters_sw_thermal_slowdown_seconds", 0.007),
    ("nvidia_smi_clocks_event_reasons_counters_hw_thermal_slowdown_seconds", 0.04),
    ("nvidia_smi_clocks_event_reasons_counters_hw_power_brake_slowdown_seconds", 5e-7),  # 500 ns
    # ECC by location: FakeGpu's default DRAM (location 2) and SRAM (location 7) counts
    ("nvidia_smi_ecc_errors_corrected_volatile_device_memory", 2),
    ("nvidia_smi_ecc_errors_corrected_volatile_dram", 2),
    ("nvidia_smi_ecc_errors_corrected_aggregate_device_memory", 12),
    ("nvidia_smi_ecc_errors_corrected_aggregate_dram", 12),
    ("nvidia_smi_ecc_errors_uncorrected_volatile_dram", 0),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_device_memory", 1),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_dram", 1),
    ("nvidia_smi_ecc_errors_corrected_volatile_sram", 1),
    ("nvidia_smi_ecc_errors_corrected_aggregate_sram", 5),
    ("nvidia_smi_ecc_errors_uncorrected_volatile_sram", 0),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram", 1),
    # SRAM detail (nvmlDeviceGetSramEccErrorStatus)
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_parity", 11),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_secded", 12),
    ("nvidia_smi_ecc_errors_uncorrected_volatile_sram_parity", 14),
    ("nvidia_smi_ecc_errors_uncorrected_volatile_sram_secded", 15),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_l2", 17),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_sm", 18),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_pcie", 19),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_mcu", 20),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_other", 21),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_sram_threshold_exceeded", 1),
    ("nvidia_smi_remapped_rows_correctable", 3),
    ("nvidia_smi_remapped_rows_uncorrectable", 1),
    ("nvidia_smi_remapped_rows_pending", 1),
    ("nvidia_smi_remapped_rows_failure", 0),
    ("nvidia_smi_remapped_rows_histogram_max", 2550),
    ("nvidia_smi_remapped_rows_histogram_high", 7),
    ("nvidia_smi_remapped_rows_histogram_partial", 2),
    ("nvidia_smi_remapped_rows_histogram_low", 1),
    ("nvidia_smi_remapped_rows_histogram_none", 4),
    ("nvidia_smi_fabric_state", 3),  # NVML_GPU_FABRIC_STATE_COMPLETED
    ("nvidia_smi_fabric_clique_id", 4),
    ("nvidia_smi_protected_memory_total_bytes", 1_073_741_824),
    ("nvidia_smi_protected_memory_used_bytes", 268_435_456),
    ("nvidia_smi_protected_memory_free_bytes", 805_306_368),
    ("nvidia_smi_pcie_link_gen_gpucurrent", 4),  # the current link generation
    ("nvidia_smi_pcie_link_gen_gpumax", 5),
]


@pytest.mark.parametrize(("name", "expected"), EXPECTED, ids=[n for n, _ in EXPECTED])
def test_new_family_value_and_unit(name: str, expected: float) -> None:
    _, collector = make([busy_h100()])
    assert value(scrape(collector), name) == pytest.approx(expected, rel=1e-12)


TX, RX = "nvidia_smi_pcie_throughput_tx_bytes_per_second", "nvidia_smi_pcie_throughput_rx_bytes_per_second"


def test_pcie_throughput_is_the_byte_counters_rate_between_collections() -> None:
    """No series on the first collection (a baseline); then bytes moved / NVML's own time between readings."""
    gpu = busy_h100()
    fake, collector = make([gpu])
    first = scrape(collector)
    assert TX not in first and RX not in first
    tx, rx = gpu.pcie_bytes
    gpu.pcie_bytes = (tx + 3_000_000_000, rx + 12_000_000_000)
    gpu.field_timestamp_us += 2_000_000  # 2 s later by NVML's clock
    s = scrape(collector)
    assert value(s, TX) == pytest.approx(1.5e9)
    assert value(s, RX) == pytest.approx(6e9)
    assert fake.calls["nvmlDeviceGetFieldValues"] == 2  # the counters ride in the one field-values call


def test_pcie_throughput_same_reading_repeats_the_rate_and_a_reset_restarts_the_baseline() -> None:
    gpu = busy_h100()
    _, collector = make([gpu])
    scrape(collector)
    gpu.pcie_bytes = (gpu.pcie_bytes[0] + 1_000_000, gpu.pcie_bytes[1])
    gpu.field_timestamp_us += 1_000_000
    assert value(scrape(collector), TX) == pytest.approx(1e6)
    assert value(scrape(collector), TX) == pytest.approx(1e6)  # NVML's cached reading: same stamp, same rate
    gpu.pcie_bytes = (5, gpu.pcie_bytes[1])  # counter went backwards (GPU reset, wrap): new baseline
    gpu.field_timestamp_us += 1_000_000
    s = scrape(collector)
    assert TX not in s
    assert value(s, RX) == 0.0
    gpu.pcie_bytes = (5 + 4_000, gpu.pcie_bytes[1])
    gpu.field_timestamp_us += 1_000_000
    assert value(scrape(collector), TX) == pytest.approx(4_000)


def test_pcie_throughput_absent_where_the_counters_are_not_supported() -> None:
    gpu = busy_h100()
    gpu.unsupported_fields = {197}  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES
    _, collector = make([gpu])
    scrape(collector)
    gpu.field_timestamp_us += 1_000_000
    s = scrape(collector)
    assert TX not in s
    assert value(s, RX) == 0.0


def test_command_exit_code_is_the_twin_of_last_collect_success() -> None:
    """0 after a good collection, 1 after a failed one; exporter-wide, no uuid label."""
    fake, collector = make()
    s = scrape(collector)
    assert s["nvidia_smi_command_exit_code"] == {(): 0.0}
    assert s["nvidia_smi_last_collect_success"] == {(): 1.0}
    fake.gpus[0].lost = True
    s = scrape(collector)
    assert s["nvidia_smi_command_exit_code"] == {(): 1.0}
    assert s["nvidia_smi_last_collect_success"] == {(): 0.0}


@pytest.mark.parametrize(
    ("value_type", "member_value", "expected"),
    [
        (0, 612_340.5, 612.3405),  # NVML_VALUE_TYPE_DOUBLE -> dVal
        (1, 612_340, 612.34),  # UNSIGNED_INT -> uiVal
        (2, 612_340, 612.34),  # UNSIGNED_LONG -> ulVal
        (3, 612_340, 612.34),  # UNSIGNED_LONG_LONG -> ullVal
        (4, 612_340, 612.34),  # SIGNED_LONG_LONG -> sllVal
        (5, 612_340, 612.34),  # SIGNED_INT -> siVal
        (6, 61_234, 61.234),  # UNSIGNED_SHORT -> usVal
    ],
)
def test_field_value_read_from_the_union_member_its_type_names(
    value_type: int, member_value: float, expected: float
) -> None:
    """The fake fills only the member valueType names (as a union read any other way would be garbage)."""
    gpu = FakeGpu(power_average=member_value, field_value_types={185: value_type})  # type: ignore[arg-type]
    _, collector = make([gpu])
    assert value(scrape(collector), "nvidia_smi_power_draw_average_watts") == pytest.approx(expected)


def test_one_unsupported_field_leaves_the_other_fields() -> None:
    """A field's own nvmlReturn != 0 drops that series only; the rest of the batch stays."""
    gpu = FakeGpu(unsupported_fields={82, 271})  # memory temperature, HW power brake counter
    _, collector = make([gpu])
    s = scrape(collector)
    assert "nvidia_smi_temperature_memory" not in s
    assert "nvidia_smi_clocks_event_reasons_counters_hw_power_brake_slowdown_seconds" not in s
    assert value(s, "nvidia_smi_power_draw_average_watts") == pytest.approx(631.95)
    assert value(s, "nvidia_smi_clocks_event_reasons_counters_sw_power_cap_seconds") == pytest.approx(1.25)
    assert s["nvidia_smi_last_collect_success"] == {(): 1.0}


FIELD_FAMILIES = {
    "nvidia_smi_power_draw_average_watts",
    "nvidia_smi_power_draw_instant_watts",
    "nvidia_smi_temperature_memory",
    "nvidia_smi_edpp_multiplier_ratio",
    "nvidia_smi_gpu_recovery_action",
} | {
    f"nvidia_smi_clocks_event_reasons_counters_{r}_seconds"
    for r in (
        "sw_power_cap",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    )
}
SRAM_DETAIL = {
    "nvidia_smi_ecc_errors_uncorrected_volatile_sram_parity",
    "nvidia_smi_ecc_errors_uncorrected_volatile_sram_secded",
} | {
    f"nvidia_smi_ecc_errors_uncorrected_aggregate_sram_{k}"
    for k in ("parity", "secded", "threshold_exceeded", "l2", "sm", "mcu", "pcie", "other")
}
ECC_BY_LOCATION = {
    f"nvidia_smi_ecc_errors_{e}_{c}_{loc}"
    for e in ("corrected", "uncorrected")
    for c in ("volatile", "aggregate")
    for loc in ("device_memory", "dram", "sram")
}
# NVML function -> the families that come from it alone
BY_FUNCTION = {
    "nvmlDeviceGetFieldValues": FIELD_FAMILIES,
    "nvmlDeviceGetPciInfoExt": {"nvidia_smi_pci_base_class", "nvidia_smi_pci_sub_class"},
    "nvmlDeviceGetInforomVersion": {"nvidia_smi_inforom_ecc", "nvidia_smi_inforom_oem"},
    "nvmlDeviceGetPlatformInfo": {
        f"nvidia_smi_platform_{k}"
        for k in ("gpu_fabric_guid", "slot_number", "tray_index", "host_id", "module_id")
    },
    "nvmlDeviceGetGspFirmwareMode": {"nvidia_smi_gsp_mode_current", "nvidia_smi_gsp_mode_default"},
    "nvmlDeviceGetC2cModeInfoV": {"nvidia_smi_c2c_mode"},
    "nvmlDeviceGetAccountingBufferSize": {"nvidia_smi_accounting_buffer_size"},
    "nvmlDeviceGetAccountingMode": {"nvidia_smi_accounting_mode"},
    "nvmlDeviceGetGpuMaxPcieLinkGeneration": {"nvidia_smi_pcie_link_gen_gpumax"},
    "nvmlDeviceGetDisplayMode": {"nvidia_smi_display_attached"},
    "nvmlDeviceGetDisplayActive": {"nvidia_smi_display_active"},
    "nvmlDeviceGetMemoryErrorCounter": ECC_BY_LOCATION,
    "nvmlDeviceGetSramEccErrorStatus": SRAM_DETAIL,
    "nvmlDeviceGetEncoderStats": {
        "nvidia_smi_encoder_stats_session_count",
        "nvidia_smi_encoder_stats_average_fps",
        "nvidia_smi_encoder_stats_average_latency",
    },
    "nvmlDeviceGetConfComputeProtectedMemoryUsage": {
        "nvidia_smi_protected_memory_total_bytes",
        "nvidia_smi_protected_memory_used_bytes",
        "nvidia_smi_protected_memory_free_bytes",
    },
    "nvmlDeviceGetRemappedRows": {
        f"nvidia_smi_remapped_rows_{k}" for k in ("correctable", "uncorrectable", "pending", "failure")
    },
    "nvmlDeviceGetRowRemapperHistogram": {
        f"nvidia_smi_remapped_rows_histogram_{k}" for k in ("max", "high", "partial", "low", "none")
    },
    "nvmlDeviceGetMarginTemperature": {"nvidia_smi_temperature_gpu_tlimit"},
    "nvmlDeviceGetJpgUtilization": {"nvidia_smi_utilization_jpeg_ratio"},
    "nvmlDeviceGetOfaUtilization": {"nvidia_smi_utilization_ofa_ratio"},
}


@pytest.mark.parametrize("fn", sorted(BY_FUNCTION))
def test_not_supported_leaves_those_series_absent(fn: str) -> None:
    """NotSupported from one NVML function: its families are absent, every other family still served."""
    _, full = make([busy_h100()])
    everything = set(scrape(full))
    assert BY_FUNCTION[fn] <= everything
    gpu = busy_h100()
    gpu.unsupported = {fn}
    _, collector = make([gpu])
    s = scrape(collector)
    assert not BY_FUNCTION[fn] & set(s), sorted(BY_FUNCTION[fn] & set(s))
    assert set(s) == everything - BY_FUNCTION[fn]
    assert s["nvidia_smi_last_collect_success"] == {(): 1.0}


def test_ecc_off_reads_no_ecc_counters() -> None:
    """With ECC disabled the location and SRAM counters are not read, as the totals are not."""
    fake, collector = make([FakeGpu(ecc_mode=(0, 0))])
    s = scrape(collector)
    assert not [n for n in s if n.startswith("nvidia_smi_ecc_errors_")]
    assert fake.calls["nvmlDeviceGetMemoryErrorCounter"] == 0
    assert fake.calls["nvmlDeviceGetSramEccErrorStatus"] == 0


STATIC_CALLS = {  # NVML function -> calls per GPU per NVML generation
    "nvmlDeviceGetPciInfo": 1,
    "nvmlDeviceGetPciInfoExt": 1,
    "nvmlDeviceGetInforomVersion": 2,  # OEM and ECC objects
    "nvmlDeviceGetPlatformInfo": 1,
    "nvmlDeviceGetSerial": 1,
    "nvmlDeviceGetGspFirmwareMode": 1,
    "nvmlDeviceGetC2cModeInfoV": 1,
    "nvmlDeviceGetAccountingBufferSize": 1,
    "nvmlDeviceGetGpuMaxPcieLinkGeneration": 1,
}
PER_SCRAPE_CALLS = {  # NVML function -> calls per GPU per scrape
    "nvmlDeviceGetFieldValues": 1,
    "nvmlDeviceGetMemoryErrorCounter": 8,  # 2 error types x 2 counters x (DRAM, SRAM)
    "nvmlDeviceGetSramEccErrorStatus": 1,
    "nvmlDeviceGetAccountingMode": 1,
    "nvmlDeviceGetRemappedRows": 1,
}


def test_static_values_are_read_once_per_nvml_generation() -> None:
    """PCI ids, inforom, platform, serial, GSP and C2C mode, buffer size: read when NVML is initialised, not
    per scrape, and read again after a re-initialisation. Dynamic readings are read on every scrape."""
    gpus = make_gpus(2)
    fake, collector = make(gpus)
    for _ in range(3):
        s = scrape(collector)
        assert len(s["nvidia_smi_pci_device_id"]) == 2
        assert len(s["nvidia_smi_inforom_ecc"]) == 2
    for fn, n in STATIC_CALLS.items():
        assert fake.calls[fn] == 2 * n, fn
    for fn, n in PER_SCRAPE_CALLS.items():
        assert fake.calls[fn] == 3 * 2 * n, fn
    # the fabric call: once per GPU and generation to learn which variant answers, then once per scrape
    assert fake.calls["nvmlDeviceGetGpuFabricInfoV"] == 2 + 3 * 2

    gpus[1].lost = True  # a failed collection: NVML is shut down and initialised again next time
    scrape(collector)
    gpus[1].lost = False
    fake.calls.clear()
    s = scrape(collector)
    assert len(s["nvidia_smi_inforom_oem"]) == 2
    for fn, n in STATIC_CALLS.items():
        assert fake.calls[fn] == 2 * n, f"{fn} not read again in the new NVML generation"


def test_static_values_follow_the_gpu_after_reinitialisation() -> None:
    """A value cached per generation is re-read, not carried over, when NVML is initialised again."""
    fake, collector = make()
    assert value(scrape(collector), "nvidia_smi_inforom_ecc") == pytest.approx(7.16)
    fake.gpus[0].inforom = {0: "2.1", 1: "7.17"}  # e.g. an inforom update and a driver reload
    assert value(scrape(collector), "nvidia_smi_inforom_ecc") == pytest.approx(7.16)  # same generation
    collector.nvml.invalidate()
    assert value(scrape(collector), "nvidia_smi_inforom_ecc") == pytest.approx(7.17)


@pytest.mark.parametrize(
    ("serial", "expected"),
    [("1650123456789", 1650123456789.0), ("0000000000000", 0.0), ("[N/A]", None), ("PQ1234X", None)],
)
def test_serial_as_a_number(serial: str, expected: float | None) -> None:
    """nvidia_gpu_exporter parses the serial as a number; one that is not a number has no series."""
    _, collector = make([FakeGpu(serial=serial)])
    s = scrape(collector)
    if expected is None:
        assert "nvidia_smi_serial" not in s
    else:
        assert value(s, "nvidia_smi_serial") == expected


def test_inforom_version_that_is_not_a_number_is_absent() -> None:
    _, collector = make([FakeGpu(inforom={0: "G506.0203.00.04", 1: "7.16"})])
    s = scrape(collector)
    assert "nvidia_smi_inforom_oem" not in s
    assert value(s, "nvidia_smi_inforom_ecc") == pytest.approx(7.16)


@pytest.mark.parametrize(
    ("fabric", "state", "clique"),
    [
        ((3, 0, 4), 3, 4),  # completed: state and clique
        ((2, 0, 0), 2, None),  # in progress: no clique yet
        ((3, 15, 4), 3, None),  # completed with an error status: the clique is not trusted
        ((0, 0, 0), None, None),  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: no fabric, no series
    ],
)
def test_fabric_state_and_clique(fabric: tuple[int, int, int], state: int | None, clique: int | None) -> None:
    """The state as NVML numbers it; the clique only once the fabric is set up without error."""
    _, collector = make([FakeGpu(fabric=fabric)])
    s = scrape(collector)
    assert ("nvidia_smi_fabric_state" in s) == (state is not None)
    if state is not None:
        assert value(s, "nvidia_smi_fabric_state") == state
    assert ("nvidia_smi_fabric_clique_id" in s) == (clique is not None)
    if clique is not None:
        assert value(s, "nvidia_smi_fabric_clique_id") == clique


def test_fabric_falls_back_to_the_unversioned_call_once_chosen() -> None:
    """A driver without nvmlDeviceGetGpuFabricInfoV: the older call serves; the choice is made once."""
    gpu = FakeGpu(fabric=(3, 0, 9), unsupported={"nvmlDeviceGetGpuFabricInfoV"})
    fake, collector = make([gpu])
    for _ in range(3):
        s = scrape(collector)
        assert value(s, "nvidia_smi_fabric_clique_id") == 9
    assert fake.calls["nvmlDeviceGetGpuFabricInfoV"] == 1  # the probe
    assert fake.calls["nvmlDeviceGetGpuFabricInfo"] == 1 + 3  # the probe, then every scrape


def test_no_fabric_call_answers_then_none_is_made_per_scrape() -> None:
    gpu = FakeGpu(unsupported={"nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"})
    fake, collector = make([gpu])
    for _ in range(3):
        assert "nvidia_smi_fabric_state" not in scrape(collector)
    assert fake.calls["nvmlDeviceGetGpuFabricInfoV"] + fake.calls["nvmlDeviceGetGpuFabricInfo"] == 2


def test_lost_gpu_during_a_new_call_fails_the_collection() -> None:
    """GpuIsLost from a struct-filling call is fatal, as from any other NVML call."""

    class LostOnSram(FakeNvml):
        def nvmlDeviceGetSramEccErrorStatus(self, device, status):  # type: ignore[no-untyped-def]
            raise fake_module.NVMLError(fake_module.NVML_ERROR_GPU_IS_LOST)

    collector = GpuCollector(Nvml(LostOnSram()), options=CollectorOptions(pods=False), hostname="h")
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"] == {(): 0.0}
    assert s["nvidia_smi_command_exit_code"] == {(): 1.0}


# -- coverage of the reference scrape and of the dashboard ----------------------------------------------------

REFERENCE = Path(__file__).resolve().parent / "fixtures" / "monitoring"  # see its SOURCES.md


def _reference_families() -> dict[str, tuple[str, str]]:
    """The reference H100 scrape (nvidia_gpu_exporter with --processes): family -> (type, HELP)."""
    text = (REFERENCE / "nvidia_gpu_exporter.h100.metrics").read_text()
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    return {name: (mtype, helps[name]) for name, mtype in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)}


def _dashboard_queries() -> tuple[set[str], set[str]]:
    """What dashboard 14574 (v1.2.0 and head) queries: metric names, and its ECC panels' ``__name__=~``."""
    lines, section = [], ""
    for line in (REFERENCE / "grafana-14574.exprs.txt").read_text().splitlines():
        if line.startswith("====="):
            section = line
        elif "14574" in section:  # both versions of dashboard 14574, not the DCGM dashboard
            lines.append(line)
    body = "\n".join(lines)
    regexes = set(re.findall(r'__name__=~"([^"]+)"', body))
    unquoted = re.sub(r'"[^"]*"', '""', body)  # metric names are never quoted; regexes and label values are
    return set(re.findall(r"\bnvidia_smi_[a-z0-9_]+", unquoted)), regexes


H100 = _reference_families()
DASHBOARD_NAMES, DASHBOARD_REGEXES = _dashboard_queries()


def test_reference_files_hold_what_the_checks_below_rely_on() -> None:
    assert len(H100) > 130 and H100["nvidia_smi_temperature_gpu"] == ("gauge", "temperature.gpu")
    assert {"nvidia_smi_gpu_recovery_action", "nvidia_smi_mig_sm_activity_ratio"} <= DASHBOARD_NAMES
    assert {
        "nvidia_smi_ecc_errors_uncorrected_.+",
        "nvidia_smi_ecc_errors_uncorrected_aggregate_.+",
    } == DASHBOARD_REGEXES


def exposed_names(text: str) -> set[str]:
    """Every family name as exposed (# TYPE lines, counters with _total) and every sample name."""
    names = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    names |= set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M))
    return names


def h100_collector() -> GpuCollector:
    """A fake H100 with processes, as the reference scrape was taken (--processes on)."""
    gpu = FakeGpu(
        processes=[(11327, 2_690_646_016, "/root/tools/memhog"), (11345, 16_452_157_440, "./gpu_burn")]
    )
    return make([gpu], processes=True)[1]


# Families of the reference scrape NVML cannot provide, with the reason. None today: every family of the
# reference H100 scrape has an NVML source.
NOT_FROM_NVML: dict[str, str] = {}


def test_every_family_of_the_reference_h100_scrape_is_emitted() -> None:
    assert len(H100) > 100
    ours = exposed_names(render(h100_collector()))
    missing = set(H100) - ours - set(NOT_FROM_NVML)
    assert not missing, sorted(missing)


# HELP texts that differ from the reference on purpose.
HELP_DIFFERS = {
    "nvidia_smi_command_exit_code": "kgpu runs no nvidia-smi; the code is the collection's outcome",
    "nvidia_smi_compute_app_used_memory_bytes": "kgpu runs on Linux only, so the Windows example is left out",
}


def test_help_and_type_match_the_reference() -> None:
    """HELP is the nvidia-smi query field, as in the reference scrape; the type is the same."""
    text = render(h100_collector())
    our_help = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    our_type = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    wrong_help = {
        n: (h, our_help.get(n))
        for n, (_, h) in H100.items()
        if n not in HELP_DIFFERS and our_help.get(n) != h
    }
    assert not wrong_help
    wrong_type = {n: (t, our_type.get(n)) for n, (t, _) in H100.items() if our_type.get(n) != t}
    assert not wrong_type


def test_every_family_dashboard_14574_queries_is_emitted() -> None:
    """Both dashboard versions' queries find a series: a GPU with processes, a MIG GPU, an XID seen, GPM
    activity after a second collection."""
    h100 = FakeGpu(processes=[(11327, 2_690_646_016, "/root/tools/memhog")])
    mig = make_gpus(2)[1]
    mig.mig_mode = (1, 1)
    mig.migs = [FakeMig("MIG-aaaa", 1, 0, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 10 * 2**30, 2 * 2**30)]
    nvml = Nvml(FakeNvml([h100, mig]))
    xid = XidWatcher(nvml)
    xid.record(UUID, 79, when=1_700_000_000.0)
    collector = GpuCollector(
        nvml, options=CollectorOptions(processes=True, pods=False), xid=xid, hostname="h"
    )
    render(collector)  # GPM activity is computed between two samples at least 100 ms apart
    nvml.lib.advance_gpm(1.0)
    time.sleep(0.15)
    samples = {s.name for f in text_string_to_metric_families(render(collector)) for s in f.samples}
    missing = DASHBOARD_NAMES - samples
    assert not missing, sorted(missing)
    for regex in DASHBOARD_REGEXES:
        assert any(re.fullmatch(regex, n) for n in samples), regex


# -- the fake keeps pynvml's shapes ---------------------------------------------------------------------------

NEW_FUNCTIONS = [*sorted(BY_FUNCTION), "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"]


@pytest.mark.parametrize("fn", NEW_FUNCTIONS)
def test_fake_functions_have_pynvml_signatures(fn: str) -> None:
    fake = FakeNvml()
    assert list(inspect.signature(getattr(fake, fn)).parameters) == list(
        inspect.signature(getattr(pynvml, fn)).parameters
    )


@pytest.mark.parametrize(
    "struct",
    [
        "nvmlPciInfoExt_v1_t",
        "c_nvmlPlatformInfo_v2_t",
        "c_nvmlEccSramErrorStatus_v1_t",
        "c_nvmlGpuFabricInfo_t",
        "c_nvmlGpuFabricInfoV_t",
    ],
)
def test_fake_structs_have_pynvml_layouts(struct: str) -> None:
    ours, theirs = getattr(FakeNvml, struct), getattr(pynvml, struct)
    assert [(n, ctypes.sizeof(t)) for n, t in ours._fields_] == [
        (n, ctypes.sizeof(t)) for n, t in theirs._fields_
    ]
    assert ctypes.sizeof(ours) == ctypes.sizeof(theirs)
    if "version" in dict(theirs._fields_):  # a versioned struct's constructor sets the same word (or none)
        assert ours().version == theirs().version


def test_fake_constants_have_pynvml_values() -> None:
    names = [
        n
        for n in vars(fake_module)
        if n.startswith(("NVML_", "nvml")) and isinstance(vars(fake_module)[n], int)
    ]
    assert len(names) > 60
    assert {n: vars(fake_module)[n] for n in names} == {n: getattr(pynvml, n) for n in names}
