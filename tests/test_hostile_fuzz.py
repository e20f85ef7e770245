"""Seeded fuzzing of every verb through the CLI: hostile files never crash, hang or half-write.

Each verb gets CASES generated inputs (tests/hostile_inputs.py); every run must exit 0, 1 or 2 without a
traceback, an input error must be one line naming the file, and ``render -o DIR`` must leave DIR exactly as
it was whenever it fails. Change SEED to explore further; a failure names its seed and case index.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from hostile_inputs import (
    EXAMPLES,
    TEMPLATES,
    Case,
    check_result,
    documents,
    invoke,
    load_yaml_docs,
    mutate_doc,
    mutate_text,
    tree,
)

SEED = 15
CASES = 150  # per verb: 1,500 runs in all

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "Tesla-T4"}},
    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "110"}},
}
WORKLOADS = [load_yaml_docs(p) for p in sorted(EXAMPLES.glob("*.yaml"))]
PROFILES = [load_yaml_docs(p) for p in sorted(TEMPLATES.glob("*.yaml"))]
AFFINITY_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ml"},
    "spec": {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["t4"]}]}
                    ]
                }
            }
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "c",
                "image": "x",
                "ports": [{"containerPort": 80, "hostPort": 8080}],
                "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "2", "memory": "4Gi"}},
            }
        ],
    },
}
TKE_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "t", "annotations": {"eks.tke.cloud.tencent.com/gpu-type": "V100"}},
    "spec": {
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"limits": {"cpu": "8", "memory": "40Gi", "nvidia.com/gpu": 1}},
            }
        ]
    },
}
CATALOG_ROWS = [
    {"instance_type": "g5.xlarge", "region": "us-east-1", "ondemand_usd_per_hour": 1.1, "max_pods": 58},
    {
        "instance_type": "g9.big",
        "region": "us-east-1",
        "vcpus": 8,
        "memory_gib": 32,
        "gpu_count": 1,
        "gpu_name": "t4",
        "gpu_memory_gib": 16,
    },
]
CONTAINERD = b"""version = 2
imports = ["/etc/containerd/conf.d/*.toml"]
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
"""
DAEMON = {"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}


def _write(path: Path, case: Case) -> str:
    path.write_bytes(case.data)
    return str(path)


def _node_file(tmp: Path) -> str:
    p = tmp / "node.json"
    p.write_text(json.dumps(NODE))
    return str(p)


def run_simulate(rng: random.Random, tmp: Path, n: int) -> None:
    base = [*WORKLOADS, [AFFINITY_POD], [NODE]]
    f = _write(tmp / f"w{n}.yaml", documents(rng, base))
    if rng.random() < 0.5:
        args = ["simulate", "-c", _node_file(tmp), "-w", f]
    else:
        args = ["simulate", "-c", f, "-w", str(EXAMPLES / "002-vector-add-pod.yaml"), "-o", "json"]
    check_result(invoke(args), names=f, what=f"simulate case {n}")


def run_plan(rng: random.Random, tmp: Path, n: int) -> None:
    if rng.random() < 0.2:
        f = _write(tmp / f"p{n}.yaml", documents(rng, PROFILES))
        args = rng.choice(
            [
                ["run", "--dry-run", "-f", f],
                ["simulate", "-f", f, "-w", str(EXAMPLES / "002-vector-add-pod.yaml")],
            ]
        )
    elif rng.random() < 0.5:
        f = _write(tmp / f"p{n}.yaml", documents(rng, PROFILES))
        args = ["plan", "-f", f, "-w", str(EXAMPLES / "002-vector-add-pod.yaml")]
    else:
        f = _write(tmp / f"w{n}.yaml", documents(rng, [*WORKLOADS, [AFFINITY_POD]]))
        args = ["plan", "-w", f, "-o", "json"]
    check_result(invoke(args), names=f, what=f"plan case {n}")


def run_render(rng: random.Random, tmp: Path, n: int) -> None:
    f = _write(tmp / f"p{n}.yaml", documents(rng, PROFILES))
    out = tmp / f"out{n}"
    out.mkdir()
    (out / "karpenter.yaml").write_text("old\n")
    (out / "mine.txt").write_text("kept\n")
    before = tree(out)
    result = invoke(["render", "-f", f, "--output-dir", str(out)])
    check_result(result, names=f, what=f"render case {n}")
    if result.exit_code != 0:
        assert tree(out) == before, f"render case {n}: failed but changed {out}"
    else:
        assert (out / "mine.txt").read_text() == "kept\n"


def run_validate(rng: random.Random, tmp: Path, n: int) -> None:
    f = _write(tmp / f"p{n}.yaml", documents(rng, PROFILES))
    check_result(invoke(["profile", "validate", "-f", f]), names=f, what=f"profile validate case {n}")


def run_tke(rng: random.Random, tmp: Path, n: int) -> None:
    f = _write(tmp / f"t{n}.yaml", documents(rng, [[TKE_POD], *WORKLOADS]))
    check_result(invoke(["tke", "match", "-f", f]), names=f, what=f"tke match case {n}")


def run_tke_flags(rng: random.Random, tmp: Path, n: int) -> None:
    pick = rng.choice
    args = ["tke", "match", "--gpu-type", pick(["V100", "T4,V100", "", "x" * 300, "\0"])]
    for flag in ("--gpus", "--cpu", "--memory"):
        if rng.random() < 0.7:
            args += [
                flag,
                str(pick([*map(str, [1, 0, -1, -4, 2**64, "1e400", "abc", "8", "40Gi", "nan", "inf"])])),
            ]
    if rng.random() < 0.3:
        args.append("--explicit")
    check_result(invoke(args), names=None, what=f"tke match flags case {n}: {args}")


def run_catalog(rng: random.Random, tmp: Path, n: int) -> None:
    if rng.random() < 0.3:
        cols = ["instance_type", "region", "vcpus", "memory_gib", "max_pods", "gpu_count"]
        values = [
            rng.choice(["g5.xlarge", "x" * 140_000, "²", "-5", "1e308", "", "\0", "us-east-1", "4"])
            for _ in cols
        ]
        data = (",".join(cols) + "\n" + ",".join(f'"{v}"' for v in values) + "\n").encode()
        if rng.random() < 0.3:
            data = mutate_text(rng, data)
        f = _write(tmp / f"c{n}.csv", Case("csv", data))
    else:
        f = _write(tmp / f"c{n}.yaml", documents(rng, [CATALOG_ROWS, [{"instance_types": CATALOG_ROWS}]]))
    check_result(invoke(["catalog", "-f", f, "--min-gpus", "0"]), names=f, what=f"catalog case {n}")


def run_node_check(rng: random.Random, tmp: Path, n: int) -> None:
    root = tmp / f"host{n}"
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    (root / "etc/docker").mkdir(parents=True)
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-container-runtime").write_text("#!/bin/sh\n")
    toml = CONTAINERD
    if rng.random() < 0.7:
        toml = mutate_text(rng, toml) if rng.random() < 0.5 else _toml_mutation(rng, toml)
    (root / "etc/containerd/config.toml").write_bytes(toml)
    if rng.random() < 0.3:
        (root / "etc/containerd/conf.d/dir.toml").mkdir()
    (root / "etc/docker/daemon.json").write_bytes(
        documents(rng, [[DAEMON]]).data if rng.random() < 0.7 else b"[]"
    )
    check_result(invoke(["node-check", "--root", str(root)]), names=None, what=f"node-check case {n}")


def _toml_mutation(rng: random.Random, data: bytes) -> bytes:
    replacements = [
        (
            b"version = 2",
            rng.choice([b'version = "abc"', b"version = 1e400", b"version = []", b"version = -1"]),
        ),
        (b'"nvidia"', rng.choice([b"1", b"[]", b"{}", b'"' + b"x" * 10000 + b'"'])),
        (b"imports = [", rng.choice([b"imports = 5 #", b"imports = [1, ", b'imports = ["conf.d", '])),
        (b"BinaryName = ", b"BinaryName = 5 #"),
        (b"[plugins.", b"plugins = 5\n[x."),
    ]
    old, new = rng.choice(replacements)
    return data.replace(old, new, 1)


def run_init(rng: random.Random, tmp: Path, n: int) -> None:
    (tmp / "file").write_text("x")
    if not (tmp / "dangling").is_symlink():
        (tmp / "dangling").symlink_to(tmp / "nowhere")
    if not (tmp / "loop").is_symlink():
        (tmp / "loop").symlink_to(tmp / "loop")
    target = rng.choice(
        [
            str(tmp / "file" / "kgpu.yaml"),
            str(tmp / ("x" * 300)),
            str(tmp / "dangling"),
            str(tmp / "loop"),
            str(tmp / "loop" / "kgpu.yaml"),
            "/proc/kgpu.yaml",
            str(tmp),
            str(tmp / f"ok{n}" / "kgpu.yaml"),
        ]
    )
    args = ["init", "-f", target, *(["--force"] if rng.random() < 0.5 else [])]
    if rng.random() < 0.3:
        args = ["plan", "--report", target.replace("kgpu.yaml", "r.html")]
    check_result(invoke(args), names=None, what=f"init case {n}: {target[:100]}")


SNAPSHOTS = Path(__file__).parent / "fixtures" / "snapshots"
SNAPSHOT_DOCS = [
    [json.loads((SNAPSHOTS / n).read_text())] for n in ("device-plugin-untolerated.json", "cuda-driver.json")
]


def run_doctor(rng: random.Random, tmp: Path, n: int) -> None:
    """A mutated ClusterSnapshot through doctor, and through simulate as its cluster."""
    doc = mutate_doc(rng, rng.choice(SNAPSHOT_DOCS)[0])
    data = json.dumps(doc).encode()
    if rng.random() < 0.2:
        data = mutate_text(rng, data)
    f = _write(tmp / f"s{n}.json", Case("snapshot", data))
    if rng.random() < 0.7:
        args = ["doctor", "--snapshot", f]
    else:
        args = ["simulate", "-c", f, "-w", str(EXAMPLES / "002-vector-add-pod.yaml")]
    check_result(invoke(args), names=f, what=f"{args[0]} snapshot case {n}")


VERBS: dict[str, Any] = {
    "doctor": run_doctor,
    "simulate": run_simulate,
    "plan": run_plan,
    "render": run_render,
    "profile-validate": run_validate,
    "tke-match-file": run_tke,
    "tke-match-flags": run_tke_flags,
    "catalog": run_catalog,
    "node-check": run_node_check,
    "init": run_init,
}


@pytest.mark.parametrize("verb", list(VERBS))
def test_hostile_inputs(verb: str, tmp_path: Path) -> None:
    """CASES seeded hostile inputs for one verb: exit 0/1/2, no traceback, errors name the file."""
    rng = random.Random(f"{SEED}-{verb}")
    for n in range(CASES):
        VERBS[verb](rng, tmp_path, n)
