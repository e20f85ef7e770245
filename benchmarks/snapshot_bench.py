"""Seeded benchmark: `kgpu snapshot` of the production shape at 50k and 150k pods, from a local paginated API server.

The cluster is ``prod_bench.py``'s (same seed): 5,000 nodes in a CPU and a GPU pool over three zones, six
DaemonSets with their pods on every node, hundreds of Deployments with chart-style spread and anti-affinity,
5 % of the pods pending with their FailedScheduling events, Pulled/Started events. Served as a real API
server answers a list: every object with ``metadata.managedFields`` (the controller's and the kubelet's, as
the API returns them whatever kubectl hides), containers with an env value and a database URL with a
password in an argument (what the snapshot redacts), the DaemonSets with their last-applied annotation.

A local API server (the test suite's ``tests/fake_apiserver.py``: the real REST paths, HTTP/1.1 keep-alive,
``limit`` / ``continue`` paging, ``fieldSelector=reason=``) serves it on 127.0.0.1. Its pages are encoded
before the clock starts and the objects dropped, as a real server's watch cache holds them, so the time
measured is the client's. Then, in fresh processes, best of N, in alternation:

- ``kgpu snapshot -f FILE --page-size 500`` through a kubeconfig with a bearer token: resolve, list every
  kind in pages of 500, redact, encode, write atomically;
- stdlib ``json.load`` of the file it wrote, the yardstick.

Each through a small parent that reports its child's peak RSS (``ru_maxrss`` of ``RUSAGE_CHILDREN``), CPU
(user + system) and wall time. Prints both, the ratio of snapshot to json.load (target: <= 2x) and the peak
RSS against the size of the file written plus 256 MiB (target: within it). It never asserts.

    .venv/bin/python benchmarks/snapshot_bench.py          # 50k and 150k pods (make bench)
    .venv/bin/python benchmarks/snapshot_bench.py 50k      # one size
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import prod_bench  # noqa: E402

from fake_apiserver import CORE, RESOURCES, FakeApiServer  # noqa: E402

PAGE = 500
SIZES = ("50k", "150k")
BOUND_MIB = 256  # the target: peak RSS <= the file written + 256 MiB
T = prod_bench.T

# What `kubectl get -o json` hides and the API returns: the field managers of a pod (the ReplicaSet
# controller's create, the kubelet's status updates) and of a node (the kubelet, the node controller).
POD_MANAGED = [
    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": T, "fieldsType": "FieldsV1",
     "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app.kubernetes.io/instance": {},
                                                                    "f:app.kubernetes.io/name": {}, "f:pod-template-hash": {}},
                                 "f:ownerReferences": {".": {}, "k:{\"uid\":\"0\"}": {}}},
                  "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:env": {}, "f:image": {},
                                                                       "f:imagePullPolicy": {}, "f:name": {},
                                                                       "f:resources": {}}},
                             "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                             "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}},
    {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": T, "fieldsType": "FieldsV1",
     "subresource": "status",
     "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {},
                                                                           "f:lastTransitionTime": {}, "f:status": {},
                                                                           "f:type": {}}},
                               "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                               "f:podIPs": {".": {}, "k:{\"ip\":\"10.1.0.1\"}": {".": {}, "f:ip": {}}},
                               "f:startTime": {}}}},
]
NODE_MANAGED = [
    {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": T, "fieldsType": "FieldsV1",
     "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:node.alpha.kubernetes.io/ttl": {}},
                                 "f:labels": {".": {}, "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {},
                                              "f:kubernetes.io/os": {}, "f:node.kubernetes.io/instance-type": {}}},
                  "f:spec": {"f:providerID": {}}}},
    {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": T, "fieldsType": "FieldsV1",
     "subresource": "status",
     "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}, "f:memory": {}, "f:pods": {}},
                               "f:capacity": {"f:cpu": {}, "f:memory": {}, "f:pods": {}},
                               "f:conditions": {"k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}}},
                               "f:nodeInfo": {"f:kubeletVersion": {}}}}},
]


def _as_served(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a list answer holds it (no apiVersion/kind; what the API adds and the snapshot strips),
    built anew: the generator shares label and container dicts between objects."""
    kind = obj["kind"]
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    meta = dict(out["metadata"])
    if kind == "Pod":
        meta["managedFields"] = POD_MANAGED
        spec = dict(out["spec"])
        spec["containers"] = [
            {**c, "args": [*c.get("args", []), f"--db=postgres://{meta['name'][:8]}:hunter2@db.data:5432/app"],
             "env": [*c.get("env", []), {"name": "API_TOKEN", "value": "s3cr3t-" + meta["uid"][:8]}]}
            for c in spec["containers"]
        ]
        out["spec"] = spec
    elif kind == "Node":
        meta["managedFields"] = NODE_MANAGED
        meta["annotations"] = {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    elif kind == "DaemonSet":
        meta["annotations"] = {"deprecated.daemonset.template.generation": "1",
                               "kubectl.kubernetes.io/last-applied-configuration": msgspec.json.encode(obj).decode()}
    out["metadata"] = meta
    return out


def pages(size: str) -> tuple[dict[tuple[str, str], list[bytes]], dict[str, int], float]:
    """The production shape's snapshot objects as list pages of PAGE: (kind, reason) -> pages, the counts,
    and the seconds it took. prod_bench writes its inputs through ``_dump``: the snapshot document is taken
    from it instead of being written and read again, the other files are not written."""
    captured: dict[str, Any] = {}
    dump = prod_bench._dump

    def capture(path: Path, doc: dict[str, Any], indent: int) -> None:
        if path.name.endswith("-snapshot.json"):
            captured["doc"] = doc

    t = time.perf_counter()
    prod_bench._dump = capture
    try:
        prod_bench.generate(Path(tempfile.gettempdir()), size, False)
    finally:
        prod_bench._dump = dump
    items = captured.pop("doc")["items"]
    by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
    counts: dict[str, int] = {}
    for obj in items:
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
        reason = obj.get("reason", "") if obj["kind"] == "Event" else ""
        by_kind.setdefault((obj["kind"], reason), []).append(_as_served(obj))
    del items
    api = {kind: version for version, kind, _ in RESOURCES.values()}
    out: dict[tuple[str, str], list[bytes]] = {}
    for (kind, reason), objs in by_kind.items():
        chunks = [objs[i:i + PAGE] for i in range(0, len(objs), PAGE)]
        out[(kind, reason)] = [
            msgspec.json.encode({"apiVersion": api[kind], "kind": f"{kind}List",
                                 "metadata": {"resourceVersion": "918273",
                                              **({"continue": str(n + 1)} if n + 1 < len(chunks) else {})},
                                 "items": chunk})
            for n, chunk in enumerate(chunks)
        ]
    del by_kind
    gc.collect()
    return out, counts, time.perf_counter() - t


class PagedServer(FakeApiServer):
    """The fake API server answering lists from pages encoded beforehand (nothing is encoded while timed)."""

    def __init__(self, served: dict[tuple[str, str], list[bytes]]) -> None:
        super().__init__(None, served=CORE)
        self.pages = served
        self.bytes_served = 0

    def _list(self, kind: str, api_version: str, ns: str | None,
              query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
        assert query.get("limit") == [str(PAGE)], query
        reason = next((s.partition("=")[2] for s in query.get("fieldSelector", []) if s.startswith("reason=")), "")
        got = self.pages.get((kind, reason))
        if not got:
            body = {"apiVersion": api_version, "kind": f"{kind}List", "metadata": {"resourceVersion": "918273"}, "items": []}
            return 200, {}, msgspec.json.encode(body)
        page = got[int(query.get("continue", ["0"])[0])]
        self.bytes_served += len(page)
        return 200, {}, page


# One process through a small parent: its CPU, wall time and peak RSS (the parent is fresh, so the
# RUSAGE_CHILDREN maximum is the child's alone).
MEASURE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cpu": ru.ru_utime + ru.ru_stime, "wall": wall, "rc": done.returncode,
                  "rss_mib": ru.ru_maxrss / 1024, "err": done.stderr[-500:]}))
"""
JSON_LOAD = """
import json, sys
with open(sys.argv[1], "rb") as fh:
    json.load(fh)
"""


# kgpu is imported from bytecode compiled beforehand, as an installed wheel has it (pip compiles at install):
# with PYTHONDONTWRITEBYTECODE set, as in some development shells, each run would compile it again. The
# bytecode goes to a folder of the bench's own.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _compile(directory: Path) -> None:
    ENV["PYTHONPYCACHEPREFIX"] = str((directory / "pycache").resolve())
    code = "import compileall, kgpu, pathlib; compileall.compile_dir(pathlib.Path(kgpu.__file__).parent, quiet=1)"
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)


def _measure(*argv: str) -> dict[str, Any]:
    env = {**ENV, "KUBECONFIG": "", "HOME": "/nonexistent"}
    out = subprocess.run([sys.executable, "-c", MEASURE, *argv], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench(size: str, repeat: int, directory: Path) -> None:
    served, counts, gen = pages(size)
    total = sum(len(p) for ps in served.values() for p in ps)
    print(f"  {size} pods: " + ", ".join(f"{n:,} {k}" for k, n in counts.items())
          + f"; served as {total / 2**20:.0f} MiB of list pages of {PAGE} (generated in {gen:.0f}s)", flush=True)
    server = PagedServer(served)
    out = directory / f"snapshot-bench-{size}.json"
    snap: dict[str, Any] = {}
    base: dict[str, Any] = {}
    with server.running(), tempfile.TemporaryDirectory() as tmp:
        kc = Path(tmp) / "kubeconfig"
        kc.write_text(json.dumps(server.kubeconfig()))
        kgpu = [sys.executable, "-c", "from kgpu.cli.main import main; main()"]
        for _ in range(repeat):
            before = len(server.requests)
            s = _measure(*kgpu, "snapshot", "--kubeconfig", str(kc), "-f", str(out), "--page-size", str(PAGE))
            if s["rc"] != 0:
                print(f"    kgpu snapshot failed (exit {s['rc']}): {s['err'].strip()}")
                return
            s["requests"] = len(server.requests) - before
            b = _measure(sys.executable, "-c", JSON_LOAD, str(out))
            snap = s if not snap or s["wall"] < snap["wall"] else snap
            base = b if not base or b["wall"] < base["wall"] else base
    mib = out.stat().st_size / 2**20
    written = json.loads(out.read_bytes())["metadata"]["counts"]
    bound = mib + BOUND_MIB
    print(f"    wrote {mib:.0f} MiB in {snap['requests']} requests: " + ", ".join(f"{n:,} {k}" for k, n in written.items()))
    print(f"    kgpu snapshot   {snap['wall']:6.2f}s wall, {snap['cpu']:6.2f}s CPU, peak RSS {snap['rss_mib']:6.0f} MiB")
    print(f"    json.load       {base['wall']:6.2f}s wall, {base['cpu']:6.2f}s CPU, peak RSS {base['rss_mib']:6.0f} MiB")
    print(f"    ratio snapshot / json.load: {snap['wall'] / base['wall']:.2f} wall, {snap['cpu'] / base['cpu']:.2f} CPU "
          "(target <= 2)")
    print(f"    peak RSS {snap['rss_mib']:.0f} MiB against file + {BOUND_MIB} MiB = {bound:.0f} MiB: "
          f"{'within' if snap['rss_mib'] <= bound else 'OVER'} ({snap['rss_mib'] / mib:.2f}x the file)", flush=True)
    out.unlink()


def main() -> None:
    directory = Path(os.environ.get("KGPU_BENCH_DIR", ".bench"))
    directory.mkdir(exist_ok=True)
    sizes = [s for s in SIZES if s in sys.argv[1:]] or list(SIZES)
    _compile(directory)
    print(f"kgpu snapshot of the production shape ({prod_bench.NODES} nodes, seed {prod_bench.SEED}) from a local "
          f"paginated API server, pages of {PAGE}; best of 2 (150k: 1) in fresh processes; targets: <= 2x json.load, "
          f"peak RSS <= file + {BOUND_MIB} MiB", flush=True)
    for size in sizes:
        bench(size, 1 if size == "150k" else 2, directory)


if __name__ == "__main__":
    main()
