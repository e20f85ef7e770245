"""TKE image caches (seed 003, "Pod 创建加速"): whether a GPU pod that asks for the cache gets it.

A pod on a super node asks with ``eks.tke.cloud.tencent.com/use-image-cache``: ``auto`` (TKE matches a
cache holding the same image name and tag) or a cache id ``imc-...``. Without a match the image is pulled
in full, 3 to 15 minutes for a framework image, and nothing fails: the pod is only slow. Two things in a
snapshot tell:

- the ``ImageCache`` objects (``eks.cloud.tencent.com/v1``, made by the imc-operator): ``spec.images``, and
  the ``PHASE`` and ``IMAGECACHEID`` the guide's ``kubectl get imagecache`` shows (``status.phase``,
  ``status.imageCacheId``); a cache made in the console has no object, so an ``imc-`` id without one is not
  a finding by itself;
- the pod's events: ``Using image cache imc-...`` (reason Pulling) when the cache was used, a plain
  ``Pulling image "..."`` when it was not.

``kgpu snapshot`` saves ImageCaches and the pods' Pulling/Pulled events; ``kubectl get
pods,nodes,imagecaches,events -A -o json`` gives doctor the same as one List.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kgpu.doctor.common import names
from kgpu.doctor.findings import INFO, WARNING, Finding
from kgpu.doctor.state import ClusterState, Event, PodInfo

USE_CACHE = "eks.tke.cloud.tencent.com/use-image-cache"
USING = "Using image cache"


def _image(ref: str) -> str:
    """Docker Hub's implicit prefixes dropped: 'docker.io/library/nginx:1' and 'nginx:1' are one image."""
    for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cache_id(cache: Mapping[str, Any]) -> str:
    status = cache.get("status") if isinstance(cache.get("status"), dict) else {}
    assert isinstance(status, dict)
    return _str(status.get("imageCacheId")) or _str(status.get("imageCacheID"))


def _phase(cache: Mapping[str, Any]) -> str:
    status = cache.get("status") if isinstance(cache.get("status"), dict) else {}
    assert isinstance(status, dict)
    return _str(status.get("phase"))


def _cache_images(cache: Mapping[str, Any]) -> set[str]:
    spec = cache.get("spec") if isinstance(cache.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    images = spec.get("images") if isinstance(spec.get("images"), list) else []
    assert isinstance(images, list)
    return {_image(i) for i in images if isinstance(i, str)}


def _name(cache: Mapping[str, Any]) -> str:
    meta = cache.get("metadata") if isinstance(cache.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    return _str(meta.get("name")) or "?"


def _pull_events(state: ClusterState) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = {}
    for ev in state.events:
        if ev.kind == "Pod" and ev.reason in ("Pulling", "Pulled"):
            out.setdefault(f"{ev.namespace}/{ev.name}", []).append(ev)
    return out


def _fix(pod: PodInfo, images: list[str]) -> str:
    listed = "".join(f"\n  - {i}" for i in images)
    return (
        "# an ImageCache that holds the pod's images (or list them in the pool's cacheImages and kgpu render):\n"
        f"apiVersion: eks.cloud.tencent.com/v1\nkind: ImageCache\nmetadata:\n  name: {pod.name}-images\n"
        f"spec:\n  images:{listed}\n  imageCacheSize: 200\n  retentionDays: 30\n"
        f"# then: kubectl get imagecache   (PHASE Ready), and recreate the pod: kubectl delete pod -n {pod.namespace} {pod.name}"
    )


def check_image_cache(state: ClusterState) -> Iterator[Finding]:
    caches = state.imagecaches
    for cache in caches:
        phase = _phase(cache)
        if phase and phase != "Ready":
            yield Finding(
                "tke-image-cache-not-ready",
                WARNING,
                f"ImageCache/{_name(cache)}",
                f"image cache is {phase}, not Ready: pods that ask for it pull "
                f"{names(sorted(_cache_images(cache)), 3)} in full",
                f"kubectl describe imagecache {_name(cache)}   # its events say why",
            )
    ready = [c for c in caches if _phase(c) in ("Ready", "")]
    held = set().union(*(_cache_images(c) for c in ready)) if ready else set()
    by_id = {_cache_id(c): c for c in caches if _cache_id(c)}
    pulls = _pull_events(state)
    for pod in state.pods:
        wanted = _str(pod.annotations.get(USE_CACHE))
        if not wanted or pod.terminated:
            continue
        events = pulls.get(pod.key, [])
        used = [e for e in events if e.message.startswith(USING)]
        full = [e for e in events if e.reason == "Pulling" and e.message.startswith("Pulling image")]
        if full and not used:
            pulled = [e.message.split('"')[1] for e in full if e.message.count('"') >= 2]
            yield Finding(
                "tke-image-cache-not-used",
                WARNING,
                pod.ref,
                f"the pod asks for the image cache ({USE_CACHE}: {wanted}) but its events show a full pull "
                f"({full[0].message}) and no \"{USING}\": no cache matched"
                + (
                    f"; image cache {wanted} is not among the cluster's ImageCaches ({names(sorted(by_id), 3)})"
                    if wanted.startswith("imc-") and by_id and wanted not in by_id
                    else ""
                ),
                _fix(pod, pulled or list(pod.images)),
            )
            continue
        if used or wanted != "auto" or not caches:
            continue
        missing = [i for i in pod.images if _image(i) not in held]
        if missing:
            yield Finding(
                "tke-image-cache-missing",
                WARNING,
                pod.ref,
                f"use-image-cache: auto, but no Ready ImageCache holds {names(missing, 3)} (TKE matches the "
                "image name and tag exactly): the image is pulled in full at every pod start",
                _fix(pod, missing),
            )
    if not caches and any(_str(p.annotations.get(USE_CACHE)) for p in state.pods) and not state.events:
        first = next(p for p in state.pods if _str(p.annotations.get(USE_CACHE)))
        yield Finding(
            "tke-image-cache-unknown",
            INFO,
            first.ref,
            "pods ask for TKE's image cache, but the input has no ImageCache objects and no pod events: kgpu "
            "cannot tell whether a cache matched",
            "kubectl get pods,nodes,imagecaches,events -A -o json > cluster.json && kgpu doctor --snapshot cluster.json",
        )


CHECKS = {
    "tke-image-cache-not-ready": check_image_cache,
    "tke-image-cache-not-used": check_image_cache,
    "tke-image-cache-missing": check_image_cache,
    "tke-image-cache-unknown": check_image_cache,
}
