"""`kgpu doctor` on a big cluster: one root cause on hundreds of nodes is one group, the summary comes first,
and --check / --severity / -n / -l select what is reported (and what the exit status is computed over)."""

from __future__ import annotations

import json
import textwrap
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kgpu.cli.doctor_cmd import Selection, parse_selector, pending_reason, render_table, run_doctor
from kgpu.cli.main import cli
from kgpu.doctor import all_check_ids
from kgpu.doctor.findings import ERROR, INFO, WARNING, Finding, Report, group_findings, group_key
from snapshot_builders import GPU_TAINT, GPU_TOLERATION, daemon_pod, node, plugin_ds, pod, snapshot

RAY_TAINT = {"key": "ray.io/node-type", "value": "worker", "effect": "NoSchedule"}
NODES = 500
HEALTHY = 4


def big_cluster(n: int = NODES, healthy: int = HEALTHY) -> dict:
    """``n`` GPU nodes: ``healthy`` run the device plugin and a GPU pod each; the others carry a taint the
    plugin does not tolerate (no GPUs advertised). One pending GPU pod that tolerates only nvidia.com/gpu."""
    ds = plugin_ds(desired=healthy)
    items = [node("cpu-1"), ds]
    for i in range(n):
        name = f"gpu-{i:04d}"
        if i < healthy:
            items.append(node(name, "g5.xlarge", taints=[GPU_TAINT], driver="550.127.05", labels={"pool": "serve"}))
            items.append(daemon_pod(ds, name))
            items.append(pod(f"serve-{i}", "ml", gpus=1, node_name=name, tolerations=[GPU_TOLERATION]))
        else:
            items.append(
                node(name, "g5.xlarge", taints=[GPU_TAINT, RAY_TAINT], gpus=0, driver="550.127.05", labels={"pool": "ray"})
            )
    items.append(pod("train-0", "ml", gpus=1, tolerations=[GPU_TOLERATION]))
    return snapshot(items)


@cache
def _snapshot_text() -> str:
    return json.dumps(big_cluster())


@pytest.fixture
def big(tmp_path: Path) -> str:
    path = tmp_path / "big.json"
    path.write_text(_snapshot_text())
    return str(path)


def doctor(*args: str):
    return CliRunner().invoke(cli, ["doctor", *args], catch_exceptions=False)


TAINTED = [f"Node/gpu-{i:04d}" for i in range(HEALTHY, NODES)]


# --- the 500-node cluster ---------------------------------------------------------------------------------


def _json(*args: str) -> dict:
    return json.loads(doctor(*args, "-o", "json").output)


def test_big_cluster_fits_one_screen_summary_first(big):
    res = doctor("--snapshot", big)
    assert res.exit_code == 1
    lines = res.output.rstrip("\n").splitlines()
    assert len(lines) <= 60, res.output
    data = _json("--snapshot", big)
    s, groups = data["summary"], data["groups"]
    assert s["errors"] > 2 * (NODES - HEALTHY) - 10  # hundreds of findings, a few lines each before grouping
    # the summary: counts by severity and the number of groups, then the pending GPU pod and why
    assert lines[0] == (
        f"{s['errors']} errors, {s['warnings']} warnings, {s['info']} info: {len(groups)} groups from "
        f"{len(s['checks'])} checks"
    )
    pending = next(i for i, line in enumerate(lines) if line.startswith("Pending GPU pods (1)"))
    assert pending < 5
    assert lines[pending + 1].startswith("  Pod/ml/train-0: 0/501 nodes are available: 496 node(s) had untolerated")
    errors = [g for g in groups if g["severity"] == "error"]
    assert f"Errors ({s['errors']}, in {len(errors)} groups)" in lines
    # one group per root cause, counted, the first three named, one fix
    header = (
        f"  [device-plugin-untolerated-taint] {NODES - HEALTHY} Nodes: "
        "Node/gpu-0004, Node/gpu-0005, Node/gpu-0006 and 493 more"
    )
    assert header in lines
    assert res.output.count("ray.io/node-type=worker:NoSchedule") == 1
    assert "    fix (the same for all 496):" in lines
    for g in groups:
        if g["count"] > 1:
            named = ", ".join(g["objects"][:3]) + f" and {g['count'] - 3} more"
            assert f"  [{g['check']}] {g['count']} Nodes: {named}" in lines
            members = {(g["check"], o) for o in g["objects"]}
            fixes = {f["fix"] for f in data["findings"] if (f["check"], f["object"]) in members}
            label = (
                f"    fix (the same for all {g['count']}):"
                if len(fixes) == 1
                else f"    fix for {g['objects'][0]} (for each of the others the same, with its name):"
            )
            assert not g["fix"] or label in lines
        else:
            assert f"  [{g['check']}] {g['objects'][0]}" in lines
    assert lines[-1].startswith(f"{s['errors']} errors, {s['warnings']} warnings, {s['info']} info, 501 nodes")


def test_big_cluster_json_names_every_affected_object(big):
    res = doctor("--snapshot", big, "-o", "json")
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert set(data) == {"findings", "groups", "summary"}
    assert len(data["findings"]) > 2 * (NODES - HEALTHY)  # every finding, as before
    group = next(g for g in data["groups"] if g["check"] == "device-plugin-untolerated-taint")
    assert group["objects"] == TAINTED and group["count"] == 496 and group["severity"] == "error"
    first = next(f for f in data["findings"] if f["check"] == "device-plugin-untolerated-taint")
    assert (group["message"], group["fix"]) == (first["message"], first["fix"])
    # the groups partition the findings: every affected object is named
    grouped = sorted((g["check"], o) for g in data["groups"] for o in g["objects"])
    assert grouped == sorted((f["check"], f["object"]) for f in data["findings"])
    assert all(g["count"] == len(g["objects"]) for g in data["groups"])
    assert len(data["groups"]) < 10


def test_wide_names_every_object(big):
    res = doctor("--snapshot", big, "-o", "wide")
    assert res.exit_code == 1
    lines = res.output.splitlines()
    big_groups = [g for g in _json("--snapshot", big)["groups"] if g["count"] == 496]
    assert lines.count("    all 496:") == len(big_groups) >= 1
    for ref in TAINTED:
        assert lines.count(f"      {ref}") == len(big_groups)


def test_no_headers_leaves_the_groups(big):
    res = doctor("--snapshot", big, "--no-headers")
    out = res.output
    assert out.startswith("  [device-plugin-untolerated-taint] 496 Nodes:")
    assert "Errors (" not in out and "Pending GPU pods" not in out and " errors, " not in out


# --- selection --------------------------------------------------------------------------------------------


def test_check_selects_one_check_repeatable_and_comma_separated(big):
    res = doctor("--snapshot", big, "--check", "device-plugin-untolerated-taint", "-o", "json")
    data = json.loads(res.output)
    assert {f["check"] for f in data["findings"]} == {"device-plugin-untolerated-taint"}
    assert data["summary"]["errors"] == 496
    assert data["summary"]["checks"] == {"device-plugin-untolerated-taint": 496}
    assert data["summary"]["nodes"] == 501  # what was looked at stays the cluster's
    assert res.exit_code == 1
    both = json.loads(doctor("--snapshot", big, "--check", "pending-gpu-pod", "--check", "gpu-exporter-missing",
                             "-o", "json").output)
    assert {f["check"] for f in both["findings"]} == {"pending-gpu-pod", "gpu-exporter-missing"}
    comma = json.loads(doctor("--snapshot", big, "--check", "pending-gpu-pod,gpu-exporter-missing",
                              "-o", "json").output)
    assert comma == both


def test_check_of_warnings_only_exits_0(big):
    total = len(_json("--snapshot", big)["findings"])
    res = doctor("--snapshot", big, "--check", "gpu-exporter-missing")
    assert res.exit_code == 0
    assert f"selected with --check gpu-exporter-missing: 1 of {total} findings" in res.output
    assert "Pending GPU pods: 1, none selected" in res.output


def test_unknown_check_exits_2_listing_the_checks(big):
    res = doctor("--snapshot", big, "--check", "gpu-node-idel")
    assert res.exit_code == 2
    assert "unknown check 'gpu-node-idel'; the checks are: " in res.output
    for check in all_check_ids():
        assert check in res.output


def test_severity_is_a_minimum(big):
    warnings = json.loads(doctor("--snapshot", big, "--severity", "warning", "-o", "json").output)
    assert {f["severity"] for f in warnings["findings"]} == {"error", "warning"}
    errors = doctor("--snapshot", big, "--severity", "error", "-o", "json")
    assert errors.exit_code == 1
    assert {f["severity"] for f in json.loads(errors.output)["findings"]} == {"error"}
    everything = json.loads(doctor("--snapshot", big, "--severity", "INFO", "-o", "json").output)
    assert everything == _json("--snapshot", big)
    assert doctor("--snapshot", big, "--severity", "fatal").exit_code == 2


def test_severity_selection_sets_the_exit_code():
    """Exit 1 only for an error among the findings selected."""
    doc = big_cluster(6, healthy=2)
    assert run_doctor(doc, "x", "json", None) == 1
    assert run_doctor(doc, "x", "json", None, Selection(severity="error")) == 1
    assert run_doctor(doc, "x", "json", None, Selection(severity="warning", checks=("gpu-exporter-missing",))) == 0


def test_namespace_selects_namespaced_objects_only(big):
    res = doctor("--snapshot", big, "-n", "ml", "-o", "json")
    data = json.loads(res.output)
    assert {f["object"] for f in data["findings"]} == {"Pod/ml/train-0"}
    assert res.exit_code == 1
    everything = _json("--snapshot", big)
    none = doctor("--snapshot", big, "-n", "other")
    assert none.exit_code == 0
    assert f"No findings selected ({len(everything['findings'])} in all without -n other)." in none.output
    # -A is every namespace, as kubectl's
    assert _json("--snapshot", big, "-n", "ml", "-A") == everything


def test_selector_selects_findings_about_matching_nodes(big):
    res = doctor("--snapshot", big, "-l", "kubernetes.io/hostname in (gpu-0010, gpu-0011),pool=ray", "-o", "json")
    data = json.loads(res.output)
    assert {f["object"] for f in data["findings"]} == {"Node/gpu-0010", "Node/gpu-0011"}
    assert res.exit_code == 1
    serve = json.loads(doctor("--snapshot", big, "-l", "pool=serve", "-o", "json").output)
    assert {f["object"] for f in serve["findings"]} == {"Node/gpu-0000"}  # the exporter, reported on the first
    nothing = json.loads(doctor("--snapshot", big, "-l", "pool notin (serve,ray)", "-o", "json").output)
    assert nothing["findings"] == [] and nothing["groups"] == []


def test_bad_selector_exits_2(big):
    res = doctor("--snapshot", big, "-l", "pool in (a")
    assert res.exit_code == 2
    assert "invalid requirement 'pool in (a'" in res.output


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("a=b", (("a", "=", ("b",)),)),
        ("a==b, c!=d", (("a", "=", ("b",)), ("c", "!=", ("d",)))),
        ("nvidia.com/gpu.present", (("nvidia.com/gpu.present", "exists", ()),)),
        ("!spot", (("spot", "!", ()),)),
        ("zone in (a, b),x notin (c)", (("zone", "in", ("a", "b")), ("x", "notin", ("c",)))),
        ("a=", (("a", "=", ("",)),)),
    ],
)
def test_parse_selector(text, parsed):
    assert parse_selector(text) == parsed


@pytest.mark.parametrize("text", ["", "a=b=c", "=b", "a in (b", "a b", "a,,b"])
def test_parse_selector_rejects(text):
    with pytest.raises(ValueError, match="invalid requirement"):
        parse_selector(text)


def test_help_explains_the_flags():
    res = doctor("--help")
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    for words in ("--check ID", "--severity [error|warning|info]", "-l, --selector SELECTOR", "-o wide",
                  "grouped by check and root cause", "an unknown id lists them"):
        assert words in text, words


# --- the grouping key -------------------------------------------------------------------------------------


def _f(obj: str, message: str, fix: str = "", check: str = "c", severity: str = ERROR) -> Finding:
    return Finding(check, severity, obj, message, fix)


def test_key_abstracts_the_name_and_numbers():
    a = _f("Node/gpu-1", "node gpu-1 has 2 GPUs, costs $1.006/hour.", "kubectl drain gpu-1")
    b = _f("Node/gpu-10", "node gpu-10 has 4 GPUs, costs $4.1/hour.", "kubectl drain gpu-10")
    assert group_key(a) == group_key(b)
    assert group_key(a)[2] == "node <name> has <n> GPUs, costs $<n>/hour."


def test_key_keeps_other_names_and_the_fix_words():
    # another node's name is not this object's: gpu-1 inside gpu-10, a path, a dotted host name
    a = _f("Node/gpu-1", "like gpu-10, nvidia.com/gpu-1 and gpu-1.example.com")
    assert group_key(a)[2] == "like gpu-<n>, nvidia.com/gpu-<n> and gpu-<n>.example.com"
    # a different fix (not only the name) is a different root cause, even when the message matches
    t1 = _f("Node/a", "taint t=1", "- key: t\n  value: '1'")
    t2 = _f("Node/b", "taint t=2", "- key: t\n  value: '2'")
    assert group_key(t1) != group_key(t2)
    # namespaced: ns/name and the bare name
    p = _f("Pod/ml/train-0", "Pod ml/train-0 waits", "kubectl describe pod -n ml train-0")
    q = _f("Pod/ml/train-1", "Pod ml/train-1 waits", "kubectl describe pod -n ml train-1")
    r = _f("Pod/dev/train-1", "Pod dev/train-1 waits", "kubectl describe pod -n dev train-1")
    assert group_key(p) == group_key(q) != group_key(r)
    # other checks or severities never share a group
    assert group_key(_f("Node/a", "x", check="c1")) != group_key(_f("Node/a", "x", check="c2"))
    assert group_key(_f("Node/a", "x", severity=ERROR)) != group_key(_f("Node/a", "x", severity=WARNING))


def test_groups_keep_report_order_and_members():
    report = Report([
        _f("Node/b", "idle b", "drain b", check="idle", severity=WARNING),
        _f("Node/a", "idle a", "drain a", check="idle", severity=WARNING),
        _f("Pod/ns/p", "pending", check="pending-gpu-pod"),
        _f("Node/c", "other thing", check="idle", severity=WARNING),
    ])
    groups = group_findings(report.findings)
    assert [(g.check, g.objects) for g in groups] == [
        ("pending-gpu-pod", ["Pod/ns/p"]),
        ("idle", ["Node/a", "Node/b"]),
        ("idle", ["Node/c"]),
    ]
    assert not groups[1].same_fix and groups[1].same_message is False


def test_select_namespace_and_nodes():
    report = Report([_f("Node/a", "x"), _f("Pod/ml/p", "y"), _f("DaemonSet/kube-system/d", "z"), _f("Node/b", "x")])
    assert [f.object for f in report.select(namespace="ml").findings] == ["Pod/ml/p"]
    assert [f.object for f in report.select(nodes={"b"}).findings] == ["Node/b"]
    assert report.select().findings == report.findings


# --- the table, at its fixed width ------------------------------------------------------------------------


def _render(report: Report, **kw) -> str:
    with click.Context(click.Command("doctor")) as ctx:
        ctx.meta["kgpu.color"] = "never"
        return render_table(report.as_dict(), **kw)


def _sample() -> Report:
    idle = [
        _f(f"Node/gpu-{i}", f"GPU node runs no workload pods; costs ${1 + i}.5/hour",
           f"kubectl drain gpu-{i} --ignore-daemonsets", check="gpu-node-idle", severity=WARNING)
        for i in range(5)
    ]
    pending = _f(
        "Pod/ml/train-0",
        "0/6 nodes are available: 6 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: 6 "
        "Preemption is not helpful for scheduling. (the snapshot has no FailedScheduling event for it)",
        "# add a node",
        check="pending-gpu-pod",
    )
    info = _f("Node/gpu-0", "MIG strategy unknown", check="mig-strategy-labels", severity=INFO)
    return Report([*idle, pending, info], {"nodes": 6, "gpu_nodes": 5, "pods": 1, "pending_gpu_pods": 1})


def test_table_at_fixed_width():
    expected = textwrap.dedent("""\
        1 errors, 5 warnings, 1 info: 3 groups from 3 checks
        looked at 6 nodes (5 with GPUs), 1 pods
        Pending GPU pods (1), why (the pending-gpu-pod findings below say what would make them run):
          Pod/ml/train-0: 0/6 nodes are available: 6 Insufficient nvidia.com/gpu.

        Errors (1, in 1 group)

          [pending-gpu-pod] Pod/ml/train-0
            0/6 nodes are available: 6 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: 6
            Preemption is not helpful for scheduling. (the snapshot has no FailedScheduling event for it)
            fix:
              # add a node

        Warnings (5, in 1 group)

          [gpu-node-idle] 5 Nodes: Node/gpu-0, Node/gpu-1, Node/gpu-2 and 2 more
            GPU node runs no workload pods; costs $1.5/hour
            (numbers in the message differ between them: -o wide or -o json gives each)
            fix for Node/gpu-0 (for each of the others the same, with its name):
              kubectl drain gpu-0 --ignore-daemonsets

        Info (1, in 1 group)

          [mig-strategy-labels] Node/gpu-0
            MIG strategy unknown

        1 errors, 5 warnings, 1 info, 6 nodes, 5 gpu nodes, 1 pods, 1 pending gpu pods""")
    assert _render(_sample()) == expected
    assert all(len(line) <= 104 for line in expected.splitlines())


def test_wide_table_lists_each_object_with_its_message():
    out = _render(_sample(), wide=True)
    assert "(numbers in the message differ" not in out
    assert "    all 5:\n      Node/gpu-0\n        GPU node runs no workload pods; costs $1.5/hour\n      Node/gpu-1\n" in out
    assert "        GPU node runs no workload pods; costs $5.5/hour" in out


def test_table_names_the_selection():
    report = _sample()
    selected = report.select(severity="warning")
    out = _render(selected, selection=Selection(severity="warning", words=("--severity warning",)), total=7)
    assert out.splitlines()[:2] == [
        "1 errors, 5 warnings, 0 info: 2 groups from 2 checks",
        "selected with --severity warning: 6 of 7 findings",
    ]


def test_pending_summary_groups_pods_by_reason():
    pods = [
        _f(f"Pod/ml/p{i}", "0/9 nodes are available: 9 Insufficient nvidia.com/gpu. preemption: x (the cluster's "
           "newest FailedScheduling event says: \"y\")", check="pending-gpu-pod")
        for i in range(7)
    ]
    placed = _f("Pod/ml/q", "Pending, but kgpu's simulation places it on node n1 now; the snapshot has no "
                "FailedScheduling event for it. Capacity freed since", check="pending-gpu-pod", severity=WARNING)
    out = _render(Report([*pods, placed], {"pending_gpu_pods": 8}))
    assert "  Pod/ml/p0, Pod/ml/p1, Pod/ml/p2 and 4 more: 0/9 nodes are available: 9 Insufficient nvidia.com/gpu." in out
    assert "  Pod/ml/q: Pending, but kgpu's simulation places it on node n1 now" in out
    assert pending_reason(placed.message) == "Pending, but kgpu's simulation places it on node n1 now"
