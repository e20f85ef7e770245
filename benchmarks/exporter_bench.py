"""Scrape latency and memory of ``kgpu exporter`` with 8 fake GPUs and 40 concurrent scrapers.

The exporter runs as its own process (so its RSS is the exporter's alone), with the fake NVML from
``tests/fakes/fake_nvml.py`` injected in place of pynvml. 40 scrapers, each on its own keep-alive connection
as Prometheus uses, send a bounded number of ``GET /metrics``; the script prints p50/p90/p99/max latency,
throughput and the exporter's RSS, once for the exporter's default reuse window (``--max-age 1``) and once
with ``--max-age 0`` (every scrape waits for a fresh NVML collection). It prints and never asserts: the
targets (p99 <= 5 ms, RSS <= 60 MiB) are for people to read against.

    .venv/bin/python benchmarks/exporter_bench.py [--gpus 8] [--scrapers 40] [--requests 4000] [--max-age S ...]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kgpu.exporter.server import DEFAULT_MAX_AGE  # noqa: E402


def serve(gpus: int, metrics: str, max_age: float) -> None:
    """Child process: the exporter over ``gpus`` fake GPUs on a free localhost port; prints the port."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "src"))
    from fakes.fake_nvml import FakeNvml, make_gpus
    from kgpu.exporter.app import ExporterConfig, build
    from kgpu.exporter.collector import CollectorOptions

    sys.setswitchinterval(0.001)  # as kgpu.exporter.app.run does
    options = CollectorOptions(metrics=metrics, pods=False)
    config = ExporterConfig(listen="127.0.0.1:0", options=options, xid=True, max_age=max_age)
    server, xid = build(config, lib=FakeNvml(make_gpus(gpus)))
    if xid is not None:
        xid.start()
    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.5)


def rss_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


async def scrape_loop(
    port: int,
    count: int,
    interval: float,
    seed: int,
    latencies: list[float],
    errors: list[str],
    start: asyncio.Event,
) -> None:
    """``count`` scrapes on one keep-alive connection; with ``interval`` > 0 one every ``interval`` s from a
    seeded random phase (as Prometheus servers scrape), with 0 back to back (saturation).

    The latency is from writing the request to holding the whole body, read with asyncio streams: the
    client side costs tens of microseconds per scrape and no scraper waits on another for the GIL, so the
    figures are the exporter's, not the load generator's.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain;version=0.0.4\r\n\r\n"
    loop = asyncio.get_running_loop()
    await start.wait()
    rnd = random.Random(seed)
    next_at = loop.time() + rnd.uniform(0, interval)
    for _ in range(count):
        if interval > 0:
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            next_at += interval
        t0 = time.perf_counter()
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
        except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
            errors.append(repr(exc))
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            continue
        latencies.append(time.perf_counter() - t0)
        if status != 200 or not body:
            errors.append(f"HTTP {status}")
    writer.close()


async def load(
    port: int, scrapers: int, per: int, interval: float, seed: int
) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    start = asyncio.Event()
    tasks = [
        asyncio.create_task(scrape_loop(port, per, interval, seed + i, latencies, errors, start))
        for i in range(scrapers)
    ]
    await asyncio.sleep(0.2)  # every connection open before the clock starts
    start.set()
    t0 = time.perf_counter()
    await asyncio.gather(*tasks)
    return latencies, errors, time.perf_counter() - t0


def pct(sorted_values: list[float], q: float) -> float:
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[idx]


def run_once(args: argparse.Namespace, max_age: float) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            "--gpus",
            str(args.gpus),
            "--metrics",
            args.metrics,
            "--max-age",
            str(max_age),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])},
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        # warm-up: NVML init, device cache, label cache
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(20):
            conn.request("GET", "/metrics")
            size = len(conn.getresponse().read())
        conn.close()
        idle = rss_kib(child.pid)

        per = max(1, args.requests // args.scrapers)
        latencies, errors, wall = asyncio.run(load(port, args.scrapers, per, args.interval, args.seed))
        loaded = rss_kib(child.pid)
    finally:
        child.terminate()
        child.wait(timeout=10)

    lat = sorted(latencies)
    ms = 1000.0
    print(
        f"kgpu exporter bench: {args.gpus} fake GPUs, {args.scrapers} concurrent scrapers, {len(lat)} scrapes, "
        f"--max-age {max_age:g}" + (" (the default)" if max_age == DEFAULT_MAX_AGE else "")
    )
    pacing = f"each every {args.interval * 1000:.0f} ms" if args.interval > 0 else "back to back (saturation)"
    print(f"  scrapers            {pacing}")
    print(f"  metric set          {args.metrics}, {size / 1024:.1f} KiB per scrape")
    if lat:
        print(
            f"  latency ms          p50 {pct(lat, 0.50) * ms:.2f}  p90 {pct(lat, 0.90) * ms:.2f}  "
            f"p99 {pct(lat, 0.99) * ms:.2f}  max {lat[-1] * ms:.2f}  mean {statistics.fmean(lat) * ms:.2f}"
        )
        print(f"  throughput          {len(lat) / wall:.0f} scrapes/s")
    print(f"  errors              {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    print(
        f"  exporter RSS        idle {idle.get('VmRSS', 0) / 1024:.1f} MiB, after load "
        f"{loaded.get('VmRSS', 0) / 1024:.1f} MiB, peak {loaded.get('VmHWM', 0) / 1024:.1f} MiB"
    )
    print("  targets             p99 <= 5 ms, RSS <= 60 MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--scrapers", type=int, default=40)
    ap.add_argument("--requests", type=int, default=4000, help="total scrapes across all scrapers")
    ap.add_argument(
        "--interval",
        type=float,
        default=0.1,
        help="seconds between one scraper's scrapes (40 scrapers x 0.1 s = 400 scrapes/s); 0: back to back",
    )
    ap.add_argument("--seed", type=int, default=2002)
    ap.add_argument(
        "--max-age",
        type=float,
        action="append",
        help=f"the exporter's --max-age (reuse window, s); repeat to compare; default: {DEFAULT_MAX_AGE:g} and 0",
    )
    ap.add_argument("--metrics", default="nvidia-smi", choices=["nvidia-smi", "dcgm", "all"])
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.gpus, args.metrics, args.max_age[0])
        return
    for i, max_age in enumerate(args.max_age or [DEFAULT_MAX_AGE, 0.0]):
        if i:
            print()
        run_once(args, max_age)


if __name__ == "__main__":
    main()
