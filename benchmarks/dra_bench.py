"""DRA benchmark: 5,000 nodes each publishing 8 GPUs through NVIDIA's DRA driver, 20,000 pods with claims.

Every node is a p5.48xlarge whose ResourceSlice kgpu generates as the driver publishes it
(``kgpu.catalog.dra``: 8 H100s with their attributes and memory capacity). Pods ask through
ResourceClaimTemplates with CEL selectors: one GPU of at least 40Gi, two GPUs with a productName selector,
and one GPU of a driver version (semver). Prints the time to read and simulate the whole input (a kubectl
List), its ratio to ``json.load`` of the same bytes (the floor any input pays), and the pods placed and
devices allocated. Both are timed with the cyclic garbage collector paused, as ``kgpu simulate`` runs, and
on. Then, as ``prod_bench`` measures, whole processes: ``kgpu simulate --cluster FILE -o json`` (start-up,
read, place, encode; kgpu imported from bytecode compiled beforehand) against a process that runs
``json.load`` of the same file, CPU seconds, best of three in alternation. Prints, never asserts.

    .venv/bin/python benchmarks/dra_bench.py
"""

from __future__ import annotations

import gc
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kgpu.catalog.dra import device_classes, node_slices
from kgpu.model.load import parse_text
from kgpu.sim.simulate import simulate

SEED = 20261125
NODES = 5000
PODS = 20000
TEMPLATES = {
    "one-gpu-40gi": (1, ["device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"]),
    "two-h100": (2, ["device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"]),
    "one-gpu-driver-570": (1, ["device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))"]),
}


def node(i: int) -> dict[str, Any]:
    name = f"ip-10-{i // 250}-{i % 250}-{i % 7}.us-west-2.compute.internal"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "p5.48xlarge",
            "topology.kubernetes.io/zone": f"us-west-2{'abc'[i % 3]}", "nvidia.com/gpu.present": "true"}},
        "status": {"allocatable": {"cpu": "191450m", "memory": "2002743684Ki", "pods": "110",
                                   "ephemeral-storage": "1844032940Ki"}},
    }


def template(name: str, count: int, selectors: list[str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "training"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": count,
                "selectors": [{"cel": {"expression": s}} for s in selectors]}}]}}}}


def pod(n: int, tpl: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"trainer-{n}", "namespace": "training", "labels": {"app": tpl}},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": tpl}],
                     "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.08-py3",
                                     "resources": {"requests": {"cpu": cpu, "memory": "32Gi"},
                                                   "claims": [{"name": "gpu"}]}}]}}


def main() -> None:
    rng = random.Random(SEED)
    items: list[dict[str, Any]] = [*device_classes()]
    for i in range(NODES):
        n = node(i)
        items.append(n)
        items.extend(node_slices(n["metadata"]["name"], "h100", 8, 81920))
    items.extend(template(k, c, s) for k, (c, s) in TEMPLATES.items())
    names = list(TEMPLATES)
    items.extend(pod(n, rng.choice(names), rng.choice(("4", "8", "16"))) for n in range(PODS))
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode()
    print(f"DRA benchmark: {NODES} nodes x 8 GPUs (ResourceSlices), {PODS} pods with claims (seed {SEED}); "
          f"input {len(data) / 1e6:.1f} MB")
    # timed twice: with the cyclic garbage collector on (as the other benchmarks), and paused as
    # `kgpu simulate` runs (kgpu.cli.main.paused_gc); json.load the same way each time
    for paused in (False, True):
        if paused:
            gc.collect()
            gc.disable()
        t_json = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            json.loads(data)
            t_json = min(t_json, time.perf_counter() - t0)
        t0 = time.perf_counter()
        objs = parse_text(data, "bench.json")
        t_read = time.perf_counter() - t0
        result = simulate(objs)
        elapsed = time.perf_counter() - t0
        gc.enable()
        label = "collector paused (as kgpu simulate)" if paused else "collector on"
        print(f"  {label}: read {t_read:.2f} s + simulate {elapsed - t_read:.2f} s = {elapsed:.2f} s; "
              f"json.load {t_json:.2f} s; ratio {elapsed / t_json:.1f}x")
        del objs
    placed = sum(1 for p in result.placements if p.phase == "Scheduled")
    gpus = sum(len(p.devices) for p in result.placements)
    print(f"  placed: {placed} pods, {gpus} devices allocated, {len(result.unschedulable)} unschedulable")
    processes(data)


def processes(data: bytes) -> None:
    """The whole verb in a fresh process against json.load in one, as prod_bench measures them."""
    from prod_bench import JSON_LOAD, VERB, _compile, _kgpu, _run

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        path = directory / "dra.json"
        path.write_bytes(data)
        _compile(directory)
        best, base = float("inf"), float("inf")
        for _ in range(3):
            best = min(best, _run(VERB, *_kgpu("simulate", "--cluster", str(path), "-o", "json"))["s"])
            base = min(base, _run(VERB, sys.executable, "-c", JSON_LOAD, str(path))["s"])
        print(f"  whole processes (CPU s, best of 3): kgpu simulate {best:.2f} s, json.load {base:.2f} s; "
              f"ratio {best / base:.1f}x")


if __name__ == "__main__":
    main()
