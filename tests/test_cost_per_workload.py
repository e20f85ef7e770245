"""Cost per workload and per namespace (kgpu.sim.workload_cost, the "Cost per workload" section of plan and
simulate): a GPU node's price divided by the GPUs each pod holds, any other node's by its dominant requested
resource, the rest idle; the workloads plus idle are the priced nodes' total to the micro-dollar, on the
repository's examples, every built-in template and random clusters."""

from __future__ import annotations

import json
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import node_dict, pod_dict
from kgpu.cli import cost_view
from kgpu.cli.main import cli
from kgpu.model.load import parse_documents
from kgpu.model.profile import TEMPLATES, builtin_profile, parse_profile
from kgpu.sim.plan import plan
from kgpu.sim.provisioners.pools import catalog_for
from kgpu.sim.simulate import UNSCHEDULABLE, simulate
from kgpu.sim.workload_cost import MICRO, WorkloadCost, apportion, split, workload_of
from test_sharing import gpu_pod, karpenter_pool, profile_dict, time_slicing

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        resources.files("kgpu.cli").joinpath("schemas", f"{name}.schema.json").read_text()
    )
    return data


def validate(name: str, instance: Any) -> None:
    jsonschema.Draft202012Validator(
        schema(name), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(instance)


def validate_part(name: str, instance: Any) -> None:
    """``instance`` against one definition of the plan schema."""
    defs = schema("plan")["$defs"]
    jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": defs}).validate(instance)


def assert_adds_up(cost: WorkloadCost) -> None:
    """The invariant: workloads + idle = priced nodes, for new and existing nodes apart; namespaces sum their
    workloads; no figure is negative."""
    new = sum(s.new for s in cost.workloads.values())
    existing = sum(s.existing for s in cost.workloads.values())
    assert new + cost.idle_new == cost.nodes_new
    assert existing + cost.idle_existing == cost.nodes_existing
    assert (
        min([cost.idle_new, cost.idle_existing, *(s.total for s in cost.workloads.values())], default=0) >= 0
    )
    spaces = cost.namespaces()
    assert sum(s.total for _, s in spaces.values()) == new + existing
    assert sum(n for n, _ in spaces.values()) == len(cost.workloads)


def assert_json_adds_up(data: dict[str, Any]) -> None:
    """The same in the JSON: micro-dollar figures, so the sums are exact once rounded to six places."""

    def micros(v: float) -> int:
        return round(v * MICRO)

    for part in ("hourly", "new_nodes_hourly", "existing_nodes_hourly"):
        total = sum(micros(w[part]) for w in data["workloads"]) + micros(data["idle"][part])
        assert total == micros(data["nodes"][part]), part
        assert sum(micros(n[part]) for n in data["namespaces"]) == sum(
            micros(w[part]) for w in data["workloads"]
        )


def kgpu(*args: str) -> Any:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code in (0, 1), res.output
    return res


# --- the split ----------------------------------------------------------------------------------------------


def test_apportion_is_exact_and_within_one_micro_dollar():
    parts = {
        ("a", "Deployment", "x"): Fraction(1, 3),
        ("a", "Job", "y"): Fraction(1, 3),
        ("b", "Pod", "z"): Fraction(1, 7),
    }
    amounts, idle = apportion(1_000_000, parts)
    assert sum(amounts.values()) + idle == 1_000_000
    for key, share in parts.items():
        assert abs(amounts[key] - 1_000_000 * share) < 1
    # shares over the whole node (a node that shrank under its pods): all of it, nothing idle
    amounts, idle = apportion(999, {("a", "Pod", "p"): Fraction(3, 2), ("a", "Pod", "q"): Fraction(3, 2)})
    assert idle == 0 and sorted(amounts.values()) == [499, 500]


def _cluster(*docs: dict[str, Any]) -> Any:
    return parse_documents(list(docs), "test")


def test_cpu_node_is_divided_by_its_dominant_resource():
    """4 CPUs, 16Gi: A asks 2 CPUs and 1Gi, B 1 CPU and 8Gi; CPU is 3/4 requested, memory 9/16: CPU decides,
    A pays half the node, B a quarter, a quarter is idle."""
    objs = _cluster(
        node_dict("cpu-1", labels={"node.kubernetes.io/instance-type": "m5.xlarge"}),
        pod_dict("a", cpu="2", memory="1Gi", node_name="cpu-1", phase="Running"),
        pod_dict("b", cpu="1", memory="8Gi", node_name="cpu-1", phase="Running"),
    )
    result = simulate(objs)
    cost = split(result.nodes, [], lambda n: 0.192)
    by = {name: s for (_, _, name), s in cost.workloads.items()}
    assert (by["a"].existing, by["b"].existing, cost.idle_existing) == (96_000, 48_000, 48_000)
    assert_adds_up(cost)
    # memory dominant once B asks 14Gi: 15/16 of memory against 3/4 of CPU
    objs = _cluster(
        node_dict("cpu-1"),
        pod_dict("a", cpu="2", memory="1Gi", node_name="cpu-1", phase="Running"),
        pod_dict("b", cpu="1", memory="14Gi", node_name="cpu-1", phase="Running"),
    )
    cost = split(simulate(objs).nodes, [], lambda n: 1.6)
    by = {name: s for (_, _, name), s in cost.workloads.items()}
    assert (by["a"].existing, by["b"].existing, cost.idle_existing) == (100_000, 1_400_000, 100_000)


def test_gpu_node_is_divided_by_gpus_and_cpu_pods_pay_nothing():
    """A 4-GPU g5.12xlarge ($5.672/h): a pod with 1 GPU pays a quarter, one with 2 half; the node-exporter-like
    CPU pod pays nothing (the node is bought for its GPUs); one GPU is idle."""
    labels = {"node.kubernetes.io/instance-type": "g5.12xlarge"}
    objs = _cluster(
        node_dict("gpu-1", cpu="48", memory="192Gi", gpus=4, labels=labels),
        pod_dict("one", gpus=1, node_name="gpu-1", phase="Running"),
        pod_dict("two", gpus=2, node_name="gpu-1", phase="Running"),
        pod_dict("exporter", cpu="40", memory="100Gi", node_name="gpu-1", phase="Running"),
    )
    cost = split(simulate(objs).nodes, [], lambda n: 5.672)
    by = {name: s for (_, _, name), s in cost.workloads.items()}
    assert (by["one"].existing, by["two"].existing, by["exporter"].existing) == (1_418_000, 2_836_000, 0)
    assert cost.idle_existing == 1_418_000 and cost.gpu_nodes == 1
    assert (by["one"].gpus, by["two"].gpus) == (1, 2)


def test_unpriced_nodes_are_counted_and_pay_nothing():
    objs = _cluster(
        node_dict("onprem-1", gpus=2), pod_dict("train", gpus=1, node_name="onprem-1", phase="Running")
    )
    cost = split(simulate(objs).nodes, [], lambda n: None)
    share = next(iter(cost.workloads.values()))
    assert (share.pods, share.unpriced_pods, share.total, cost.unpriced_nodes, cost.priced_nodes) == (
        1,
        1,
        0,
        1,
        0,
    )
    data = cost.as_dict()
    assert data["nodes"]["unpriced"] == 1 and data["workloads"][0]["unpriced_pods"] == 1


def test_mig_slices_of_an_unknown_model_are_equal_parts_of_the_gpus():
    """GFD names a GPU kgpu has no MIG table for: its 7 advertised slices share the one GPU equally."""
    labels = {
        "nvidia.com/gpu.count": "1",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.product": "NVIDIA-X1",
    }
    doc = node_dict("mig-1", labels=labels)
    doc["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7"
    objs = _cluster(doc, *[_mig_pod(f"p{i}", node_name="mig-1") for i in range(2)])
    cost = split(simulate(objs).nodes, [], lambda n: 7.0)
    assert sorted(s.existing for s in cost.workloads.values()) == [1_000_000, 1_000_000]
    assert cost.idle_existing == 5_000_000


def _mig_pod(name: str, node_name: str) -> dict[str, Any]:
    doc = pod_dict(name, node_name=node_name, phase="Running")
    doc["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.10gb": 1}
    return doc


# --- workloads, as kubectl shows them ---------------------------------------------------------------------


def _owned_pod(
    name: str,
    owner_kind: str,
    owner: str,
    *,
    labels: dict[str, str] | None = None,
    namespace: str = "ml",
    node: str = "gpu-1",
    gpus: int = 1,
) -> dict[str, Any]:
    doc = pod_dict(
        name,
        gpus=gpus,
        node_name=node,
        phase="Running",
        namespace=namespace,
        labels=labels,
        tolerations=[GPU_TOL],
    )
    doc["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1" if owner_kind != "Job" else "batch/v1",
            "kind": owner_kind,
            "name": owner,
            "uid": f"uid-{owner}",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return doc


def test_pods_roll_up_to_their_deployment_cronjob_statefulset_and_raycluster():
    """As `kubectl get pods -o json` has them: a ReplicaSet's pods are its Deployment's (from the ReplicaSet
    read, or the pod-template-hash in its name), a CronJob's Job's pods the CronJob's; a StatefulSet, a
    RayCluster and a bare pod are themselves."""
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "api-6d4cf56db6",
            "namespace": "ml",
            "uid": "uid-api-6d4cf56db6",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "api-server",
                    "uid": "uid-api-server",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nightly-29061440",
            "namespace": "ml",
            "uid": "uid-nightly-29061440",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": "nightly",
                    "uid": "uid-nightly",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "parallelism": 0,
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}},
        },
    }
    objs = _cluster(
        node_dict(
            "gpu-1",
            cpu="96",
            memory="1100Gi",
            gpus=8,
            labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
        ),
        rs,
        job,
        _owned_pod(
            "api-6d4cf56db6-x2x4z", "ReplicaSet", "api-6d4cf56db6", labels={"pod-template-hash": "6d4cf56db6"}
        ),
        _owned_pod(
            "web-7b9f8c6d5-abcde", "ReplicaSet", "web-7b9f8c6d5", labels={"pod-template-hash": "7b9f8c6d5"}
        ),
        _owned_pod("nightly-29061440-q7k2p", "Job", "nightly-29061440"),
        _owned_pod("db-0", "StatefulSet", "db"),
        _owned_pod("ray-head-abcde", "RayCluster", "ray", namespace="research"),
        pod_dict("debug", gpus=1, node_name="gpu-1", phase="Running", namespace="research"),
    )
    owners = {p.name: workload_of(p, objs.owned) for p in objs.pods}
    assert owners == {
        "api-6d4cf56db6-x2x4z": ("ml", "Deployment", "api-server"),
        "web-7b9f8c6d5-abcde": ("ml", "Deployment", "web"),
        "nightly-29061440-q7k2p": ("ml", "CronJob", "nightly"),
        "db-0": ("ml", "StatefulSet", "db"),
        "ray-head-abcde": ("research", "RayCluster", "ray"),
        "debug": ("research", "Pod", "debug"),
    }
    cost = split(simulate(objs).nodes, [], lambda n: 32.7726, owned=objs.owned)
    assert_adds_up(cost)
    spaces = cost.namespaces()
    assert spaces["ml"][0] == 4 and spaces["research"][0] == 2
    assert spaces["ml"][1].existing == 16_386_300  # four of the eight GPUs of $32.7726/h


# --- the examples, the templates -------------------------------------------------------------------------


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_template_adds_up_and_new_nodes_are_the_plans_cost(template: str):
    prof = builtin_profile(template)
    result = plan(prof)
    sim = result.simulation
    cost = split(
        sim.nodes,
        sim.new_nodes,
        lambda n: None,
        owned=result.owned,
        profile=prof,
        catalog=catalog_for(prof),
        pending=[p.pod for p in sim.placements if p.phase == UNSCHEDULABLE],
    )
    assert_adds_up(cost)
    assert cost.nodes_new == round(result.cost["total"] * MICRO)
    pods = sum(s.pods for s in cost.workloads.values())
    assert pods == sum(len(st.pods) for st in sim.nodes)
    assert sum(s.pending for s in cost.workloads.values()) == len(sim.unschedulable)


@pytest.mark.parametrize(
    "args",
    [
        ("plan",),
        ("plan", "-f", "src/kgpu/model/templates/kuberay.yaml"),
        ("plan", "-f", "src/kgpu/model/templates/eks-eksctl.yaml", "-w", "examples/workloads"),
    ],
)
def test_plan_json_adds_up_and_matches_the_cost_block(args: tuple[str, ...]):
    data = json.loads(kgpu(*args, "-o", "json").stdout)
    validate("plan", data)
    wc = data["workload_cost"]
    assert_json_adds_up(wc)
    assert wc["nodes"]["new_nodes_hourly"] == pytest.approx(data["cost"]["total"], abs=1e-6)
    if not data["cost"].get("unpriced_baseline_nodes"):  # the node view prices the baseline as the cost does
        assert wc["nodes"]["existing_nodes_hourly"] == pytest.approx(data["cost"]["baseline"], abs=1e-4)


def test_simulate_examples_json_adds_up_to_the_node_views_prices():
    res = kgpu("simulate", "-c", str(EXAMPLES / "cluster"), "-w", str(EXAMPLES / "workloads"), "-o", "json")
    data = json.loads(res.stdout)
    validate("simulate", data)
    wc = data["workload_cost"]
    assert_json_adds_up(wc)
    # m5.xlarge + c5.2xlarge + g4dn.12xlarge + 2 x g5.12xlarge + p3.8xlarge on-demand in us-west-2, as the table
    assert wc["nodes"]["hourly"] == 28.028 and wc["nodes"]["priced"] == 6
    vector_add = next(w for w in wc["workloads"] if w["name"] == "cuda-vector-add")
    assert (vector_add["kind"], vector_add["pods"], vector_add["gpus"]) == ("Deployment", 10, 10)
    assert wc["workloads"][0] == vector_add  # most expensive first


def test_shared_gpu_pods_pay_what_the_shared_gpu_split_says():
    """Time-sliced pools: each pod's share of the per-workload table is its shared_gpus price (the same rule)."""
    prof = parse_profile(
        profile_dict(
            karpenter_pool("infer", ["g5.xlarge"], time_slicing(4)),
            karpenter_pool("notebooks", ["g5.2xlarge"], time_slicing(10, renameByDefault=True)),
        )
    )
    work = parse_documents(
        [gpu_pod(f"chat-{i}") for i in range(3)]
        + [gpu_pod(f"nb-{i}", "nvidia.com/gpu.shared") for i in range(4)],
        "pods.yaml",
    )
    result = plan(prof, work)
    sim = result.simulation
    cost = split(sim.nodes, sim.new_nodes, lambda n: None, profile=prof, catalog=catalog_for(prof))
    assert_adds_up(cost)
    shared = {pod: price for e in sim.extra["shared_gpus"] for pod, price in e["pods"].items()}
    assert len(shared) == 7
    for (ns, _, name), share in cost.workloads.items():
        if f"{ns}/{name}" in shared:
            assert abs(share.new / MICRO - shared[f"{ns}/{name}"]) <= 1e-6
    idle = sum(e["idle"] for e in sim.extra["shared_gpus"])
    assert abs(cost.idle_new / MICRO - idle) <= 1e-5


# --- random clusters -----------------------------------------------------------------------------------------

TYPES = {  # instance type -> (GPUs, CPUs, memory)
    "m5.xlarge": (0, "4", "16Gi"),
    "c5.2xlarge": (0, "8", "16Gi"),
    "g5.xlarge": (1, "4", "16Gi"),
    "g5.12xlarge": (4, "48", "192Gi"),
    "p4d.24xlarge": (8, "96", "1152Gi"),
    "x9.unknown": (2, "8", "32Gi"),
}


@st.composite
def clusters(draw: Any) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
    docs: list[dict[str, Any]] = []
    prices: dict[str, float | None] = {}
    for i in range(draw(st.integers(1, 6))):
        itype = draw(st.sampled_from(sorted(TYPES)))
        gpus, cpu, mem = TYPES[itype]
        name = f"ip-10-0-{i}-1.us-west-2.compute.internal"
        labels = {"node.kubernetes.io/instance-type": itype, "topology.kubernetes.io/region": "us-west-2"}
        doc = node_dict(name, cpu=cpu, memory=mem, gpus=gpus, labels=labels)
        replicas = draw(st.sampled_from([1, 1, 4])) if gpus else 1
        if replicas > 1:  # time-slicing as GFD labels it
            labels.update(
                {
                    "nvidia.com/gpu.replicas": str(replicas),
                    "nvidia.com/gpu.sharing-strategy": "time-slicing",
                    "nvidia.com/gpu.count": str(gpus),
                }
            )
            doc["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus * replicas)
        docs.append(doc)
        prices[name] = (
            None if itype == "x9.unknown" else draw(st.sampled_from([0.192, 1.006, 5.672, 32.7726]))
        )
    for j in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["Deployment", "StatefulSet", "Job", "Pod"]))
        ns = draw(st.sampled_from(["ml", "serving", "default"]))
        gpus = draw(st.integers(0, 2))
        cpu = draw(st.sampled_from(["100m", "500m", "2", "6"]))
        mem = draw(st.sampled_from(["128Mi", "2Gi", "12Gi"]))
        template = pod_dict("t", cpu=cpu, memory=mem, gpus=gpus, tolerations=[GPU_TOL])
        if kind == "Pod":
            docs.append({**template, "metadata": {"name": f"pod-{j}", "namespace": ns}})
            continue
        spec: dict[str, Any] = {
            "template": {"metadata": {"labels": {"app": f"w{j}"}}, "spec": template["spec"]}
        }
        if kind == "Job":
            spec["parallelism"] = draw(st.integers(1, 4))
            spec["template"]["spec"]["restartPolicy"] = "Never"
        else:
            spec["replicas"] = draw(st.integers(1, 4))
            spec["selector"] = {"matchLabels": {"app": f"w{j}"}}
        docs.append(
            {
                "apiVersion": "batch/v1" if kind == "Job" else "apps/v1",
                "kind": kind,
                "metadata": {"name": f"w{j}", "namespace": ns},
                "spec": spec,
            }
        )
    return docs, prices


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_random_clusters_add_up(cluster: tuple[list[dict[str, Any]], dict[str, float | None]]):
    docs, prices = cluster
    objs = parse_documents(docs, "cluster.yaml")
    result = simulate(objs)
    cost = split(
        result.nodes,
        [],
        lambda n: prices[n.name],
        owned=objs.owned,
        pending=[p.pod for p in result.placements if p.phase == UNSCHEDULABLE],
    )
    assert_adds_up(cost)
    priced = {n for n, p in prices.items() if p is not None}
    assert cost.nodes_existing == sum(round(prices[n] * MICRO) for n in priced)  # type: ignore[operator]
    placed = sum(1 for p in result.placements if p.node)
    assert sum(s.pods for s in cost.workloads.values()) == placed
    for share in cost.workloads.values():  # a workload never pays more than the nodes it runs on
        assert share.total <= sum(round((prices[n] or 0) * MICRO) for n in share.nodes)
    assert_json_adds_up(cost.as_dict())
    validate_part("workload_cost", cost.as_dict())


# --- the table, --by, the report ------------------------------------------------------------------------------


def _many_workloads(tmp_path: Path) -> Path:
    """Fourteen one-GPU Deployments in two namespaces."""
    docs = []
    for i in range(14):
        template = pod_dict("t", gpus=1, cpu="1", memory="1Gi", tolerations=[GPU_TOL])
        docs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"model-{i:02d}", "namespace": "team-a" if i % 2 else "team-b"},
                "spec": {
                    "replicas": 1 + i % 3,
                    "selector": {"matchLabels": {"app": f"m{i}"}},
                    "template": {"metadata": {"labels": {"app": f"m{i}"}}, "spec": template["spec"]},
                },
            }
        )
    path = tmp_path / "work.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _section(out: str) -> list[str]:
    lines = out.split(cost_view.TITLE, 1)[1].splitlines()
    return lines[: next(i for i, ln in enumerate(lines) if ln.startswith("  ("))]


def test_table_shows_the_top_workloads_then_the_rest_summed(tmp_path: Path):
    work = _many_workloads(tmp_path)
    out = kgpu("plan", "-w", str(work), "--color", "never").stdout
    rows = _section(out)[3:]
    data = json.loads(kgpu("plan", "-w", str(work), "-o", "json").stdout)["workload_cost"]
    workloads = data["workloads"]
    assert len(workloads) > cost_view.TOP + 1
    shown = [r.split()[1] for r in rows[: cost_view.TOP]]
    assert shown == [f"{w['kind']}/{w['name']}" for w in workloads[: cost_view.TOP]]
    rest = workloads[cost_view.TOP :]
    more = rows[cost_view.TOP]
    assert f"{len(rest)} more workloads" in more
    assert f"${sum(w['hourly'] for w in rest):,.4f}" in more
    assert rows[-2].split()[0] == "idle" and rows[-1].split()[0] == "total"
    assert f"${data['nodes']['hourly']:,.4f}" in rows[-1]
    wide = _section(kgpu("plan", "-w", str(work), "-o", "wide", "--color", "never").stdout)
    assert len(wide) == 3 + len(workloads) + 2 and "NEW NODES $/H" in wide[1]


def test_by_namespace(tmp_path: Path):
    work = _many_workloads(tmp_path)
    out = kgpu("plan", "-w", str(work), "--by", "namespace", "--color", "never").stdout
    assert "Cost per workload (by namespace)" in out
    rows = _section(out)[3:]
    data = json.loads(kgpu("plan", "-w", str(work), "-o", "json").stdout)["workload_cost"]
    names = [n["namespace"] for n in data["namespaces"]]
    assert [r.split()[0] for r in rows[: len(names)]] == names
    team_a = next(n for n in data["namespaces"] if n["namespace"] == "team-a")
    assert team_a["workloads"] == 7
    assert f"${team_a['hourly']:,.4f}" in rows[names.index("team-a")]
    assert CliRunner().invoke(cli, ["plan", "--by", "pod"]).exit_code == 2


def test_simulate_by_namespace_and_no_headers():
    args = ("simulate", "-c", str(EXAMPLES / "cluster"), "-w", str(EXAMPLES / "workloads"))
    out = kgpu(*args, "--by", "namespace", "--color", "never").stdout
    rows = _section(out)[3:]
    assert [r.split()[0] for r in rows[:3]] == ["default", "ml", "kube-system"]
    assert "Cost per workload" not in kgpu(*args, "--no-headers").stdout


def test_report_has_the_cost_per_workload_table(tmp_path: Path):
    path = tmp_path / "plan.html"
    kgpu("plan", "--report", str(path), "-o", "json")
    html = path.read_text()
    table = html.split('<table class="workload-cost">', 1)[1].split("</table>", 1)[0]
    data = json.loads(kgpu("plan", "-o", "json").stdout)["workload_cost"]
    for w in data["workloads"]:
        assert f"<td>{w['kind']}/{w['name']}</td>" in table
    assert "<td>idle</td>" in table and f"${data['nodes']['hourly']:,.4f}" in table
    assert "Cost per workload" in html


@given(
    total=st.integers(0, 10**9),
    parts=st.lists(st.tuples(st.integers(0, 50), st.integers(1, 60)), min_size=1, max_size=12),
)
def test_apportion_property(total: int, parts: list[tuple[int, int]]):
    """Any shares, over or under the whole node: exact sum, each figure within one micro-dollar of its exact
    value (after scaling), idle never negative."""
    shares = {("ns", "Deployment", f"w{i}"): Fraction(n, d) for i, (n, d) in enumerate(parts)}
    amounts, idle = apportion(total, shares)
    assert sum(amounts.values()) + idle == total and idle >= 0
    whole = sum(shares.values(), Fraction(0))
    scale = 1 / whole if whole > 1 else Fraction(1)
    for key, share in shares.items():
        assert abs(amounts[key] - total * share * scale) < 1


def test_a_workload_on_nodes_without_a_price_reads_n_a_not_zero(tmp_path: Path) -> None:
    """The TKE template's super nodes have no packaged price: its workloads, idle and the total read "n/a"
    (a $0.0000 would read as free), and so does the plan's new-node cost; JSON keeps the numbers and counts."""
    prof = tmp_path / "kgpu.yaml"
    assert CliRunner().invoke(cli, ["init", "-t", "tke-supernode", "-f", str(prof)]).exit_code == 0
    res = CliRunner().invoke(cli, ["plan", "-f", str(prof)])
    section = res.stdout.split("Cost per workload")[1].split("(each pod pays")[0]
    rows = [ln for ln in section.splitlines()[3:] if ln.strip()]
    assert rows and all(ln.split()[-2:] == ["n/a", "n/a"] for ln in rows), section
    assert "$0.0000" not in section
    assert "new nodes        n/a: none has a price" in res.stdout
    data = json.loads(CliRunner().invoke(cli, ["plan", "-f", str(prof), "-o", "json"]).stdout)
    costs = data["workload_cost"]["workloads"]
    assert costs and all(w["hourly"] == 0 and w["unpriced_pods"] == w["pods"] for w in costs)
