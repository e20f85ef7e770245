"""Seed 003's image cache ("Pod 创建加速"), from the guide's own YAML and `kubectl describe` events: the
pool's own images in the rendered ImageCache, and doctor reading ImageCache objects and "Using image cache"
events to say whether a pod that asks for the cache got it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.doctor import CHECK_IDS, doctor_report

# Seed 003, 方式 2B: the ImageCache (comments dropped), and the status `kubectl get imagecache` shows.
GUIDE_IMAGECACHE = """apiVersion: eks.cloud.tencent.com/v1
kind: ImageCache
metadata:
  name: gpu-training-cache
spec:
  images:
  - pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime
  - tensorflow/tensorflow:2.13.0-gpu
  - nvidia/cuda:11.4.0-runtime-ubuntu20.04
  imageCacheSize: 200
  retentionDays: 30
  autoCreateEip: false
"""
GUIDE_STATUS = {
    "phase": "Ready",
    "imageCacheId": "imc-abc123xyz",
}  # "gpu-training-cache  Ready  imc-abc123xyz"
# 方式一 and 方式二's pods.
GUIDE_FAST = """apiVersion: v1
kind: Pod
metadata:
  name: gpu-inference-fast
  annotations:
    eks.tke.cloud.tencent.com/use-image-cache: auto
    eks.tke.cloud.tencent.com/pod-resource: '{"disk": {"size": 200}}'
    eks.tke.cloud.tencent.com/gpu-type: T4
spec:
  containers:
  - name: inference
    image: pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime
    resources:
      limits:
        nvidia.com/gpu: 1
  nodeSelector:
    type: virtual-kubelet
  tolerations:
  - key: serverless
    operator: Exists
    effect: NoSchedule
"""
GUIDE_CACHED = """apiVersion: v1
kind: Pod
metadata:
  name: gpu-inference-cached
  annotations:
    eks.tke.cloud.tencent.com/use-image-cache: imc-abc123xyz
    eks.tke.cloud.tencent.com/gpu-type: T4
spec:
  containers:
  - name: inference
    image: pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime
    resources:
      limits:
        nvidia.com/gpu: 1
  nodeSelector:
    type: virtual-kubelet
  tolerations:
  - key: serverless
    operator: Exists
    effect: NoSchedule
"""
# 步骤 3's events: with the cache, and without.
USED = ("Pulling", "Using image cache imc-abc123xyz")
FULL = ("Pulling", 'Pulling image "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime"')
SUPER_NODE = "eklet-subnet-k2n4ab7x-7c9f"


def _super_node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": SUPER_NODE,
            "uid": "0b7d6c1e-61a1-4a0f-9a34-7d1f5e0c2b11",
            "labels": {
                "type": "virtual-kubelet",
                "kubernetes.io/role": "agent",
                "kubernetes.io/hostname": SUPER_NODE,
                "node.kubernetes.io/instance-type": "eklet",
                "topology.kubernetes.io/region": "ap-guangzhou",
                "topology.kubernetes.io/zone": "ap-guangzhou-3",
            },
        },
        "spec": {"taints": [{"key": "eks.tke.cloud.tencent.com/eklet", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "1000", "memory": "4000Gi", "pods": "1000", "nvidia.com/gpu": "1000"},
            "allocatable": {"cpu": "1000", "memory": "4000Gi", "pods": "1000", "nvidia.com/gpu": "1000"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.28.3-tke.5", "osImage": "", "containerRuntimeVersion": ""},
        },
    }


def _pod(text: str) -> dict[str, Any]:
    pod: dict[str, Any] = yaml.safe_load(text)
    pod["metadata"].update({"namespace": "default", "uid": f"uid-{pod['metadata']['name']}"})
    pod["spec"]["nodeName"] = SUPER_NODE
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def _cache(status: dict[str, str] | None = GUIDE_STATUS, images: list[str] | None = None) -> dict[str, Any]:
    cache: dict[str, Any] = yaml.safe_load(GUIDE_IMAGECACHE)
    cache["metadata"]["uid"] = "5d3c0f0e-2a5b-4c3e-8d1f-3b6a9e2c7d40"
    if images is not None:
        cache["spec"]["images"] = images
    if status is not None:
        cache["status"] = dict(status)
    return cache


def _event(pod: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.1800a1b2c3d4e5f6", "namespace": "default"},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod,
            "namespace": "default",
            "fieldPath": "spec.containers{inference}",
        },
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": SUPER_NODE},
        "type": "Normal",
        "count": 1,
        "lastTimestamp": "2026-11-22T10:00:30Z",
    }


def _found(*items: dict[str, Any]) -> list[tuple[str, str, str]]:
    doc = {"apiVersion": "v1", "kind": "List", "items": [_super_node(), *items]}
    return [
        (f.check, f.severity, f.object)
        for f in doctor_report(doc).findings
        if f.check in CHECK_IDS["TKE image cache"]
    ]


def test_the_guides_cache_serves_its_pods() -> None:
    """The guide's Ready cache holds the pytorch image: the auto pod and the pod naming imc-abc123xyz,
    whose events say "Using image cache imc-abc123xyz", give no finding."""
    assert _found(_cache(), _pod(GUIDE_FAST), _pod(GUIDE_CACHED), _event("gpu-inference-cached", *USED)) == []


def test_a_full_pull_despite_the_annotation_is_a_warning() -> None:
    """步骤 3's second case: only `Pulling image "..."`: the cache was not used; the fix is an ImageCache
    holding the pulled image."""
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            _super_node(),
            _cache({"phase": "Ready", "imageCacheId": "imc-other1"}),
            _pod(GUIDE_CACHED),
            _event("gpu-inference-cached", *FULL),
        ],
    }
    [f] = [f for f in doctor_report(doc).findings if f.check == "tke-image-cache-not-used"]
    assert f.severity == "warning" and f.object == "Pod/default/gpu-inference-cached"
    assert 'Pulling image "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime"' in f.message
    assert "image cache imc-abc123xyz is not among the cluster's ImageCaches (imc-other1)" in f.message
    fix = yaml.safe_load(f.fix.split("# then")[0])
    assert fix["kind"] == "ImageCache" and fix["spec"]["images"] == [
        "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime"
    ]


def test_auto_with_no_cache_holding_the_image() -> None:
    """TKE matches the image name and tag exactly: a cache of other images leaves the auto pod pulling."""
    other = _cache(images=["tensorflow/tensorflow:2.13.0-gpu"])
    assert _found(other, _pod(GUIDE_FAST)) == [
        ("tke-image-cache-missing", "warning", "Pod/default/gpu-inference-fast")
    ]
    # Docker Hub's implicit prefix is the same image
    hub = _cache(images=["docker.io/pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime"])
    assert _found(hub, _pod(GUIDE_FAST)) == []


def test_a_cache_that_is_not_ready() -> None:
    creating = _cache({"phase": "Creating", "imageCacheId": "imc-abc123xyz"})
    found = _found(creating, _pod(GUIDE_FAST))
    assert ("tke-image-cache-not-ready", "warning", "ImageCache/gpu-training-cache") in found
    assert ("tke-image-cache-missing", "warning", "Pod/default/gpu-inference-fast") in found


def test_without_caches_or_events_doctor_says_it_cannot_tell() -> None:
    assert _found(_pod(GUIDE_FAST)) == [("tke-image-cache-unknown", "info", "Pod/default/gpu-inference-fast")]


def test_cache_images_render_the_guides_imagecache_and_doctor_accepts_it(tmp_path: Path) -> None:
    """The pool's cacheImages (the guide's three images) and cacheSizeGiB (200) make the rendered
    ImageCache the guide's, and the workloads' disk annotation matches it; applied and Ready, doctor finds
    nothing to say about the rendered pods."""
    path = tmp_path / "kgpu.yaml"
    assert CliRunner().invoke(cli, ["init", "-t", "tke-supernode", "-f", str(path), "--force"]).exit_code == 0
    data = yaml.safe_load(path.read_text())
    guide = yaml.safe_load(GUIDE_IMAGECACHE)["spec"]
    data["pools"][0].update({"cacheImages": guide["images"], "cacheSizeGiB": guide["imageCacheSize"]})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    res = CliRunner().invoke(cli, ["render", "-f", str(path), "--target", "workloads"])
    assert res.exit_code == 0, res.output
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    [cache] = [d for d in docs if d["kind"] == "ImageCache"]
    assert cache["apiVersion"] == "eks.cloud.tencent.com/v1"
    assert cache["spec"]["images"] == guide["images"] and cache["spec"]["imageCacheSize"] == 200
    disks = {
        json.loads(
            d["spec"]["template"]["metadata"]["annotations"]["eks.tke.cloud.tencent.com/pod-resource"]
        )["disk"]["size"]
        for d in docs
        if d["kind"] in ("Job", "Deployment")
        and "eks.tke.cloud.tencent.com/pod-resource"
        in d["spec"]["template"]["metadata"].get("annotations", {})
    }
    assert disks == {200}

    applied = copy.deepcopy(cache)
    applied["status"] = {"phase": "Ready", "imageCacheId": "imc-k8q2m4x1"}
    pod = _pod(GUIDE_FAST)
    assert _found(applied, pod) == []


def test_bad_image_reference_in_cache_images_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "kgpu.yaml"
    assert CliRunner().invoke(cli, ["init", "-t", "tke-supernode", "-f", str(path), "--force"]).exit_code == 0
    data = yaml.safe_load(path.read_text())
    data["pools"][0]["cacheImages"] = ["pytorch/pytorch 2.0"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    res = CliRunner().invoke(cli, ["render", "-f", str(path)])
    assert res.exit_code == 2
    assert "pools[0].cacheImages[0]" in res.output
