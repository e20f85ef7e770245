"""On a host with an NVIDIA GPU: one ``kgpu exporter`` scrape (NVML in-process) vs one nvidia-smi query.

nvidia_gpu_exporter (seed 002's exporter) forks ``nvidia-smi --query-gpu=<fields> --format=csv`` on every
scrape. With its default ``--query-field-names=AUTO`` the fields are every field ``nvidia-smi
--help-query-gpu`` lists, which this script discovers the same way (``--fields`` overrides). It then

- serves kgpu's exporter over the real NVML on localhost and times N ``GET /metrics`` (HTTP included), and
- times N runs of that nvidia-smi command, as nvidia_gpu_exporter runs it,

and prints both latency distributions and the ratio of medians. Target: kgpu >= 20x faster. It prints and
never asserts.

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

    server = make_server(
        GpuCollector(Nvml(), options=CollectorOptions(metrics=args.metrics, pods=False)), "127.0.0.1:0"
    )
    serve_in_thread(server)
    url = server.url + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # warm-up: nvmlInit, device cache
            body = resp.read()
        series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
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


if __name__ == "__main__":
    main()
