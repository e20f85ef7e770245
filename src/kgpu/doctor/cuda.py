"""CUDA in the image vs the driver on the node: "CUDA driver version is insufficient for CUDA runtime version"
predicted before the pod crashes.

The image's CUDA comes from its reference (``kgpu.catalog.cuda.image_cuda``); the node's driver from GPU
Feature Discovery's labels (``nvidia.com/cuda.driver.major/minor/rev``, or the newer
``nvidia.com/cuda.driver-version.major/minor/revision``). NVIDIA's table gives the minimum driver of each CUDA
release, and minor-version compatibility the floor of each major version:

- driver below the major's floor: the CUDA runtime fails to initialise with "CUDA driver version is
  insufficient for CUDA runtime version" (error);
- driver at or above the floor but below the release's minimum: most code runs (minor-version
  compatibility), newer features and PTX JIT fail; images built on ``nvidia/cuda`` set
  ``NVIDIA_REQUIRE_CUDA`` and the container toolkit refuses to start them ("unsatisfied condition:
  cuda>=12.4"), which is an error for ``nvidia/cuda`` itself and a warning for other images;
- NGC framework containers carry the forward-compatibility package (data-center GPUs run them on older LTS
  drivers): warnings, not errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kgpu.catalog.cuda import (
    DriverVersion,
    ImageCuda,
    compat_floor,
    driver_cuda,
    format_driver,
    image_cuda,
    min_driver,
    parse_driver,
    split_image,
)
from kgpu.doctor.common import names
from kgpu.doctor.deviceplugin_workloads import builtin_plugin, cluster_policy, helm_release, plugin_daemonsets
from kgpu.doctor.findings import ERROR, INFO, WARNING, Finding
from kgpu.doctor.state import ClusterState, NodeInfo

_OLD = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev")
_NEW = (
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
)
_FULL = "nvidia.com/cuda.driver-version.full"


def node_driver(labels: Mapping[str, str]) -> DriverVersion | None:
    """The node's NVIDIA driver from GFD labels; None when GFD has not labelled it."""
    full = labels.get(_FULL)
    if full:
        parsed = parse_driver(full)
        if parsed:
            return parsed
    for keys in (_NEW, _OLD):
        parts = [labels.get(k) for k in keys]
        if parts[0] and parts[1] is not None:
            text = ".".join(p for p in parts if p)
            parsed = parse_driver(text)
            if parsed:
                return parsed
    return None


def _verdict(img: ImageCuda, driver: DriverVersion) -> tuple[str, str] | None:
    """(severity, why) when the driver is too old for the image; None when it is new enough."""
    release = min_driver(img.version)
    if release is None:
        return None
    if driver >= release.min_driver:
        return None
    floor = compat_floor(img.version[0])
    has = driver_cuda(driver)
    has_text = f" (CUDA {has[0]}.{has[1]})" if has else ""
    need = f"CUDA {img.name} needs driver >= {format_driver(release.min_driver)}"
    repo, _ = split_image(img.image)
    if floor is None or driver < floor:
        sev = WARNING if img.source == "ngc" else ERROR
        why = (
            f'the container will fail with "CUDA driver version is insufficient for CUDA runtime version": '
            f"{need}"
            + (
                f" ({img.version[0]}.x runs on >= {format_driver(floor)} with minor-version compatibility)"
                if floor
                else ""
            )
            + f", the node has {format_driver(driver)}{has_text}"
        )
        if img.source == "ngc":
            why += "; NGC containers' forward-compatibility package helps only on data-center GPUs with an LTS driver"
        return sev, why
    is_cuda_base = repo.rsplit("/", 1)[-1] == "cuda"
    sev = ERROR if is_cuda_base else WARNING
    why = (
        f"{need}, the node has {format_driver(driver)}{has_text}: it runs only through minor-version "
        f"compatibility (>= {format_driver(floor)}), without newer features or PTX JIT; images built on "
        f'nvidia/cuda refuse to start ("unsatisfied condition: cuda>={img.name}")'
    )
    return sev, why


def check_cuda(state: ClusterState) -> Iterator[Finding]:
    unlabelled: list[str] = []
    seen_unlabelled: set[str] = set()
    cache: dict[str, ImageCuda | None] = {}
    for pod in state.pods:
        if pod.gpus <= 0 or not pod.node_name or pod.terminated:
            continue
        node: NodeInfo | None = state.node_by_name.get(pod.node_name)
        if node is None or node.virtual:
            continue
        driver = node_driver(node.labels)
        for image in pod.images:
            if image not in cache:
                cache[image] = image_cuda(image)
            img = cache[image]
            if img is None:
                continue
            if driver is None:
                if node.name not in seen_unlabelled:
                    seen_unlabelled.add(node.name)
                    unlabelled.append(node.name)
                continue
            verdict = _verdict(img, driver)
            if verdict is None:
                continue
            sev, why = verdict
            release = min_driver(img.version)
            assert release is not None
            older = driver_cuda(driver)
            yield Finding(
                "cuda-driver-insufficient",
                sev,
                pod.ref,
                f"image {image} on node {node.name}: {why}",
                f"# use an image built for CUDA <= {older[0]}.{older[1]}, or upgrade the node's driver to >= "
                f"{format_driver(release.min_driver)}"
                if older
                else f"# upgrade the node's driver to >= {format_driver(release.min_driver)}",
            )
    if unlabelled:
        yield Finding(
            "cuda-driver-unknown",
            INFO,
            f"Node/{unlabelled[0]}",
            f"{len(unlabelled)} GPU node(s) running CUDA images have no nvidia.com/cuda.driver.* labels "
            f"({names(unlabelled)}): GPU Feature Discovery is not installed, so kgpu cannot compare the images' "
            "CUDA with the drivers",
            gfd_fix(state, [state.node_by_name[n] for n in unlabelled]),
        )


NVDP_REPO = "# (helm repo add nvdp https://nvidia.github.io/k8s-device-plugin)"


def gfd_fix(state: ClusterState, nodes: list[NodeInfo]) -> str:
    """How to add GPU Feature Discovery to these nodes without a second device plugin.

    Where the plugin comes from decides it: the GPU Operator's ClusterPolicy (``spec.gfd.enabled``), a Helm
    release of NVIDIA's chart (``gfd.enabled=true`` on that release), or anything else (the static
    manifest, Bottlerocket's built-in plugin): the chart with ``devicePlugin.enabled=false``, which deploys
    GFD and Node Feature Discovery only. With no plugin at all, the chart installs both.
    """
    lines: list[str] = []
    dss = plugin_daemonsets(state)
    policies = sorted({p for ds in dss if (p := cluster_policy(ds))})
    for policy in policies:
        lines.append(
            f"kubectl patch clusterpolicies.nvidia.com {policy} --type merge -p "
            """'{"spec":{"gfd":{"enabled":true}}}'   # the GPU Operator deploys GFD with its plugin"""
        )
    releases = sorted({r for ds in dss if not cluster_policy(ds) and (r := helm_release(ds))})
    for release, namespace in releases:
        lines.append(
            f"helm upgrade {release} nvdp/nvidia-device-plugin -n {namespace} --reuse-values --set gfd.enabled=true"
            f"   # GFD from the release that runs the plugin\n{NVDP_REPO}"
        )
    others = [ds for ds in dss if not cluster_policy(ds) and not helm_release(ds)]
    if others or any(builtin_plugin(n) for n in nodes):
        where = [ds.ref for ds in others] + sorted({n.os_image for n in nodes if builtin_plugin(n)})
        lines.append(
            "helm upgrade -i nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin --create-namespace "
            "--set gfd.enabled=true --set devicePlugin.enabled=false"
            f"   # GFD and NFD only: the plugin already runs ({names(where, 3)})\n{NVDP_REPO}"
        )
    if not lines:
        lines.append(
            "helm upgrade -i nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin --create-namespace "
            f"--set gfd.enabled=true   # the device plugin with GFD (no plugin runs yet)\n{NVDP_REPO}"
        )
    return "\n".join(lines)


CHECKS = {"cuda-driver-insufficient": check_cuda, "cuda-driver-unknown": check_cuda}
