"""Kueue from the profile's ``queues``: the rendered objects, their CRD validation, the GPU quota finding,
the profile's errors, and the ``kueue-two-teams`` template admitting the seed jobs under ``kgpu queue``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.errors import InputError
from kgpu.model.kueue_jobs import read_jobs
from kgpu.model.profile import Profile, builtin_profile, parse_profile, template_text
from kgpu.render.consistency import check
from kgpu.render.kueue import pool_capacity
from kgpu.render.stack import render_stack
from kgpu.render.validate import KUEUE_CRDS, crd_rule_list, validate_document, validate_stack
from kgpu.sim.queue.admission import settle

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "examples/queue/two-teams-jobs.yaml"
TEMPLATE = ROOT / "src/kgpu/model/templates/kueue-two-teams.yaml"
NOW = "2026-11-28T12:00:00Z"


def template_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(template_text("kueue-two-teams"))
    return data


def eksctl_with_queues(gpu: int | str = 8) -> Profile:
    data = yaml.safe_load(template_text("eks-eksctl"))
    data["queues"] = {
        "teams": [
            {
                "name": "ml",
                "namespaces": ["ml", "ml-dev"],
                "quotas": [
                    {"pool": "spot-ng", "cpu": "64", "memory": "256Gi"},
                    {"pool": "gpu-spot-ng", "gpu": gpu},
                ],
            }
        ]
    }
    return parse_profile(data)


def kueue_docs(profile: Profile) -> list[dict[str, Any]]:
    return render_stack(profile, ["kueue"])["kueue"]


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def warnings_for(profile: Profile) -> list[str]:
    return [p.line() for p in check(profile, {}) if "queues" in p.field]


# --- validity against Kueue v0.15.0's CRDs ----------------------------------------------------------------


def test_every_packaged_kueue_rule_compiles() -> None:
    counts = {}
    for file, version in KUEUE_CRDS.values():
        rules = crd_rule_list(file, version)
        assert all(r.program is not None and r.unsupported is None for r in rules), file
        counts[file.removeprefix("kueue.x-k8s.io_").removesuffix(".yaml")] = len(rules)
    assert counts["clusterqueues"] == 4 and counts["resourceflavors"] == 8


@pytest.mark.parametrize(
    "profile", [builtin_profile("kueue-two-teams"), eksctl_with_queues()], ids=["karpenter", "eksctl"]
)
def test_rendered_objects_are_valid_against_the_packaged_crds(profile: Profile) -> None:
    """Every Kueue object is checked against its CRD (none skipped for want of a schema), and passes."""
    stack = render_stack(profile, ["kueue"])
    kinds = {d["kind"] for d in stack["kueue"]}
    assert {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"} <= kinds
    report = validate_stack(stack)
    assert report.errors == []
    assert not [s for s in report.skipped if "no packaged schema" in s]
    checked = [d for d in stack["kueue"] if (d["apiVersion"], d["kind"]) in KUEUE_CRDS]
    assert len(checked) == len(stack["kueue"]) - len(of_kind(stack["kueue"], "Namespace"))


def test_the_crds_refuse_what_the_api_server_refuses() -> None:
    docs = kueue_docs(builtin_profile("kueue-two-teams"))
    cq = copy.deepcopy(of_kind(docs, "ClusterQueue")["research"])
    cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"].pop()
    errors, _ = validate_document(cq)
    assert errors == [
        'spec.resourceGroups[0]: Invalid value: "object": flavors must have the same number of resources as '
        "the coveredResources"
    ]
    flavor = copy.deepcopy(of_kind(docs, "ResourceFlavor")["gpu-spot"])
    flavor["spec"]["nodeTaints"][0]["effect"] = "NoSchedul"
    errors, _ = validate_document(flavor)
    assert any("supported taint effect values" in e for e in errors)
    check_ = copy.deepcopy(of_kind(kueue_docs(eksctl_with_queues()), "AdmissionCheck")["kgpu-provisioning"])
    check_["spec"]["parameters"]["apiGroup"] = "Kueue_X"
    errors, _ = validate_document(check_)
    assert errors and errors[0].startswith("spec.parameters.apiGroup:")


# --- what the objects say ---------------------------------------------------------------------------------


def test_flavors_carry_the_pools_labels_and_taints() -> None:
    profile = builtin_profile("kueue-two-teams")
    flavors = of_kind(kueue_docs(profile), "ResourceFlavor")
    assert list(flavors) == [p.name for p in profile.pools]
    for pool in profile.pools:
        spec = flavors[pool.name]["spec"]
        assert spec["nodeLabels"] == {**pool.labels, "karpenter.sh/nodepool": pool.name}
        assert spec.get("nodeTaints", []) == [t.as_k8s() for t in pool.taints]
        assert "tolerations" not in spec  # Kueue would then admit pods that do not tolerate the taint
    data = template_data()
    data["queues"]["injectTolerations"] = True
    flavors = of_kind(kueue_docs(parse_profile(data)), "ResourceFlavor")
    assert flavors["gpu-spot"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert "tolerations" not in flavors["general"]["spec"]


def test_node_group_flavors_select_the_group_and_take_the_provisioning_check() -> None:
    docs = kueue_docs(eksctl_with_queues())
    flavors = of_kind(docs, "ResourceFlavor")
    assert flavors["spot-ng"]["spec"]["nodeLabels"] == {
        "alpha.eksctl.io/nodegroup-name": "spot-ng",
        "lifecycle": "Ec2Spot",
    }
    # one group per zone: no single group name selects them, the pool's own labels do
    assert "alpha.eksctl.io/nodegroup-name" not in flavors["gpu-spot-ng"]["spec"]["nodeLabels"]
    assert flavors["gpu-spot-ng"]["spec"]["nodeLabels"]["nvidia.com/gpu"] == "true"
    config = of_kind(docs, "ProvisioningRequestConfig")["kgpu-provisioning"]["spec"]
    assert config == {
        "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        "managedResources": ["nvidia.com/gpu"],
    }
    check_ = of_kind(docs, "AdmissionCheck")["kgpu-provisioning"]["spec"]
    assert check_["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check_["parameters"] == {
        "apiGroup": "kueue.x-k8s.io",
        "kind": "ProvisioningRequestConfig",
        "name": "kgpu-provisioning",
    }
    cq = of_kind(docs, "ClusterQueue")["ml"]["spec"]
    assert cq["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "kgpu-provisioning", "onFlavors": ["spot-ng", "gpu-spot-ng"]}]
    }
    local = [
        (d["metadata"]["namespace"], d["metadata"]["name"], d["spec"]["clusterQueue"])
        for d in docs
        if d["kind"] == "LocalQueue"
    ]
    assert local == [("ml", "ml", "ml"), ("ml-dev", "ml", "ml")]
    karpenter_docs = kueue_docs(builtin_profile("kueue-two-teams"))
    assert not of_kind(karpenter_docs, "AdmissionCheck")
    assert all(
        "admissionChecksStrategy" not in d["spec"] for d in of_kind(karpenter_docs, "ClusterQueue").values()
    )


def test_cluster_queues_hold_the_teams_quotas_in_pool_order() -> None:
    docs = kueue_docs(builtin_profile("kueue-two-teams"))
    research = of_kind(docs, "ClusterQueue")["research"]["spec"]
    assert research["cohortName"] == "gpu-teams"
    assert research["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert research["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["research"]}
    ]
    (group,) = research["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    flavors = {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}
    assert list(flavors) == ["general", "gpu-spot", "gpu-on-demand"]
    assert flavors["gpu-spot"]["nvidia.com/gpu"] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 16,
        "borrowingLimit": 8,
    }
    # cpu/memory not given: the NodePool's limits
    assert (
        flavors["gpu-spot"]["cpu"]["nominalQuota"] == "1000"
        and flavors["gpu-spot"]["memory"]["nominalQuota"] == "4000Gi"
    )
    prod = of_kind(docs, "ClusterQueue")["prod"]["spec"]["resourceGroups"][0]["flavors"]
    assert prod[2]["resources"][2] == {"name": "nvidia.com/gpu", "nominalQuota": 16, "lendingLimit": 4}
    classes = {n: d["value"] for n, d in of_kind(docs, "WorkloadPriorityClass").items()}
    assert classes == {"production": 1000, "research": 100}
    assert of_kind(docs, "Cohort") == {"gpu-teams": of_kind(docs, "Cohort")["gpu-teams"]}
    namespaces = of_kind(docs, "Namespace")
    assert namespaces["prod"]["metadata"]["labels"]["kubernetes.io/metadata.name"] == "prod"


def test_a_pool_the_team_does_not_list_is_borrow_only() -> None:
    data = template_data()
    data["queues"]["teams"][1]["quotas"] = [{"pool": "gpu-on-demand", "gpu": 8}]
    prod = of_kind(kueue_docs(parse_profile(data)), "ClusterQueue")["prod"]["spec"]["resourceGroups"][0][
        "flavors"
    ]
    assert prod[0] == {
        "name": "general",
        "resources": [{"name": r, "nominalQuota": 0} for r in ("cpu", "memory", "nvidia.com/gpu")],
    }


# --- the GPU quota finding --------------------------------------------------------------------------------


def test_quota_finding_is_quiet_for_the_template() -> None:
    assert warnings_for(builtin_profile("kueue-two-teams")) == []


def test_quota_finding_fires_for_a_team_over_the_nodepool_limit() -> None:
    data = template_data()
    data["queues"]["teams"][0]["quotas"][1]["gpu"] = {"nominal": 40}
    assert warnings_for(parse_profile(data)) == [
        "warning: team research: queues.teams[0].quotas[1].gpu: nominal quota 40 nvidia.com/gpu in flavor "
        "gpu-spot, but the pool can launch at most 32 (NodePool gpu-spot limits): Kueue would admit jobs whose "
        "pods never find a node"
    ]


def test_quota_finding_fires_for_the_teams_sum_in_one_flavor() -> None:
    data = template_data()
    data["queues"]["teams"][0]["quotas"][1]["gpu"] = 20
    data["queues"]["teams"][1]["quotas"][1]["gpu"] = 20  # each fits, together 40 of 32
    (line,) = warnings_for(parse_profile(data))
    assert line.startswith(
        "warning: pool gpu-spot: queues.teams: the teams' nominal quotas in flavor gpu-spot add up to 40"
    )
    data["queues"]["teams"][1]["quotas"][1]["gpu"] = 16  # 36 of 32 still
    assert len(warnings_for(parse_profile(data))) == 1
    data["queues"]["teams"][1]["quotas"][1]["gpu"] = 12  # 32 of 32
    assert warnings_for(parse_profile(data)) == []


def test_quota_finding_counts_node_groups_by_max_size_and_gpus_per_instance() -> None:
    """gpu-spot-ng: one group per zone (3) at maxSize 10 of p3.2xlarge (1 GPU): 30 GPUs at most."""
    profile = eksctl_with_queues(gpu=30)
    assert pool_capacity(profile, profile.pool("gpu-spot-ng")).gpu == 30
    assert warnings_for(profile) == []
    (line,) = warnings_for(eksctl_with_queues(gpu=31))
    assert "at most 30 (3 node group(s) at maxSize 10 x p3.2xlarge)" in line


# --- bad profile sections ---------------------------------------------------------------------------------


def render_exit(tmp_path: Path, data: dict[str, Any]) -> tuple[int, str]:
    path = tmp_path / "kgpu.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(cli, ["render", "-f", str(path), "--target", "kueue"])
    return res.exit_code, res.output


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda q: q["teams"][0]["quotas"][1].update(pool="gpu-spt"),
            "queues.teams[0].quotas[1].pool: 'gpu-spt' is not a pool; did you mean gpu-spot?",
        ),
        (
            lambda q: q["teams"][1]["quotas"][0].update(memory="256Gx"),
            "queues.teams[1].quotas[0].memory: '256Gx' is not a quantity",
        ),
        (
            lambda q: q["teams"][0]["quotas"][2].update(gpu={"nominal": "four"}),
            "queues.teams[0].quotas[2].gpu: 'four' is not a quantity",
        ),
        (
            lambda q: q["teams"][1]["quotas"][2].update(gpu={"nominal": 16, "lendingLimit": 20}),
            "queues.teams[1].quotas[2].gpu: lendingLimit 20 must be less than or equal to the nominalQuota (16)",
        ),
        (
            lambda q: q["teams"][1].update(namespaces=["Prod"]),
            "queues.teams[1].namespaces: [0]: 'Prod' is not a namespace name",
        ),
        (
            lambda q: q["preemption"].update(reclaimWithinCohort="Always"),
            "queues.preemption.reclaimWithinCohort: 'Always' is not one of Never, LowerPriority, Any",
        ),
        (
            lambda q: q["teams"][1].update(name="research"),
            "queues: teams: names must be unique, repeated: research",
        ),
        (
            lambda q: q["teams"][0]["quotas"][0].update(gpus=1),
            "queues.teams[0].quotas[0].gpus: unknown field",
        ),
    ],
)
def test_bad_queues_section_exits_2_naming_the_field(tmp_path: Path, edit: Any, expected: str) -> None:
    data = template_data()
    edit(data["queues"])
    code, output = render_exit(tmp_path, data)
    assert code == 2, output
    assert expected in output and "Traceback" not in output
    assert len(output.strip().splitlines()) == 1


def test_a_cpu_quota_with_nothing_to_default_to_names_the_field(tmp_path: Path) -> None:
    data = template_data()
    del data["pools"][0]["limits"]  # general: no cpu/memory limit
    data["queues"]["teams"][0]["quotas"][0] = {"pool": "general"}
    code, output = render_exit(tmp_path, data)
    assert code == 2
    assert "queues.teams[0].quotas[0].cpu: pool general sets no cpu limit" in output
    with pytest.raises(InputError):
        kueue_docs(parse_profile(data))


# --- the template and kgpu queue --------------------------------------------------------------------------


def test_template_renders_and_kgpu_queue_admits_the_seed_jobs(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    res = CliRunner().invoke(
        cli, ["render", "--template", "kueue-two-teams", "--output-dir", str(out), "--validate"]
    )
    assert res.exit_code == 0, res.output
    assert "kueue.yaml" in yaml.safe_load((out / "kustomization.yaml").read_text())["resources"]
    res = CliRunner().invoke(
        cli,
        [
            "queue",
            "-c",
            str(out / "kueue.yaml"),
            "-w",
            str(JOBS),
            "--now",
            NOW,
            "--profile",
            str(TEMPLATE),
            "-o",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    by_name = {w["name"].rsplit("-", 1)[0]: w for w in result["workloads"]}
    assert set(by_name) == {"job-pytorch-training", "rayjob-ray-gpu-training", "raycluster-ray-interactive"}
    assert all(w["admitted"] and w["reason"] == "QuotaReserved" for w in by_name.values())
    job = by_name["job-pytorch-training"]
    assert job["cluster_queue"] == "prod" and job["flavors"] == {"main": {"nvidia.com/gpu": "gpu-on-demand"}}
    ray = by_name["rayjob-ray-gpu-training"]
    assert ray["cluster_queue"] == "research"
    assert ray["flavors"]["head"] == {"cpu": "general", "memory": "general"}
    assert ray["flavors"]["gpu-group"]["nvidia.com/gpu"] == "gpu-spot"
    for w in by_name.values():
        placement = w["placement"]
        assert placement["status"] == "placed" and placement["scheduled"] == placement["pods"]
        assert placement["hourly_cost"] > 0 and placement["new_nodes"]
    assert any(n.endswith(" on-demand") for n in job["placement"]["new_nodes"])
    assert all(n.endswith(" spot") for n in ray["placement"]["new_nodes"])


def test_stdout_render_of_the_template_is_a_queue_input_too() -> None:
    """`kgpu render --template kueue-two-teams > all.yaml` holds the namespaces the LocalQueues live in."""
    res = CliRunner().invoke(cli, ["render", "--template", "kueue-two-teams"])
    assert res.exit_code == 0
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    assert {"research", "prod"} <= names
    jobs = [d for d in yaml.safe_load_all(JOBS.read_text()) if d]
    workloads = read_jobs(jobs, source=str(JOBS), priority_classes=docs).workloads
    settled = settle([*docs, *workloads], source="render")
    assert {o.cluster_queue for o in settled.workloads.values()} == {"research", "prod"}
    assert all(o.admitted for o in settled.workloads.values())
