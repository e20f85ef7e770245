"""kgpu's DRA placement against the real DynamicResources plugin (dra-oracle), on random clusters.

For every scenario (``dra_scenarios``: slices of several drivers, whole GPUs and MIG devices as NVIDIA's
driver publishes them, pools over several slices, allNodes and nodeSelector slices; claims with CEL
selectors, counts, ``All``, ``firstAvailable``, ``matchAttribute``; templates, shared and allocated claims)
both place the same pending pods in the same order, and must agree on:

- schedulable: whether the pod is placed;
- node: the node of every placed pod (both break score ties by node name);
- devices: the devices allocated for its claims, per claim and request, in allocation order. The real
  allocator tries pools in Go map order and slices in informer order, which change from run to run: the
  oracle is given kgpu's devices (DRA_ORACLE_PREFER) and, where the plugin took others on the same node,
  runs the cycle there again until it takes the same (each run is the real allocator's own outcome), so
  that later pods are compared on the same state; such pods are counted apart ("steered");
- message: the FailedScheduling text of every pod that is not placed, whole (the oracle runs PostFilter:
  DynamicResources' deallocation and DefaultPreemption's dry run, as the event carries them), word for word,
  and whether it is an error (the plugin's Error status); a pod DynamicResources' PreEnqueue keeps out of the
  queue (a claim missing or being deleted) is never tried and has no such text: kgpu must say so, with the
  plugin's reason (``not_enqueued``).

A disagreement in a scenario that exercises a behaviour listed in KNOWN (docs/simulate.md, "Dynamic
Resource Allocation", known differences) is counted in that class and printed; any other fails. Once two
outcomes differ, the later pods of that scenario may differ for that reason alone: only the first
disagreement of a scenario is held against kgpu, the rest are counted as "after an earlier difference".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from dra_scenarios import Scenario, generate

from conftest import binary, cases, seed
from kgpu.cli.main import cli
from kgpu.sim.scheduler.plugins.dra_place import not_enqueued

# Behaviours kgpu's DRA placement does not model (docs/simulate.md, "Dynamic Resource Allocation").
KNOWN: dict[str, str] = {
    "pool-order": "kube-scheduler tries pools in Go map order and slices in informer order, which change from one "
                  "cycle to the next; kgpu takes one of those orders (driver and pool name, then input order): its "
                  "devices are one of the allocations the real allocator made on that node when run again",
    "pool-order-unsampled": "as pool-order, but kgpu's devices were not among the allocations sampled (the node sees "
                            "several slices of the devices' driver, and the devices per claim, request and driver "
                            "are the same)",
    "filter-timeout": "the allocator ran past DynamicResources' Filter timeout (10 s, DRASchedulerFilterTimeout, beta "
                      "and on in 1.34) on a node of the oracle, or past kgpu's SEARCH_STEPS device tries on a node the "
                      "oracle searched to its end: 'timed out trying to allocate devices' on one side; kgpu has no clock",
    "error-node": "the allocator fails on several nodes with different errors: kube-scheduler filters 16 nodes in "
                  "parallel and reports the first error returned; kgpu's is the error of one of those nodes",
}

KINDS = ("schedulable", "node", "devices", "message")


def run_oracle(cluster: Path, pods: Path, prefer: Path | None = None) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "DRA_ORACLE_PREFER": str(prefer)} if prefer else None
    out = subprocess.run([str(binary("kube", "dra-oracle")), str(cluster), str(pods)],
                         capture_output=True, text=True, timeout=300, check=False, env=env)
    assert out.returncode == 0, out.stderr
    return {r["pod"]: r for r in map(json.loads, out.stdout.splitlines())}


class TooLong(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise TooLong


def run_kgpu(cluster: Path, pods: Path) -> dict[str, dict[str, Any]]:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    try:
        res = CliRunner().invoke(cli, ["simulate", "--cluster", str(cluster), "--workload", str(pods), "-o", "json"],
                                 catch_exceptions=False)
    except TooLong:
        raise AssertionError(f"kgpu simulate ran over 60 s on {cluster}") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert res.exit_code in (0, 1), res.output
    data = json.loads(res.stdout)
    return {f"{p['namespace']}/{p['name']}": p for p in data["pods"] if not p.get("recreated")}


def _devices(devices: list[dict[str, Any]] | None) -> list[tuple[Any, ...]]:
    return [(d["claim"], d["request"], d["driver"], d["pool"], d["device"], bool(d.get("adminAccess")))
            for d in devices or []]


def compare(ours: dict[str, dict[str, Any]], theirs: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(pod, kind, detail) for each disagreement, in the oracle's queue order."""
    diffs = []
    for key, t in theirs.items():
        o = ours.get(key)
        if o is None:
            diffs.append((key, "schedulable", "missing from kgpu's output"))
            continue
        o_node = o["node"] if o["phase"] == "Scheduled" else None
        t_node = t.get("node")
        if bool(o_node) != bool(t_node):
            diffs.append((key, "schedulable", f"kgpu {o['phase']} {o_node or o.get('reason')!r}, "
                                              f"kube-scheduler {t_node or t.get('message')!r}"))
        elif o_node and o_node != t_node:
            diffs.append((key, "node", f"kgpu {o_node}, kube-scheduler {t_node}"))
        elif o_node and _devices(o.get("devices")) != _devices(t.get("devices")):
            diffs.append((key, "devices", f"\n   kgpu:           {_devices(o.get('devices'))}"
                                          f"\n   kube-scheduler: {_devices(t.get('devices'))}"))
        elif not o_node:
            mine = o.get("reason") or ""
            theirs_msg = t.get("message") or ""
            if t.get("not_enqueued"):
                if mine != not_enqueued(theirs_msg):
                    diffs.append((key, "message", f"\n   kgpu:           {mine}\n   kube-scheduler: never tried, "
                                                  f"PreEnqueue: {theirs_msg}"))
            elif t.get("error"):
                mine_err = mine.startswith("running ")
                if not mine_err or mine != theirs_msg:
                    diffs.append((key, "message", f"\n   kgpu:           {mine}\n   kube-scheduler: {theirs_msg} (error)"))
            elif mine != theirs_msg:
                diffs.append((key, "message", f"\n   kgpu:           {mine}\n   kube-scheduler: {theirs_msg}"))
    return diffs


CANNOT_ALLOCATE = "cannot allocate all claims"
_CANNOT_ADD = re.compile(r"cannot add device ([^/]+)/(.+)/([^/ ]+) because a claim constraint")


def message_order_ambiguous(s: Scenario, mine: str, theirs: str) -> bool:
    """The allocator's error names the first device of an ``All`` request that breaks a constraint: which
    one is first depends on the pool and slice order, on the node the pool is local to (or any node). The
    same order decides whether such a device comes before one in use (then the request just fails: "cannot
    allocate all claims") or after it (the error): one side's error against the other's plain failure is
    that order too (the real allocator gives either from one run to the next on the same scenario)."""
    a, b = _CANNOT_ADD.search(mine), _CANNOT_ADD.search(theirs)
    if (a is None) != (b is None):
        err, plain = (a or b), (theirs if a else mine)
        assert err is not None
        return CANNOT_ALLOCATE in plain and any(
            order_ambiguous(s, n["metadata"]["name"], [("", "", err.group(1))]) for n in s.nodes
        )
    if a is None or b is None or a.group(1) != b.group(1) or _CANNOT_ADD.sub("", mine) != _CANNOT_ADD.sub("", theirs):
        return False
    driver = a.group(1)
    return any(order_ambiguous(s, n["metadata"]["name"], [("", "", driver)]) for n in s.nodes)


def order_ambiguous(s: Scenario, node: str, devices: list[tuple[Any, ...]]) -> bool:
    """Whether the allocator's order of pools and slices on ``node`` can change which of the drivers'
    devices come first: more than one current slice of a driver the devices are from."""
    nodes = {n["metadata"]["name"]: n for n in s.nodes}
    labels = nodes[node]["metadata"].get("labels", {})
    newest: dict[tuple[str, str], int] = {}
    visible = []
    for sl in (x for x in s.dra if x["kind"] == "ResourceSlice"):
        spec = sl["spec"]
        if spec.get("nodeName") not in (None, node):
            continue
        sel = spec.get("nodeSelector")
        if sel is not None and not any(all(labels.get(e["key"]) in e["values"] for e in t.get("matchExpressions", []))
                                       for t in sel["nodeSelectorTerms"]):
            continue
        key = (spec["driver"], spec["pool"]["name"])
        newest[key] = max(newest.get(key, 0), spec["pool"]["generation"])
        visible.append(spec)
    per_driver: Counter[str] = Counter(sp["driver"] for sp in visible
                                       if sp["pool"]["generation"] == newest[(sp["driver"], sp["pool"]["name"])])
    return any(per_driver[d[2]] > 1 for d in devices)


def _shape(devices: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """Devices per claim, request and driver: what any pool order gives alike."""
    return Counter((d[0], d[1], d[2], d[5]) for d in devices)


def run_case(s: Scenario, directory: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    directory.mkdir()
    cluster, pods = s.write(directory)
    ours = run_kgpu(cluster, pods)
    prefer = directory / "prefer.json"
    prefer.write_text(json.dumps({k: p["devices"] for k, p in ours.items() if p.get("devices")}))
    return ours, run_oracle(cluster, pods, prefer)


def test_dra_placement_agrees_with_kube_scheduler(tmp_path: Path) -> None:
    n = cases(300)
    total: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    known: Counter[str] = Counter()
    after = 0
    steered = 0
    examples: list[str] = []
    unexplained: list[str] = []
    features: Counter[str] = Counter()
    for i in range(n):
        s = generate(seed() + i)
        features.update(s.features)
        ours, theirs = run_case(s, tmp_path / f"s{i}")
        total["schedulable"] += len(theirs)
        total["node"] += sum(1 for t in theirs.values() if t.get("node"))
        total["devices"] += sum(1 for t in theirs.values() if t.get("node"))
        steered += sum(1 for k, t in theirs.items() if t.get("steered")
                       and _devices(t.get("devices")) == _devices(ours.get(k, {}).get("devices")))
        total["message"] += sum(1 for t in theirs.values() if not t.get("node"))
        for k, (pod, kind, detail) in enumerate(compare(ours, theirs)):
            wrong[kind] += 1
            if k > 0:
                after += 1
                continue
            classes = [c for c in KNOWN if c in s.features]
            mine, real = _devices(ours[pod].get("devices")), _devices(theirs[pod].get("devices"))
            if kind == "devices" and order_ambiguous(s, theirs[pod]["node"], mine + real) and _shape(mine) == _shape(real):
                classes = ["pool-order-unsampled"]
            if kind == "devices" and mine in [_devices(a) for a in theirs[pod].get("alternatives", ())]:
                classes = ["pool-order"]
            # where the searches stop differs either way: the oracle's clock, kgpu's SEARCH_STEPS (seed 44214914
            # found kgpu stopping on a node the real allocator searched to its end within the 10 s)
            if kind == "message" and any(
                "timed out trying to allocate devices" in (text or "")
                for text in (theirs[pod].get("message"), ours[pod].get("reason"))
            ):
                classes = ["filter-timeout"]
            mine = ours[pod].get("reason") or ""
            # kgpu's error is one of the errors the oracle's nodes gave, the device an All request's
            # constraint rejected first aside where the pool and slice order decides which one that is
            if kind == "message" and any(mine == e or message_order_ambiguous(s, mine, e)
                                         for e in theirs[pod].get("errors", ())):
                classes = ["error-node"]
            if kind == "message" and message_order_ambiguous(s, ours[pod].get("reason") or "",
                                                              theirs[pod].get("message") or ""):
                classes = ["pool-order"]
            if classes:
                known[classes[0]] += 1
                examples.append(f"seed {s.seed} {pod} [{kind}, {classes[0]}] {detail}")
            else:
                unexplained.append(f"seed {s.seed} {pod} [{kind}] {detail}")
    pods = total["schedulable"]
    print(f"\nDynamicResources oracle: {n} scenarios, {pods} pods with claims; features drawn: "
          + ", ".join(f"{f} {c}" for f, c in sorted(features.items())))
    for kind in KINDS:
        agree = total[kind] - wrong[kind]
        rate = agree / total[kind] if total[kind] else 1.0
        print(f"  {kind:12s} {agree}/{total[kind]} agree ({rate:.2%})")
        if kind == "devices" and steered:
            print(f"               of which {steered} after the oracle ran the cycle again on the node until the real "
                  "allocator, in another pool and slice order, took kgpu's devices")
    for cls, count in known.most_common():
        print(f"  known difference: {KNOWN[cls]}: {count} scenario(s)")
    if after:
        print(f"  after an earlier difference in the same scenario: {after} pod(s)")
    if os.environ.get("KGPU_CONFORMANCE_VERBOSE"):
        for line in examples:
            print("  KNOWN", line)
    for line in unexplained[:40]:
        print("  DISAGREE", line)
    assert not unexplained, f"{len(unexplained)} unexplained disagreement(s) with kube-scheduler (printed above)"
