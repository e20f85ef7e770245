"""Shell completion (bash, zsh, fish), `kubectl gpu <TAB>` through kubectl_complete-gpu, the krew package."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from kgpu import __version__
from kgpu.cli.completion_cmd import DEFAULT_COMP, NO_FILE_COMP, kubectl_candidates
from kgpu.cli.main import VERBS, cli

ROOT = Path(__file__).resolve().parent.parent
KREW = ROOT / "plugins" / "krew"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_calls_kgpu_back(shell: str):
    res = CliRunner().invoke(cli, ["completion", shell])
    assert res.exit_code == 0
    assert "_KGPU_COMPLETE" in res.stdout and "kgpu" in res.stdout


def test_completion_rejects_unknown_shell():
    assert CliRunner().invoke(cli, ["completion", "tcsh"]).exit_code == 2


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_KGPU_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    env["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main"], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_bash_completes_verbs_choices_and_paths():
    assert "plain,plan" in _complete("kgpu pl", 1)
    assert {"plain,wide", "plain,json"} <= set(_complete("kgpu plan -o ", 3))
    assert "plain,eks-eksctl" in _complete("kgpu init -t eks", 3)
    assert _complete("kgpu plan -f ", 3) == ["file,"]


def test_every_dash_f_completes_file_paths():
    ctx = click.Context(cli)
    seen = 0
    for name in VERBS:
        cmd = cli.get_command(ctx, name)
        commands = list(cmd.commands.values()) if isinstance(cmd, click.Group) else [cmd]
        for c in commands:
            for p in c.params:
                if isinstance(p, click.Option) and "-f" in p.opts:
                    seen += 1
                    assert isinstance(p.type, click.Path), f"{name} {c.name}: -f is {p.type!r}"
    assert seen >= 6


def test_kubectl_protocol_candidates_and_directives():
    lines, directive = kubectl_candidates(["pl"])
    assert directive == NO_FILE_COMP and lines[0].startswith("plan\t")
    lines, directive = kubectl_candidates(["render", "--target", "karpenter-c"])
    assert lines == ["karpenter-chart"] and directive == NO_FILE_COMP
    assert kubectl_candidates(["simulate", "-c", ""]) == ([], DEFAULT_COMP)  # the shell completes paths
    lines, _ = kubectl_candidates([])
    assert {ln.split("\t")[0] for ln in lines} >= {"plan", "render", "simulate", "completion"}


def test_krew_manifest_sha256_matches_the_archive_built_from_the_sources():
    spec = importlib.util.spec_from_file_location("krew_build", KREW / "build.py")
    assert spec and spec.loader
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    manifest = yaml.safe_load((ROOT / "plugins" / "gpu.yaml").read_text())
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "gpu"
    platform = manifest["spec"]["platforms"][0]
    assert platform["sha256"] == build.sha256() == build.sha256()  # reproducible
    assert manifest["spec"]["version"] == f"v{build.version()}"
    assert platform["bin"] == "kubectl-gpu"
    assert {f["from"] for f in platform["files"]} == set(build.FILES)
    # krew's checklist: the licence travels in the archive and is extracted on install
    assert "LICENSE" in build.FILES and (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    with tarfile.open(fileobj=io.BytesIO(build.archive_bytes())) as tar:
        assert sorted(tar.getnames()) == sorted(build.FILES)
        assert tar.getmember("LICENSE").mode == 0o644 and tar.getmember("kubectl-gpu").mode == 0o755
    wheel = build.wheel_url(build.version())
    assert wheel in manifest["spec"]["caveats"] and wheel in (KREW / "kubectl-gpu").read_text()


@pytest.fixture
def kgpu_on_path(tmp_path: Path) -> dict[str, str]:
    """A `kgpu` on PATH running this tree, as pipx would install it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kgpu"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kgpu.cli.main "$@"\n')
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")}


def test_krew_shims_run_kgpu_as_kubectl_gpu(kgpu_on_path: dict[str, str]):
    usage = subprocess.run(
        [str(KREW / "kubectl-gpu"), "plan", "--help"], env=kgpu_on_path, capture_output=True, text=True
    )
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: kubectl gpu plan")
    comp = subprocess.run(
        [str(KREW / "kubectl_complete-gpu"), "ren"], env=kgpu_on_path, capture_output=True, text=True
    )
    assert comp.stdout.splitlines()[0].startswith("render\t") and comp.stdout.splitlines()[-1] == ":4"


def test_krew_shim_without_kgpu_says_how_to_install(tmp_path: Path):
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    res = subprocess.run([str(KREW / "kubectl-gpu"), "plan"], env=env, capture_output=True, text=True)
    assert res.returncode == 2
    # kgpu is not on PyPI: the line names the release's wheel, for this version
    assert f"pipx install https://github.com/kgpu/kgpu/releases/download/v{__version__}/kgpu-{__version__}-py3-none-any.whl" in res.stderr
