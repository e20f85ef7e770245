"""What the simulation does not model is never silent: each warning code, from a real manifest, and its
absence without the feature; the JSON shape, the table's column and footer, doctor's explanation."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from builders import node_dict, pod_dict
from kgpu.cli.main import cli
from kgpu.model.inputs import Objects
from kgpu.model.load import parse_documents
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import simulate
from kgpu.sim.unmodelled import RULES
from test_provision_karpenter import CAT, GENERAL, profile

ZONE = "topology.kubernetes.io/zone"


def cluster(*extra: dict[str, Any]) -> Objects:
    nodes = [
        node_dict("n1", labels={ZONE: "us-west-2a", "kubernetes.io/hostname": "n1"}),
        node_dict("n2", labels={ZONE: "us-west-2b", "kubernetes.io/hostname": "n2"}),
    ]
    return parse_documents([*nodes, *extra], "cluster.yaml")


def codes(docs: list[dict[str, Any]], objs: Objects | None = None, **kw: Any) -> dict[str, list[str]]:
    """Pod name -> warning codes of a simulation of ``docs`` on ``objs`` (default: two plain nodes)."""
    result = simulate(objs or cluster(), parse_documents(docs, "w.yaml"), **kw)
    return {p.pod.name: [w.code for w in p.warnings] for p in result.placements}


def with_spec(doc: dict[str, Any], **spec: Any) -> dict[str, Any]:
    doc["spec"].update(spec)
    return doc


def test_pvc_and_ephemeral_volumes() -> None:
    """A pod mounting a PersistentVolumeClaim or a generic ephemeral volume: volume binding and the
    volume's zone are not modelled; a configMap or emptyDir volume says nothing."""
    pvc = with_spec(
        pod_dict("pvc", cpu="1"), volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}]
    )
    eph = with_spec(
        pod_dict("eph", cpu="1"),
        volumes=[
            {
                "name": "scratch",
                "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}},
            }
        ],
    )
    plain = with_spec(
        pod_dict("plain", cpu="1"),
        volumes=[{"name": "c", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}}],
    )
    got = codes([pvc, eph, plain])
    assert got == {"pvc": ["volumes"], "eph": ["volumes"], "plain": []}
    result = simulate(cluster(), parse_documents([pvc], "w.yaml"))
    assert result.placements[0].warnings[0].message.startswith("pvc data-0: ")


def test_statefulset_volume_claim_templates() -> None:
    """A StatefulSet's volumeClaimTemplates give every replica a PersistentVolumeClaim volume."""
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
            "volumeClaimTemplates": [
                {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
            ],
        },
    }
    assert codes([sts]) == {"db-0": ["volumes"], "db-1": ["volumes"]}
    del sts["spec"]["volumeClaimTemplates"]
    assert codes([sts]) == {"db-0": [], "db-1": []}


def test_resource_claims_are_modelled_but_unsupported_cel_is_dra() -> None:
    """Claims are allocated (kgpu.sim.scheduler.plugins.dynamicresources) when the DRA objects are given: then only a selector kgpu cannot
    evaluate leaves the dra warning; without any DRA object the claims are not allocated, and said so."""
    claim = with_spec(
        pod_dict("dra"), resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    )
    assert codes([claim, pod_dict("plain")]) == {"dra": ["dra"], "plain": []}
    tpl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "one-gpu", "namespace": "default"},
           "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
               "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": "isURL('https://example.com')"}}]}}]}}}}
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}, "spec": {}}
    sl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
          "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                   "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}}
    assert codes([claim, pod_dict("plain")], cluster(tpl, cls, sl)) == {"dra": ["dra"], "plain": []}


def test_runtime_class() -> None:
    kata = with_spec(pod_dict("kata"), runtimeClassName="kata")
    assert codes([kata, pod_dict("plain")]) == {"kata": ["runtime-class"], "plain": []}


def test_namespace_selector_other_than_metadata_name() -> None:
    term = {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "x"}}}
    team = pod_dict("team", pod_anti_affinity=[{**term, "namespaceSelector": {"matchLabels": {"team": "a"}}}])
    named = pod_dict(
        "named",
        pod_anti_affinity=[
            {**term, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "a"}}}
        ],
    )
    assert codes([team, named]) == {"team": ["namespace-selector"], "named": []}


def test_karpenter_topology_and_preferences() -> None:
    """Pods Karpenter provisions for: spread on a key other than zone and hostname and required pod
    (anti-)affinity are not modelled in kgpu's Karpenter (karpenter-topology), ScheduleAnyway spread on
    other keys neither (karpenter-preferences); zone and hostname spread is (ScheduleAnyway relaxed as
    Karpenter does), preferred node affinity is, and a plain pod says nothing."""
    prof = profile(GENERAL)

    def spread_pod(name: str, key: str, when: str) -> dict[str, Any]:
        c = {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": name}},
        }
        return pod_dict(name, cpu="1", labels={"app": name}, spread=[c])

    capacity = spread_pod("capacity", "karpenter.sh/capacity-type", "DoNotSchedule")
    zone = spread_pod("zone", ZONE, "DoNotSchedule")
    host = spread_pod("host", "kubernetes.io/hostname", "DoNotSchedule")
    soft = spread_pod("soft", "kubernetes.io/hostname", "ScheduleAnyway")
    soft_capacity = spread_pod("soft-capacity", "karpenter.sh/capacity-type", "ScheduleAnyway")
    anti = pod_dict(
        "anti",
        cpu="1",
        labels={"app": "a"},
        pod_anti_affinity=[{"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "a"}}}],
    )
    pref = pod_dict("pref", cpu="1")
    pref["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-west-2b"]}]
                    },
                }
            ]
        }
    }
    plain = pod_dict("plain", cpu="1")
    got = codes(
        [capacity, zone, host, soft, soft_capacity, anti, pref, plain],
        Objects(),
        provisioner=provisioner_for(prof, CAT),
    )
    assert got == {
        "capacity": ["karpenter-topology"],
        "zone": [],
        "host": [],
        "soft": [],
        "soft-capacity": ["karpenter-preferences"],
        "anti": ["karpenter-topology"],
        "pref": [],
        "plain": [],
    }


def test_karpenter_exists_not_in() -> None:
    """A key with Exists and NotIn and nothing else in a requirement set Karpenter tries (a required term
    with a preference, or one term alone) is read by Karpenter as NotIn: it may launch a node without the
    label (karpenter-exists-not-in). Exists alone, or with In (a nodeSelector on the key counts), is
    modelled."""
    prof = profile(GENERAL)

    def affinity(name: str, required: list[dict[str, Any]], preferred: list[dict[str, Any]] = (),
                 selector: dict[str, str] | None = None) -> dict[str, Any]:
        doc = pod_dict(name, cpu="1", node_selector=selector)
        na: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": required}]}}
        if preferred:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": 1, "preference": {"matchExpressions": list(preferred)}}]
        doc["spec"]["affinity"] = {"nodeAffinity": na}
        return doc

    exists = {"key": "team", "operator": "Exists"}
    not_ml = {"key": "team", "operator": "NotIn", "values": ["ml"]}
    pods = [
        affinity("both", [exists, not_ml]),
        affinity("preferred", [exists], [not_ml]),
        affinity("exists", [exists]),
        affinity("selector", [exists, not_ml], selector={"team": "infra"}),
        affinity("in", [exists, not_ml, {"key": "team", "operator": "In", "values": ["infra", "ml"]}]),
    ]
    got = codes(pods, Objects(), provisioner=provisioner_for(prof, CAT))
    assert got == {"both": ["karpenter-exists-not-in"], "preferred": ["karpenter-exists-not-in"],
                   "exists": [], "selector": [], "in": []}


def test_every_rule_has_a_test_above() -> None:
    """A rule added without a test here fails this."""
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    for rule in RULES:
        assert f'"{rule.code}"' in source.replace(f'Rule("{rule.code}"', ""), rule.code


# --- output -------------------------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump_all([node_dict("n1"), node_dict("n2")]))
    w = tmp_path / "w.yaml"
    pvc = with_spec(
        pod_dict("db", cpu="1"), volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "db-data"}}]
    )
    w.write_text(yaml.safe_dump_all([pvc, pod_dict("web", cpu="1")]))
    return c, w


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_json_per_pod_warnings_and_summary_count(files) -> None:
    c, w = files
    res = invoke("simulate", "-c", str(c), "-w", str(w), "-o", "json")
    data = json.loads(res.output)
    pods = {p["name"]: p for p in data["pods"]}
    assert pods["web"]["warnings"] == []
    [warning] = pods["db"]["warnings"]
    assert set(warning) == {"code", "message"} and warning["code"] == "volumes"
    assert "pvc db-data" in warning["message"]
    assert data["summary"]["with_warnings"] == 1
    assert res.exit_code == 0  # a warning is not a failure


def test_table_column_and_footer(files) -> None:
    c, w = files
    res = invoke("simulate", "-c", str(c), "-w", str(w))
    lines = res.output.splitlines()
    assert lines[0].split() == ["NAMESPACE", "POD", "PHASE", "NODE", "WHY", "WARNINGS"]
    rows = {line.split()[1]: line.split() for line in lines[2:] if line.startswith("default ")}
    assert rows["db"][-1] == "volumes" and rows["web"][-1] == "-"
    assert "Not modelled (WARNINGS)" in res.output
    assert any(line.strip().startswith("volumes  1 pod(s): PersistentVolumeClaims") for line in lines)
    assert lines[-1].endswith("1 with warnings")
    wide = invoke("simulate", "-c", str(c), "-w", str(w), "-o", "wide")
    assert "WARNINGS" in wide.output.splitlines()[0]


def test_table_unchanged_without_warnings(tmp_path) -> None:
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump(node_dict("n1")))
    w = tmp_path / "w.yaml"
    w.write_text(yaml.safe_dump(pod_dict("web", cpu="1")))
    res = invoke("simulate", "-c", str(c), "-w", str(w))
    assert res.output.splitlines()[0].split() == ["NAMESPACE", "POD", "PHASE", "NODE", "WHY"]
    assert "Not modelled" not in res.output and "with warnings" not in res.output


def test_plan_shows_the_warnings(tmp_path) -> None:
    w = tmp_path / "w.yaml"
    w.write_text(yaml.safe_dump(with_spec(pod_dict("kata", cpu="1"), runtimeClassName="kata")))
    data = json.loads(invoke("plan", "-w", str(w), "-o", "json").output)
    assert [x["code"] for x in data["pods"][0]["warnings"]] == ["runtime-class"]
    assert data["summary"]["with_warnings"] == 1
    text = invoke("plan", "-w", str(w)).output
    assert "WARNINGS" in text and "runtime-class  1 pod(s)" in text
    report = tmp_path / "plan.html"
    invoke("plan", "-w", str(w), "--report", str(report))
    assert "<th>WARNINGS</th>" in report.read_text() and "runtime-class" in report.read_text()


# --- doctor -------------------------------------------------------------------------------------------------


def _doctor_pending(*, pvc: bool, fits: bool) -> Any:
    from kgpu.doctor import doctor_report
    from snapshot_builders import GPU_TAINT, GPU_TOLERATION, daemon_pod, node, plugin_ds, pod, snapshot

    ds = plugin_ds(desired=1)
    gpu = node("gpu-1", "g5.xlarge", taints=[GPU_TAINT], driver="550.127.05")
    pending = pod("train-0", "ml", gpus=1 if fits else 2, tolerations=[GPU_TOLERATION])
    if pvc:  # besides the kube-api-access projected volume every real pod has
        pending["spec"]["volumes"].append(
            {"name": "data", "persistentVolumeClaim": {"claimName": "train-data"}}
        )
    doc = snapshot([node("cpu-1"), gpu, ds, daemon_pod(ds, "gpu-1"), pending])
    [finding] = doctor_report(doc).by_check("pending-gpu-pod")
    return finding


def test_doctor_names_what_is_not_modelled_for_a_pending_pod() -> None:
    """A pending pod kgpu places now: the PVC it mounts is named as what may explain it. One that cannot
    run: its explanation says the volume is not modelled. Without the PVC, neither says so."""
    f = _doctor_pending(pvc=True, fits=True)
    assert f.severity == "warning"
    assert (
        "What kgpu does not model for it may explain it: volumes (pvc train-data: no PersistentVolumeClaim"
        in f.message
    )
    assert "volumes" not in _doctor_pending(pvc=False, fits=True).message
    f = _doctor_pending(pvc=True, fits=False)
    assert f.severity == "error" and "Not modelled for it: volumes (pvc train-data" in f.message
    assert "Not modelled" not in _doctor_pending(pvc=False, fits=False).message
