"""NVIDIA's DRA driver (NVIDIA/k8s-dra-driver-gpu) as data: its DeviceClasses and the ResourceSlice a node
of a catalog instance type publishes.

Facts from the driver (``cmd/gpu-kubelet-plugin/deviceinfo.go``; chart ``deployments/helm/nvidia-dra-driver-gpu``):

- driver name ``gpu.nvidia.com``; one pool per node, named after the node, in one slice (generation 1,
  ``resourceSliceCount`` 1) whose name the API server generates from ``<node>-gpu.nvidia.com-``;
- a full GPU is device ``gpu-<minor>`` with string attributes ``type`` ("gpu"), ``uuid``, ``productName``,
  ``brand``, ``architecture``, ``pcieBusID``, version attributes ``cudaComputeCapability``, ``driverVersion``,
  ``cudaDriverVersion``, and capacity ``memory`` (bytes);
- a MIG device is ``gpu-<minor>-mig-<GPU instance profile id>-<placement start>-<size>`` with ``type`` "mig",
  ``parentUUID`` and ``profile`` besides the parent's attributes, and capacity ``memory``,
  ``multiprocessors`` and one ``memorySlice<i>`` per memory slice it holds. A GPU in MIG mode publishes its
  MIG devices, not itself;
- DeviceClasses ``gpu.nvidia.com`` and ``mig.nvidia.com`` select ``device.driver == 'gpu.nvidia.com'`` and
  the ``type`` attribute.

Per GPU model (``data/nvidia-dra-gpus.csv``): the product name NVML reports, the architecture and compute
capability (NVIDIA's CUDA GPUs list). Memory is the catalog's MiB (NVML reports slightly less: the driver
reserves some). UUIDs and PCI bus IDs are made up, stable per node and index.
"""

from __future__ import annotations

import csv
import hashlib
import io
from functools import cache
from typing import Any

from kgpu.catalog._resources import read_text
from kgpu.catalog.mig import mig_profiles

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
DRIVER_VERSION = "580.95.5"
CUDA_DRIVER_VERSION = "13.0.0"
# GPU instance profile ids by compute slices (NVIDIA MIG User Guide, "Supported MIG Profiles"); +me: 20,
# the double-memory 1g profile (1g.10gb on 40GB, 1g.20gb on 80GB): 15
_PROFILE_IDS = {1: 19, 2: 14, 3: 9, 4: 5, 7: 0}
_SM_PER_SLICE = {"A100": 14, "A100-80GB": 14, "H100": 16, "H200": 16}


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the driver's chart installs."""
    out = []
    for name, kind in ((GPU_CLASS, "gpu"), (MIG_CLASS, "mig")):
        out.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}' && "
                                                          f"device.attributes['{DRIVER}'].type == '{kind}'"}}]},
        })
    return out


@cache
def _gpus() -> dict[tuple[str, int], dict[str, str]]:
    return {(r["gpu"], int(r["memory_mib"])): r for r in csv.DictReader(io.StringIO(read_text("nvidia-dra-gpus.csv")))}


def gpu_facts(gpu: str, memory_mib: int) -> dict[str, str] | None:
    """The row for a catalog GPU name ('h100') and memory; the closest memory of that name when none is exact."""
    rows = [(abs(m - memory_mib), r) for (g, m), r in _gpus().items() if g == gpu.lower()]
    return min(rows, key=lambda x: x[0])[1] if rows else None


def _uuid(node: str, i: int, what: str = "GPU") -> str:
    h = hashlib.sha256(f"{node}/{what}/{i}".encode()).hexdigest()
    return f"{what}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _mig_key(product: str) -> str:
    if "A100" in product:
        return "A100-80GB" if "80GB" in product else "A100"
    return "H200" if "H200" in product else "H100"


def node_slices(node: str, gpu: str, count: int, memory_mib: int, *, mig: dict[str, int] | None = None,
                driver_version: str = DRIVER_VERSION, cuda_driver_version: str = CUDA_DRIVER_VERSION) -> list[dict[str, Any]]:
    """The ResourceSlices the driver publishes on ``node`` with ``count`` GPUs of model ``gpu`` (a catalog
    name: 'h100'); ``mig``: the MIG devices per GPU (profile -> count) when the GPUs are in MIG mode."""
    facts = gpu_facts(gpu, memory_mib)
    if facts is None or not count:
        return []
    devices = []
    for minor in range(count):
        uuid = _uuid(node, minor)
        base: dict[str, Any] = {
            "productName": {"string": facts["product_name"]}, "brand": {"string": facts["brand"]},
            "architecture": {"string": facts["architecture"]},
            "cudaComputeCapability": {"version": facts["cuda_compute_capability"] + (".0" if facts["cuda_compute_capability"].count(".") == 1 else "")},
            "driverVersion": {"version": driver_version}, "cudaDriverVersion": {"version": cuda_driver_version},
            "pcieBusID": {"string": f"0000:{0x10 + 0x10 * minor:02x}:00.0"},
        }
        if not mig:
            devices.append({"name": f"gpu-{minor}",
                            "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}, **base},
                            "capacity": {"memory": {"value": f"{memory_mib}Mi"}}})
            continue
        key = _mig_key(facts["product_name"])
        table = mig_profiles(key)
        start = 0
        for profile, n in sorted(mig.items(), key=lambda kv: -table[kv[0]].memory_slices if kv[0] in table else 0):
            p = table.get(profile)
            if p is None:
                continue
            pid = 20 if profile.endswith("+me") else (15 if p.compute_slices == 1 and p.memory_slices == 2
                                                       else _PROFILE_IDS.get(p.compute_slices, 0))
            size = p.memory_slices
            for _ in range(n):
                if start + size > 8:
                    break
                cap: dict[str, Any] = {
                    "memory": {"value": f"{memory_mib * size // 8}Mi"},
                    "multiprocessors": {"value": str(p.compute_slices * _SM_PER_SLICE.get(key, 14))},
                }
                for s in range(start, start + size):
                    cap[f"memorySlice{s}"] = {"value": "1"}
                devices.append({
                    "name": f"gpu-{minor}-mig-{pid}-{start}-{size}",
                    "attributes": {"type": {"string": "mig"}, "uuid": {"string": _uuid(node, minor * 100 + start, "MIG")},
                                   "parentUUID": {"string": uuid}, "profile": {"string": profile}, **base},
                    "capacity": cap,
                })
                start += size
    suffix = hashlib.sha256(node.encode()).hexdigest()[:5]
    return [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-{suffix}", "generateName": f"{node}-{DRIVER}-",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": _uuid(node, 0, "node")[5:],
                                          "controller": True}]},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }]
