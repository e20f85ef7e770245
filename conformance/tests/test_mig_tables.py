"""kgpu's MIG tables (``kgpu.catalog.mig``) against NVIDIA's own mig-parted configs, read by mig-parted's parser.

``conformance/migparted`` builds ``mig-configs`` from the pinned ``github.com/NVIDIA/mig-parted`` module
(``MIG_PARTED_VERSION`` in ``versions.env``): it unmarshals a config file into mig-parted's ``v1.Spec`` and
says, for each GPU PCI device ID kgpu knows (``mig-gpus.csv``), which entries of every config mig-parted
applies to that GPU. Two files are read:

- the GPU Operator's ``default-mig-parted-config`` ConfigMap (``conformance/migparted/testdata``, commit cited
  in the file): what the MIG manager applies for a ``nvidia.com/mig.config`` label on GPU Operator clusters;
- mig-parted's own ``deployments/systemd/config-default.yaml`` from the module the parser comes from.

Per GPU model and config name, kgpu's ``mig_layout`` must give the profiles and counts mig-parted selects, or
refuse the config where mig-parted has nothing for that GPU or only profiles of other GPUs; every profile in
kgpu's table must be an ``all-<profile>`` config of the ConfigMap at its ``max_count``, and the ConfigMap's
``+me`` profile of each GPU's one-slice profile must be in kgpu's table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import binary
from kgpu.catalog.mig import MigConfigError, config_names, device_id, mig_gpus, mig_layout, mig_profiles

HERE = Path(__file__).resolve().parent.parent
CONFIGMAP = HERE / "migparted" / "testdata" / "gpu-operator-default-mig-parted-config.yaml"
_NAME = re.compile(r"^(\d+)g\.(\d+)gb")


def _version() -> str:
    for line in (HERE / "versions.env").read_text().splitlines():
        if line.startswith("MIG_PARTED_VERSION="):
            return line.split("=", 1)[1].strip()
    pytest.fail("versions.env has no MIG_PARTED_VERSION")


def _module_dir() -> Path:
    """Where Go keeps the pinned mig-parted module (``build.sh`` downloaded it to build ``mig-configs``)."""
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/mig-parted"],
        cwd=HERE / "migparted", capture_output=True, text=True, check=True,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def parsed() -> dict[str, dict[str, Any]]:
    ids = ",".join(device_id(g) for g in mig_gpus())
    default = _module_dir() / "deployments" / "systemd" / "config-default.yaml"
    out = subprocess.run(
        [str(binary("migparted", "mig-configs")), "-device-ids", ids, str(CONFIGMAP), str(default)],
        capture_output=True, text=True, check=True, timeout=60,
    )
    files = json.loads(out.stdout)
    return {"gpu-operator": files[0], "mig-parted": files[1]}


@dataclass
class Verdicts:
    agree: list[str] = field(default_factory=list)
    disagree: list[str] = field(default_factory=list)


def _selected(cfg: dict[str, Any], gpu: str) -> list[dict[str, Any]]:
    return [cfg["entries"][i] for i in cfg["perDevice"][device_id(gpu)]]


def _compare(source: str, configs: dict[str, Any], gpus: list[str]) -> Verdicts:
    """Every config of ``configs`` on every GPU of ``gpus``: kgpu's layout against mig-parted's selection."""
    v = Verdicts()
    for name, cfg in sorted(configs.items()):
        if cfg.get("error"):
            continue
        for gpu in gpus:
            table = mig_profiles(gpu)
            entries = _selected(cfg, gpu)
            try:
                mine: dict[str, int] | None = mig_layout(name, gpu)
            except MigConfigError:
                mine = None
            where = f"{source} {name} on {gpu} ({device_id(gpu)})"
            if not entries:
                theirs: dict[str, int] | None = None
            elif len(entries) > 1:
                v.disagree.append(f"{where}: mig-parted applies {len(entries)} entries; kgpu models one")
                continue
            elif not entries[0]["migEnabled"]:
                theirs = {}
            else:
                theirs = dict(entries[0]["migDevices"])
            if theirs is not None and not entries[0]["deviceFilter"] and any(p not in table for p in theirs):
                # an entry for every GPU naming another GPU's profile: mig-parted fails on this one (the
                # node's nvidia.com/mig.config.state becomes `failed`), which kgpu refuses up front
                theirs = None
            if mine == theirs:
                v.agree.append(where)
            else:
                v.disagree.append(f"{where}: mig-parted {theirs if theirs is not None else 'fails'}, "
                                  f"kgpu {mine if mine is not None else 'refuses'}")
    return v


def _gpus_in(configs: dict[str, Any]) -> list[str]:
    """kgpu's GPUs the file has a device-filtered entry for (mig-parted's own default predates B200)."""
    return [g for g in mig_gpus()
            if any(device_id(g) in (e["deviceFilter"] or []) for c in configs.values() for e in c.get("entries") or [])]


def test_parser_is_the_pinned_module(parsed: dict[str, dict[str, Any]]) -> None:
    mod = (HERE / "migparted" / "go.mod").read_text()
    assert f"github.com/NVIDIA/mig-parted {_version()}" in mod
    for f in parsed.values():
        assert f["parser"] == f"github.com/NVIDIA/mig-parted@{_version()}"


def test_configmap_layouts_agree_per_gpu_and_config(parsed: dict[str, dict[str, Any]]) -> None:
    configs = parsed["gpu-operator"]["configs"]
    v = _compare("gpu-operator", configs, mig_gpus())
    print(f"\nmig tables vs the GPU Operator's default-mig-parted-config ({len(configs)} configs, "
          f"{len(mig_gpus())} GPUs): {len(v.agree)} agree, {len(v.disagree)} disagree")
    for line in v.disagree:
        print("  DISAGREE", line)
    assert not v.disagree
    assert len(v.agree) == len([c for c in configs.values() if not c.get("error")]) * len(mig_gpus())


def test_mig_parted_default_config_agrees(parsed: dict[str, dict[str, Any]]) -> None:
    f = parsed["mig-parted"]
    assert not f.get("specError"), f["specError"]
    gpus = _gpus_in(f["configs"])
    assert {"A100", "A100-80GB", "H100", "H200"} <= set(gpus)
    v = _compare("mig-parted", f["configs"], gpus)
    print(f"\nmig tables vs mig-parted {_version()}'s config-default.yaml ({len(f['configs'])} configs, "
          f"GPUs {', '.join(gpus)}): {len(v.agree)} agree, {len(v.disagree)} disagree")
    assert not v.disagree, v.disagree


def test_every_kgpu_profile_and_config_is_in_the_configmap(parsed: dict[str, dict[str, Any]]) -> None:
    """Each profile of kgpu's table is the ConfigMap's ``all-<profile>`` at ``max_count`` on that GPU, and
    every config name kgpu offers is one the MIG manager knows."""
    configs = parsed["gpu-operator"]["configs"]
    assert set(config_names()) <= set(configs), sorted(set(config_names()) - set(configs))
    for gpu in mig_gpus():
        for p in mig_profiles(gpu).values():
            cfg = configs[p.config_name]
            assert not cfg.get("error"), (p.config_name, cfg["error"])
            (entry,) = _selected(cfg, gpu)
            assert entry["migDevices"] == {p.name: p.max_count}, (gpu, p, entry)


def test_no_configmap_profile_of_a_kgpu_gpu_is_missing(parsed: dict[str, dict[str, Any]]) -> None:
    """The ConfigMap's media-extension profiles (``<1-slice profile>+me``) of kgpu's GPUs are in kgpu's table;
    each name's size is its memory slices of the whole GPU's (``3g.40gb``: 4/8 of 80 GB, to the GB NVIDIA
    rounds to) and its compute slices its ``<n>g``; the profiles of GPUs kgpu has no type for (A30, H100 NVL,
    GH200, B300, RTX PRO 6000, ...) are listed."""
    names: set[str] = set()
    for cfg in parsed["gpu-operator"]["configs"].values():
        for e in cfg.get("entries") or []:
            names.update(e["migDevices"])
    known = {p for g in mig_gpus() for p in mig_profiles(g)}
    for gpu in mig_gpus():
        table = mig_profiles(gpu)
        whole = int(_NAME.match(next(p for p in table if p.startswith("7g."))).group(2))  # type: ignore[union-attr]
        for p in table.values():
            g, gb = (int(x) for x in _NAME.match(p.name).groups())  # type: ignore[union-attr]
            assert g == p.compute_slices and abs(gb - whole * p.memory_slices / 8) <= 1, (gpu, p)
            if p.memory_slices == 1 and "+" not in p.name:
                assert p.name + "+me" in names and p.name + "+me" in table, (gpu, p.name)
    assert known <= names, sorted(known - names)
    print(f"\nConfigMap profiles of GPUs outside kgpu's catalog: {', '.join(sorted(names - known))}")


def test_only_profiles_outside_kgpu_are_rejected_by_the_pinned_parser(parsed: dict[str, dict[str, Any]]) -> None:
    """Configs mig-parted's parser rejects (profile names newer than the pinned module) are of GPUs kgpu
    does not model; each is named."""
    configs = parsed["gpu-operator"]["configs"]
    rejected = {n: c["error"] for n, c in configs.items() if c.get("error")}
    print(f"\nrejected by mig-parted {_version()}: {', '.join(sorted(rejected)) or 'none'}")
    assert not set(rejected) & set(config_names())
    if rejected:
        assert parsed["gpu-operator"].get("specError")
