"""`kgpu simulate` as a user runs it: the JSON contract, the table, exit codes and bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml
from click.testing import CliRunner

from builders import GPU_TAINT, node_dict, pod_dict
from kgpu.cli.main import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_examples_all_placed_json_contract(examples):
    res = invoke("simulate", "--cluster", str(examples / "cluster"), "--workload", str(examples / "workloads"), "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(data) == {"pods", "summary", "workload_cost"}
    assert data["summary"] == {"scheduled": 14, "unschedulable": 0, "with_warnings": 0}
    for pod in data["pods"]:
        assert set(pod) == {"namespace", "name", "phase", "node", "reason", "warnings"}
        assert pod["phase"] == "Scheduled" and pod["node"] and pod["reason"] is None
        assert pod["warnings"] == []
    names = [p["name"] for p in data["pods"]]
    assert names[:3] == ["pytorch-training-0", "tensorflow-serving-0", "tensorflow-serving-1"]
    assert [n for n in names if n.startswith("cuda-vector-add-")] == [f"cuda-vector-add-{i}" for i in range(10)]
    # seed 000's workloads select node-type=gpu; all land on GPU nodes
    assert all("10-0-1-10" not in p["node"] and "10-0-2-20" not in p["node"] for p in data["pods"])


def test_unschedulable_exits_1_with_reason_in_table(tmp_path):
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump_all([node_dict("gpu-1", gpus=1, taints=[GPU_TAINT]), node_dict("cpu-1"), node_dict("cpu-2")]))
    work = tmp_path / "w.yaml"
    work.write_text(yaml.safe_dump(pod_dict("train", gpus=1)))
    res = invoke("simulate", "-c", str(cluster), "-w", str(work))
    assert res.exit_code == 1
    assert "train" in res.output and "Unschedulable" in res.output
    assert ("0/3 nodes are available: 1 node(s) had untolerated taint(s), "
            "2 Insufficient nvidia.com/gpu.") in res.output
    header = res.output.splitlines()[0]
    assert header.split() == ["NAMESPACE", "POD", "PHASE", "NODE", "WHY"]


def test_identical_pods_are_grouped_in_the_table(examples):
    res = invoke("simulate", "-c", str(examples / "cluster"), "-w", str(examples / "workloads" / "001-cuda-vector-add.yaml"))
    assert res.exit_code == 0
    assert "cuda-vector-add (x" in res.output


def test_missing_file_is_exit_2_one_line(tmp_path):
    res = CliRunner().invoke(cli, ["simulate", "-c", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: {tmp_path / 'nope.yaml'}: no such file or directory"


def test_bad_quantity_is_exit_2_naming_the_field(tmp_path, examples):
    work = tmp_path / "w.yaml"
    doc = pod_dict("p", memory="40GB")
    work.write_text(yaml.safe_dump(doc))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(examples / "cluster"), "-w", str(work)])
    assert res.exit_code == 2
    assert "w.yaml: Pod default/p: spec.containers[0].resources.requests.memory: invalid quantity '40GB'" in res.output


def test_kubectl_plugin_entry_point_and_version():
    out = subprocess.run([sys.executable, "-m", "kgpu.cli.main", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("kgpu, version ")


def test_cluster_priority_classes_apply_to_workload_files(tmp_path) -> None:
    """A PriorityClass read with the cluster orders pods from a workload file, as admission would."""
    import json

    from click.testing import CliRunner

    from kgpu.cli.main import cli

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    (tmp_path / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, high]}))

    def pod(name: str, **spec: object) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}], **spec}}

    (tmp_path / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                    "items": [pod("first"), pod("urgent", priorityClassName="high")]}))
    res = CliRunner().invoke(cli, ["simulate", "--cluster", str(tmp_path / "cluster.json"),
                                   "--workload", str(tmp_path / "pods.json"), "-o", "json"])
    data = json.loads(res.stdout)
    phases = {p["name"]: p["phase"] for p in data["pods"]}
    assert phases == {"first": "Unschedulable", "urgent": "Scheduled"}
    assert "warnings" not in data


def test_preempted_pods_in_table_and_json(tmp_path):
    """A high-priority GPU pod on a full cluster evicts the running low-priority pod: the table shows the
    victim as Preempted on its node with who preempted it, and the JSON carries preempted_by / preempted."""
    running = pod_dict("low", gpus=1, node_name="gpu-1", priority=0)
    running["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "low", "uid": "u", "controller": True}
    ]
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump_all([node_dict("gpu-1", gpus=1), running]))
    work = tmp_path / "w.yaml"
    work.write_text(yaml.safe_dump(pod_dict("train", gpus=1, priority=1000)))
    res = invoke("simulate", "-c", str(cluster), "-w", str(work))
    assert res.exit_code == 1  # the recreated pod has nowhere to go
    rows = [line.split()[:4] for line in res.output.splitlines()[2:5]]
    assert rows == [
        ["default", "train", "Scheduled", "gpu-1"],
        ["default", "low", "Preempted", "gpu-1"],
        ["default", "low", "Unschedulable", "-"],
    ]
    assert "preempted by default/train (priority 1000 over 0); its ReplicaSet creates it again" in res.output
    data = json.loads(invoke("simulate", "-c", str(cluster), "-w", str(work), "-o", "json").output)
    assert data["pods"][0]["preempted"] == ["default/low"]
    assert data["pods"][1]["preempted_by"] == "default/train"
    assert data["pods"][2]["recreated"] is True
    assert data["summary"] == {"scheduled": 1, "unschedulable": 1, "preempted": 1, "with_warnings": 0}
