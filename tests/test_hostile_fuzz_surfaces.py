"""Seeded fuzzing of the newer surfaces: DRA objects and their CEL selectors, NodeOverlays, PersistentVolumes
and claims, and `top --prometheus` against a Prometheus that answers with mutated bodies.

Each case must exit 0, 1 or 2 without a traceback, an input error must be one line naming the file
(tests/hostile_inputs.py ``check_result``), and no case may run long: a selector over the API server's CEL cost
limit is refused before it runs. A failure names its seed and case index; change SEED to explore further.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hostile_inputs import check_result, documents, invoke, mutate_doc, mutate_text
from test_api_refuses import NODE as ZONED_NODE
from test_api_refuses import POD as VOLUME_POD
from test_api_refuses import PV, PVC
from test_dra import claim_pod, gpu_class, gpu_device, gpu_slice, nodes, template

SEED = 20261129
CASES = 60  # per surface
CEL = json.loads((Path(__file__).parent / "fixtures" / "cel" / "cost_oracle.json").read_text())["selectors"]
SC = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "gp3"},
    "provisioner": "ebs.csi.aws.com",
    "volumeBindingMode": "WaitForFirstConsumer",
}
OVERLAY = {
    "apiVersion": "karpenter.sh/v1alpha1",
    "kind": "NodeOverlay",
    "metadata": {"name": "gpu-slices"},
    "spec": {
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]}
        ],
        "capacity": {"nvidia.com/gpu": "4"},
        "priceAdjustment": "-10%",
    },
}
GPU_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-a",
        "labels": {
            "node.kubernetes.io/instance-type": "g5.xlarge",
            "topology.kubernetes.io/zone": "us-east-1a",
        },
    },
    "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "58", "nvidia.com/gpu": "1"}},
}
GPU_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {
        "nodeName": "gpu-a",
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    },
}


def _cluster(tmp: Path, n: int, docs: list[list[Any]], rng: random.Random) -> str:
    """Mostly one document of the set mutated (so that the others are read and simulated), sometimes the
    whole file as tests/hostile_inputs.py damages it."""
    path = tmp / f"c{n}.json"
    if rng.random() < 0.25:
        path.write_bytes(documents(rng, docs).data)
        return str(path)
    items = list(rng.choice(docs))
    i = rng.randrange(len(items))
    items[i] = mutate_doc(rng, items[i])
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, allow_nan=True).encode()
    path.write_bytes(mutate_text(rng, data) if rng.random() < 0.1 else data)
    return str(path)


def _write_list(tmp: Path, n: int, items: list[Any]) -> str:
    path = tmp / f"c{n}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def _dra_docs() -> list[Any]:
    return [
        *nodes("n1", "n2"),
        gpu_class(),
        gpu_slice("n1", 2),
        gpu_slice("n2", devices=[gpu_device(0, "n2")]),
        template(),
        template("pair", count=2),
        claim_pod("p"),
        claim_pod("q", tpl="pair"),
    ]


EXITS: dict[str, list[int]] = {}


def _ran(surface: str, res: Any) -> None:
    EXITS.setdefault(surface, []).append(res.exit_code)


def _dra_variant(rng: random.Random) -> list[Any]:
    """The DRA set with one change the API server takes but the allocator must weigh: counts, All,
    a device gone, a missing template, an incomplete pool, another selector."""
    docs = _dra_docs()
    tpl = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    exact = tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    change = rng.randrange(6)
    if change == 0:
        exact["count"] = rng.randint(1, 9)
    elif change == 1:
        exact.pop("count")
        exact["allocationMode"] = "All"
    elif change == 2:
        sl = next(d for d in docs if d["kind"] == "ResourceSlice")
        sl["spec"]["devices"] = sl["spec"]["devices"][: rng.randint(0, 1)]
    elif change == 3:
        docs[-1]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "missing"
    elif change == 4:
        sl = next(d for d in docs if d["kind"] == "ResourceSlice")
        sl["spec"]["pool"]["resourceSliceCount"] = 2
    else:
        exact["selectors"] = [{"cel": {"expression": rng.choice(CEL)["expression"]}}]
    return docs


def run_dra(rng: random.Random, tmp: Path, n: int) -> None:
    f = _cluster(tmp, n, [_dra_docs()], rng) if rng.random() < 0.6 else _write_list(tmp, n, _dra_variant(rng))
    work = tmp / f"w{n}.yaml"
    work.write_bytes(
        documents(rng, [[claim_pod("r")]]).data if rng.random() < 0.2 else json.dumps(claim_pod("r")).encode()
    )
    args = ["simulate", "-c", f, "-w", str(work)] if rng.random() < 0.7 else ["simulate", "-c", f]
    res = invoke(args)
    check_result(res, names=None, what=f"dra case {n}")
    _ran("dra", res)


def run_cel(rng: random.Random, tmp: Path, n: int) -> None:
    """A recorded selector, cut, doubled or with a token put in, in a DeviceClass or a claim template."""
    e = rng.choice(CEL)["expression"]
    for _ in range(rng.randint(0, 2)):
        i, j = sorted(rng.randrange(len(e) + 1) for _ in range(2))
        e = rng.choice(
            [
                e[:i] + e[j:],
                e[:i] + e[i:j] * 2 + e[j:],
                e[:i] + rng.choice(["(", ")", "[", ".all(x, ", " && ", "'", ","]) + e[i:],
            ]
        )
    docs = [*nodes("n1"), gpu_class(), gpu_slice("n1", 4)]
    docs += (
        [template(selectors=[e])] if rng.random() < 0.5 else [gpu_class("other.nvidia.com", e), template()]
    )
    cluster, work = tmp / f"c{n}.yaml", tmp / f"w{n}.yaml"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    work.write_text(json.dumps(claim_pod("p")))
    start = time.monotonic()
    res = invoke(["simulate", "-c", str(cluster), "-w", str(work)])
    check_result(res, names=str(cluster), what=f"cel case {n}: {e[:80]}")
    _ran("cel", res)
    assert time.monotonic() - start < 30, f"cel case {n} ran {time.monotonic() - start:.0f}s: {e[:120]}"


def run_overlay(rng: random.Random, tmp: Path, n: int) -> None:
    f = _cluster(tmp, n, [[GPU_NODE, OVERLAY]], rng)
    work = tmp / f"w{n}.yaml"
    work.write_text(json.dumps({**GPU_POD, "spec": {**GPU_POD["spec"], "nodeName": None}}))
    res = invoke(["simulate", "-c", f, "-w", str(work)])
    check_result(res, names=None, what=f"overlay case {n}")
    _ran("overlay", res)


def run_volumes(rng: random.Random, tmp: Path, n: int) -> None:
    f = _cluster(tmp, n, [[ZONED_NODE, SC, PVC, PV]], rng)
    work = tmp / f"w{n}.yaml"
    work.write_bytes(
        documents(rng, [[VOLUME_POD]]).data if rng.random() < 0.3 else json.dumps(VOLUME_POD).encode()
    )
    res = invoke(["simulate", "-c", f, "-w", str(work)])
    check_result(res, names=None, what=f"volumes case {n}")
    _ran("volumes", res)


class _Prometheus(BaseHTTPRequestHandler):
    body = b""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = type(self).body
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


ANSWER = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [
            {"metric": {"node": "gpu-a", "Hostname": "gpu-a", "gpu": "0"}, "value": [1764300000.0, "87.5"]}
        ],
    },
}


def run_top(rng: random.Random, tmp: Path, n: int, url: str) -> None:
    answer = mutate_doc(rng, ANSWER) if rng.random() < 0.8 else ANSWER
    data = json.dumps(answer, allow_nan=True).encode()
    _Prometheus.body = mutate_text(rng, data) if rng.random() < 0.3 else data
    snap = tmp / f"s{n}.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [GPU_NODE, GPU_POD]}))
    res = invoke(
        [
            "top",
            "-f",
            str(snap),
            "--prometheus",
            url,
            "--request-timeout",
            "2",
            *rng.choice([[], ["-o", "json"], ["-o", "wide"]]),
        ]
    )
    check_result(res, names=None, what=f"top --prometheus case {n}")
    assert res.exit_code == 0, res.output  # a bad answer is a note, the view is still shown


SURFACES = {"dra": run_dra, "cel": run_cel, "overlay": run_overlay, "volumes": run_volumes}


@pytest.mark.parametrize("surface", list(SURFACES))
def test_hostile_surface(surface: str, tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-{surface}")
    for n in range(CASES):
        SURFACES[surface](rng, tmp_path, n)
    exits = EXITS[surface]
    # the mutations reach past the readers: some cases are simulated, some refused
    assert exits.count(2) >= 5 and len(exits) - exits.count(2) >= 5, sorted(exits)


def test_hostile_prometheus_answers(tmp_path: Path, prometheus: str) -> None:
    rng = random.Random(f"{SEED}-top")
    for n in range(CASES):
        run_top(rng, tmp_path, n, prometheus)
