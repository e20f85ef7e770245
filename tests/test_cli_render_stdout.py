"""`kgpu render | kubectl apply -f -` and `kgpu render --output-dir DIR` for GitOps; old spellings warn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.profile import TEMPLATES
from kgpu.render.sort import rank


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _ids(docs: list[dict]) -> list[tuple]:
    return [(d["apiVersion"], d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs]


@pytest.mark.parametrize("template", TEMPLATES)
def test_stdout_holds_only_cluster_objects_in_apply_order(template: str):
    res = run("render", "--template", template)
    assert res.exit_code == 0, res.output
    docs = [d for d in yaml.safe_load_all(res.stdout) if d is not None]
    assert docs
    for d in docs:  # what kubectl apply needs of every document
        assert d["apiVersion"] and d["kind"] and d["metadata"]["name"], d
        assert not d["apiVersion"].startswith("eksctl.io/"), "eksctl's ClusterConfig is not a cluster object"
    assert [rank(d) for d in docs] == sorted(rank(d) for d in docs)
    assert len(set(_ids(docs))) == len(docs), "an object twice"


def test_stdout_leaves_out_eksctl_config_and_helm_values_and_says_so():
    res = run("render", "--template", "eks-eksctl")
    assert res.exit_code == 0
    assert "ClusterConfig" not in res.stdout and "autoDiscovery" not in res.stdout
    assert "note: left out eksctl.yaml" in res.stderr and "cluster-autoscaler-values.yaml" in res.stderr
    alone = run("render", "--template", "eks-eksctl", "--target", "eksctl")
    assert "kind: ClusterConfig" in alone.stdout and "not Kubernetes objects" in alone.stderr


def test_stdout_json_is_a_list_and_name_is_kind_group_slash_name():
    as_yaml = [d for d in yaml.safe_load_all(run("render", "--template", "eks-karpenter").stdout) if d]
    as_json = json.loads(run("render", "--template", "eks-karpenter", "-o", "json").stdout)
    assert as_json["kind"] == "List" and as_json["items"] == as_yaml
    names = run("render", "--template", "eks-karpenter", "-o", "name").stdout.split()
    assert "nodepool.karpenter.sh/gpu" in names and "namespace/kgpu-system" in names
    assert len(names) == len(as_yaml)


def test_output_dir_writes_files_and_a_kustomization(tmp_path: Path):
    out = tmp_path / "manifests"
    res = run("render", "--template", "eks-eksctl", "--output-dir", str(out))
    assert res.exit_code == 0, res.output
    assert res.stderr.strip().endswith(f"to {out}") and "deprecated" not in res.stderr
    kust = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert kust["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and kust["kind"] == "Kustomization"
    assert (
        "eksctl.yaml" not in kust["resources"] and "cluster-autoscaler-values.yaml" not in kust["resources"]
    )
    assert (out / "eksctl.yaml").exists() and (out / "cluster-autoscaler-values.yaml").exists()
    ids = []
    for name in kust["resources"]:
        ids += _ids([d for d in yaml.safe_load_all((out / name).read_text()) if d])
    assert len(ids) == len(set(ids)), "kustomize refuses a resource listed twice"
    listed = {p.name for p in out.iterdir()} - {
        "kustomization.yaml",
        "eksctl.yaml",
        "cluster-autoscaler-values.yaml",
        "node-termination-handler-values.yaml",  # Helm values, not for kubectl apply
        "workloads.yaml",  # written for review, applied on purpose
    }
    assert listed == set(kust["resources"])
    assert "workloads.yaml is not in kustomization.yaml: it starts GPU pods" in res.stderr


GPU_POD_KINDS = {"Pod", "Job", "Deployment", "StatefulSet", "RayJob"}


def _gpu_pods(docs: list[dict]) -> list[str]:
    """Objects that start pods asking for nvidia.com/gpu when applied."""
    out = []
    for d in docs:
        if d.get("kind") not in GPU_POD_KINDS:
            continue
        spec = d["spec"] if d["kind"] == "Pod" else d["spec"]["template"]["spec"]
        for c in spec.get("containers", []):
            if "nvidia.com/gpu" in (c.get("resources", {}).get("limits") or {}):
                out.append(f"{d['kind']}/{d['metadata']['name']}")
    return out


@pytest.mark.parametrize("template", TEMPLATES)
def test_stdout_is_infrastructure_only_unless_workloads_are_asked_for(template: str):
    """`kgpu render | kubectl apply -f -` builds the cluster and starts no GPU pod; the example workloads
    and the verification pods come with --with-workloads or --target workloads."""
    res = run("render", "--template", template)
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    assert _gpu_pods(docs) == [], template
    assert "note: left out the example GPU workloads and test pods" in res.stderr
    assert "add --with-workloads (or --target workloads)" in res.stderr
    more = run("render", "--template", template, "--with-workloads")
    with_pods = [d for d in yaml.safe_load_all(more.stdout) if d]
    assert more.exit_code == 0 and "example GPU workloads" not in more.stderr
    pods = _gpu_pods(with_pods)
    assert any(p.startswith("Pod/gpu-verify-") for p in pods) and any(p.startswith("Job/") for p in pods)
    assert len(with_pods) > len(docs)
    alone = run("render", "--template", template, "--target", "workloads", "-o", "name")
    assert alone.exit_code == 0 and "example GPU workloads" not in alone.stderr
    assert any(n.startswith("pod/gpu-verify-") for n in alone.stdout.split())


def test_with_workloads_lists_them_in_the_kustomization(tmp_path: Path):
    out = tmp_path / "m"
    res = run("render", "--template", "eks-karpenter", "--output-dir", str(out), "--with-workloads")
    assert res.exit_code == 0, res.output
    assert "workloads.yaml" in yaml.safe_load((out / "kustomization.yaml").read_text())["resources"]


def test_dash_o_is_a_format_never_a_file_named_after_one(tmp_path: Path, monkeypatch):
    """`kgpu init -o wide` wrote a file named `wide`: a format word this verb lacks, or a word that does
    not look like a path, is one error line (exit 2) and writes nothing."""
    monkeypatch.chdir(tmp_path)
    for args in (("init", "-o", "wide"), ("init", "-o", "table"), ("render", "--template", "onprem", "-o", "wide")):
        res = run(*args)
        assert res.exit_code == 2, args
        assert res.stderr.startswith(f"error: -o {args[-1]}: kgpu {args[0]} has no {args[-1]} output (-o is the output format: ")
        assert len(res.stderr.strip().splitlines()) == 1
    res = run("init", "-o", "prod")
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: -o prod: not an output format (-o is one of yaml, json; to write there: -f prod)"
    res = run("render", "--template", "onprem", "-o", "manifests")
    assert res.exit_code == 2 and "to write there: --output-dir manifests" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_files_written_get_the_usual_permissions_under_the_umask(tmp_path: Path):
    """Not mkstemp's 0600 and mkdtemp's 0700: 0644 files, 0755 directories and scripts under umask 022,
    0640/0750 under 027; a replaced file keeps its mode."""
    import os

    old = os.umask(0o022)
    try:
        prof = tmp_path / "kgpu.yaml"
        assert run("init", "-t", "onprem", "-f", str(prof)).exit_code == 0
        assert prof.stat().st_mode & 0o777 == 0o644
        out = tmp_path / "m"
        assert run("render", "-f", str(prof), "--output-dir", str(out)).exit_code == 0
        assert out.stat().st_mode & 0o777 == 0o755
        assert (out / "rbac.yaml").stat().st_mode & 0o777 == 0o644
        assert (out / "onprem-files" / "verify-gpu-runtime.sh").stat().st_mode & 0o777 == 0o755
        assert (out / "onprem-files" / "etc").stat().st_mode & 0o777 == 0o755
        report = tmp_path / "plan.html"
        assert run("plan", "--report", str(report)).exit_code in (0, 1)
        assert report.stat().st_mode & 0o777 == 0o644
        os.umask(0o027)
        strict = tmp_path / "strict.yaml"
        assert run("init", "-t", "onprem", "-f", str(strict)).exit_code == 0
        assert strict.stat().st_mode & 0o777 == 0o640
        out2 = tmp_path / "m2"
        assert run("render", "-f", str(prof), "--output-dir", str(out2)).exit_code == 0
        assert out2.stat().st_mode & 0o777 == 0o750
        assert (out2 / "onprem-files" / "bootstrap-gpu-host.sh").stat().st_mode & 0o777 == 0o750
        prof.chmod(0o600)
        assert run("init", "-t", "onprem", "-f", str(prof), "--force").exit_code == 0
        assert prof.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_old_dash_o_directory_still_works_with_a_deprecation_line(tmp_path: Path):
    out = tmp_path / "m"
    res = run("render", "--template", "onprem", "-o", str(out))
    assert res.exit_code == 0
    assert f"-o {out} (a directory) is deprecated" in res.stderr and f"--output-dir {out}" in res.stderr
    assert (out / "kustomization.yaml").exists()


def test_format_with_output_dir_is_a_usage_error(tmp_path: Path):
    res = run("render", "--template", "onprem", "-o", "json", "--output-dir", str(tmp_path / "m"))
    assert res.exit_code == 2 and not (tmp_path / "m").exists()


def test_init_file_flag_and_old_dash_o(tmp_path: Path):
    new = tmp_path / "a.yaml"
    res = run("init", "-t", "onprem", "-f", str(new))
    assert res.exit_code == 0 and new.exists() and "deprecated" not in res.stderr
    old = tmp_path / "b.yaml"
    res = run("init", "-t", "onprem", "-o", str(old))
    assert res.exit_code == 0 and old.read_text() == new.read_text()
    assert "deprecated" in res.stderr and f"-f {old}" in res.stderr


def test_init_dash_o_yaml_and_json_print_instead_of_writing(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = run("init", "-t", "onprem", "-o", "yaml").stdout
    assert text.startswith("#") and yaml.safe_load(text)["kind"] == "ClusterProfile"
    data = json.loads(run("init", "-t", "onprem", "-o", "json").stdout)
    assert data["metadata"]["name"] == yaml.safe_load(text)["metadata"]["name"]
    assert not (tmp_path / "kgpu.yaml").exists()
