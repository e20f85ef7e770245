"""Shared GPUs in the node view, the cost split tables of plan and simulate, and the HTML report.

A plan over three Karpenter pools (g5.xlarge time-sliced 4 ways, g5.xlarge renamed to
``nvidia.com/gpu.shared`` with 10 replicas, p4d.24xlarge MIG ``all-balanced`` under the mixed strategy):
the node view shows each node's device resources and idle slices within 80 columns, the cost table is
what the JSON's ``shared_gpus`` says, and headless Chromium reads the same from the page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli import nodeview
from kgpu.cli.main import cli
from test_plan_report import run_chromium
from test_sharing import gpu_pod, karpenter_pool, profile_dict, time_slicing

MIG = {"mig": {"strategy": "mixed", "config": "all-balanced"}}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("shared")
    prof = profile_dict(
        karpenter_pool("infer", ["g5.xlarge"], time_slicing(4)),
        karpenter_pool("notebooks", ["g5.xlarge"], time_slicing(10, renameByDefault=True)),
        karpenter_pool("mig", ["p4d.24xlarge"], MIG),
    )
    pods = [gpu_pod(f"chat-{i}") for i in range(3)]
    pods += [gpu_pod(f"nb-{i}", "nvidia.com/gpu.shared") for i in range(3)]
    pods += [gpu_pod(f"embed-{i}", "nvidia.com/mig-1g.5gb") for i in range(5)]
    pods += [gpu_pod("train-0", "nvidia.com/mig-3g.20gb")]
    (d / "kgpu.yaml").write_text(yaml.safe_dump(prof))
    (d / "pods.yaml").write_text(yaml.safe_dump_all(pods))
    return str(d / "kgpu.yaml"), str(d / "pods.yaml")


def plan(files: tuple[str, str], *args: str) -> Any:
    res = CliRunner().invoke(cli, ["plan", "-f", files[0], "-w", files[1], "--color", "never", *args])
    assert res.exit_code == 0, res.output
    return res


def section(out: str, title: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index(title)
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_node_view_shows_slices_and_idle_slices_within_80_columns(files: tuple[str, str]) -> None:
    view = section(plan(files).stdout, "Nodes by pool (requests / allocatable)")
    assert max(len(ln) for ln in view) <= 80, "\n".join(view)
    text = "\n".join(view)
    # time-sliced 4 ways, 3 pods: one idle replica; the node's GPU bar counts devices
    node = view.index(next(ln for ln in view if ln.startswith(" +infer-1")))
    assert "3/4" in view[node]
    assert view[node + 1].split()[:5] == ["1", "idle", "gpu", "shared", "x4"] and view[node + 1].endswith("3/4")
    # renamed: the resource's name says shared
    assert re.search(r"^   7 idle +gpu\.shared x10 +\S+ 3/10$", text, re.M), text
    # MIG all-balanced on 8 A100s: 2x 1g.5gb, 1x 2g.10gb, 1x 3g.20gb per GPU
    assert re.search(r"^   11 idle +mig-1g\.5gb +\S+ 5/16$", text, re.M), text
    assert re.search(r"^   8 idle +mig-2g\.10gb +\S+ 0/8$", text, re.M), text
    assert re.search(r"^   7 idle +mig-3g\.20gb +\S+ 1/8$", text, re.M), text
    pool = next(ln for ln in view if ln.startswith("mig "))
    assert "6/32" in pool
    legend = view[view.index(next(ln for ln in view if ln.startswith("Bars:"))):]
    assert legend[1].startswith("+ new node, (xN) N alike nodes")
    assert legend[2] == nodeview.SLICES_LEGEND  # the prices' sources follow in the cost block


def test_cost_table_is_the_json_cost_split(files: tuple[str, str]) -> None:
    data = json.loads(plan(files, "-o", "json").stdout)
    entries = {e["config"]: e for e in data["shared_gpus"]}
    table = section(plan(files).stdout, nodeview.SHARED_TITLE)
    assert table[1].split() == ["CONFIG", "NODES", "GPUS", "SLICES", "PODS", "$/H", "IDLE", "$/H", "IDLE"]
    rows = {ln.split()[0]: ln.split() for ln in table[3:]}
    assert set(rows) == {"infer", "notebooks", "mig"}
    for name, e in entries.items():
        _, nodes, gpus, used, paid, idle, share = rows[name]
        assert (nodes, gpus) == ("1", str(e["gpus"]))
        devices = e["devices"].values()
        assert used == f"{sum(d['used'] for d in devices)}/{sum(d['advertised'] for d in devices)}"
        assert paid == f"${sum(e['pods'].values()):,.4f}" and idle == f"${e['idle']:,.4f}"
        assert share == f"{round(100 * e['idle'] / e['hourly_price'])}%"
        # pods plus idle are the node's price
        assert abs(sum(e["pods"].values()) + e["idle"] - e["hourly_price"]) < 1e-5
    assert rows["infer"][-1] == "25%"  # one replica of four is idle


def test_wide_lists_each_pods_gpu_share(files: tuple[str, str]) -> None:
    data = json.loads(plan(files, "-o", "json").stdout)
    out = plan(files, "-o", "wide").stdout
    table = section(out, nodeview.SHARED_TITLE)
    rows = {ln.split()[0]: ln.split() for ln in table[3:] if not ln.startswith("(")}
    for e in data["shared_gpus"]:
        for pod, cost in e["pods"].items():
            assert rows[pod][1:] == [e["node"], e["config"], f"${cost:,.4f}/h"]
    idle = [ln.split() for ln in table[3:] if ln.startswith("(")]
    assert len(idle) == len(data["shared_gpus"])
    assert idle[[r[3] for r in idle].index("infer-1")][:5] == ["(1", "idle", "slice(s))", "infer-1", "infer"]


def test_whole_gpu_plans_have_no_slices_nor_cost_split() -> None:
    out = CliRunner().invoke(cli, ["plan", "-w", "tests/fixtures/plan/vector-add-and-web.yaml"]).stdout
    shared = out.split("Cost per workload")[0]  # that table's idle row is every node's, shared or not
    assert nodeview.SHARED_TITLE not in out and nodeview.SLICES_LEGEND not in out and " idle " not in shared


def _node(name: str, labels: dict[str, str], alloc: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": "95690m", "memory": "1117028368Ki", "pods": "737", **alloc},
                   "capacity": {"cpu": "96", "memory": "1176944656Ki", "pods": "737", **alloc}},
    }


def test_existing_nodes_show_slices_from_their_labels(tmp_path: Path) -> None:
    """No profile: what GPU Feature Discovery labelled and the plugin advertised is all there is."""
    single = _node("ip-10-0-3-17.us-west-2.compute.internal", {
        "node.kubernetes.io/instance-type": "p4d.24xlarge", "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "nvidia.com/gpu.count": "56",
        "nvidia.com/gpu.replicas": "1", "nvidia.com/mig.config": "all-1g.5gb",
        "nvidia.com/mig.config.state": "success",
    }, {"nvidia.com/gpu": "56"})
    mps = _node("ip-10-0-3-18.us-west-2.compute.internal", {
        "node.kubernetes.io/instance-type": "g5.xlarge", "nvidia.com/gpu.product": "NVIDIA-A10G-SHARED",
        "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "mps",
    }, {"nvidia.com/gpu": "2"})
    cluster = tmp_path / "nodes.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [single, mps]}))
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all([gpu_pod(f"p{i}") for i in range(3)]))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(cluster), "-w", str(pods), "--color", "never"])
    assert res.exit_code == 0, res.output
    view = section(res.stdout, "Nodes by pool (requests / allocatable)")
    assert max(len(ln) for ln in view) <= 80
    slices = [ln.split() for ln in view if re.match(r"^   \d+ idle ", ln)]
    kinds = {" ".join(s[2:-2]): (s[0], s[-1]) for s in slices}
    assert set(kinds) == {"gpu mig 1g.5gb", "gpu mps x2"}, view
    used = sum(int(f.split("/")[0]) for _, f in kinds.values())
    assert used == 3 and all(int(i) + int(f.split("/")[0]) == int(f.split("/")[1]) for i, f in kinds.values())
    assert nodeview.SHARED_TITLE not in res.stdout  # no profile, no config to split costs by


def test_slices_of_a_node() -> None:
    u = nodeview.Usage
    assert nodeview.slices({"nvidia.com/gpu": 8, "cpu": 96000}, {"nvidia.com/gpu": 3}, {}) == ()
    ts = nodeview.slices({"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 3},
                         {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    assert ts == (nodeview.Slice("nvidia.com/gpu", u(3, 4), "shared x4"),) and ts[0].label == "gpu shared x4"
    assert ts[0].idle == 1
    renamed = nodeview.slices({"nvidia.com/gpu.shared": 80}, {}, {"nvidia.com/gpu.replicas": "10"})
    assert renamed[0].label == "gpu.shared x10" and renamed[0].idle == 80
    # no GFD labels (GFD not deployed): the name says shared, the replicas are not known
    (bare,) = nodeview.slices({"nvidia.com/gpu.shared": 8}, {"nvidia.com/gpu.shared": 8}, {})
    assert (bare.label, bare.idle) == ("gpu.shared", 0)
    mixed = nodeview.slices(
        {"nvidia.com/mig-1g.10gb.shared": 28, "nvidia.com/mig-3g.40gb": 0},
        {"nvidia.com/mig-1g.10gb.shared": 2},
        {"nvidia.com/mig-1g.10gb.replicas": "2", "nvidia.com/mig-1g.10gb.sharing-strategy": "time-slicing"},
    )
    assert [(x.label, x.usage) for x in mixed] == [("mig-1g.10gb.shared x2", u(2, 28))]  # none advertised: no line


@pytest.fixture(scope="module")
def report(files: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "shared.html"
    plan(files, "--report", str(path))
    return path


def test_report_has_slice_bars_and_the_cost_split(files: tuple[str, str], report: Path) -> None:
    html = report.read_text()
    data = json.loads(plan(files, "-o", "json").stdout)
    # one slice bar per device resource of each shared node: 1 + 1 + 3
    assert len(re.findall(r'<rect class="bar slice"', html)) == 5
    assert 'class="shared-config"' in html and 'class="shared-pods"' in html
    for e in data["shared_gpus"]:
        for pod, cost in e["pods"].items():
            assert f"<td>{pod}</td><td>{e['node']}</td><td>{e['config']}</td><td>${cost:,.4f}/h</td>" in html


@pytest.mark.integration
def test_chromium_shows_slices_and_idle_cost(report: Path) -> None:
    dom = run_chromium("--dump-dom", report.as_uri()).stdout
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    for shown in ("gpu shared x4", "gpu.shared x10", "mig-1g.5gb", "11 idle", "5/16", "Shared GPU cost",
                  "Per pod", "default/embed-0", "(1 idle slice(s))", "N idle: a shared or MIG node"):
        assert shown in text, shown


def test_long_device_names_give_way_within_80_columns() -> None:
    """Eight H100s, MIG 1g.10gb time-sliced 10 ways and renamed: 560 slices and the longest resource name."""
    u = nodeview.Usage
    x = nodeview.Slice("nvidia.com/mig-1g.10gb.shared", u(497, 560), "shared x10")
    group = nodeview.NodeGroup(
        "h100-mig-timesliced", "ip-10-0-7-201.us-west-2.compute.internal", "p5.48xlarge", "on-demand", True,
        u(497, 560), u(180000, 191450), u(10**12, 2 * 10**12), 497, 98.32, count=2, slices=(x,),
    )
    lines = nodeview.render([nodeview.Pool("h100-mig-timesliced", [group])]).splitlines()
    assert max(len(ln) for ln in lines) <= 80, "\n".join(lines)
    line = next(ln for ln in lines if ln.startswith("   63 idle"))
    assert re.search(r" mig-1g\.\S*… x10 ", line) and line.endswith("497/560"), line
    wide = nodeview.render([nodeview.Pool("h100-mig-timesliced", [group])], compact=False)
    assert "mig-1g.10gb.shared x10" in wide


def test_amd_gpus_fill_the_gpu_bar(tmp_path: Path) -> None:
    """A g4ad node advertises amd.com/gpu (AMD's device plugin): the node view's GPU column counts those
    GPUs and the pods asking for them, as it counts nvidia.com/gpu."""
    node = _node("ip-10-0-4-2.us-west-2.compute.internal", {"node.kubernetes.io/instance-type": "g4ad.8xlarge"},
                 {"amd.com/gpu": "2"})
    cluster = tmp_path / "nodes.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    pod = gpu_pod("rocm", resource="amd.com/gpu")
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump(pod))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(cluster), "-w", str(pods), "--color", "never"])
    assert res.exit_code == 0, res.output
    row = next(ln for ln in section(res.stdout, "Nodes by pool (requests / allocatable)") if "g4ad.8xlarge" in ln)
    assert " 1/2 " in row, row
