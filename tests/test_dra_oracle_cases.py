"""DRA cases the differential against kube-scheduler's DynamicResources plugin (conformance/tests/
test_dra_differential.py, dra-oracle) found, pinned here without Go: each asserts what the real plugin and
structured allocator of Kubernetes 1.34 answered on the same objects."""

from __future__ import annotations

from typing import Any

from builders import node_dict, pod_dict
from kgpu.sim.simulate import UNSCHEDULABLE
from test_dra import DRIVER, claim_pod, gpu_class, gpu_device, gpu_slice, nodes, run, template

ERROR = 'running "DynamicResources" filter plugin: '


def shared_claim(name: str = "shared", **exactly: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **exactly}}]}}}


def claims_pod(name: str, *refs: dict[str, str], **kw: Any) -> dict[str, Any]:
    doc = pod_dict(name, cpu="1", memory="1Gi", **kw)
    doc["spec"]["resourceClaims"] = list(refs)
    return doc


def all_template(name: str = "all-gpus", constraint: str = "") -> dict[str, Any]:
    tpl = template(name, allocationMode="All")
    del tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
    if constraint:
        tpl["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": constraint}]
    return tpl


def test_the_allocator_speaks_before_a_claim_bound_elsewhere() -> None:
    """Filter runs the allocator for the claims still to allocate first; 'resourceclaim not available on
    the node' only where the allocator succeeded. Both nodes fail the two-GPU claim: both say so."""
    cl = [*nodes("n1", "n2"), gpu_class(), gpu_slice("n1", 1), gpu_slice("n2", 1), shared_claim(), template("two", count=2)]
    first = claims_pod("a", {"name": "gpu", "resourceClaimName": "shared"})
    both = claims_pod("b", {"name": "gpu", "resourceClaimName": "shared"}, {"name": "pair", "resourceClaimTemplateName": "two"})
    out = run(cl, [first, both])
    assert out["a"].node == "n1"
    assert out["b"].reason.startswith("0/2 nodes are available: 2 cannot allocate all claims.")
    one = [*cl[:-1], template("two", count=1)]  # n2 serves the template's claim, but the shared one is on n1
    out = run(one, [first, both])
    assert out["b"].reason.startswith("0/2 nodes are available: 1 cannot allocate all claims, "
                                      "1 resourceclaim not available on the node.")


def test_all_counts_its_devices_before_the_search_and_32_is_the_limit() -> None:
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", 40), all_template()]
    out = run(cl, [claim_pod("p", tpl="all-gpus")])
    assert out["p"].reason == ERROR + "claim default/p-gpu: number of requested devices 40 exceeds the claim limit of 32"
    big = [*nodes("n1"), gpu_class(), gpu_slice("n1", 40), template("many", count=33)]
    assert run(big, [claim_pod("p", tpl="many")])["p"].reason == (
        ERROR + "claim default/p-gpu: number of requested devices 33 exceeds the claim limit of 32")


def test_all_with_a_constraint_it_cannot_keep_is_an_error() -> None:
    devs = [gpu_device(0, "n1", clique="a"), gpu_device(1, "n1", clique="b")]
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", devices=devs), all_template(constraint="gpu.nvidia.com/cliqueId")]
    out = run(cl, [claim_pod("p", tpl="all-gpus")])
    assert out["p"].reason == (ERROR + "claim default/p-gpu, request gpu: cannot add device gpu.nvidia.com/n1/gpu-1 "
                                       "because a claim constraint would not be satisfied")


def test_a_device_taken_with_admin_access_is_in_use_for_the_pods_other_claims() -> None:
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", 1), template("monitor", adminAccess=True), template()]
    pod = claims_pod("p", {"name": "mon", "resourceClaimTemplateName": "monitor"},
                     {"name": "gpu", "resourceClaimTemplateName": "single-gpu"})
    out = run(cl, [pod])
    assert out["p"].phase == UNSCHEDULABLE
    assert out["p"].reason.startswith("0/1 nodes are available: 1 cannot allocate all claims.")


def test_an_allocation_from_a_node_selector_slice_is_pinned_by_that_selector() -> None:
    zone = "topology.kubernetes.io/zone"
    cl = nodes("a1", "b1")
    cl[0]["metadata"]["labels"][zone] = "us-east-1a"
    cl[1]["metadata"]["labels"][zone] = "us-east-1b"
    fabric = gpu_slice("fabric", 2, name="fabric-a")
    del fabric["spec"]["nodeName"]
    fabric["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": zone, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]}]}
    only_a = gpu_slice("a-fabric", 1, name="a-fabric")  # its pool's name sorts first
    del only_a["spec"]["nodeName"]
    only_a["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": zone, "operator": "In", "values": ["us-east-1a"]}]}]}
    first = claims_pod("first", {"name": "gpu", "resourceClaimName": "shared"}, node_selector={zone: "us-east-1a"})
    second = claims_pod("second", {"name": "gpu", "resourceClaimName": "shared"}, node_selector={zone: "us-east-1b"})
    # the shared claim's two devices: a-fabric's single device (zone a only) and one of fabric's
    out = run([*cl, gpu_class(), only_a, fabric, shared_claim(count=2)], [first, second])
    assert out["first"].node == "a1"
    assert out["second"].reason.startswith("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                                           "1 resourceclaim not available on the node.")
    wide = claims_pod("second", {"name": "gpu", "resourceClaimName": "shared"}, node_selector={zone: "us-east-1b"})
    out = run([*cl, gpu_class(), fabric, shared_claim(count=2)], [first, wide])
    assert out["second"].node == "b1"  # both devices from the slice that selects both zones


def test_cel_reads_an_absent_domain_as_an_empty_map() -> None:
    """A NIC has no gpu.nvidia.com attribute: the selector fails on the attribute's key, not the domain."""
    nic = gpu_slice("n1", devices=[{"name": "nic-0", "attributes": {"rdma": {"bool": True}}}])
    nic["spec"]["driver"] = "net.example.com"
    nic["metadata"]["name"] = "n1-net"
    any_class = gpu_class("anything", "true")
    tpl = template("t", selectors=["device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"])
    tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "anything"
    out = run([*nodes("n1"), any_class, nic, tpl], [claim_pod("p", tpl="t")])
    assert out["p"].reason == ERROR + "claim default/p-gpu: selector #0: CEL runtime error: no such key: profile"
    has = template("t", selectors=["has(device.attributes['gpu.nvidia.com'].profile)"])
    has["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "anything"
    out = run([*nodes("n1"), any_class, nic, has], [claim_pod("p", tpl="t")])
    assert out["p"].reason.startswith("0/1 nodes are available: 1 cannot allocate all claims.")


def test_a_device_in_use_is_skipped_before_its_selectors_are_evaluated() -> None:
    devs = [gpu_device(0, "n1"), gpu_device(1, "n1", clique="a")]  # gpu-0 has no cliqueId, and is in use
    held = shared_claim("held")
    held["status"] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
                                     "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                         {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    tpl = template(selectors=["device.attributes['gpu.nvidia.com'].cliqueId == 'a'"])
    out = run([*nodes("n1"), gpu_class(), gpu_slice("n1", devices=devs), held, tpl], [claim_pod("p")])
    assert out["p"].devices[0]["device"] == "gpu-1"


def test_an_error_on_any_node_aborts_even_where_another_node_serves_the_pod() -> None:
    """kube-scheduler filters every node; the allocator's error on one of them fails the cycle, though
    the other node would have served the pod."""
    good = gpu_slice("n1", devices=[gpu_device(0, "n1", clique="a")])
    bad = gpu_slice("n2", devices=[gpu_device(0, "n2")], name="n2-gpu")
    tpl = template(selectors=["device.attributes['gpu.nvidia.com'].cliqueId == 'a'"])
    out = run([*nodes("n1", "n2"), gpu_class(), good, bad, tpl], [claim_pod("p")])
    assert out["p"].reason == ERROR + "claim default/p-gpu: selector #0: CEL runtime error: no such key: cliqueId"


def test_match_attribute_compares_typed_values() -> None:
    devs = [gpu_device(0, "n1"), gpu_device(1, "n1")]
    devs[0]["attributes"]["rail"] = {"int": 1}
    devs[1]["attributes"]["rail"] = {"bool": True}
    tpl = template(count=2)
    tpl["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.nvidia.com/rail"}]
    out = run([*nodes("n1"), gpu_class(), gpu_slice("n1", devices=devs), tpl], [claim_pod("p")])
    assert out["p"].phase == UNSCHEDULABLE


def test_a_claim_not_created_does_not_inherit_nodes_dropped_for_its_twin() -> None:
    """Scenario 189313774: two pods of one spec, the second with a pod status saying its template's claim
    was not created (not needed). The first one's claim fails on the roomy node without devices, which the
    allocator can never serve for that claim; the second has no claim to allocate, so kube-scheduler puts it
    on that best-scored node all the same."""
    cl = [node_dict("roomy", cpu="64", memory="128Gi"), node_dict("small", cpu="8", memory="32Gi"),
          gpu_class(), gpu_slice("small", 2), template()]
    twin = claim_pod("twin")
    twin["status"] = {"phase": "Pending", "resourceClaimStatuses": [{"name": "gpu"}]}
    out = run(cl, [claim_pod("first"), twin])
    assert (out["first"].node, out["first"].devices[0]["device"]) == ("small", "gpu-0")
    assert (out["twin"].node, out["twin"].devices) == ("roomy", [])
