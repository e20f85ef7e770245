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


# --- contexts and namespaces from the kubeconfig ----------------------------------------------------------------

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "dev",
    "clusters": [{"name": "eks-prod", "cluster": {"server": "https://ABCD.gr7.us-west-2.eks.amazonaws.com"}}],
    "users": [{"name": "admin", "user": {"token": "t0ken"}}],
    "contexts": [
        {"name": "dev", "context": {"cluster": "eks-prod", "user": "admin", "namespace": "ml"}},
        {"name": "arn:aws:eks:us-west-2:111122223333:cluster/prod", "context": {"cluster": "eks-prod", "user": "admin"}},
        {"name": "staging", "context": {"cluster": "eks-prod", "user": "admin", "namespace": "serving"}},
    ],
}


def _complete_env(words: str, cword: int, **env: str) -> list[str]:
    full = {**os.environ, "_KGPU_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword),
            "PYTHONPATH": str(ROOT / "src"), **env}
    out = subprocess.run([sys.executable, "-m", "kgpu.cli.main"], env=full, capture_output=True, text=True, check=True)
    assert not out.stderr
    return [ln for ln in out.stdout.splitlines() if ln]  # bash's script reads an empty line as none


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    return path


def test_context_completes_from_the_kubeconfig_after_the_verb_or_before_it(kubeconfig: Path):
    env = {"KUBECONFIG": str(kubeconfig)}
    assert _complete_env("kgpu doctor --context ", 3, **env) == [
        "plain,arn:aws:eks:us-west-2:111122223333:cluster/prod", "plain,dev", "plain,staging"]
    assert _complete_env("kgpu --context st", 2, **env) == ["plain,staging"]
    # --kubeconfig typed first wins over KUBECONFIG, as kubectl reads it
    other = kubeconfig.parent / "other"
    other.write_text(yaml.safe_dump({**KUBECONFIG, "contexts": [{"name": "lab", "context": {"cluster": "eks-prod"}}]}))
    assert _complete_env(f"kgpu --kubeconfig {other} top --context ", 5, **env) == ["plain,lab"]
    assert _complete_env(f"kgpu snapshot --kubeconfig {other} --context ", 5, **env) == ["plain,lab"]


def test_namespace_completes_the_namespaces_the_contexts_name(kubeconfig: Path):
    """Offline only: the contexts' namespaces and default, never a list from the API server."""
    assert _complete_env("kgpu doctor -n ", 3, KUBECONFIG=str(kubeconfig)) == [
        "plain,default", "plain,ml", "plain,serving"]
    assert _complete_env("kgpu -n s", 2, KUBECONFIG=str(kubeconfig)) == ["plain,serving"]


def test_broken_or_missing_kubeconfig_completes_nothing(tmp_path: Path):
    bad = tmp_path / "config"
    bad.write_text("contexts: [[[\n")
    assert _complete_env("kgpu doctor --context ", 3, KUBECONFIG=str(bad)) == []
    assert _complete_env("kgpu doctor --context ", 3, KUBECONFIG=str(tmp_path / "none"), HOME=str(tmp_path)) == []
    lines, directive = kubectl_candidates_env(["doctor", "--context", ""], str(bad))
    assert lines == [] and directive == NO_FILE_COMP


def kubectl_candidates_env(words: list[str], config: str) -> tuple[list[str], int]:
    old = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = config
    try:
        return kubectl_candidates(words)
    finally:
        if old is None:
            del os.environ["KUBECONFIG"]
        else:
            os.environ["KUBECONFIG"] = old


def test_kubectl_gpu_completes_contexts(kubeconfig: Path):
    lines, directive = kubectl_candidates_env(["doctor", "--context", "d"], str(kubeconfig))
    assert lines == ["dev\tnamespace ml"] and directive == NO_FILE_COMP
    lines, _ = kubectl_candidates_env(["--context", ""], str(kubeconfig))
    assert [ln.split("\t")[0] for ln in lines] == ["arn:aws:eks:us-west-2:111122223333:cluster/prod", "dev", "staging"]


def test_completion_does_not_import_the_entry_point():
    """No import circle between the entry point and the completion verb: both import the root command."""
    import grimp

    graph = grimp.build_graph("kgpu")
    assert graph.find_shortest_chain(importer="kgpu.cli.completion_cmd", imported="kgpu.cli.main") is None
    assert graph.find_shortest_chain(importer="kgpu.cli.root", imported="kgpu.cli.main") is None
    assert graph.find_shortest_chain(importer="kgpu.cli.main", imported="kgpu.cli.root") is not None


def test_gpu_names_complete_from_the_catalogs():
    """catalog --gpu from the AWS catalog (the catalog's names, either case), or TKE's gpu-type values with
    --provider tke; a --gpu-type list completes its last item."""
    aws = _complete("kgpu catalog --gpu a1", 3)
    assert {"plain,A100", "plain,A100-80GB", "plain,A10G"} <= set(aws), aws
    assert all(line.split(",", 1)[1].lower().startswith("a1") for line in aws)
    assert _complete("kgpu catalog --provider tke --gpu V", 5) == ["plain,V100"]
    assert _complete("kgpu tke match --gpu-type T4,V", 4) == ["plain,T4,V100"]
    assert _complete("kgpu run --gpu-type T4,h1", 3) == ["plain,T4,H100"]


def test_label_selectors_complete_keys_then_values():
    assert _complete("kgpu top -l karpenter.sh/ca", 3) == ["plain,karpenter.sh/capacity-type="]
    assert _complete("kgpu top -l karpenter.sh/capacity-type=s", 3) == ["plain,karpenter.sh/capacity-type=spot"]
    types = _complete("kgpu doctor -l gpu=x,node.kubernetes.io/instance-type=p5.", 3)
    assert "plain,gpu=x,node.kubernetes.io/instance-type=p5.48xlarge" in types
    assert all(t.startswith("plain,gpu=x,node.kubernetes.io/instance-type=p5.") for t in types)
    assert _complete("kgpu top -l !nvidia.com/mig.config.st", 3) == ["plain,!nvidia.com/mig.config.state"]


def test_node_names_complete_from_the_file_the_line_reads(tmp_path: Path):
    snap = ROOT / "tests" / "fixtures" / "snapshots" / "cuda-driver.json"
    import json as _json

    nodes = sorted(o["metadata"]["name"] for o in _json.loads(snap.read_text())["items"] if o.get("kind") == "Node")
    got = _complete(f"kgpu doctor --snapshot {snap} -l kubernetes.io/hostname=ip-", 5)
    assert got == [f"plain,kubernetes.io/hostname={n}" for n in nodes if n.startswith("ip-")] and got
    assert _complete(f"kgpu top -f {snap} -l kubernetes.io/hostname=", 5)[0] == f"plain,kubernetes.io/hostname={nodes[0]}"
    # no file on the line (a live cluster), or one that is not JSON: nothing, and no error
    assert not any(_complete("kgpu top -l kubernetes.io/hostname=", 3))
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert not any(_complete(f"kgpu top -f {bad} -l kubernetes.io/hostname=", 5))
