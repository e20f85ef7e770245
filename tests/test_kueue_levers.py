"""What would let a pending Workload start now (kgpu.sim.queue.levers): each lever kgpu offers is checked by
applying its field changes to the objects, as an administrator would, and settling them again; a quota raise
is the least (one unit less leaves the Workload pending). Built on the two-team example (examples/queue)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from kgpu.model.kueue_jobs import read_jobs
from kgpu.sim.queue.admission import settle
from kgpu.sim.queue.levers import levers
from test_queue_cli import GPU, JOBS, kueue_docs, lone_team_a, queue_json, run, running_workload, write

NOW = "2026-11-28T12:00:00Z"
KEY = ("team-a", "job-pytorch-training-adb98")


def _job(gpus: int, priority_class: str | None = None) -> dict[str, Any]:
    job: dict[str, Any] = next(
        d for d in yaml.safe_load_all(Path(JOBS).read_text()) if d and d["kind"] == "Job"
    )
    for c in job["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    if priority_class:
        job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/priority-class"] = priority_class
    return job


def _objects(cluster: list[dict[str, Any]], job: dict[str, Any]) -> list[dict[str, Any]]:
    from datetime import datetime

    new = read_jobs([*cluster, job], source="t", created=datetime.fromisoformat(NOW)).workloads
    return [*cluster, *new]


def _apply(objects: list[dict[str, Any]], obj: str, fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The lever's field changes, made on a copy of the objects as `kubectl edit` would make them."""
    kind, _, rest = obj.partition("/")
    out = copy.deepcopy(objects)
    for o in out:
        m = o["metadata"]
        if o["kind"] == kind and rest in (m["name"], f"{m.get('namespace')}/{m['name']}"):
            for path, value in fields.items():
                steps = [int(s) if s.isdigit() else s for s in re.findall(r"[^.\[\]]+", path)]
                at: Any = o
                for s in steps[:-1]:
                    at = at.setdefault(s, {}) if isinstance(s, str) else at[s]
                if value is None:
                    at.pop(steps[-1], None)
                else:
                    at[steps[-1]] = value
            return out
    raise AssertionError(f"no {obj}")


def _admitted(objects: list[dict[str, Any]]) -> bool:
    return settle(objects, source="t").workloads[KEY].admitted


def test_quota_levers_are_the_least_raise_in_each_flavor_it_may_use() -> None:
    """team-a alone, its 4 spot GPUs held by a job no class can preempt: a 4-GPU job waits. Raising spot
    quota 4 -> 8, on-demand 2 -> 4 or p4d 0 -> 4 admits it; one GPU less does not."""
    cluster = [*lone_team_a(kueue_docs()), running_workload("finetune", 4, "2026-11-28T11:00:00Z")]
    objects = _objects(cluster, _job(4))
    base = settle(objects, source="t")
    assert not base.workloads[KEY].admitted
    found = levers(objects, KEY, source="t", base=base)
    quota = {next(iter(lv.flavors["main"].values())): lv for lv in found if lv.kind == "quota"}
    assert sorted(quota) == ["g5-on-demand", "g5-spot", "p4d-on-demand"]
    assert [
        lv.kind for lv in found if lv.kind != "quota"
    ] == []  # no class outranks the running job; no cohort
    for flavor, old, new in (("g5-spot", 4, 8), ("g5-on-demand", 2, 4), ("p4d-on-demand", 0, 4)):
        lv = quota[flavor]
        ((path, value),) = lv.fields.items()
        assert path.endswith(".nominalQuota") and value == str(new), (flavor, lv.fields)
        assert lv.change.endswith(f"in flavor {flavor}: nvidia.com/gpu from {old} to {new}")
        assert _admitted(_apply(objects, lv.object, lv.fields))
        assert not _admitted(_apply(objects, lv.object, {path: str(new - 1)}))
        assert lv.preempts == () and lv.also == () and lv.displaces == ()


def test_a_higher_priority_class_preempts_the_running_job() -> None:
    """The running job and the new one are at research (100), which preempts only lower priorities: with
    production (1000) the new one preempts the running job, which the lever names."""
    held = running_workload("finetune", 4, "2026-11-28T11:00:00Z")
    held["spec"]["priority"] = 100
    held["spec"]["priorityClassRef"] = {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "research",
    }
    cluster = [*lone_team_a(kueue_docs()), held]
    objects = _objects(cluster, _job(4, "research"))
    base = settle(objects, source="t")
    assert not base.workloads[KEY].admitted
    found = levers(objects, KEY, source="t", base=base)
    (prio,) = [lv for lv in found if lv.kind == "priority"]
    assert prio.object == f"Workload/{KEY[0]}/{KEY[1]}"
    assert prio.fields["spec.priority"] == 1000 and prio.fields["spec.priorityClassRef.name"] == "production"
    assert prio.preempts == (("team-a", "job-finetune-1a2b3"),)
    after = settle(_apply(objects, prio.object, prio.fields), source="t")
    assert after.workloads[KEY].admitted and after.workloads[("team-a", "job-finetune-1a2b3")].evicted


def test_dropping_the_borrowing_limit_lets_it_borrow_the_cohorts_unused_quota() -> None:
    """team-a may borrow nothing (borrowingLimit 0 everywhere) and its 4 spot GPUs are in use; team-b lends
    its unused 2 spot g5 and 8 p4d GPUs to the cohort: dropping team-a's limit in either flavor admits a
    2-GPU job there."""
    docs = kueue_docs()
    for d in docs:
        if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == "team-a":
            for group in d["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for r in flavor["resources"]:
                        if r["name"] == GPU:
                            r["nominalQuota"] = 4 if flavor["name"] == "g5-spot" else 0
                            r["borrowingLimit"] = 0
    cluster = [*docs, running_workload("finetune", 4, "2026-11-28T11:00:00Z")]
    objects = _objects(cluster, _job(2))
    base = settle(objects, source="t")
    assert not base.workloads[KEY].admitted
    found = levers(objects, KEY, source="t", base=base)
    borrow = [lv for lv in found if lv.kind == "borrowing"]
    assert [lv.flavors["main"][GPU] for lv in borrow] == ["g5-spot", "p4d-on-demand"]
    for lv in borrow:
        assert set(lv.fields.values()) == {None} and all(f.endswith(".borrowingLimit") for f in lv.fields)
        assert _admitted(_apply(objects, lv.object, lv.fields))


def test_kgpu_queue_shows_the_levers_and_json_names_the_fields(tmp_path: Path) -> None:
    cluster = write(
        tmp_path,
        "cluster.yaml",
        [*lone_team_a(kueue_docs()), running_workload("finetune", 4, "2026-11-28T11:00:00Z")],
    )
    jobs = write(tmp_path, "j.yaml", [_job(4)])
    data = queue_json("-c", cluster, "-w", jobs, "--now", NOW, "--runtime", "team-a/finetune=2h")
    (row,) = data["workloads"]
    assert {lv["kind"] for lv in row["levers"]} == {"quota"} and data["levers_note"] == ""
    spot = next(lv for lv in row["levers"] if lv["flavors"]["main"][GPU] == "g5-spot")
    assert spot["object"] == "ClusterQueue/team-a" and list(spot["fields"].values()) == ["8"]
    code, out = run("-c", cluster, "-w", jobs, "--now", NOW, "--runtime", "team-a/finetune=2h")
    assert code == 1
    assert "What would let it start now (each change re-simulated with Kueue's admission):" in out
    assert (
        "team-a/job-pytorch-training-adb98: raise ClusterQueue team-a's nominalQuota in flavor g5-spot: "
        "nvidia.com/gpu from 4 to 8 -> admitted in g5-spot"
    ) in out


def test_the_html_report_shows_quota_per_cluster_queue_beside_the_workloads_and_levers(
    tmp_path: Path,
) -> None:
    cluster = write(
        tmp_path,
        "cluster.yaml",
        [*lone_team_a(kueue_docs()), running_workload("finetune", 4, "2026-11-28T11:00:00Z")],
    )
    jobs = write(tmp_path, "j.yaml", [_job(4)])
    page = tmp_path / "queue.html"
    code, _ = run("-c", cluster, "-w", jobs, "--now", NOW, "--report", str(page))
    assert code == 1
    html = page.read_text()
    # team-a's spot row: nominal 4, used 4, nothing borrowed, 100 % of its quota in use
    assert (
        "<td>team-a</td><td>-</td><td>g5-spot</td><td>nvidia.com/gpu</td><td>4</td><td>4</td><td>0</td>"
        in html
    )
    assert ">100%</td>" in html
    assert "<td>team-a/job-pytorch-training-adb98 (new)</td><td>team-a</td>" in html
    assert "nvidia.com/gpu from 4 to 8 -&gt; admitted in g5-spot" in html
    assert "0 of 1 Workloads admitted now; 3 levers found" in html


def test_with_more_than_five_pending_levers_are_tried_only_for_the_jobs_asked(tmp_path: Path) -> None:
    cluster = write(
        tmp_path,
        "cluster.yaml",
        [*lone_team_a(kueue_docs()), running_workload("finetune", 4, "2026-11-28T11:00:00Z")],
    )
    jobs = []
    for i in range(6):
        job = _job(4)
        job["metadata"]["name"] = f"train-{i}"
        job["metadata"]["uid"] = f"uid-train-{i}"
        jobs.append(job)
    files = write(tmp_path, "j.yaml", jobs)
    data = queue_json("-c", cluster, "-w", files, "--now", NOW)
    assert len(data["workloads"]) == 6 and not any(w["levers"] for w in data["workloads"])
    assert "6 are pending: ask with --job NS/NAME" in data["levers_note"]
    data = queue_json("-c", cluster, "-w", files, "--now", NOW, "--job", "team-a/train-3")
    (row,) = data["workloads"]
    assert row["levers"] and data["levers_note"] == ""
    # the others take any new spot quota first: train-3 needs room for them too (4 GPUs each, ahead of it)
    spot = next(lv for lv in row["levers"] if lv["flavors"]["main"][GPU] == "g5-spot")
    assert int(next(iter(spot["fields"].values()))) > 8 and spot["also_admits"]


def test_a_raise_past_int64_is_no_lever_and_no_error() -> None:
    """A job asking for 2^63-2 GPUs (the most a request may total): spot has 4 in use of 4, so raising it by
    the request passes int64 (a ClusterQueue the API server would refuse): that try admits nothing and kgpu
    still answers; on-demand (2 left of 2) and p4d (0) can be raised to exactly 2^63-2."""
    cluster = [*lone_team_a(kueue_docs()), running_workload("finetune", 4, "2026-11-28T11:00:00Z")]
    objects = _objects(cluster, _job(2**63 - 2))
    base = settle(objects, source="t")
    assert not base.workloads[KEY].admitted
    found = levers(objects, KEY, source="t", base=base)
    quota = {lv.flavors["main"][GPU]: list(lv.fields.values()) for lv in found if lv.kind == "quota"}
    assert quota == {"g5-on-demand": [str(2**63 - 2)], "p4d-on-demand": [str(2**63 - 2)]}
