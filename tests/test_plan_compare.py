"""`kgpu plan --compare` across the user's own profiles: `-f a.yaml -f b.yaml -w k8s/ --compare` plans the same
workloads on a and b (not on the built-in templates), one -f compares it with every template, none compares the
templates; the caption says what is compared on what; exit 0 when something runs every pod, 1 when nothing
does, 2 for bad input."""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.profile import TEMPLATES

ROOT = Path(__file__).resolve().parent.parent
KGPU = ROOT / ".venv" / "bin" / "kgpu"
WORK = str(ROOT / "tests" / "fixtures" / "plan" / "vector-add-and-web.yaml")


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def validate(data: Any) -> None:
    text = resources.files("kgpu.cli").joinpath("schemas", "plan-compare.schema.json").read_text()
    jsonschema.Draft202012Validator(json.loads(text)).validate(data)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Two profiles as `kgpu init` writes them: EKS with Karpenter, and EKS with eksctl node groups."""
    folder = tmp_path_factory.mktemp("profiles")
    a, b = str(folder / "a.yaml"), str(folder / "b.yaml")
    assert run("init", "-t", "eks-karpenter", "-f", a).exit_code == 0
    assert run("init", "-t", "eks-eksctl", "-f", b).exit_code == 0
    return a, b


def test_two_profiles_are_compared_on_the_same_workloads(profiles: tuple[str, str]):
    a, b = profiles
    res = run("plan", "-f", a, "-f", b, "-w", WORK, "--compare", "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    validate(data)
    assert {r["profile_file"] for r in data["compare"]} == {a, b}
    assert not any("template" in r for r in data["compare"])
    assert data["compared"] == f"{WORK} on {a}, {b}" and data["workloads"] == WORK
    for row in data["compare"]:  # each row is that profile's own plan of the workloads
        alone = json.loads(run("plan", "-f", row["profile_file"], "-w", WORK, "-o", "json").stdout)
        assert row["profile"] == alone["profile"]
        assert (
            row["hourly_cost"] == alone["cost"]["total"] and row["baseline_cost"] == alone["cost"]["baseline"]
        )
        assert row["scheduled"] == alone["summary"]["scheduled"] + alone["summary"].get("provisioned", 0)
        assert row["unschedulable"] == alone["summary"]["unschedulable"]
    names = run("plan", "-f", a, "-f", b, "-w", WORK, "--compare", "-o", "name").stdout.split()
    assert sorted(names) == sorted([f"profile/{a}", f"profile/{b}"])


def test_table_caption_names_the_profiles_and_the_workloads(profiles: tuple[str, str]):
    a, b = profiles
    out = run("plan", "-f", a, "-f", b, "-w", WORK, "--compare", "--color", "never").stdout
    first = out.splitlines()[0]
    assert first == f"{WORK} on {a}, {b} (comparable first, cheapest first)"
    assert out.splitlines()[1].split()[0] == "PROFILE"
    rows = [ln.split()[0] for ln in out.split("\n\n")[0].splitlines()[3:]]
    assert sorted(rows) == sorted([a, b])  # the two profiles, no template
    assert f"{a} (eks-karpenter)" in out and f"{b} (eks-eksctl)" in out


def test_without_w_the_first_profiles_workloads_are_everyones(profiles: tuple[str, str], tmp_path: Path):
    a, b = profiles
    prof = yaml.safe_load(Path(a).read_text())
    prof["workloads"] = ["work.yaml"]
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(prof))
    (tmp_path / "work.yaml").write_text(Path(WORK).read_text())
    data = json.loads(run("plan", "-f", str(mine), "-f", b, "--compare", "-o", "json").stdout)
    assert data["workloads"] == f"the workloads of {mine} ({tmp_path / 'work.yaml'})"
    with_w = json.loads(run("plan", "-f", str(mine), "-f", b, "-w", WORK, "--compare", "-o", "json").stdout)
    assert data["compare"] == with_w["compare"]  # b planned mine's workloads, not its own guide's
    alone = json.loads(run("plan", "-f", b, "--compare", "-o", "json").stdout)
    assert next(r for r in alone["compare"] if "profile_file" in r) != next(
        r for r in data["compare"] if r["profile_file"] == b
    )
    no_work = json.loads(run("plan", "-f", a, "-f", b, "--compare", "-o", "json").stdout)
    assert no_work["workloads"] == f"the example workloads of {a}'s guide"


def test_one_profile_is_compared_with_every_template(profiles: tuple[str, str]):
    a, _ = profiles
    data = json.loads(run("plan", "-f", a, "-w", WORK, "--compare", "-o", "json").stdout)
    validate(data)
    assert sorted(r.get("template", r.get("profile_file")) for r in data["compare"]) == sorted(
        [a, *TEMPLATES]
    )
    assert data["compared"] == f"{WORK} on {a} and every built-in template"
    mine = next(r for r in data["compare"] if r.get("profile_file") == a)
    same = next(r for r in data["compare"] if r.get("template") == "eks-karpenter")
    assert mine["total_cost"] == same["total_cost"]  # `kgpu init` writes the template as it is


def test_compare_without_f_compares_the_templates_and_exits_0():
    """The help's own example: every built-in template, on each guide's examples; eks-karpenter runs them all."""
    res = run("plan", "--compare", "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    validate(data)
    assert [r["template"] for r in data["compare"]] and {r["template"] for r in data["compare"]} == set(
        TEMPLATES
    )
    assert (
        data["compared"]
        == "each guide's example workloads (TKE's own on tke-supernode) on every built-in template"
    )
    table = run("plan", "--compare", "--color", "never").stdout
    assert table.startswith(
        "Each guide's example workloads (TKE's own on tke-supernode) on every built-in template"
    )


def test_exit_1_when_no_profile_runs_every_pod(profiles: tuple[str, str], tmp_path: Path):
    a, b = profiles
    huge = tmp_path / "huge.yaml"
    huge.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "huge", "namespace": "default"},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 64}}}
                    ]
                },
            }
        )
    )
    res = run("plan", "-f", a, "-f", b, "-w", str(huge), "--compare", "-o", "json")
    assert res.exit_code == 1, res.output
    assert {r["status"] for r in json.loads(res.stdout)["compare"]} == {"cannot-run"}


def test_bad_input(profiles: tuple[str, str], tmp_path: Path):
    a, b = profiles
    res = run("plan", "-f", a, "-f", b)
    assert res.exit_code == 2 and "several with --compare" in res.output
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: kgpu.dev/v1alpha1\nkind: ClusterProfile\nmetadata: {name: x}\nprovider: eks\npools: 3\n"
    )
    res = run("plan", "-f", a, "-f", str(broken), "--compare")
    assert res.exit_code == 2 and str(broken) in res.output and "Traceback" not in res.output


def test_report_of_profiles(profiles: tuple[str, str], tmp_path: Path):
    a, b = profiles
    page = tmp_path / "compare.html"
    assert run("plan", "-f", a, "-f", b, "-w", WORK, "--compare", "--report", str(page)).exit_code == 0
    html = page.read_text()
    assert f"<title>{WORK} on {a}, {b}</title>" in html
    assert "<th>PROFILE</th>" in html and f"{a} (eks-karpenter)" in html


def test_installed_entry_point(profiles: tuple[str, str]):
    """The same through the installed `kgpu`: both profiles, no template."""
    a, b = profiles
    out = subprocess.run(
        [str(KGPU), "plan", "-f", a, "-f", b, "-w", WORK, "--compare", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted([f"profile/{a}", f"profile/{b}"])
