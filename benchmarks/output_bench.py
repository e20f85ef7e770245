"""`-o json` / `-o yaml` on a 50,000-pod result: kgpu's emitters against the standard library's json and
PyYAML's pure-Python dumper, on the same data (seeded). Prints figures; asserts only that YAML is the
same bytes both ways."""

from __future__ import annotations

import json
import random
import time

import yaml

from kgpu.cli.output import to_json, to_yaml

SEED = 14
PODS = 50_000
NODES = 5_000


def result() -> dict:
    rng = random.Random(SEED)
    pods = []
    for i in range(PODS):
        placed = rng.random() < 0.97
        pod = {
            "namespace": rng.choice(["default", "ml", "inference", "训练"]),
            "name": f"job-{i // 8}-{i % 8}",
            "phase": "Scheduled" if placed else "Unschedulable",
            "node": f"ip-10-{i % NODES // 250}-{i % 250}.us-west-2.compute.internal" if placed else None,
            "reason": None
            if placed
            else "0/5000 nodes are available: 1200 Insufficient nvidia.com/gpu, 3800 node(s) had untolerated taint(s).",
        }
        if placed and rng.random() < 0.2:
            pod.update(pool="gpu", instance_type="g5.12xlarge", capacity_type="spot", zone="us-west-2a")
        pods.append(pod)
    return {
        "pods": pods,
        "summary": {"scheduled": sum(p["node"] is not None for p in pods), "unschedulable": 0},
    }


def best(fn, runs: int = 3) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    data = result()
    print(f"output benchmark: {PODS} pods (seed {SEED})")
    ours, text = best(lambda: to_json(data))
    std, _ = best(lambda: json.dumps(data, indent=2, ensure_ascii=False))
    print(
        f"  -o json: msgspec {ours:.3f}s, json.dumps {std:.3f}s ({std / ours:.1f}x), {len(text) / 2**20:.1f} MiB"
    )
    ours_y, text_y = best(lambda: to_yaml(data), runs=1)
    std_y, text_py = best(
        lambda: yaml.dump(
            data, Dumper=yaml.SafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
        ),
        runs=1,
    )
    assert text_y == text_py, "libyaml and PyYAML's pure-Python dumper must write the same bytes"
    print(f"  -o yaml: libyaml {ours_y:.3f}s, pure Python {std_y:.3f}s ({std_y / ours_y:.1f}x), same bytes")


if __name__ == "__main__":
    main()
