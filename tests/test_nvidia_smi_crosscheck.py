"""The GPU-host cross-check in ``benchmarks/exporter_vs_nvidia_smi.py``: nvidia-smi CSV -> expected series.

Its naming rule is checked against every nvidia-smi field of the reference H100 scrape (HELP is the field,
the family its nvidia_gpu_exporter name), and the comparison against a scrape of the fake H100.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.exposition import TextWriter
from kgpu.exporter.nvml import Nvml
from test_exporter_families import H100

_spec = importlib.util.spec_from_file_location(
    "exporter_vs_nvidia_smi",
    Path(__file__).resolve().parent.parent / "benchmarks" / "exporter_vs_nvidia_smi.py",
)
assert _spec is not None and _spec.loader is not None
xcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(xcheck)

FIELD_HELPS = {name: h for name, (_, h) in H100.items() if re.fullmatch(r"[\w.]+(?: \[[^\]]+\])?", h)}


def test_naming_rule_matches_every_field_of_the_reference_scrape() -> None:
    assert len(FIELD_HELPS) > 100
    wrong = {name: xcheck.family_for(h) for name, h in FIELD_HELPS.items() if xcheck.family_for(h) != name}
    assert not wrong


@pytest.mark.parametrize(
    ("cell", "header", "expected"),
    [
        ("1980 MHz", "clocks.current.sm [MHz]", 1.98e9),
        ("81559 MiB", "memory.total [MiB]", 81559 * 2**20),
        ("37 %", "utilization.gpu [%]", 0.37),
        ("700.00 W", "power.limit [W]", 700.0),
        ("1250 us", "clocks_event_reasons_counters.sw_power_cap [us]", 0.00125),
        ("P0", "pstate", 0.0),
        ("Enabled", "persistence_mode", 1.0),
        ("Not Active", "clocks_throttle_reasons.gpu_idle", 0.0),
        ("0x0000000000000004", "clocks_event_reasons.active", 4.0),
        ("9.0", "compute_cap", 9.0),
        ("[N/A]", "fan.speed [%]", None),
        ("[Not Supported]", "utilization.jpeg [%]", None),
        ("590.48.01", "driver_version", None),
        ("00000000:00:09.0", "pci.bus_id", None),
    ],
)
def test_cells_parse_as_nvidia_gpu_exporter_reads_them(
    cell: str, header: str, expected: float | None
) -> None:
    got = xcheck.parse_value(cell, header)
    assert got == (None if expected is None else pytest.approx(expected))


def fake_scrape() -> tuple[FakeNvml, dict[str, dict[str, float]]]:
    fake = FakeNvml(make_gpus(1))
    collector = GpuCollector(Nvml(fake), options=CollectorOptions(pods=False), hostname="h")
    return fake, xcheck.samples_by_uuid(TextWriter().render(collector.build()).decode())


def test_cross_check_agrees_with_a_consistent_csv_and_names_a_difference() -> None:
    fake, scrape = fake_scrape()
    gpu = fake.gpus[0]
    header = "uuid, memory.total [MiB], power.default_limit [W], temperature.gpu, utilization.jpeg [%], fan.speed [%]"
    row = f"{gpu.uuid}, {gpu.memory_total // 2**20} MiB, 700.00 W, 12, 0 %, [N/A]"
    problems, counts = xcheck.cross_check(f"{header}\n{row}\n", scrape)
    assert problems == []
    assert (counts["equal"], counts["moving"], counts["missing"], counts["differs"]) == (2, 2, 0, 0)

    wrong = f"{gpu.uuid}, 1 MiB, 300.00 W, 12, 0 %, 40 %"
    problems, counts = xcheck.cross_check(f"{header}\n{wrong}\n", scrape)
    assert (counts["differs"], counts["missing"]) == (2, 0)
    assert any("nvidia_smi_power_default_limit_watts" in p and "kgpu 700" in p for p in problems)
    assert counts["moving"] == 3  # fan.speed now reported: present in the fake's scrape

    problems, counts = xcheck.cross_check(f"{header}\n{row}\n", {})  # an exporter serving nothing
    assert counts["missing"] == 4
    assert sum(p.startswith("  missing") for p in problems) == 4
