"""``kgpu catalog`` and ``kgpu tke match``: exit codes 0/1/2 and output shapes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kgpu.cli.main import cli

POD_V100 = """\
apiVersion: v1
kind: Pod
metadata:
  name: tensorflow-training-v100
  annotations:
    eks.tke.cloud.tencent.com/gpu-type: 'V100'
spec:
  containers:
  - name: tensorflow
    image: tensorflow/tensorflow:latest-gpu
    resources:
      requests: {cpu: "6", memory: "30Gi", nvidia.com/gpu: 1}
      limits: {cpu: "8", memory: "40Gi", nvidia.com/gpu: 1}
"""

DEPLOYMENT_T4 = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: inference, namespace: ai}
spec:
  template:
    metadata:
      annotations: {eks.tke.cloud.tencent.com/gpu-type: '1/2*T4'}
    spec:
      containers:
      - name: a
        image: x
        resources:
          requests: {cpu: "2", memory: "8Gi", nvidia.com/gpu: 1}
      - name: b
        image: x
        resources:
          limits: {cpu: "2", memory: "8Gi"}
"""

JOB_BAD_MEM = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  template:
    metadata:
      annotations:
        eks.tke.cloud.tencent.com/gpu-type: 'V100'
        eks.tke.cloud.tencent.com/gpu-count: '1'
        eks.tke.cloud.tencent.com/cpu: '8'
        eks.tke.cloud.tencent.com/mem: '40G'
    spec:
      containers: [{name: t, image: x}]
"""


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


# --- kgpu catalog -------------------------------------------------------------------------------------


def test_catalog_json_filtered_by_gpu_and_sorted_by_price():
    result = run("catalog", "--gpu", "T4", "--region", "us-west-2", "-o", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows and {r["gpu_name"] for r in rows} == {"t4"}
    prices = [r["cheapest_usd_per_hour"] for r in rows]
    assert prices == sorted(prices)
    first = rows[0]
    assert set(first) >= {"instance_type", "on_demand_usd_per_hour", "spot_usd_per_hour", "zones", "region"}
    assert first["cheapest_usd_per_hour"] == min(first["spot_usd_per_hour"], first["on_demand_usd_per_hour"])


def test_catalog_gpu_name_any_case():
    lower = json.loads(run("catalog", "--gpu", "a10g", "-o", "json").stdout)
    upper = json.loads(run("catalog", "--gpu", "A10G", "-o", "json").stdout)
    assert lower == upper and {r["instance_type"].split(".")[0] for r in lower} == {"g5"}


def test_catalog_min_gpus_and_cpu_types():
    rows = json.loads(run("catalog", "--min-gpus", "8", "-o", "json").stdout)
    assert rows and all(r["gpu_count"] >= 8 for r in rows)
    everything = json.loads(run("catalog", "--min-gpus", "0", "-o", "json").stdout)
    assert any(r["instance_type"] == "m5.xlarge" for r in everything)
    assert not any(r["instance_type"] == "m5.xlarge" for r in json.loads(run("catalog", "-o", "json").stdout))


def test_catalog_table():
    result = run("catalog", "--gpu", "t4")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[1].split()[:3] == ["TYPE", "GPU", "GPUS"]
    assert lines[3].startswith("g4dn.xlarge")


def test_catalog_unknown_gpu_exits_2_with_suggestion():
    result = run("catalog", "--gpu", "A10")
    assert result.exit_code == 2
    assert "unknown GPU 'A10'" in result.stderr and "a10g" in result.stderr


def test_catalog_unknown_region_exits_2():
    result = run("catalog", "--region", "us-west-9")
    assert result.exit_code == 2 and "us-west-2" in result.stderr


def test_catalog_override_file_changes_sort(tmp_path: Path):
    """Making g4dn.12xlarge nearly free moves it to the top of the T4 list."""
    overrides = tmp_path / "prices.yaml"
    overrides.write_text(
        "- instance_type: g4dn.12xlarge\n  region: us-east-1\n  ondemand_usd_per_hour: 0.01\n"
    )
    rows = json.loads(run("catalog", "--gpu", "t4", "--file", str(overrides), "-o", "json").stdout)
    assert rows[0]["instance_type"] == "g4dn.12xlarge" and rows[0]["on_demand_usd_per_hour"] == 0.01


def test_catalog_override_csv(tmp_path: Path):
    overrides = tmp_path / "prices.csv"
    overrides.write_text("instance_type,region,spot_usd_per_hour_median\ng5.xlarge,us-east-1,0.001\n")
    rows = json.loads(run("catalog", "--file", str(overrides), "-o", "json").stdout)
    assert rows[0]["instance_type"] == "g5.xlarge"


def test_catalog_bad_override_names_file_and_row(tmp_path: Path):
    overrides = tmp_path / "bad.yaml"
    overrides.write_text("- instance_type: g4dn.xlarge\n  vcpus: four\n")
    result = run("catalog", "--file", str(overrides))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {overrides}: row 1: vcpus:")


def test_catalog_missing_override_file():
    result = run("catalog", "--file", "/does/not/exist.yaml")
    assert result.exit_code == 2 and "no such file" in result.stderr


def test_catalog_tke_specs():
    rows = json.loads(run("catalog", "--provider", "tke", "--gpu", "t4", "-o", "json").stdout)
    assert {r["gpu_type"] for r in rows} == {"T4", "1/4*T4", "1/2*T4"}
    assert all(r["usd_per_hour"] is None for r in rows)
    four = json.loads(run("catalog", "--provider", "tke", "--min-gpus", "4", "-o", "json").stdout)
    assert {(r["gpu_type"], r["gpu_count"]) for r in four} == {
        ("V100", 4),
        ("V100", 8),
        ("T4", 4),
        ("A10*PNV4", 4),
    }
    bad = run("catalog", "--provider", "tke", "--gpu", "L2")
    assert bad.exit_code == 2 and "L20" in bad.stderr


# --- kgpu tke match -----------------------------------------------------------------------------------


def test_tke_match_flags_auto():
    result = run("tke", "match", "--gpu-type", "T4,V100", "--gpus", "1", "--cpu", "6", "--memory", "32Gi", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "gpu_type": "T4",
        "gpu_count": 1,
        "cpu": 8,
        "memory": "32Gi",
        "mode": "auto",
    }


def test_tke_match_flags_explicit_mismatch_exits_1():
    result = run(
        "tke", "match", "--gpu-type", "V100", "--gpus", "1", "--cpu", "6", "--memory", "40Gi", "--explicit", "-o", "json"
    )
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert set(error) == {"code", "message"} and error["code"] == "no_matching_spec"


def test_tke_match_flags_explicit_ok():
    result = run(
        "tke", "match", "--gpu-type", "V100", "--gpus", "1", "--cpu", "8", "--memory", "40Gi", "--explicit", "-o", "json"
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["mode"] == "explicit"


def test_tke_match_bad_quantity_flag_exits_2():
    result = run("tke", "match", "--gpu-type", "T4", "--cpu", "six")
    assert result.exit_code == 2 and result.stderr.startswith("error: --cpu: invalid quantity")


def test_tke_match_needs_input():
    assert run("tke", "match").exit_code == 2
    assert run("tke", "match", "-f", "x.yaml", "--gpu-type", "T4").exit_code == 2


def test_tke_match_pod_file(tmp_path: Path):
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD_V100)
    result = run("tke", "match", "-f", str(pod), "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "object": "Pod default/tensorflow-training-v100",
        "gpu_type": "V100",
        "gpu_count": 1,
        "cpu": 8,
        "memory": "40Gi",
        "mode": "auto",
    }


def test_tke_match_several_documents(tmp_path: Path):
    """One result per pod template; containers add up (2+2 cores, 8+8Gi); any error makes exit 1."""
    path = tmp_path / "all.yaml"
    path.write_text(
        DEPLOYMENT_T4 + "---\n" + JOB_BAD_MEM + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
    )
    result = run("tke", "match", "-f", str(path), "-o", "json")
    assert result.exit_code == 1
    first, second = json.loads(result.stdout)
    assert first == {
        "object": "Deployment ai/inference",
        "gpu_type": "1/2*T4",
        "gpu_count": 1,
        "cpu": 4,
        "memory": "16Gi",
        "mode": "auto",
    }
    assert second["object"] == "Job default/train"
    assert second["error"]["code"] == "invalid_memory_format"


def test_tke_match_table(tmp_path: Path):
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD_V100)
    result = run("tke", "match", "-f", str(pod))  # a table by default, like every other verb
    assert result.exit_code == 0
    assert "V100" in result.stdout.splitlines()[2] and "40Gi" in result.stdout.splitlines()[2]


def test_tke_match_json_pod(tmp_path: Path):
    pod = tmp_path / "pod.json"
    pod.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "annotations": {"eks.tke.cloud.tencent.com/gpu-type": "V100"}},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            }
        )
    )
    result = run("tke", "match", "-f", str(pod), "-o", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["gpu_count"] == 2


def test_tke_match_missing_file_exits_2():
    result = run("tke", "match", "-f", "/does/not/exist.yaml")
    assert result.exit_code == 2 and "no such file" in result.stderr


def test_tke_match_bad_yaml_exits_2(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Pod\nmetadata: [unclosed\n")
    result = run("tke", "match", "-f", str(path))
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {path}: invalid YAML")


def test_tke_match_bad_quantity_names_file_object_field(tmp_path: Path):
    path = tmp_path / "pod.yaml"
    path.write_text(POD_V100.replace('cpu: "6"', 'cpu: "6 cores"'))
    result = run("tke", "match", "-f", str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: {path}: Pod default/tensorflow-training-v100: spec.containers[0].resources.requests.cpu: invalid quantity"
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_tke_match_unquoted_annotation_is_bad_input(tmp_path: Path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB_BAD_MEM.replace("gpu-count: '1'", "gpu-count: 1"))
    result = run("tke", "match", "-f", str(path))
    assert result.exit_code == 2
    assert "spec.template.metadata.annotations[eks.tke.cloud.tencent.com/gpu-count]" in result.stderr


def test_tke_match_file_without_pods_exits_2(tmp_path: Path):
    path = tmp_path / "svc.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    result = run("tke", "match", "-f", str(path))
    assert result.exit_code == 2 and "no Pod or pod template found" in result.stderr


def test_catalog_prices_carry_their_date_and_a_monthly_figure():
    """Every price shown says how old it is; -o wide and JSON add the 730-hour month."""
    from kgpu.catalog.prices import AS_OF, HOURS_PER_MONTH

    table_out = CliRunner().invoke(cli, ["catalog", "--gpu", "T4", "--region", "us-west-2"]).stdout
    assert table_out.rstrip().splitlines()[-1].startswith(f"(prices as of {AS_OF} (AWS, USD; month = 730 h)")
    rows = json.loads(CliRunner().invoke(cli, ["catalog", "--gpu", "T4", "--region", "us-west-2", "-o", "json"]).stdout)
    first = rows[0]
    assert first["instance_type"] == "g4dn.xlarge" and first["prices_as_of"] == AS_OF
    assert first["on_demand_usd_per_month"] == round(first["on_demand_usd_per_hour"] * HOURS_PER_MONTH, 2) == 383.98
    wide = CliRunner().invoke(cli, ["catalog", "--gpu", "T4", "--region", "us-west-2", "-o", "wide"]).stdout
    assert "ON-DEMAND $/MO" in wide and "383.98" in wide
    bare = CliRunner().invoke(cli, ["catalog", "--gpu", "T4", "--no-headers"]).stdout
    assert "prices as of" not in bare
