"""Dynamic Resource Allocation (resource.k8s.io/v1): objects and their API validation, the structured
allocator's order, the DynamicResources plugin's verdicts and texts, and the allocation in simulate's output.
Fixtures are shaped like NVIDIA's DRA driver's ResourceSlices and `kubectl get -o json` of claims."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from builders import node_dict, pod_dict
from kgpu.errors import InputError
from kgpu.model.load import parse_documents
from kgpu.sim.simulate import SCHEDULED, UNSCHEDULABLE, simulate

DRIVER = "gpu.nvidia.com"


def gpu_class(name: str = "gpu.nvidia.com", expr: str = "device.driver == 'gpu.nvidia.com' && "
              "device.attributes['gpu.nvidia.com'].type == 'gpu'") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def gpu_device(i: int, node: str, product: str = "NVIDIA H100 80GB HBM3", memory: str = "81559Mi",
               clique: str = "") -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{node}-{i:04d}"}, "index": {"int": i},
        "minor": {"int": i}, "productName": {"string": product}, "brand": {"string": "Nvidia"},
        "architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "580.82.7"}, "cudaDriverVersion": {"version": "13.0.0"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i:02x}"},
    }
    if clique:
        attrs["cliqueId"] = {"string": clique}
    return {"name": f"gpu-{i}", "attributes": attrs, "capacity": {"memory": {"value": memory}}}


def gpu_slice(node: str, n: int = 8, *, generation: int = 1, count: int = 1, name: str = "",
              devices: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-gpu.nvidia.com-abcde",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": "0f1e"}]},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                 "devices": devices if devices is not None else [gpu_device(i, node, **kw) for i in range(n)]},
    }


def template(name: str = "single-gpu", count: int = 1, selectors: list[str] | None = None, **exactly: Any) -> dict[str, Any]:
    ex: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": count, **exactly}
    if selectors:
        ex["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": ex}]}}}}


def claim_pod(name: str, tpl: str = "single-gpu", **kw: Any) -> dict[str, Any]:
    doc = pod_dict(name, cpu="1", memory="1Gi", **kw)
    doc["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": tpl}]
    doc["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return doc


def run(cluster: list[dict[str, Any]], work: list[dict[str, Any]]) -> dict[str, Any]:
    result = simulate(parse_documents(cluster, "cluster.json"), parse_documents(work, "w.yaml"))
    return {p.pod.name: p for p in result.placements}


def nodes(*names: str) -> list[dict[str, Any]]:
    return [node_dict(n, cpu="32", memory="128Gi") for n in names]


# --- allocation ----------------------------------------------------------------------------------------


def test_pods_get_devices_in_device_order_and_fill_nodes() -> None:
    """Each pod's claim gets the first free matching device; the allocation is in the JSON output."""
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", 2), template()]
    out = run(cl, [claim_pod("a"), claim_pod("b"), claim_pod("c")])
    assert out["a"].phase == SCHEDULED and out["a"].devices[0]["device"] == "gpu-0"
    assert out["b"].devices[0]["device"] == "gpu-1"
    assert out["a"].as_dict()["devices"] == [
        {"claim": "a-gpu", "request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}
    ]
    assert out["c"].phase == UNSCHEDULABLE
    assert out["c"].reason.startswith("0/1 nodes are available: 1 cannot allocate all claims.")
    assert out["c"].reason.endswith("still not schedulable, preemption: 0/1 nodes are available: 1 Preemption is not "
                                    "helpful for scheduling.")
    assert out["a"].warnings == ()


def test_selectors_with_quantity_and_semver() -> None:
    """CEL: productName, capacity compared as quantities, versions as semver."""
    cl = [*nodes("a100", "h100"), gpu_class(),
          gpu_slice("a100", 1, product="NVIDIA A100-SXM4-40GB", memory="40Gi"), gpu_slice("h100", 1), template(
        selectors=["device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('70Gi')) >= 0 && "
                   "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))"])]
    out = run(cl, [claim_pod("p")])
    assert out["p"].node == "h100"
    small = copy.deepcopy(cl)
    small[-1] = template(selectors=["device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')"])
    assert run(small, [claim_pod("p")])["p"].node == "a100"


def test_outdated_generation_is_ignored_and_all_on_incomplete_pool_fails() -> None:
    old = gpu_slice("n1", 4, generation=1, name="old")
    new = gpu_slice("n1", 1, generation=2, name="new")
    out = run([*nodes("n1"), gpu_class(), old, new, template(count=2)], [claim_pod("p")])
    assert out["p"].phase == UNSCHEDULABLE  # only generation 2's single device counts
    partial = gpu_slice("n1", 2, count=2)
    all_tpl = template(allocationMode="All")
    del all_tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
    out = run([*nodes("n1"), gpu_class(), partial, all_tpl], [claim_pod("p")])
    assert out["p"].reason == ('running "DynamicResources" filter plugin: claim default/p-gpu, request gpu: asks for '
                               "all devices, but resource pool gpu.nvidia.com/n1 is currently being updated")
    complete = gpu_slice("n1", 3)
    out = run([*nodes("n1"), gpu_class(), complete, all_tpl], [claim_pod("p")])
    assert [d["device"] for d in out["p"].devices] == ["gpu-0", "gpu-1", "gpu-2"]


def test_match_attribute_backtracks() -> None:
    """Two GPUs with the same cliqueID: the first device's clique has one GPU, so the allocator goes back."""
    devs = [gpu_device(0, "n1", clique="a"), gpu_device(1, "n1", clique="b"), gpu_device(2, "n1", clique="b")]
    tpl = template(count=2)
    tpl["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.nvidia.com/cliqueId"}]
    out = run([*nodes("n1"), gpu_class(), gpu_slice("n1", devices=devs), tpl], [claim_pod("p")])
    assert [d["device"] for d in out["p"].devices] == ["gpu-1", "gpu-2"]


def test_a_search_past_its_budget_is_kube_schedulers_filter_timeout() -> None:
    """48 GPUs in two cliques of 24, a claim for 25 of one clique: no combination exists, and the allocator's
    backtracking would try every subset of a clique (2^24 each). kube-scheduler gives up after its Filter timeout
    ("timed out trying to allocate devices", unresolvable); kgpu after SEARCH_STEPS device tries, in seconds,
    with the same words; a claim that fits on the same node is unaffected."""
    import time

    from kgpu.sim.scheduler.plugins.dynamicresources import SEARCH_STEPS, TIMED_OUT

    devs = [gpu_device(i, "n1", clique="a" if i % 2 else "b") for i in range(48)]
    greedy = template("clique-25", count=25)
    greedy["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.nvidia.com/cliqueId"}]
    fits = template("clique-4", count=4)
    fits["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.nvidia.com/cliqueId"}]
    cluster = [*nodes("n1"), gpu_class(), gpu_slice("n1", devices=devs), greedy, fits]
    started = time.perf_counter()
    out = run(cluster, [claim_pod("big", "clique-25"), claim_pod("small", "clique-4")])
    took = time.perf_counter() - started
    print(f"search budget of {SEARCH_STEPS:,} device tries spent in {took:.1f}s")
    assert out["big"].node is None and TIMED_OUT in (out["big"].reason or "")
    assert "1 timed out trying to allocate devices" in out["big"].reason
    assert out["small"].node == "n1" and len(out["small"].devices) == 4


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    tpl = template()
    tpl["spec"]["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 4},
        {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 2},
    ]}]
    out = run([*nodes("n1"), gpu_class(), gpu_slice("n1", 3), tpl], [claim_pod("p")])
    assert {d["request"] for d in out["p"].devices} == {"gpu/small"} and len(out["p"].devices) == 2


def test_shared_claim_pins_the_second_pod_to_the_first_pods_node() -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "shared", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    pods = []
    for name in ("a", "b"):
        p = pod_dict(name, cpu="20", memory="1Gi")
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        pods.append(p)
    out = run([*nodes("n1", "n2"), gpu_class(), gpu_slice("n1", 1), gpu_slice("n2", 1), claim], pods)
    assert out["a"].node == "n1"
    # b does not fit n1 (cpu); n2 is not where the claim is allocated
    assert out["b"].reason.startswith("0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node.")


# --- PreFilter's verdicts -------------------------------------------------------------------------------


def test_prefilter_messages_replace_the_histogram() -> None:
    cl = [*nodes("n1", "n2"), gpu_slice("n1", 1), template()]
    out = run(cl, [claim_pod("p")])
    assert out["p"].reason == (
        "0/2 nodes are available: request gpu: device class gpu.nvidia.com does not exist. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    # a missing claim keeps the pod out of the queue (PreEnqueue): kube-scheduler has no words for it
    out = run([*cl, gpu_class()], [claim_pod("q", tpl="missing")])
    assert out["q"].reason == (
        'kube-scheduler does not try it: pod "default/q": ResourceClaim not created yet (DynamicResources\' '
        "PreEnqueue keeps the pod out of the scheduling queue until that changes, so there is no FailedScheduling event)")
    named = pod_dict("r")
    named["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "nope"}]
    out = run([*cl, gpu_class()], [named])
    assert out["r"].reason.startswith('kube-scheduler does not try it: could not find ResourceClaim "default/nope" (')
    assert "preemption" not in (out["r"].reason or "")


def test_unsupported_cel_is_a_warning_never_a_match() -> None:
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", 1), template(selectors=["isURL('https://example.com')"])]
    out = run(cl, [claim_pod("p")])
    assert out["p"].phase == UNSCHEDULABLE
    assert [w.code for w in out["p"].warnings] == ["dra"] and "isURL" in out["p"].warnings[0].message


# --- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "where", "words"),
    [
        (lambda d: d.__setitem__("spec", {"selectors": [{"cel": {"expression": "device.driver =="}}]}),
         "DeviceClass gpu.nvidia.com: spec.selectors[0].cel.expression", "compilation failed"),
        (lambda d: d.__setitem__("spec", {"selectors": [{"cel": {"expression": "cel.bind(1, 2, true)"}}]}),
         "DeviceClass gpu.nvidia.com: spec.selectors[0].cel.expression",
         "cel.bind() variable names must be simple identifiers"),
    ],
)
def test_malformed_cel_is_exit_2(mutate: Any, where: str, words: str) -> None:
    cls = gpu_class()
    mutate(cls)
    with pytest.raises(InputError) as err:
        run([*nodes("n1"), cls], [claim_pod("p")])
    assert where in str(err.value) and words in str(err.value)


def test_duplicate_device_names_in_a_slice() -> None:
    s = gpu_slice("n1", 2)
    s["spec"]["devices"][1]["name"] = "gpu-0"
    with pytest.raises(InputError) as err:
        run([*nodes("n1"), s], [])
    assert "ResourceSlice n1-gpu.nvidia.com-abcde: spec.devices[1].name" in str(err.value)
    assert "Duplicate value: 'gpu-0'" in str(err.value)


def test_api_limits() -> None:
    bad_count = template(count=0)
    with pytest.raises(InputError, match=r"spec.spec.devices.requests\[0\].exactly.count.*must be greater than zero"):
        run([*nodes("n1"), gpu_class(), bad_count], [])
    too_many = gpu_slice("n1", 129)
    with pytest.raises(InputError, match=r"spec.devices.*Too many: 129: must have at most 128"):
        run([*nodes("n1"), too_many], [])
    both = gpu_slice("n1", 1)
    both["spec"]["allNodes"] = True
    with pytest.raises(InputError, match="exactly one of `nodeName`"):
        run([*nodes("n1"), both], [])
    all_count = template(count=2, allocationMode="All")
    with pytest.raises(InputError, match="must not be specified when allocationMode is 'All'"):
        run([*nodes("n1"), gpu_class(), all_count], [])


# --- NVIDIA's DRA driver: generated slices ---------------------------------------------------------------


def test_generated_slices_of_a_catalog_type_are_valid_and_selectable() -> None:
    """A p4de node's slice as the driver publishes it: 8 A100 80GB devices the gpu.nvidia.com class selects;
    in MIG mode (all-1g.10gb) 56 MIG devices the mig.nvidia.com class selects, with parentUUID and profile."""
    from kgpu.catalog.dra import device_classes, node_slices

    whole = node_slices("ip-10-0-1-5.ec2.internal", "a100", 8, 81920)
    assert [d["name"] for d in whole[0]["spec"]["devices"]] == [f"gpu-{i}" for i in range(8)]
    attrs = whole[0]["spec"]["devices"][0]["attributes"]
    assert attrs["productName"] == {"string": "NVIDIA A100-SXM4-80GB"} and attrs["cudaComputeCapability"] == {"version": "8.0.0"}
    tpl = template(selectors=["device.attributes['gpu.nvidia.com'].architecture == 'Ampere' && "
                              "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) == 0"])
    out = run([*nodes("ip-10-0-1-5.ec2.internal"), *device_classes(), *whole, tpl], [claim_pod("p")])
    assert out["p"].devices[0]["device"] == "gpu-0"
    mig = node_slices("ip-10-0-1-5.ec2.internal", "a100", 8, 81920, mig={"1g.10gb": 7})
    devices = mig[0]["spec"]["devices"]
    assert len(devices) == 56 and devices[0]["name"] == "gpu-0-mig-19-0-1"
    assert devices[0]["attributes"]["parentUUID"] == attrs["uuid"]
    mig_tpl = template(selectors=["device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"], count=2)
    mig_tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "mig.nvidia.com"
    out = run([*nodes("ip-10-0-1-5.ec2.internal"), *device_classes(), *mig, mig_tpl], [claim_pod("m")])
    assert [d["device"] for d in out["m"].devices] == ["gpu-0-mig-19-0-1", "gpu-0-mig-19-1-1"]
    # the whole-GPU class does not select MIG devices
    out = run([*nodes("ip-10-0-1-5.ec2.internal"), *device_classes(), *mig, template()], [claim_pod("g")])
    assert out["g"].phase == UNSCHEDULABLE


def test_the_node_lane_agrees_with_filtering_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heap of a class of pods with their own claims places every pod where filtering every node and
    taking the best-scored one does (seeded: mixed GPU counts, nodes of different sizes)."""
    import random

    import kgpu.sim.scheduler.plugins.dra_place as dra_mod

    rng = random.Random(7)
    cl: list[dict[str, Any]] = [gpu_class(), template("one", 1), template("two", 2), template("four", 4)]
    for i in range(12):
        n = node_dict(f"n{i}", cpu=str(rng.choice((8, 16, 32))), memory="128Gi")
        cl += [n, gpu_slice(f"n{i}", rng.choice((2, 4, 8)))]
    work = [claim_pod(f"p{k}", tpl=rng.choice(("one", "two", "four"))) for k in range(40)]
    for k, p in enumerate(work):
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(rng.choice((1, 2, 4)))
        p["metadata"]["name"] = f"p{k}"
    fast = run(cl, copy.deepcopy(work))
    monkeypatch.setattr(dra_mod, "_lane_ok", lambda *a: False)
    exact = run(cl, copy.deepcopy(work))
    assert {k: (v.node, v.devices) for k, v in fast.items()} == {k: (v.node, v.devices) for k, v in exact.items()}
    assert sum(1 for v in fast.values() if v.phase == UNSCHEDULABLE) > 0  # the cluster fills up


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_node_lane_agrees_when_scores_rise_and_tie(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """The lane keeps stale heap entries as upper bounds and scores them again on top; binds that can raise
    a node's score (BalancedAllocation after a pod that evens cpu and memory out) push it again, and equal
    scores go to the node first by name, not by input order. Pods of other kinds, with and without claims,
    bind in between. Every placement and device equals filtering every node."""
    import random

    import kgpu.sim.scheduler.plugins.dra_place as dra_mod
    from kgpu.sim.scheduler.scheduler import Scheduler

    rng = random.Random(seed)
    cl: list[dict[str, Any]] = [gpu_class(), template("one", 1), template("two", 2)]
    names = [f"gpu-{rng.randrange(10**6):06d}" for _ in range(16)]  # input order is not name order
    for name in dict.fromkeys(names):
        size = rng.choice(((16, "64Gi"), (16, "64Gi"), (64, "128Gi"), (8, "256Gi")))  # ties among equals
        cl += [node_dict(name, cpu=str(size[0]), memory=size[1]), gpu_slice(name, rng.choice((4, 8)))]
    work = []
    for k in range(120):
        cpu, memory = rng.choice((("1", "1Gi"), ("1", "24Gi"), ("6", "2Gi"), ("2", "8Gi")))
        doc = claim_pod(f"p{k}", tpl=rng.choice(("one", "two"))) if rng.random() < 0.8 else pod_dict(f"p{k}")
        doc["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": memory}
        work.append(doc)
    rises = []
    real = Scheduler._cannot_raise
    monkeypatch.setattr(Scheduler, "_cannot_raise", lambda self, *a: rises.append(not real(self, *a)) or not rises[-1])
    fast = run(cl, copy.deepcopy(work))
    assert any(rises) and not all(rises)  # both kinds of bind happened
    monkeypatch.setattr(dra_mod, "_lane_ok", lambda *a: False)
    exact = run(cl, copy.deepcopy(work))
    assert {k: (v.node, v.devices) for k, v in fast.items()} == {k: (v.node, v.devices) for k, v in exact.items()}
    assert sum(1 for v in fast.values() if v.phase == UNSCHEDULABLE) > 0  # the cluster fills up


def test_the_lane_takes_a_node_whose_score_rose_since_its_last_turn() -> None:
    """A bind can raise a node's score by one (LeastAllocated falls less than BalancedAllocation rounds up):
    the lane must see it. node-a scores 118 for the claim pods and node-b 119; node-c (one GPU) takes the
    first claim pod; a pod pinned to node-a makes it 119 (cpu 1200m of 4, memory 80.25Gi of 101Gi); the
    second claim pod ties at 119 and goes to node-a, first by name (kgpu.sim.scheduler.scheduler._score's figures)."""
    cl: list[dict[str, Any]] = [gpu_class(), template("one", 1)]
    for name, cpu, memory, gpus in (("node-a", "4", "101Gi", 2), ("node-b", "4", "101Gi", 2), ("node-c", "64", "256Gi", 1)):
        cl += [node_dict(name, cpu=cpu, memory=memory, labels={"kubernetes.io/hostname": name}), gpu_slice(name, gpus)]
    for name, node, cpu in (("used-a", "node-a", "700m"), ("used-b", "node-b", "100m")):
        cl.append(pod_dict(name, cpu=cpu, memory="80Gi", node_name=node, phase="Running"))
    work = [claim_pod("first", tpl="one"),
            pod_dict("pinned", cpu="500m", memory="256Mi", node_selector={"kubernetes.io/hostname": "node-a"}),
            claim_pod("second", tpl="one")]
    for doc in (work[0], work[2]):
        doc["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "500m", "memory": "1Gi"}
    out = run(cl, work)
    assert [out[n].node for n in ("first", "pinned", "second")] == ["node-c", "node-a", "node-a"]


def test_cli_wide_shows_devices_and_exit_codes(tmp_path: Any) -> None:
    """`kgpu simulate -o wide` has a DEVICES column; an unschedulable DRA pod exits 1, malformed CEL exits 2
    naming the object and field."""
    import yaml
    from click.testing import CliRunner

    from kgpu.cli.main import cli

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([*nodes("gpu-node-1"), gpu_class(), gpu_slice("gpu-node-1", 1), template()]))
    work = tmp_path / "pods.yaml"
    work.write_text(yaml.safe_dump_all([claim_pod("trainer-0"), claim_pod("trainer-1")]))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(cluster), "-w", str(work), "-o", "wide"])
    assert res.exit_code == 1, res.output
    lines = res.output.splitlines()
    assert "DEVICES" in lines[0]
    assert any("trainer-0" in ln and "gpu-0" in ln for ln in lines)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all([*nodes("gpu-node-1"), gpu_class(expr="device.driver ==")]))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(bad), "-w", str(work)])
    assert res.exit_code == 2
    assert "DeviceClass gpu.nvidia.com: spec.selectors[0].cel.expression" in res.output


def allocated_claim(name: str, node: str, device: str, *, pod: str = "") -> dict[str, Any]:
    """A claim as `kubectl get resourceclaim -o json` shows it once the scheduler allocated it."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": "5d3c0a2e-1f4b-4c5e-9a1d-7b2e3f4a5b6c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": "0a1b"}] if pod else [],
        },
    }


def test_claims_read_allocated_hold_their_devices_and_pin_their_pods() -> None:
    """From a cluster: a running pod's allocated claim keeps gpu-0 taken; a pending pod whose claim is
    allocated to n2 can only go to n2."""
    cl = [*nodes("n1", "n2"), gpu_class(), gpu_slice("n1", 2), gpu_slice("n2", 1), template(),
          allocated_claim("running-gpu", "n1", "gpu-0", pod="running"), allocated_claim("pinned", "n2", "gpu-0")]
    pinned = pod_dict("waiting", cpu="1", memory="1Gi")
    pinned["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "pinned"}]
    out = run(cl, [claim_pod("new"), pinned])
    assert out["new"].node == "n1" and out["new"].devices[0]["device"] == "gpu-1"
    assert out["waiting"].node == "n2"
    assert out["waiting"].devices == [{"claim": "pinned", "request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]


def test_admin_access_takes_devices_in_use() -> None:
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", 1), template(),
          allocated_claim("running-gpu", "n1", "gpu-0", pod="running"), template("monitor", adminAccess=True)]
    out = run(cl, [claim_pod("user"), claim_pod("dcgm", tpl="monitor")])
    assert out["user"].phase == UNSCHEDULABLE
    assert out["dcgm"].devices == [{"claim": "dcgm-gpu", "request": "gpu", "driver": DRIVER, "pool": "n1",
                                    "device": "gpu-0", "adminAccess": True}]


def test_all_nodes_slices_and_incomplete_pools_for_exact_count() -> None:
    """A network-attached pool (allNodes) serves every node; an incomplete pool still serves ExactCount."""
    net = gpu_slice("fabric", 2, count=2, name="fabric-0")
    del net["spec"]["nodeName"]
    net["spec"]["allNodes"] = True
    out = run([*nodes("n1", "n2"), gpu_class(), net, template(count=2)], [claim_pod("p")])
    assert out["p"].phase == SCHEDULED and [d["pool"] for d in out["p"].devices] == ["fabric", "fabric"]


def test_kubectl_json_list_and_old_api_versions() -> None:
    """A `kubectl get -o json` List is read like YAML; a v1beta1 object is ignored with a warning."""
    import json

    from kgpu.model.load import parse_text

    old = gpu_class()
    old["apiVersion"] = "resource.k8s.io/v1beta1"
    old["metadata"]["name"] = "old.nvidia.com"
    items = [*nodes("n1"), gpu_class(), old, gpu_slice("n1", 1), template(), claim_pod("p")]
    objs = parse_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode(), "cluster.json")
    result = simulate(objs)
    assert result.placements[0].devices[0]["device"] == "gpu-0"
    assert any("DeviceClass old.nvidia.com: apiVersion 'resource.k8s.io/v1beta1' ignored" in w for w in result.warnings)


def test_cel_runtime_error_aborts_only_where_the_allocator_meets_it() -> None:
    """A selector that reads an attribute some devices lack: the first device matches and the pod is placed;
    when the search must look at a device without it, the Filter is an error (the cycle aborts)."""
    devs = [gpu_device(0, "n1", clique="a"), gpu_device(1, "n1")]  # gpu-1 has no cliqueId
    tpl = template(selectors=["device.attributes['gpu.nvidia.com'].cliqueId == 'a'"])
    out = run([*nodes("n1"), gpu_class(), gpu_slice("n1", devices=devs), tpl], [claim_pod("p")])
    assert out["p"].devices[0]["device"] == "gpu-0"
    two = template(count=2, selectors=["device.attributes['gpu.nvidia.com'].cliqueId == 'a'"])
    out = run([*nodes("n1"), gpu_class(), gpu_slice("n1", devices=devs), two], [claim_pod("p")])
    assert out["p"].reason == ('running "DynamicResources" filter plugin: claim default/p-gpu: selector #0: CEL runtime error: '
                               "no such key: cliqueId")


def test_attribute_names_are_checked_even_after_alike_device_names() -> None:
    """Validation memos do not mix device names (DNS labels) with attribute names (C identifiers)."""
    good = gpu_slice("n1", 1)
    bad = gpu_slice("n2", 1)
    bad["spec"]["devices"][0]["attributes"]["gpu-0"] = {"string": "x"}
    with pytest.raises(InputError, match=r"attributes\[gpu-0\].*C identifier"):
        run([*nodes("n1", "n2"), good, bad], [])


def test_a_pod_whose_claims_are_all_not_needed_has_nothing_to_deallocate() -> None:
    """Every claim of the pod intentionally not created (its status names none): PreFilter finds no claim, so
    DynamicResources' PostFilter says "no new claims to deallocate" when another filter rejects every node (as
    the real plugin does; the whole-message DRA differential found kgpu saying "still not schedulable")."""
    cl = [*nodes("n1", "n2"), gpu_slice("n1", 1), template(), gpu_class()]
    p = claim_pod("p", node_selector={"pool": "none"})
    p["status"] = {"phase": "Pending", "resourceClaimStatuses": [{"name": "gpu"}]}
    out = run(cl, [p])
    assert out["p"].reason == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
