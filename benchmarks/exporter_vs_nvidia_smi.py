"""On a host with an NVIDIA GPU: one ``kgpu exporter`` scrape (NVML in-process) vs one nvidia-smi query.

nvidia_gpu_exporter (seed 002's exporter) forks ``nvidia-smi --query-gpu=<fields> --format=csv`` on every
scrape. With its default ``--query-field-names=AUTO`` the fields are every field ``nvidia-smi
--help-query-gpu`` lists, which this script discovers the same way (``--fields`` overrides). It then

- serves kgpu's exporter over the real NVML on localhost and times N ``GET /metrics`` (HTTP included; each
  a fresh NVML collection, as with ``--max-age 0``), and
- times N runs of that nvidia-smi command, as nvidia_gpu_exporter runs it,

and prints both latency distributions and the ratio of medians. Target: kgpu >= 20x faster.

Then it cross-checks the two on the same GPUs: every field nvidia-smi reports as a number must be a kgpu
series under nvidia_gpu_exporter's name for it (``clocks.current.sm [MHz]`` ->
``nvidia_smi_clocks_current_sm_clock_hz``), in the same unit, with the same value for readings that do not
move (limits, max clocks, PCI ids, modes, versions); moving readings (utilization, power, temperatures,
current clocks) are only required to be present and finite. It prints a line per field that is missing or
differs, and a summary. It prints and never asserts.

    .venv/bin/python benchmarks/exporter_vs_nvidia_smi.py [-n 50] [--fields a,b,c]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

# The fields that also appear as gpu_info labels, always queried by nvidia_gpu_exporter.
INFO_FIELDS = [
    "uuid",
    "name",
    "driver_model.current",
    "driver_model.pending",
    "vbios_version",
    "driver_version",
    "pci.bus_id",
    "serial",
    "compute_cap",
    "pci.sub_device_id",
    "index",
]


def discover_fields(nvidia_smi: str) -> list[str]:
    """Field names from ``nvidia-smi --help-query-gpu`` (lines like ``"clocks.current.sm" or "clocks.sm"``)."""
    out = subprocess.run([nvidia_smi, "--help-query-gpu"], capture_output=True, text=True, check=True).stdout
    fields: list[str] = []
    for line in out.splitlines():
        if line.startswith('"'):
            name = re.match(r'"([^"]+)"', line)
            if name and name.group(1) not in fields:
                fields.append(name.group(1))
    for f in INFO_FIELDS:
        if f not in fields:
            fields.append(f)
    return fields


def usable_fields(nvidia_smi: str, fields: list[str]) -> list[str]:
    """Drop fields this driver rejects (nvidia-smi fails the whole query on one unknown field)."""
    ok = []
    for f in fields:
        r = subprocess.run([nvidia_smi, f"--query-gpu={f}", "--format=csv"], capture_output=True, text=True)
        if r.returncode == 0:
            ok.append(f)
    return ok


# nvidia_gpu_exporter's unit suffixes and factors: "[MiB]" -> _bytes (x 2**20), ...
UNITS: dict[str, tuple[str, float]] = {
    "[MiB]": ("_bytes", 1024 * 1024),
    "[MHz]": ("_clock_hz", 1e6),
    "[%]": ("_ratio", 0.01),
    "[W]": ("_watts", 1.0),
    "[us]": ("_seconds", 1e-6),
}
# Readings that move between two reads; compared for presence only.
MOVING = (
    "utilization.",
    "power.draw",
    "temperature.",
    "clocks.current.",
    "clocks.sm",
    "clocks.gr",
    "clocks.mem",
    "clocks.video",
    "clocks_event_reasons",
    "clocks_throttle_reasons",
    "memory.used",
    "memory.free",
    "fan.speed",
    "encoder.stats.",
    "pstate",
    "pcie.link.gen.current",
    "pcie.link.gen.gpucurrent",
    "pcie.link.width.current",
    "edpp",
)


def family_for(header: str) -> str | None:
    """nvidia_gpu_exporter's metric name for a CSV header such as ``clocks.current.sm [MHz]``; None for a
    header it does not turn into a metric (an unknown unit)."""
    field, _, unit = header.strip().partition(" ")
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", field).lower()
    name = "nvidia_smi_" + re.sub(r"[^a-z0-9_]", "_", name)
    if not unit:
        return name
    suffix = UNITS.get(unit)
    return None if suffix is None else name + suffix[0]


def parse_value(text: str, header: str) -> float | None:
    """One CSV cell as nvidia_gpu_exporter reads it, in the metric's unit; None for [N/A] and the like."""
    text = text.strip()
    unit = header.strip().partition(" ")[2]
    factor = UNITS.get(unit, ("", 1.0))[1]
    words = {"enabled": 1.0, "disabled": 0.0, "active": 1.0, "not active": 0.0, "yes": 1.0, "no": 0.0}
    if text.lower() in words:
        return words[text.lower()]
    if re.fullmatch(r"P\d+", text):
        return float(text[1:])
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return float(int(text, 16))
    number = re.fullmatch(r"(-?\d+(?:\.\d+)?)(?: [A-Za-z%/]+)?", text)  # "1980 MHz", "9.0"; not "590.48.01"
    if number is None:
        return None
    return float(number.group(1)) * factor


def cross_check(csv_text: str, scrape: dict[str, dict[str, float]]) -> tuple[list[str], dict[str, int]]:
    """Problems found comparing nvidia-smi's CSV (with header) to kgpu's samples (family -> uuid -> value)."""
    lines = [line for line in csv_text.splitlines() if line.strip()]
    headers = [h.strip() for h in lines[0].split(",")]
    uuid_col = next(i for i, h in enumerate(headers) if h == "uuid")
    problems: list[str] = []
    counts = {"equal": 0, "moving": 0, "missing": 0, "differs": 0, "not a metric": 0}
    for row in lines[1:]:
        cells = [c.strip() for c in row.split(",")]
        uuid = cells[uuid_col].lower().removeprefix("gpu-")
        for header, cell in zip(headers, cells, strict=False):
            family = family_for(header)
            expected = parse_value(cell, header)
            if expected is None:
                continue
            if family is None or family == "nvidia_smi_uuid":
                counts["not a metric"] += 1
                continue
            got = scrape.get(family, {}).get(uuid)
            if got is None:
                counts["missing"] += 1
                problems.append(f"  missing  {family:<60} nvidia-smi {header} = {cell}  (GPU {uuid[:8]})")
            elif header.startswith(MOVING):
                counts["moving"] += 1
                if got != got or got in (float("inf"), float("-inf")):
                    problems.append(f"  not finite {family} = {got}")
            elif abs(got - expected) <= max(1e-6, 1e-3 * abs(expected)):
                counts["equal"] += 1
            else:
                counts["differs"] += 1
                problems.append(f"  differs  {family:<60} kgpu {got:g} vs nvidia-smi {cell} (GPU {uuid[:8]})")
    return problems, counts


def samples_by_uuid(body: str) -> dict[str, dict[str, float]]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if "uuid" in sample.labels and len(sample.labels) == 1:
                out.setdefault(sample.name, {})[sample.labels["uuid"]] = sample.value
    return out


def summary(label: str, samples: list[float]) -> str:
    s = sorted(samples)
    p99 = s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]
    return (
        f"  {label:<28} median {statistics.median(s) * 1000:8.2f} ms   p99 {p99 * 1000:8.2f} ms   "
        f"min {s[0] * 1000:8.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=50, help="repetitions of each")
    ap.add_argument("--fields", help="comma-separated nvidia-smi fields (default: discovered, as AUTO does)")
    ap.add_argument("--metrics", default="nvidia-smi", choices=["nvidia-smi", "dcgm", "all"])
    args = ap.parse_args()

    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        sys.exit("nvidia-smi not found: run this on a host with the NVIDIA driver")

    from kgpu.exporter.collector import CollectorOptions, GpuCollector
    from kgpu.exporter.nvml import Nvml
    from kgpu.exporter.server import make_server, serve_in_thread

    fields = args.fields.split(",") if args.fields else usable_fields(nvidia_smi, discover_fields(nvidia_smi))
    query = [nvidia_smi, f"--query-gpu={','.join(fields)}", "--format=csv"]

    # max_age=0: every timed scrape is a fresh NVML collection, the work nvidia-smi does on every run
    server = make_server(
        GpuCollector(Nvml(), options=CollectorOptions(metrics=args.metrics, pods=False)),
        "127.0.0.1:0",
        max_age=0,
    )
    serve_in_thread(server)
    url = server.url + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # warm-up: nvmlInit, device cache
            body = resp.read()
        series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
        csv_text = subprocess.run(query, capture_output=True, text=True, check=True).stdout
        with urllib.request.urlopen(url, timeout=30) as resp:  # right after nvidia-smi: moving values close
            checked = samples_by_uuid(resp.read().decode())
        kgpu_times = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url, timeout=30) as resp:
                resp.read()
            kgpu_times.append(time.perf_counter() - t0)
    finally:
        server.shutdown()
        server.server_close()

    smi_times = []
    for _ in range(args.n):
        t0 = time.perf_counter()
        subprocess.run(query, capture_output=True, check=True)
        smi_times.append(time.perf_counter() - t0)

    ratio = statistics.median(smi_times) / statistics.median(kgpu_times)
    print(f"kgpu exporter vs nvidia-smi, {args.n} runs each")
    print(f"  nvidia-smi fields           {len(fields)} (as nvidia_gpu_exporter --query-field-names=AUTO)")
    print(f"  kgpu series per scrape      {series}")
    print(summary("kgpu GET /metrics (NVML)", kgpu_times))
    print(summary("nvidia-smi --query-gpu", smi_times))
    print(f"  ratio (median nvidia-smi / median kgpu): {ratio:.1f}x   (target >= 20x)")
    problems, counts = cross_check(csv_text, checked)
    print("cross-check, kgpu series vs nvidia-smi fields (numeric cells only)")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for line in problems:
        print(line)


if __name__ == "__main__":
    main()
