"""GPU Feature Discovery's labels for shared and MIG GPUs, against the device plugin's own tests as data.

Each case is one of NVIDIA/k8s-device-plugin's label tests (commit 1b826acc6af3079d8923bac395c3124b8861a9a6,
``internal/lm/resource_test.go`` ``TestGPUResourceLabeler`` / ``TestMigResourceLabeler`` and
``internal/lm/mig-strategy_test.go`` ``TestMigStrategyNoneLabels`` / ``TestMigStrategySingleLabels``): its
sharing config, devices and expected labels, restricted to the labels kgpu models (``product``, ``count``,
``replicas``, ``sharing-strategy``, ``nvidia.com/mig.strategy``; not memory, engines or compute capability).
The plugin's mock GPU is ``MOCKMODEL`` with MIG devices ``1g.100gb`` / ``1g.300gb``; here it is a catalog GPU
with a MIG profile of the same kind (one profile per GPU), and ``MOCKMODEL`` reads as its product name.
"""

from __future__ import annotations

from typing import Any

import pytest

from kgpu.model.sharing import DeviceConfig, gpu_product

TS = "time-slicing"
KEYS = ("product", "count", "replicas", "sharing-strategy")


def expected(labels: dict[str, str], model: str, profile: str = "") -> dict[str, str]:
    """The plugin test's labels, kgpu's keys only, MOCKMODEL (and its MIG profile) made the catalog GPU's."""
    out = {}
    for k, v in labels.items():
        if k == "nvidia.com/mig.strategy" or k.rpartition(".")[2] in KEYS or k.endswith(".sharing-strategy"):
            v = v.replace("MOCKMODEL", model)
            for mock in ("1g.100gb", "1g.300gb"):
                v = v.replace(mock, profile)
            out[k] = v
    return out


def gpu_labels(cfg: DeviceConfig, gpu: str, gpus: int) -> dict[str, str]:
    return {k: v for k, v in cfg.gfd_labels(gpu, gpus).items()
            if k == "nvidia.com/mig.strategy" or k.startswith("nvidia.com/gpu.") or k.startswith("nvidia.com/mig-")}


# (description in the plugin's test, kgpu config, GPUs, the plugin's expected labels)
WHOLE_GPU: list[tuple[str, DeviceConfig, int, dict[str, str]]] = [
    ("no sharing", DeviceConfig(), 1, {
        "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.product": "MOCKMODEL"}),
    ("time-slicing ignores non-matching resource",
     DeviceConfig(strategy=TS, replicas={"nvidia.com/not-gpu": 2}), 1, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "1",
         "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.product": "MOCKMODEL"}),
    ("time-slicing appends suffix and doubles count",
     DeviceConfig(strategy=TS, replicas={"nvidia.com/gpu": 2}), 1, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "2",
         "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "MOCKMODEL-SHARED"}),
    ("time-slicing renamed does not append suffix and doubles count",
     DeviceConfig(strategy=TS, replicas={"nvidia.com/gpu": 2}, rename=True), 1, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "2",
         "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "MOCKMODEL"}),
    ("mps ignores non-matching resource",
     DeviceConfig(strategy="mps", replicas={"nvidia.com/not-gpu": 2}, fail_gt_one=True), 1, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "1",
         "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.product": "MOCKMODEL"}),
    ("mps appends suffix and doubles count",
     DeviceConfig(strategy="mps", replicas={"nvidia.com/gpu": 2}, fail_gt_one=True), 1, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "2",
         "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.product": "MOCKMODEL-SHARED"}),
    ("mps renamed does not append suffix and doubles count",
     DeviceConfig(strategy="mps", replicas={"nvidia.com/gpu": 2}, rename=True, fail_gt_one=True), 1, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "2",
         "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.product": "MOCKMODEL"}),
    ("sharing is applied to multiple devices", DeviceConfig(strategy=TS, replicas={"nvidia.com/gpu": 2}), 2, {
        "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "2",
        "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "MOCKMODEL-SHARED"}),
]


@pytest.mark.parametrize(("gpu", "case"), [(g, c) for g in ("A10G", "T4", "H100") for c in WHOLE_GPU],
                         ids=lambda x: x if isinstance(x, str) else x[0])
def test_whole_gpu_labels_are_the_plugins(gpu: str, case: tuple[str, DeviceConfig, int, dict[str, str]]) -> None:
    _, cfg, gpus, labels = case
    assert gpu_labels(cfg, gpu, gpus) == expected(labels, gpu_product(gpu))


# MIG: one GPU model with one-profile configs (the mock's single MIG device per GPU), H100 all-7g.80gb
MIG_SINGLE: list[tuple[str, dict[str, Any], int, dict[str, str]]] = [
    ("single non-mig device returns non-mig (none) labels", {"mig_config": "all-disabled"}, 1, {
        "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.product": "MOCKMODEL", "nvidia.com/mig.strategy": "single"}),
    ("multiple non-mig device returns non-mig (none) labels", {"mig_config": "all-disabled"}, 2, {
        "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.product": "MOCKMODEL", "nvidia.com/mig.strategy": "single"}),
    ("single mig-enabled device returns mig labels", {"mig_config": "all-7g.80gb"}, 1, {
        "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.product": "MOCKMODEL-MIG-1g.100gb", "nvidia.com/mig.strategy": "single"}),
    ("multiple mig-enabled devices returns mig labels", {"mig_config": "all-7g.80gb"}, 2, {
        "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.product": "MOCKMODEL-MIG-1g.100gb", "nvidia.com/mig.strategy": "single"}),
    ("empty mig devices returns MIG invalid label", {"mig_config": "all-enabled"}, 1, {
        "nvidia.com/gpu.count": "0", "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.sharing-strategy": "",
        "nvidia.com/gpu.product": "MOCKMODEL-MIG-INVALID", "nvidia.com/mig.strategy": "single"}),
    ("mixed mig config returns MIG invalid label", {"mig_config": "all-balanced"}, 1, {
        "nvidia.com/gpu.count": "0", "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.sharing-strategy": "",
        "nvidia.com/gpu.product": "MOCKMODEL-MIG-INVALID", "nvidia.com/mig.strategy": "single"}),
]


@pytest.mark.parametrize("case", MIG_SINGLE, ids=lambda c: c[0])
def test_mig_single_strategy_labels_are_the_plugins(case: tuple[str, dict[str, Any], int, dict[str, str]]) -> None:
    _, kw, gpus, labels = case
    cfg = DeviceConfig(mig_strategy="single", **kw)
    assert gpu_labels(cfg, "H100", gpus) == expected(labels, gpu_product("H100"), "7g.80gb")


def test_mig_enabled_gpus_keep_whole_labels_without_sharing() -> None:
    """``sharing is not applied to multiple MIG device; replicas is zero``: MIG-enabled GPUs keep
    ``nvidia.com/gpu.*`` with the model's product, the GPU count and replicas 0 even when ``nvidia.com/gpu``
    is time-sliced; under ``mixed`` the MIG devices' labels come beside them."""
    cfg = DeviceConfig(strategy=TS, replicas={"nvidia.com/gpu": 2}, mig_strategy="mixed", mig_config="all-7g.80gb")
    want = expected({
        "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.product": "MOCKMODEL"}, gpu_product("H100"))
    got = gpu_labels(cfg, "H100", 2)
    assert {k: v for k, v in got.items() if k.startswith("nvidia.com/gpu.")} == want
    assert got["nvidia.com/mig-7g.80gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-7g.80gb"
    assert got["nvidia.com/mig-7g.80gb.replicas"] == "1"


# TestMigResourceLabeler: the labels of one MIG resource, under the single (nvidia.com/gpu) or mixed name
MIG_RESOURCE: list[tuple[str, str, dict[str, Any], dict[str, str]]] = [
    ("no sharing", "single", {}, {
        "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.product": "MOCKMODEL-MIG-1g.300gb"}),
    ("shared appends suffix and doubles count", "single",
     {"strategy": TS, "replicas": {"nvidia.com/gpu": 2}}, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "2",
         "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "MOCKMODEL-MIG-1g.300gb-SHARED"}),
    ("renamed does not append suffix and doubles count", "single",
     {"strategy": TS, "replicas": {"nvidia.com/gpu": 2}, "rename": True}, {
         "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "2",
         "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.product": "MOCKMODEL-MIG-1g.300gb"}),
    ("mig mixed appends shared", "mixed",
     {"strategy": TS, "replicas": {"nvidia.com/mig-7g.80gb": 2}}, {
         "nvidia.com/mig-7g.80gb.count": "1", "nvidia.com/mig-7g.80gb.replicas": "2",
         "nvidia.com/mig-7g.80gb.sharing-strategy": "time-slicing",
         "nvidia.com/mig-7g.80gb.product": "MOCKMODEL-MIG-1g.300gb-SHARED"}),
]


@pytest.mark.parametrize("case", MIG_RESOURCE, ids=lambda c: c[0])
def test_mig_resource_labels_are_the_plugins(case: tuple[str, str, dict[str, Any], dict[str, str]]) -> None:
    _, strategy, kw, labels = case
    cfg = DeviceConfig(mig_strategy=strategy, mig_config="all-7g.80gb", **kw)
    got = gpu_labels(cfg, "H100", 1)
    want = expected(labels, gpu_product("H100"), "7g.80gb")
    assert {k: got.get(k) for k in want} == want


def test_products_are_sanitised_nvml_names() -> None:
    """``sanitise`` in ``internal/lm/resource.go``: the NVML name with spaces as dashes (``NVIDIA A10G`` ->
    ``NVIDIA-A10G``); the MIG GPUs' names are the ones NVML reports (``NVIDIA H100 80GB HBM3``)."""
    assert gpu_product("A10G") == "NVIDIA-A10G"
    assert gpu_product("T4") == "Tesla-T4"
    assert gpu_product("H100") == "NVIDIA-H100-80GB-HBM3"
    assert gpu_product("A100") == "NVIDIA-A100-SXM4-40GB"
