"""The exporter's collector over the fake NVML: every metric's value and unit, absent fields, failures."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fakes.fake_nvml import FakeGpu, FakeMig, FakeNvml, make_gpus
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.exposition import TextWriter
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.xid import XidWatcher

UUID = "5d1b2d6e-0000-4a5b-8c9d-000000000000"  # FakeGpu's "GPU-5D1B2D6E-..." in nvidia_gpu_exporter form


def scrape(collector: GpuCollector) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name -> {sorted label items -> value}, parsed back from the text exposition the server sends."""
    text = TextWriter().render(collector.build()).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def value(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, **labels: str) -> float:
    want = tuple(sorted(({"uuid": UUID} | labels).items()))
    assert name in samples, f"{name} missing"
    assert want in samples[name], f"{name}{dict(want)} missing; have {list(samples[name])}"
    return samples[name][want]


def make(gpus: list[FakeGpu] | None = None, **options: object) -> tuple[FakeNvml, GpuCollector]:
    fake = FakeNvml(gpus)
    return fake, GpuCollector(Nvml(fake), options=CollectorOptions(**options), hostname="gpu-node-1")  # type: ignore[arg-type]


# name, expected value from FakeGpu's defaults (NVML units converted)
EXPECTED = [
    ("nvidia_smi_index", 0),
    ("nvidia_smi_count", 1),
    ("nvidia_smi_compute_cap", 9.0),
    ("nvidia_smi_utilization_gpu_ratio", 1.0),  # 100 %
    ("nvidia_smi_utilization_memory_ratio", 0.11),  # 11 %
    ("nvidia_smi_utilization_encoder_ratio", 0.0),
    ("nvidia_smi_utilization_decoder_ratio", 0.0),
    ("nvidia_smi_memory_total_bytes", 85_520_809_984),
    ("nvidia_smi_memory_reserved_bytes", 502_267_904),
    ("nvidia_smi_memory_used_bytes", 20_780_679_168),
    ("nvidia_smi_memory_free_bytes", 85_520_809_984 - 20_780_679_168 - 502_267_904),
    ("nvidia_smi_temperature_gpu", 59),
    ("nvidia_smi_fan_speed_ratio", 0.38),  # 38 %
    ("nvidia_smi_power_draw_watts", 631.95),  # 631950 mW
    ("nvidia_smi_power_limit_watts", 700),
    ("nvidia_smi_enforced_power_limit_watts", 700),
    ("nvidia_smi_power_default_limit_watts", 700),
    ("nvidia_smi_power_min_limit_watts", 200),
    ("nvidia_smi_power_max_limit_watts", 700),
    ("nvidia_smi_energy_joules_total", 123_456.789),  # 123456789 mJ
    ("nvidia_smi_clocks_current_graphics_clock_hz", 1.98e9),  # 1980 MHz
    ("nvidia_smi_clocks_current_sm_clock_hz", 1.98e9),
    ("nvidia_smi_clocks_current_memory_clock_hz", 2.619e9),
    ("nvidia_smi_clocks_current_video_clock_hz", 1.545e9),
    ("nvidia_smi_clocks_max_graphics_clock_hz", 1.98e9),
    ("nvidia_smi_clocks_max_sm_clock_hz", 1.98e9),
    ("nvidia_smi_clocks_max_memory_clock_hz", 2.619e9),
    ("nvidia_smi_pstate", 0),
    ("nvidia_smi_clocks_event_reasons_active", 0),
    ("nvidia_smi_clocks_event_reasons_supported", 511),
    ("nvidia_smi_clocks_event_reasons_gpu_idle", 0),
    ("nvidia_smi_clocks_throttle_reasons_sw_power_cap", 0),
    ("nvidia_smi_ecc_mode_current", 1),
    ("nvidia_smi_ecc_mode_pending", 1),
    ("nvidia_smi_ecc_errors_corrected_volatile_total", 3),
    ("nvidia_smi_ecc_errors_corrected_aggregate_total", 17),
    ("nvidia_smi_ecc_errors_uncorrected_volatile_total", 0),
    ("nvidia_smi_ecc_errors_uncorrected_aggregate_total", 2),
    ("nvidia_smi_persistence_mode", 1),
    ("nvidia_smi_compute_mode", 0),
    ("nvidia_smi_pcie_link_gen_current", 5),
    ("nvidia_smi_pcie_link_gen_max", 5),
    ("nvidia_smi_pcie_link_width_current", 16),
    ("nvidia_smi_pcie_link_width_max", 16),
    ("nvidia_smi_mig_mode_current", 0),
    ("nvidia_smi_mig_mode_pending", 0),
]


@pytest.mark.parametrize(("name", "expected"), EXPECTED, ids=[n for n, _ in EXPECTED])
def test_every_metric_value_and_unit(name: str, expected: float) -> None:
    """Each family carries NVML's reading converted to nvidia_gpu_exporter's unit, labelled by uuid."""
    _, collector = make()
    assert value(scrape(collector), name) == pytest.approx(expected)


def test_gpu_info_labels_match_nvidia_gpu_exporter() -> None:
    """gpu_info has the reference scrape's label set; uuid is lower case without GPU-."""
    _, collector = make()
    (labels,) = scrape(collector)["nvidia_smi_gpu_info"]
    assert dict(labels) == {
        "uuid": UUID,
        "name": "NVIDIA H100 80GB HBM3",
        "driver_model_current": "[N/A]",
        "driver_model_pending": "[N/A]",
        "vbios_version": "96.00.A5.00.01",
        "driver_version": "590.48.01",
        "pci_bus_id": "00000000:00:09.0",
        "serial": "1650123456789",
        "compute_cap": "9.0",
        "pci_sub_device_id": "0x16C110DE",
        "index": "0",
        "cuda_version": "13.1",
    }


def test_families_cover_dashboard_14574_and_reference_names() -> None:
    """Every family dashboard 14574 (v1.2.0) queries, and the issue's list, is served."""
    _, collector = make()
    names = set(scrape(collector))
    needed = {
        "nvidia_smi_gpu_info",
        "nvidia_smi_index",
        "nvidia_smi_pstate",
        "nvidia_smi_utilization_gpu_ratio",
        "nvidia_smi_utilization_memory_ratio",
        "nvidia_smi_power_draw_watts",
        "nvidia_smi_power_default_limit_watts",
        "nvidia_smi_enforced_power_limit_watts",
        "nvidia_smi_fan_speed_ratio",
        "nvidia_smi_temperature_gpu",
        "nvidia_smi_memory_used_bytes",
        "nvidia_smi_memory_total_bytes",
        "nvidia_smi_memory_free_bytes",
        "nvidia_smi_memory_reserved_bytes",
        "nvidia_smi_clocks_current_graphics_clock_hz",
        "nvidia_smi_clocks_max_graphics_clock_hz",
        "nvidia_smi_clocks_current_memory_clock_hz",
        "nvidia_smi_clocks_max_memory_clock_hz",
        "nvidia_smi_clocks_current_video_clock_hz",
        "nvidia_smi_clocks_current_sm_clock_hz",
    } | {
        f"nvidia_smi_clocks_{p}_reasons_{r}"
        for p in ("throttle", "event")
        for r in (
            "gpu_idle",
            "hw_thermal_slowdown",
            "sw_power_cap",
            "applications_clocks_setting",
            "hw_power_brake_slowdown",
            "sw_thermal_slowdown",
            "sync_boost",
        )
    }
    assert needed <= names, sorted(needed - names)


def test_clock_event_reason_bits() -> None:
    """Each reason is 1 exactly when its NVML bit is set in the current reasons mask."""
    gpu = FakeGpu(clocks_event_reasons=0x4 | 0x40)  # SW power cap + HW thermal slowdown
    _, collector = make([gpu])
    s = scrape(collector)
    assert value(s, "nvidia_smi_clocks_event_reasons_active") == 0x44
    assert value(s, "nvidia_smi_clocks_event_reasons_sw_power_cap") == 1
    assert value(s, "nvidia_smi_clocks_event_reasons_hw_thermal_slowdown") == 1
    assert value(s, "nvidia_smi_clocks_throttle_reasons_hw_thermal_slowdown") == 1
    assert value(s, "nvidia_smi_clocks_event_reasons_gpu_idle") == 0
    assert value(s, "nvidia_smi_clocks_event_reasons_sync_boost") == 0


def test_not_supported_fields_have_no_series() -> None:
    """NotSupported (fan on a datacenter GPU, energy, ECC) means the series is absent, the rest unaffected."""
    gpu = FakeGpu(
        unsupported={"nvmlDeviceGetFanSpeed", "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetEccMode"}
    )
    _, collector = make([gpu])
    s = scrape(collector)
    assert "nvidia_smi_fan_speed_ratio" not in s
    assert "nvidia_smi_energy_joules_total" not in s
    assert not [n for n in s if n.startswith("nvidia_smi_ecc_")]
    assert value(s, "nvidia_smi_temperature_gpu") == 59
    assert s["nvidia_smi_last_collect_success"][()] == 1


def test_old_driver_without_memory_v2_falls_back_and_omits_reserved() -> None:
    """Without nvmlDeviceGetMemoryInfo v2 there is no reserved figure; total/used/free still come."""

    class OldDriver(FakeNvml):
        def nvmlDeviceGetMemoryInfo(self, h, version=None):  # type: ignore[no-untyped-def]
            if version is not None:
                raise self.NVMLError_NotSupported(3)
            return super().nvmlDeviceGetMemoryInfo(h)

    collector = GpuCollector(Nvml(OldDriver()), hostname="h")
    s = scrape(collector)
    assert "nvidia_smi_memory_reserved_bytes" not in s
    assert value(s, "nvidia_smi_memory_free_bytes") == 85_520_809_984 - 20_780_679_168


def test_unknown_pstate_is_absent() -> None:
    _, collector = make([FakeGpu(pstate=32)])
    assert "nvidia_smi_pstate" not in scrape(collector)


def test_lost_gpu_reports_failure_then_reinitialises_and_recovers() -> None:
    """GpuIsLost: health metric 0, failure counted, NVML shut down; next scrape re-inits and recovers."""
    fake, collector = make()
    assert scrape(collector)["nvidia_smi_last_collect_success"][()] == 1
    assert fake.init_calls == 1

    fake.gpus[0].lost = True
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"][()] == 0
    assert s["nvidia_smi_failed_scrapes_total"][()] == 1
    assert "nvidia_smi_temperature_gpu" not in s
    assert fake.shutdown_calls == 1

    fake.gpus[0].lost = False
    s = scrape(collector)
    assert fake.init_calls == 2, "NVML must be initialised again after the failure"
    assert s["nvidia_smi_last_collect_success"][()] == 1
    assert s["nvidia_smi_failed_scrapes_total"][()] == 1
    assert value(s, "nvidia_smi_temperature_gpu") == 59


def test_one_lost_gpu_keeps_the_others() -> None:
    """With two GPUs and one lost, the healthy one is still reported; the scrape is marked failed."""
    gpus = make_gpus(2)
    gpus[1].lost = True
    _, collector = make(gpus)
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"][()] == 0
    assert len(s["nvidia_smi_temperature_gpu"]) == 1


@pytest.mark.parametrize("cause", ["driver_not_loaded", "uninitialized"])
def test_nvml_unavailable_is_a_failed_collection_not_a_crash(cause: str) -> None:
    """DriverNotLoaded at init and Uninitialized mid-scrape both give a failure metric and a retry."""
    fake, collector = make()
    if cause == "driver_not_loaded":
        fake.driver_loaded = False
    else:
        scrape(collector)
        fake._refs = 0  # the driver dropped our NVML session behind our back
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"][()] == 0
    fake.driver_loaded = True
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"][()] == 1
    assert value(s, "nvidia_smi_index") == 0


def test_nvml_is_initialised_lazily() -> None:
    """Building the collector (and the server) does not touch NVML; the first scrape does."""
    fake, collector = make()
    assert fake.init_calls == 0
    scrape(collector)
    assert fake.init_calls == 1
    scrape(collector)
    assert fake.init_calls == 1


def test_processes_per_gpu() -> None:
    """--processes: per-process info and memory, None memory (WDDM) gives no memory series."""
    gpu = FakeGpu(processes=[(11327, 2_690_646_016, "/root/tools/memhog"), (11345, None, "./gpu_burn")])
    _, collector = make([gpu], processes=True)
    s = scrape(collector)
    assert value(s, "nvidia_smi_compute_apps") == 2
    assert value(s, "nvidia_smi_compute_app_info", pid="11345", process_name="./gpu_burn") == 1
    assert value(
        s, "nvidia_smi_compute_app_used_memory_bytes", pid="11327", process_name="/root/tools/memhog"
    ) == (2_690_646_016)
    assert len(s["nvidia_smi_compute_app_used_memory_bytes"]) == 1
    assert s["nvidia_smi_compute_apps_last_collect_success"][()] == 1


def test_processes_off_by_default() -> None:
    _, collector = make([FakeGpu(processes=[(1, 10, "x")])])
    assert "nvidia_smi_compute_apps" not in scrape(collector)


def test_mig_devices() -> None:
    """MIG enabled: one info series per MIG device, memory per GPU instance, profile from the name."""
    gpu = FakeGpu(
        mig_mode=(1, 1),
        migs=[
            FakeMig("MIG-aaaa", 1, 0, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 10 * 2**30, 2 * 2**30),
            FakeMig("MIG-bbbb", 2, 0, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40 * 2**30, 5 * 2**30),
        ],
    )
    _, collector = make([gpu])
    s = scrape(collector)
    assert value(s, "nvidia_smi_mig_mode_current") == 1
    info = s["nvidia_smi_mig_info"]
    assert (
        tuple(
            sorted(
                {
                    "uuid": UUID,
                    "gpu_instance_id": "2",
                    "compute_instance_id": "0",
                    "mig_uuid": "MIG-bbbb",
                    "profile": "3g.40gb",
                }.items()
            )
        )
        in info
    )
    assert value(s, "nvidia_smi_mig_memory_used_bytes", gpu_instance_id="1") == 2 * 2**30
    assert value(s, "nvidia_smi_mig_memory_total_bytes", gpu_instance_id="2") == 40 * 2**30


def test_xid_counts_and_last_timestamp() -> None:
    """The watcher's counts per (uuid, xid) and the last event's time per (uuid, xid), labelled by code as
    nvidia_gpu_exporter labels them (its recommended alert selects codes)."""
    fake = FakeNvml()
    nvml = Nvml(fake)
    xid = XidWatcher(nvml)
    collector = GpuCollector(nvml, xid=xid, hostname="h")
    xid.record(UUID, 79, when=1_700_000_000.0)
    xid.record(UUID, 79, when=1_700_000_100.0)
    xid.record(UUID, 13, when=1_700_000_050.0)
    s = scrape(collector)
    assert value(s, "nvidia_smi_xid_errors_total", xid="79") == 2
    assert value(s, "nvidia_smi_xid_errors_total", xid="13") == 1
    assert value(s, "nvidia_smi_xid_last_timestamp_seconds", xid="79") == 1_700_000_100.0
    assert value(s, "nvidia_smi_xid_last_timestamp_seconds", xid="13") == 1_700_000_050.0


def test_xid_thread_counts_nvml_events() -> None:
    """The XID thread registers for XidCriticalError and counts events delivered by nvmlEventSetWait."""
    import time

    fake = FakeNvml()
    nvml = Nvml(fake)
    watcher = XidWatcher(nvml, wait_ms=50, retry_s=0.05)
    watcher.start()
    try:
        deadline = time.monotonic() + 5
        while not watcher.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watcher.running
        fake.push_xid(0, 48)
        fake.push_xid(0, 48)
        while watcher.snapshot().counts.get((UUID, 48), 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watcher.snapshot().counts[(UUID, 48)] == 2
        assert fake.calls["nvmlDeviceRegisterEvents"] == 1
    finally:
        watcher.stop()


def test_dcgm_name_set() -> None:
    """--metrics dcgm: dashboard 12239's names, DCGM units (MHz, MiB, %), dcgm-exporter's labels."""
    _, collector = make(metrics="dcgm", pods=False)
    s = scrape(collector)
    # exporter-wide health, served with every name set
    health = {"nvidia_smi_command_exit_code", "nvidia_smi_nvml_return_code"}
    assert not [
        n
        for n in s
        if n.startswith("nvidia_smi_") and "collect" not in n and "failed" not in n and n not in health
    ]
    labels = (
        ("DCGM_FI_DRIVER_VERSION", "590.48.01"),
        ("Hostname", "gpu-node-1"),
        ("UUID", "GPU-5D1B2D6E-0000-4A5B-8C9D-000000000000"),
        ("device", "nvidia0"),
        ("gpu", "0"),
        ("modelName", "NVIDIA H100 80GB HBM3"),
        ("pci_bus_id", "00000000:00:09.0"),
    )
    assert s["DCGM_FI_DEV_GPU_TEMP"][labels] == 59
    assert s["DCGM_FI_DEV_POWER_USAGE"][labels] == pytest.approx(631.95)
    assert s["DCGM_FI_DEV_SM_CLOCK"][labels] == pytest.approx(1980)
    assert s["DCGM_FI_DEV_GPU_UTIL"][labels] == pytest.approx(100)
    assert s["DCGM_FI_DEV_FB_USED"][labels] == pytest.approx(20_780_679_168 / 2**20)
    assert s["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][labels] == pytest.approx(123_456_789)


def test_all_name_sets() -> None:
    _, collector = make(metrics="all")
    s = scrape(collector)
    assert "DCGM_FI_DEV_GPU_TEMP" in s
    assert "nvidia_smi_temperature_gpu" in s


def test_fast_writer_matches_prometheus_client() -> None:
    """kgpu's text writer and prometheus_client's generate_latest expose the same samples and types."""
    gpus = make_gpus(3)
    gpus[1].unsupported = {"nvmlDeviceGetFanSpeed"}
    gpus[2].processes = [(7, 1024, 'we"ird\\name\n')]
    collector = GpuCollector(
        Nvml(FakeNvml(gpus)), options=CollectorOptions(metrics="all", processes=True), hostname="h"
    )
    families = collector.build()
    ours = TextWriter().render(families).decode()
    registry = CollectorRegistry(auto_describe=False)

    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            return iter(families)

    registry.register(Fixed())
    theirs = generate_latest(registry).decode()

    def norm(text: str) -> list[tuple[str, str, tuple[tuple[str, str], ...], float]]:
        return sorted(
            (f.type, s.name, tuple(sorted(s.labels.items())), s.value)
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if not s.name.endswith("_created")
        )

    assert norm(ours) == norm(theirs)
    assert len(norm(ours)) > 3 * 60


def test_eight_gpus_distinct_series() -> None:
    _, collector = make(make_gpus(8))
    s = scrape(collector)
    assert len(s["nvidia_smi_temperature_gpu"]) == 8
    assert {dict(k)["uuid"] for k in s["nvidia_smi_index"]} == {
        g.uuid.lower().removeprefix("gpu-") for g in make_gpus(8)
    }


def test_hostname_label_is_the_node_name_from_the_daemonset(monkeypatch: pytest.MonkeyPatch) -> None:
    """NODE_NAME (set by the DaemonSet from spec.nodeName) names the node; without it, the host name."""
    import socket

    from kgpu.exporter.collector import node_hostname

    monkeypatch.setenv("NODE_NAME", "ip-10-0-1-5.us-west-2.compute.internal")
    assert node_hostname() == "ip-10-0-1-5.us-west-2.compute.internal"
    assert GpuCollector(Nvml(FakeNvml([])), options=CollectorOptions()).hostname == node_hostname()  # type: ignore[arg-type]
    monkeypatch.setenv("NODE_NAME", "")
    assert node_hostname() == socket.gethostname()
