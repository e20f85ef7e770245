"""How the exporter lives through what real NVML does that a happy path does not: answers in pynvml's own
struct types, readings it cannot use, a GPU that stays lost, NVML shut down under a blocked XID wait,
32-bit counters that wrap."""

from __future__ import annotations

import ctypes
import time

import pynvml
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fakes.fake_nvml import FakeGpu, FakeNvml, make_gpus
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.exposition import TextWriter
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.readings import _raw
from kgpu.exporter.xid import XidWatcher

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(collector: GpuCollector) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(TextWriter().render(collector.build()).decode()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def by_uuid(samples: Samples, name: str) -> dict[str, float]:
    return {dict(k)["uuid"]: v for k, v in samples.get(name, {}).items()}


def make(gpus: list[FakeGpu], **options: object) -> tuple[FakeNvml, GpuCollector]:
    fake = FakeNvml(gpus)
    opts = CollectorOptions(**({"pods": False} | options))  # type: ignore[arg-type]
    return fake, GpuCollector(Nvml(fake), options=opts, hostname="h")


# -- pynvml's structs decode c_char fields to str ----------------------------------------------------------


def test_single_byte_fields_are_read_raw_from_pynvmls_own_struct() -> None:
    """pynvml returns ``str`` for a ``c_char`` field (and fails on a byte >= 0x80): read the bytes."""
    info = pynvml.c_nvmlPlatformInfo_v2_t()
    for name, byte in (("slotNumber", 2), ("moduleId", 0x85), ("hostId", 0)):
        ctypes.memmove(ctypes.addressof(info) + getattr(type(info), name).offset, bytes([byte]), 1)
    with pytest.raises(UnicodeDecodeError):
        _ = info.moduleId  # what reading the attribute does
    assert _raw(info, "slotNumber", 1)[0] == 2
    assert _raw(info, "moduleId", 1)[0] == 0x85
    assert _raw(info, "hostId", 1)[0] == 0


def test_platform_bytes_above_0x7f_are_served() -> None:
    gpu = FakeGpu(platform=(bytes(range(1, 17)), 0x82, 3, 1, 0, 0x85))
    _, collector = make([gpu])
    s = scrape(collector)
    uuid = collector._devices[0].uuid
    assert by_uuid(s, "nvidia_smi_platform_slot_number") == {uuid: 0x82}
    assert by_uuid(s, "nvidia_smi_platform_module_id") == {uuid: 0x85}
    assert s["nvidia_smi_last_collect_success"] == {(): 1.0}


# -- an answer kgpu cannot use ------------------------------------------------------------------------------


class Garbled(FakeNvml):
    """GPU 1 answers its power draw with something that is not a number."""

    def nvmlDeviceGetPowerUsage(self, h):  # type: ignore[no-untyped-def]
        value = super().nvmlDeviceGetPowerUsage(h)
        return "garbage" if h.gpu.index == 1 else value


def test_an_unusable_reading_fails_that_gpu_and_the_health_metric_not_the_scrape() -> None:
    fake = Garbled(make_gpus(2))
    collector = GpuCollector(Nvml(fake), options=CollectorOptions(pods=False), hostname="h")
    s = scrape(collector)
    uuids = [d.uuid for d in collector._devices.values()]
    assert set(by_uuid(s, "nvidia_smi_temperature_gpu")) == {uuids[0]}  # GPU 0 served in full
    assert s["nvidia_smi_last_collect_success"] == {(): 0.0}
    assert s["nvidia_smi_failed_scrapes_total"] == {(): 1.0}
    assert "garbage" in collector.stats.last_error
    assert fake.init_calls == 1  # not an NVML failure: no re-initialisation


# -- a GPU that stays lost ----------------------------------------------------------------------------------


def test_a_gpu_that_stays_lost_does_not_reinitialise_nvml_on_every_scrape() -> None:
    gpus = make_gpus(2)
    fake, collector = make(gpus)
    scrape(collector)
    healthy = collector._devices[0].uuid
    gpus[1].lost = True
    s = scrape(collector)  # first sight: failure, and NVML re-initialised on the next scrape
    assert s["nvidia_smi_last_collect_success"] == {(): 0.0}
    for _ in range(3):
        gpus[0].field_timestamp_us = None  # wall clock: PCIe rates need time to pass
        time.sleep(0.002)
        s = scrape(collector)
        assert s["nvidia_smi_last_collect_success"] == {(): 0.0}
    assert fake.init_calls == 2, "one re-initialisation, not one per scrape"
    # the healthy GPU keeps its state between collections: PCIe rate (needs a baseline) is served
    assert set(by_uuid(s, "nvidia_smi_pcie_throughput_tx_bytes_per_second")) == {healthy}

    collector._next_lost_reinit = 0.0  # the retry interval has passed
    scrape(collector)
    scrape(collector)
    assert fake.init_calls == 3
    gpus[1].lost = False
    scrape(collector)  # within the interval again: the recovered GPU is picked up without a re-init
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"] == {(): 1.0}
    assert len(by_uuid(s, "nvidia_smi_temperature_gpu")) == 2


def test_pcie_baseline_survives_an_nvml_reinitialisation() -> None:
    gpu = FakeGpu(field_timestamp_us=1_700_000_000_000_000)
    fake, collector = make([gpu])
    scrape(collector)
    gpu.lost = True
    scrape(collector)  # failure: NVML shut down, initialised again on the next scrape
    gpu.lost = False
    gpu.pcie_bytes = (gpu.pcie_bytes[0] + 2_000_000, gpu.pcie_bytes[1])
    gpu.field_timestamp_us += 2_000_000
    s = scrape(collector)
    assert fake.init_calls == 2
    assert list(by_uuid(s, "nvidia_smi_pcie_throughput_tx_bytes_per_second").values()) == [1e6]


# -- NVML is not shut down under the XID watcher's blocked wait ---------------------------------------------


def test_reinitialisation_waits_for_the_xid_wait_and_never_frees_a_dead_event_set() -> None:
    fake = FakeNvml(make_gpus(1))
    nvml = Nvml(fake)
    watcher = XidWatcher(nvml, wait_ms=300, retry_s=0.05)
    watcher.start()
    try:
        deadline = time.monotonic() + 5
        while not (watcher.running and fake._waiting):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        nvml.invalidate()  # what a failed collection does
        assert fake.shutdowns_during_wait == 0
        assert fake.shutdown_calls == 1
        nvml.ensure_init()
        deadline = time.monotonic() + 5
        while not (watcher.running and fake._waiting and fake.init_calls >= 2):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        fake.push_xid(0, 79)  # the re-registered watcher still counts
        deadline = time.monotonic() + 5
        while not watcher.snapshot().counts:
            assert time.monotonic() < deadline
            time.sleep(0.005)
    finally:
        watcher.stop()
    assert fake.event_set_stale_frees == 0
    assert list(watcher.snapshot().counts.values()) == [1]


# -- 32-bit counters wrap -----------------------------------------------------------------------------------


def test_a_32_bit_pcie_counter_that_wraps_still_gives_the_rate() -> None:
    gpu = FakeGpu(field_timestamp_us=1_700_000_000_000_000, pcie_bytes=(2**32 - 1_000, 10))
    gpu.field_value_types[197] = 1  # NVML_VALUE_TYPE_UNSIGNED_INT
    _, collector = make([gpu])
    scrape(collector)
    gpu.pcie_bytes = (3_000, 10)  # 4,000 bytes later, past 2**32
    gpu.field_timestamp_us += 1_000_000
    s = scrape(collector)
    assert list(by_uuid(s, "nvidia_smi_pcie_throughput_tx_bytes_per_second").values()) == [4_000.0]
