"""Seed 003 rows a user did by hand: what a spec costs and what 1/4*T4 saves, the 'T4,V100' priority list
with 2 GPUs, CUDA against the super node's driver for running pods, and *_VISIBLE_DEVICES in pod specs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kgpu.catalog.tke import TkeSpec, match_auto, packaged_prices, whole_card
from kgpu.cli.main import cli
from kgpu.model.profile import builtin_profile

GIB = 1024**3

# The guide's example 4 ("多 GPU 优先级配置"), with the 2 GPUs of its medium-scale training row.
PRIORITY_2_GPUS = """
apiVersion: v1
kind: Pod
metadata:
  name: multi-gpu-priority
  annotations:
    eks.tke.cloud.tencent.com/gpu-type: 'T4,V100'
spec:
  containers:
  - name: training
    image: nvidia/cuda:11.4.0-runtime-ubuntu20.04
    command: ["nvidia-smi"]
    resources:
      requests: {cpu: "4", memory: "16Gi", nvidia.com/gpu: 2}
      limits: {cpu: "8", memory: "32Gi", nvidia.com/gpu: 2}
"""

# The guide's example 2 (1/4 T4 inference, 3 replicas) and its T4 equivalent.
T4_MINI = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: inference-service-t4-mini
spec:
  replicas: 3
  selector:
    matchLabels: {app: inference}
  template:
    metadata:
      labels: {app: inference}
      annotations:
        eks.tke.cloud.tencent.com/gpu-type: '1/4*T4'
    spec:
      containers:
      - name: inference
        image: your-registry/inference-service:latest
        resources:
          requests: {cpu: "2", memory: "8Gi", nvidia.com/gpu: 1}
          limits: {cpu: "4", memory: "16Gi", nvidia.com/gpu: 1}
        env:
        - name: CUDA_VISIBLE_DEVICES
          value: "0"
"""

PRICES = {
    "date": "2026-11-20",
    "source": "console price calculator, ap-guangzhou",
    "cpuCoreHour": 0.02,
    "memoryGiBHour": 0.005,
    "gpuHour": {"T4": 0.60, "1/4*T4": 0.15, "1/2*T4": 0.30, "V100": 1.50},
}


def _profile(tmp_path: Path, prices: dict[str, Any] | None) -> Path:
    runner = CliRunner()
    path = tmp_path / "kgpu.yaml"
    assert runner.invoke(cli, ["init", "-t", "tke-supernode", "-f", str(path)]).exit_code == 0
    if prices is not None:
        data = yaml.safe_load(path.read_text())
        data["pools"][0]["prices"] = prices
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _plan(tmp_path: Path, profile: Path, text: str, expect: int = 0) -> dict[str, Any]:
    work = tmp_path / "work.yaml"
    work.write_text(text)
    res = CliRunner().invoke(cli, ["plan", "-f", str(profile), "-w", str(work), "-o", "json"])
    assert res.exit_code == expect, res.output
    data: dict[str, Any] = json.loads(res.stdout)
    return data


# --- 'T4,V100' with 2 GPUs ---------------------------------------------------------------------------------


def test_priority_list_falls_back_to_the_next_type_with_the_gpu_count() -> None:
    """'T4,V100' 表示优先使用 T4，不可用时使用 V100: T4 has no 2-card row, V100 has: V100 2 cards, 8 cores
    (the 2-card row offers 2, 4, 8, 16, 18), 32GiB; not 4 T4 cards."""
    spec = match_auto(["T4", "V100"], 2, 8000, 32 * GIB)
    assert spec == TkeSpec("V100", 2, 8, 32)


def test_a_single_type_still_rounds_up_to_more_cards() -> None:
    """With one type there is nothing to fall back to: 'T4' with 2 GPUs gets the 4-card row (the guide's
    "后台会选择 A10 PNV4 4卡" rule)."""
    assert match_auto(["T4"], 2, 8000, 32 * GIB) == TkeSpec("T4", 4, 64, 64)


def test_priority_list_rounds_up_only_when_no_type_has_the_count() -> None:
    """'T4,A10*GNV4' with 2 GPUs: neither has a 2-card row, so T4's 4-card row, the first that holds it."""
    assert match_auto(["T4", "A10*GNV4"], 2, 4000, 16 * GIB).gpu_type == "T4"


def test_plan_places_the_priority_pod_on_v100_two_cards(tmp_path: Path) -> None:
    profile = _profile(tmp_path, None)
    data = _plan(tmp_path, profile, PRIORITY_2_GPUS)
    assert data["pods"][0]["instance_type"] == "V100 2x 8C 32Gi"


def test_explicit_annotations_on_a_priority_list_take_the_type_with_the_spec(tmp_path: Path) -> None:
    """方式 A on 'T4,V100' with 2 cards, 18 cores, 80Gi: T4 offers no such spec, V100 does."""
    profile = _profile(tmp_path, None)
    text = PRIORITY_2_GPUS.replace(
        "gpu-type: 'T4,V100'",
        "gpu-type: 'T4,V100'\n    eks.tke.cloud.tencent.com/gpu-count: '2'\n"
        "    eks.tke.cloud.tencent.com/cpu: '18'\n    eks.tke.cloud.tencent.com/mem: '80Gi'",
    )
    data = _plan(tmp_path, profile, text)
    assert data["pods"][0]["instance_type"] == "V100 2x 18C 80Gi"


# --- prices ------------------------------------------------------------------------------------------------


def test_packaged_prices_are_dated_and_sourced_and_hold_no_figures() -> None:
    """The guide gives no prices and TKE publishes them only in its calculator: the snapshot says so."""
    prices = packaged_prices()
    assert prices.date == "2026-11-25" and "457/39807" in prices.source
    assert prices.spec_price(TkeSpec("T4", 1, 8, 32)) is None


def test_plan_prices_each_spec_from_the_pools_prices(tmp_path: Path) -> None:
    """1/4*T4 4 cores / 16GiB = 0.15 + 4 x 0.02 + 16 x 0.005 = $0.31/h per pod, three replicas."""
    profile = _profile(tmp_path, PRICES)
    data = _plan(tmp_path, profile, T4_MINI)
    assert {n["instance_type"] for n in data["new_nodes"]} == {"1/4*T4 1x 4C 16Gi"}
    assert {n["hourly_price"] for n in data["new_nodes"]} == {0.31}
    assert data["cost"]["total"] == pytest.approx(0.93)
    assert "unpriced_nodes" not in data["cost"]


def test_plan_says_what_a_quarter_t4_saves_against_a_whole_t4(tmp_path: Path) -> None:
    """使用 1/4 T4 可节省 75% GPU 成本: on the whole spec (cores and memory cost the same on both) the pool's
    prices give $0.31 against $0.76 per pod: 59 % saved."""
    profile = _profile(tmp_path, PRICES)
    data = _plan(tmp_path, profile, T4_MINI)
    line = next(w for w in data["warnings"] if "saves" in w)
    assert "3 pod(s) on 1/4*T4 cost $0.9300/h" in line
    assert "whole T4 cards $2.2800/h" in line and "saves $1.3500/h (59%)" in line
    assert "prices of 2026-11-20, console price calculator, ap-guangzhou" in line
    assert "1/4*T4 saves $0.4500/h (59%) against T4 1x 4C 16Gi" in data["new_nodes"][0]["note"]
    assert whole_card(TkeSpec("1/4*T4", 1, 4, 16)) == TkeSpec("T4", 1, 4, 16)


def test_without_prices_plan_says_the_super_node_pods_are_unpriced(tmp_path: Path) -> None:
    profile = _profile(tmp_path, None)
    data = _plan(tmp_path, profile, T4_MINI)
    assert data["cost"]["unpriced_nodes"] == 3
    assert any("3 super-node pod(s) unpriced" in w and "set the pool's prices" in w for w in data["warnings"])


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"gpuHour": {"T5": 1.0}}, "pools[0].prices.gpuHour"),
        ({"gpuHour": {"PNV5b": 1.0}}, "did you mean 'L20'"),
        ({"date": "20 Nov 2026"}, "pools[0].prices.date"),
        ({"cpuCoreHour": -1}, "pools[0].prices.cpuCoreHour"),
        ({"currency": "CNY"}, "pools[0].prices.currency"),
    ],
)
def test_bad_prices_are_exit_2_naming_the_field(tmp_path: Path, change: dict[str, Any], words: str) -> None:
    profile = _profile(tmp_path, {**PRICES, **change})
    res = CliRunner().invoke(cli, ["plan", "-f", str(profile)])
    assert res.exit_code == 2, res.output
    assert words in res.output and "Traceback" not in res.output


def test_prices_on_a_pool_that_is_not_tke_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "kgpu.yaml"
    assert CliRunner().invoke(cli, ["init", "-t", "eks-karpenter", "-f", str(path)]).exit_code == 0
    data = yaml.safe_load(path.read_text())
    data["pools"][1]["prices"] = PRICES
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    res = CliRunner().invoke(cli, ["plan", "-f", str(path)])
    assert res.exit_code == 2 and "only a tke-supernode pool takes prices" in res.output


def test_template_profile_has_no_prices() -> None:
    assert builtin_profile("tke-supernode").pools[0].prices is None


# --- doctor: CUDA of running super-node pods, *_VISIBLE_DEVICES ----------------------------------------------


def _fixture(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (Path(__file__).parent / "fixtures" / "snapshots" / f"{name}.json").read_text(encoding="utf-8")
    )
    return doc


def test_doctor_checks_cuda_of_running_super_node_pods_against_the_guides_driver() -> None:
    """"确保 CUDA 版本匹配": T4 vGPU runs CUDA 11.0, so a CUDA 12.1 image fails; the guide's own example 7
    image (CUDA 11.7) on A10 PNV4 (11.4) runs by minor-version compatibility only."""
    from kgpu.doctor import doctor_report

    report = doctor_report(_fixture("tke-running"))
    found = {f.object: f for f in report.findings if f.check == "tke-cuda-driver"}
    error = found["Pod/default/inference-t4-mini-6f9c8-m2n3b"]
    assert error.severity == "error" and "CUDA driver version is insufficient" in error.message
    assert "1/4*T4 spec runs CUDA 11.0" in error.message
    warning = found["Pod/default/multi-gpu-training-a10-7xk2p"]
    assert warning.severity == "warning" and "A10*PNV4 spec runs CUDA 11.4" in warning.message
    # the complete example: 'T4,V100', CUDA_VISIBLE_DEVICES=0 on one GPU, an image without a CUDA tag
    assert not [f for f in report.findings if "gpu-inference-service" in f.object]


def test_doctor_cli_exit_1_on_the_super_node_cuda_error(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(_fixture("tke-running")))
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(path), "-o", "json"])
    assert res.exit_code == 1, res.output
    assert "tke-cuda-driver" in res.output


def test_visible_devices_findings_follow_the_allocation() -> None:
    from kgpu.doctor import doctor_report

    report = doctor_report(_fixture("visible-devices"))
    got = {(f.check, f.severity, f.object.rsplit("/", 1)[-1]): f.message for f in report.findings}
    assert "no CUDA-capable device is detected" in got[
        ("cuda-visible-devices-conflict", "error", "train-one-r5t4y")
    ]
    assert "the other 3 stay idle" in got[("cuda-visible-devices-conflict", "warning", "train-four-q8w7e")]
    assert "though it requested none" in got[("nvidia-visible-devices-in-spec", "warning", "sidecar-all-p1a2s")]
    assert not any("infer-ok" in k[2] for k in got)  # the guide's "0" on one GPU


def test_kgpu_snapshot_keeps_the_visible_devices_values_and_doctor_compares_them() -> None:
    """kgpu snapshot redacts env values but these two (kgpu.live.snapshot.redact): doctor gives the same
    findings as on the unredacted objects; a value redacted elsewhere is reported as set, not compared."""
    from kgpu.doctor import doctor_report
    from kgpu.live.snapshot import redact

    def levels(doc: dict[str, Any]) -> dict[str, str]:
        report = doctor_report(doc)
        return {f.object.rsplit("/", 1)[-1]: f.severity for f in report.findings if "visible" in f.check}

    plain = levels(_fixture("visible-devices"))
    doc = _fixture("visible-devices")
    for item in doc["items"]:
        redact(item)
    assert levels(doc) == plain and plain["train-one-r5t4y"] == "error"
    for item in doc["items"]:
        for c in (item.get("spec") or {}).get("containers") or []:
            for e in c.get("env") or []:
                e["value"] = "<redacted>"
    report = doctor_report(doc)
    assert {f.object.rsplit("/", 1)[-1]: f.severity for f in report.findings if "visible" in f.check}[
        "train-one-r5t4y"] == "info"
    assert any("redacted by kgpu snapshot" in f.message for f in report.findings)
