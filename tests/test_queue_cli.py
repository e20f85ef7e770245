"""`kgpu queue`: Kueue's verdict, the flavor, the start time and the placement of queued GPU jobs, on the
two-team example (examples/queue) and on clusters built from it: a team whose quota is in use, a flavor
whose nodes are missing, nodes labelled for one flavor only."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "queue"
KUEUE = str(EXAMPLE / "kueue.yaml")
JOBS = str(EXAMPLE / "jobs.yaml")
PROFILE = str(ROOT / "src" / "kgpu" / "model" / "templates" / "eks-karpenter.yaml")
NOW = "2026-11-28T12:00:00Z"
GPU = "nvidia.com/gpu"


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["queue", *args])
    return res.exit_code, res.stdout + (res.stderr if res.stderr_bytes else "")


def queue_json(*args: str, codes: tuple[int, ...] = (0, 1)) -> dict[str, Any]:
    code, out = run(*args, "-o", "json")
    assert code in codes, out
    data: dict[str, Any] = json.loads(out)
    schema = json.loads(resources.files("kgpu.cli").joinpath("schemas", "queue.schema.json").read_text())
    jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(data)
    return data


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in data["workloads"]}


def running_workload(name: str, gpus: int, admitted_at: str) -> dict[str, Any]:
    """A Workload Kueue admitted for team-a's Job `name` (priority above every class of the example, so no
    new job preempts it), holding `gpus` g5-spot GPUs, as `kubectl get -o json`
    shows it (v1beta2, status.admission and its conditions)."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}-1a2b3",
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": admitted_at,
            "resourceVersion": "4711",
            "labels": {"kueue.x-k8s.io/job-uid": f"job-uid-{name}"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": f"job-uid-{name}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": "team-a",
            "priority": 100000,
            "active": True,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                                }
                            ],
                            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                        }
                    },
                }
            ],
        },
        "status": {
            "admission": {
                "clusterQueue": "team-a",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 1,
                        "flavors": {GPU: "g5-spot"},
                        "resourceUsage": {GPU: str(gpus)},
                    }
                ],
            },
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "Quota reserved in ClusterQueue team-a",
                    "lastTransitionTime": admitted_at,
                },
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": admitted_at,
                },
            ],
        },
    }


def write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def kueue_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(Path(KUEUE).read_text()) if d]


def lone_team_a(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """team-a alone in no cohort: its own 4 spot g5 and 2 on-demand g5 GPUs, nothing to borrow."""
    out = []
    for d in docs:
        if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == "team-b":
            continue
        if d["kind"] == "ClusterQueue":
            d["spec"].pop("cohortName", None)
            for group in d["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for r in flavor["resources"]:
                        r.pop("borrowingLimit", None)
        out.append(d)
    return out


def node(name: str, family: str, capacity: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": f"{family}.12xlarge",
                "karpenter.sh/capacity-type": capacity,
                "karpenter.k8s.aws/instance-family": family,
                "karpenter.sh/nodepool": "gpu",
                "node-type": "gpu",
                "topology.kubernetes.io/zone": "us-west-2a",
            },
        },
        "spec": {"taints": [{"key": GPU, "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "47", "memory": "190Gi", "pods": "234", GPU: str(gpus)},
            "capacity": {"cpu": "48", "memory": "192Gi", "pods": "234", GPU: str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_the_example_admits_both_seed_jobs_on_spot_g5_now() -> None:
    data = queue_json("-c", KUEUE, "-w", JOBS, "--now", NOW, codes=(0,))
    rows = by_name(data)
    train = rows["job-pytorch-training-adb98"]
    ray = rows["rayjob-ray-gpu-training-61476"]
    assert (train["admitted"], train["cluster_queue"], train["flavors"]) == (
        True,
        "team-a",
        {"main": {GPU: "g5-spot"}},
    )
    assert ray["admitted"] and ray["flavors"]["gpu-group"][GPU] == "g5-spot"
    assert train["start"]["earliest"] == NOW and train["submitted"]
    spot = {
        (q["cluster_queue"], q["flavor"]): q["used"] for q in data["cluster_queues"] if q["resource"] == GPU
    }
    assert spot[("team-a", "g5-spot")] == 1 and spot[("team-b", "g5-spot")] == 2


def test_quota_admits_but_no_node_can_hold_it_in_the_schedulers_words(tmp_path: Path) -> None:
    """The cluster has only on-demand g5 nodes: Kueue admits onto g5-spot (quota), kube-scheduler finds no node
    with the flavor's labels."""
    cluster = write(tmp_path, "cluster.yaml", [*kueue_docs(), node("ip-10-0-1-5", "g5", "on-demand", 4)])
    data = queue_json("-c", cluster, "-w", JOBS, "--now", NOW)
    train = by_name(data)["job-pytorch-training-adb98"]
    assert train["admitted"]
    placement = train["placement"]
    assert placement["status"] == "unschedulable"
    assert placement["message"].startswith(
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector"
    )


def test_the_flavors_node_labels_steer_the_pods(tmp_path: Path) -> None:
    cluster = write(
        tmp_path,
        "cluster.yaml",
        [*kueue_docs(), node("ip-10-0-1-5", "g5", "on-demand", 4), node("ip-10-0-1-6", "g5", "spot", 4)],
    )
    train = by_name(queue_json("-c", cluster, "-w", JOBS, "--now", NOW))["job-pytorch-training-adb98"]
    assert train["placement"] == {
        "status": "placed",
        "pods": 1,
        "scheduled": 1,
        "nodes": ["ip-10-0-1-6"],
        "new_nodes": [],
        "hourly_cost": None,
        "message": "",
    }


def test_a_profile_launches_nodes_for_admitted_pods_with_their_cost() -> None:
    train = by_name(queue_json("-c", KUEUE, "-w", JOBS, "--now", NOW, "--profile", PROFILE))[
        "job-pytorch-training-adb98"
    ]
    placement = train["placement"]
    assert placement["status"] == "placed" and placement["new_nodes"]
    assert all(n.startswith("g5.") and n.endswith("spot") for n in placement["new_nodes"])
    assert placement["hourly_cost"] is not None and placement["hourly_cost"] > 0


def test_pending_on_quota_in_kueues_words_and_a_start_time_when_the_running_job_ends(tmp_path: Path) -> None:
    """team-a alone: a running Workload holds 4 of its 4 spot GPUs and 2 on-demand; a new job asking 4 waits
    until the running one ends (2 h after it started, 1 h ago: in 1 h)."""
    docs = lone_team_a(kueue_docs())
    holding = running_workload("finetune", 4, "2026-11-28T11:00:00Z")
    jobs = yaml.safe_load_all(Path(JOBS).read_text())
    job = next(d for d in jobs if d and d["kind"] == "Job")
    for c in job["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"requests": {GPU: "4"}, "limits": {GPU: "4"}}
    cluster = write(tmp_path, "cluster.yaml", [*docs, holding])
    submitted = write(tmp_path, "jobs.yaml", [job])
    data = queue_json(
        "-c",
        cluster,
        "-w",
        submitted,
        "--now",
        NOW,
        "--runtime",
        "team-a/finetune=2h",
        "--job",
        "team-a/pytorch-training",
    )
    (row,) = data["workloads"]
    assert not row["admitted"] and row["reason"] == "Pending"
    # Kueue sorts the flavors' reasons (flavorassigner Status.Message): quota the flavor can never give first
    assert row["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor g5-on-demand, "
        "previously considered podsets requests (0) + current podset request (4) > maximum capacity (2), "
        "insufficient quota for nvidia.com/gpu in flavor p4d-on-demand, previously considered podsets requests "
        "(0) + current podset request (4) > maximum capacity (0), insufficient unused quota for nvidia.com/gpu "
        "in flavor g5-spot, 4 more needed"
    )
    assert row["start"]["earliest"] == "2026-11-28T13:00:00Z" == row["start"]["latest"]
    assert row["ahead"] == [] and row["placement"] is None
    for within, code in (("30m", 1), ("90m", 0)):  # the start is in 1 h
        args = ("-c", cluster, "-w", submitted, "--now", NOW, "--runtime", "team-a/finetune=2h")
        assert run(*args, "--job", "team-a/pytorch-training", "--within", within)[0] == code


def test_the_table_says_pending_and_why(tmp_path: Path) -> None:
    docs = lone_team_a(kueue_docs())
    cluster = write(
        tmp_path, "cluster.yaml", [*docs, running_workload("finetune", 4, "2026-11-28T11:00:00Z")]
    )
    job = next(d for d in yaml.safe_load_all(Path(JOBS).read_text()) if d and d["kind"] == "Job")
    for c in job["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"requests": {GPU: "4"}, "limits": {GPU: "4"}}
    code, out = run(
        "-c", cluster, "-w", write(tmp_path, "j.yaml", [job]), "--now", NOW, "--runtime", "team-a/team-a=2h"
    )
    assert code == 1
    line = next(x for x in out.splitlines() if x.startswith("team-a/job-pytorch-training"))
    assert line.split()[1:5] == ["(new)", "team-a", "pending", "-"] and "+1h00m" in line
    assert "team-a/job-pytorch-training-adb98: couldn't assign flavors to pod set main" in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--within", "5x"), "--within: '5x' is not a duration"),
        (("--runtime", "team-a/x"), "--runtime: 'team-a/x' is not NS/NAME=DURATION"),
        (("--job", "team-a/nope"), "--job: no Workload or job team-a/nope in the input"),
        (("--job", "nope"), "--job: 'nope' is not NAMESPACE/NAME"),
        (("--now", "yesterday"), "--now: 'yesterday' is not an RFC 3339 time"),
    ],
)
def test_bad_arguments_are_named_exit_2(args: tuple[str, ...], said: str) -> None:
    code, out = run("-c", KUEUE, "-w", JOBS, *args)
    assert code == 2 and said in out


def test_a_quota_that_is_not_a_quantity_names_the_object_and_field(tmp_path: Path) -> None:
    docs = kueue_docs()
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")
    cq["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]["nominalQuota"] = "four"
    code, out = run("-c", write(tmp_path, "bad.yaml", docs), "-w", JOBS)
    assert code == 2
    assert "ClusterQueue" in out and "team-a" in out and "nominalQuota" in out


def test_a_jobs_file_without_jobs_is_refused_and_an_empty_cluster_is_said(tmp_path: Path) -> None:
    code, out = run("-c", KUEUE, "-w", KUEUE)
    assert code == 2 and "--workloads: no Job, JobSet, RayJob or RayCluster" in out
    code, out = run("-c", write(tmp_path, "empty.yaml", [{"apiVersion": "v1", "kind": "List", "items": []}]))
    assert code == 0 and "warning: no ClusterQueue in the input: Kueue admits nothing" in out


def test_a_document_without_kind_in_a_folder_names_its_file(tmp_path: Path) -> None:
    """A rendered folder holds Helm values next to the objects: the error names the file and document."""
    (tmp_path / "a-kueue.yaml").write_text(Path(KUEUE).read_text())
    (tmp_path / "b-chart-values.yaml").write_text("settings:\n  clusterName: gpu\n---\nreplicas: 2\n")
    code, out = run("-c", str(tmp_path))
    assert code == 2
    assert f"{tmp_path / 'b-chart-values.yaml'}: document 1: object without kind" in out


def test_plan_queue_puts_the_jobs_behind_the_profiles_own_kueue(tmp_path: Path) -> None:
    """`kgpu plan --queue`: the kueue-two-teams profile's rendered Kueue objects as the cluster, seed 000's
    Job and seed 004's RayJob and RayCluster submitted now: each admitted in its team's ClusterQueue with a
    flavor of its pool, placed on nodes the profile launches, with their cost."""
    profile = tmp_path / "kgpu.yaml"
    profile.write_text((ROOT / "src" / "kgpu" / "model" / "templates" / "kueue-two-teams.yaml").read_text())
    jobs = str(EXAMPLE / "two-teams-jobs.yaml")
    page = tmp_path / "queue.html"
    res = CliRunner().invoke(
        cli, ["plan", "-f", str(profile), "--queue", "-w", jobs, "-o", "json", "--report", str(page)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    html = page.read_text()
    assert "Queue for profile" in html and "3 of 3 Workloads admitted now" in html
    for q in data["cluster_queues"]:  # every quota row of the JSON is a row of the page
        assert f"<td>{q['cluster_queue']}</td>" in html and f"<td>{q['flavor']}</td>" in html
    jsonschema.validate(data, json.loads((ROOT / "src/kgpu/cli/schemas/queue.schema.json").read_text()))
    by_cq = {(w["namespace"], w["name"]): w for w in data["workloads"]}
    assert len(by_cq) == 3 and all(w["admitted"] for w in by_cq.values())
    prod = next(w for w in data["workloads"] if w["cluster_queue"] == "prod")
    assert {f for ps in prod["flavors"].values() for f in ps.values()} == {"gpu-on-demand"}
    research = [w for w in data["workloads"] if w["cluster_queue"] == "research"]
    assert len(research) == 2 and all(
        "gpu-spot" in {f for ps in w["flavors"].values() for f in ps.values()} for w in research
    )
    bare = tmp_path / "bare.yaml"
    bare.write_text((ROOT / "src" / "kgpu" / "model" / "templates" / "eks-karpenter.yaml").read_text())
    res = CliRunner().invoke(cli, ["plan", "-f", str(bare), "--queue", "-w", jobs])
    assert res.exit_code == 2 and "needs a profile file with a queues section" in res.output


def test_simulate_shows_quota_per_cluster_queue_beside_the_nodes() -> None:
    """`kgpu simulate -c` on a cluster holding Kueue's objects: the quota per ClusterQueue, flavor and
    resource after what Kueue admits now (JSON `cluster_queues`, a table under the node view); Kueue's kinds
    are read, not reported as unknown; a bad Kueue object is bad input."""
    res = CliRunner().invoke(cli, ["simulate", "-c", KUEUE, "-o", "json"])
    data = json.loads(res.stdout)
    rows = {(q["cluster_queue"], q["flavor"], q["resource"]): q for q in data["cluster_queues"]}
    assert rows[("team-b", "p4d-on-demand", GPU)]["nominal"] == 8
    assert {q["cohort"] for q in data["cluster_queues"]} == {"gpu-teams"}
    res = CliRunner().invoke(cli, ["simulate", "-c", KUEUE])
    assert "Quota per ClusterQueue" in res.output and "unknown kind 'ClusterQueue'" not in res.output
    docs = [d for d in yaml.safe_load_all(Path(KUEUE).read_text()) if d]
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    res = CliRunner().invoke(cli, ["simulate", "-c", "-"], input=yaml.safe_dump_all(docs))
    assert res.exit_code == 2 and "nominalQuota" in res.output, res.output


def test_without_c_kgpu_queue_reads_the_live_cluster(tmp_path: Path) -> None:
    """No -c: Kueue's objects, the Namespaces and the nodes and pods are read from the kubeconfig's cluster
    (an API server on 127.0.0.1 serving them as kube-apiserver does), as `kgpu snapshot` reads them; the
    answer is the one the same objects in a file give."""
    from fake_apiserver import RESOURCES, FakeApiServer

    objs = [d for d in yaml.safe_load_all(Path(KUEUE).read_text()) if d]
    server = FakeApiServer(objs, served=tuple(RESOURCES))
    kc = tmp_path / "kc"
    with server.running():
        kc.write_text(yaml.safe_dump(server.kubeconfig()))
        live = CliRunner().invoke(
            cli,
            ["queue", "--kubeconfig", str(kc), "-w", JOBS, "--now", NOW, "-o", "json"],
            env={"KUBECONFIG": "", "HOME": "/nonexistent"},
        )
    assert live.exit_code in (0, 1), live.output
    got = json.loads(live.stdout)
    from_file = queue_json("-c", KUEUE, "-w", JOBS, "--now", NOW)
    assert got["cluster_queues"] == from_file["cluster_queues"]
    assert [(w["namespace"], w["name"], w["admitted"], w["flavors"]) for w in got["workloads"]] == [
        (w["namespace"], w["name"], w["admitted"], w["flavors"]) for w in from_file["workloads"]
    ]
    assert any(r.path.startswith("/apis/kueue.x-k8s.io/") for r in server.requests)
