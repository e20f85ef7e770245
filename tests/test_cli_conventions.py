"""kubectl's conventions on every verb: -o FORMAT, --no-headers, --color, help examples, `kubectl gpu`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli import output
from kgpu.cli.main import VERBS, cli


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


def _all_commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[str, click.Command]] = []
    for name in VERBS:
        cmd = cli.get_command(ctx, name)
        if cmd is None:
            continue
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out.extend((f"{name} {sub}", c) for sub, c in cmd.commands.items())
    return out


@pytest.mark.parametrize("verb", [name for name, _ in _all_commands()])
def test_every_verb_help_ends_with_two_or_three_real_examples(verb: str):
    res = run(*verb.split(), "--help")
    assert res.exit_code == 0, res.output
    tail = res.output.split("Examples:")[-1]
    assert "Examples:" in res.output and "Options:" not in tail
    commands = [ln.strip() for ln in tail.splitlines() if ln.strip().startswith("kgpu ")]
    assert 2 <= len(commands) <= 3, tail
    assert all(c.startswith(f"kgpu {verb.split()[0]}") or "kgpu " in c for c in commands)


def test_examples_run_as_written():
    """The examples without files of their own (built-in profile and templates) work as printed."""
    for line in (
        "kgpu plan",
        "kgpu render --template onprem -o name",
        "kgpu catalog --region us-west-2",
        "kgpu catalog --provider tke --gpu T4 -o yaml",
        "kgpu profile schema -o yaml",
    ):
        res = run(*line.split()[1:])
        assert res.exit_code == 0, (line, res.output)


@pytest.mark.parametrize(
    "args",
    [
        ("plan",),
        ("catalog",),
        ("catalog", "--provider", "tke"),
        ("tke", "match", "--gpu-type", "T4", "--gpus", "1"),
        ("simulate", "-c", "examples/cluster", "-w", "examples/workloads"),
    ],
)
def test_json_and_yaml_agree_and_table_is_the_default(args: tuple[str, ...]):
    as_json = run(*args, "-o", "json")
    as_yaml = run(*args, "-o", "yaml")
    default = run(*args)
    assert as_json.exit_code == as_yaml.exit_code == default.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout)
    assert not default.stdout.lstrip().startswith(("{", "["))
    assert "----" in default.stdout  # a table's header rule


def test_output_format_is_case_insensitive_and_rejects_unknown():
    assert run("catalog", "-o", "JSON").exit_code == 0
    bad = run("catalog", "-o", "xml")
    assert bad.exit_code == 2 and "xml" in bad.output


def test_no_headers_prints_rows_only():
    with_headers = run("simulate", "-c", "examples/cluster", "-w", "examples/workloads").stdout.splitlines()
    rows = run(
        "simulate", "-c", "examples/cluster", "-w", "examples/workloads", "--no-headers"
    ).stdout.splitlines()
    assert with_headers[0].split()[:2] == ["NAMESPACE", "POD"]
    assert rows == with_headers[2 : 2 + len(rows)]
    assert all(r.startswith("default ") for r in rows)
    cat = run("catalog", "--gpu", "T4", "--no-headers").stdout.splitlines()
    assert cat and all(line.split()[0].startswith("g4dn.") for line in cat)


def test_wide_adds_columns_and_one_row_per_pod():
    res = run("plan", "-o", "wide")
    header = next(ln for ln in res.stdout.splitlines() if ln.startswith("NAMESPACE"))
    assert header.split()[:4] == ["NAMESPACE", "POD", "PHASE", "NODE"] and "ZONE" in header
    assert res.stdout.count("cuda-vector-add-") == 10
    cat = run("catalog", "--gpu", "T4", "-o", "wide").stdout
    assert "ARCH" in cat and "us-east-1a" in cat


def test_name_output_is_kind_slash_name():
    names = run("simulate", "-c", "examples/cluster", "-w", "examples/workloads", "-o", "name").stdout.split()
    assert names[0] == "pod/pytorch-training-0" and len(names) == 14
    assert run("catalog", "--gpu", "T4", "-o", "name").stdout.split()[0].startswith("instancetype/g4dn.")
    assert run("plan", "--compare", "-o", "name").stdout.split()[0] == "template/eks-karpenter"


def test_color_always_never_and_no_color():
    always = run("plan", "--color", "always")
    assert "\x1b[" in always.stdout
    assert "\x1b[" not in run("plan", "--color", "never").stdout
    assert "\x1b[" not in run("plan").stdout  # not a terminal
    assert "\x1b[" in run("plan", "--color=always", env={"NO_COLOR": "1"}).stdout  # the flag wins


def test_color_auto_follows_the_terminal_and_no_color(monkeypatch):
    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert output.color_enabled()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not output.color_enabled()


def test_table_widths_ignore_colour_codes():
    text = output.table(("A", "B"), [(click.style("xx", fg="red"), "1"), ("yyyy", "2")])
    plain = click.unstyle(text).splitlines()
    assert plain[2].index("1") == plain[3].index("2")


def test_yaml_uses_libyaml_with_the_pure_python_bytes():
    data = run("plan", "-o", "json").stdout
    loaded = json.loads(data)
    assert output.to_yaml(loaded) == yaml.dump(
        loaded, Dumper=yaml.SafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    assert yaml.__with_libyaml__


def test_json_keeps_non_ascii_and_stringifies_unknown_types():
    from fractions import Fraction

    text = output.to_json({"name": "训练", "q": Fraction(1, 2), "f": 0.1})
    assert "训练" in text and json.loads(text) == {"name": "训练", "q": "1/2", "f": 0.1}


def test_invoked_as_kubectl_gpu_usage_and_examples_say_kubectl_gpu(tmp_path):
    code = (
        "import sys; sys.argv[0] = '/usr/local/bin/kubectl-gpu'; from kgpu.cli.main import main; "
        "main(['plan', '--help'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("Usage: kubectl gpu plan [OPTIONS]")
    assert "\n    kubectl gpu plan -f kgpu.yaml" in out and "  kgpu plan" not in out
    code2 = "import sys; sys.argv[0] = 'kgpu'; from kgpu.cli.main import main; main(['plan', '--help'])"
    assert subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True).stdout.startswith(
        "Usage: kgpu plan"
    )


def test_require_extra_names_the_extra():
    with pytest.raises(SystemExit) as exc:
        output.require_extra("exporter", "kgpu exporter", ["kgpu_no_such_module"])
    assert exc.value.code == 2


def test_require_extra_message(capsys):
    with pytest.raises(SystemExit):
        output.require_extra("validate", "kgpu render --validate", ["kgpu_no_such_module"])
    err = capsys.readouterr().err
    assert err.startswith("error: kgpu render --validate needs the 'validate' extra, kgpu[validate]")
    # kgpu is not on PyPI: the line installs the extra's own requirements, from kgpu's metadata
    assert "pip install 'kubernetes-validate<2,>=1.30'" in err
    assert "(pipx: pipx inject kgpu 'kubernetes-validate<2,>=1.30')" in err
    assert len(err.strip().splitlines()) == 1


def test_extra_requirements_come_from_the_installed_metadata():
    assert sorted(r.split("<")[0].split(">")[0] for r in output.extra_requirements("exporter")) == [
        "bcrypt",
        "grpcio",
        "nvidia-ml-py",
        "prometheus-client",
        "protobuf",
    ]
    assert output.extra_requirements("no-such-extra") == []


def test_extras_in_pyproject_match_the_modules_checked():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(output.EXTRAS) <= set(extras)
    base = " ".join(project["dependencies"]).lower()
    for heavy in ("nvidia-ml-py", "grpcio", "protobuf", "kubernetes-validate", "prometheus-client"):
        assert heavy not in base
    assert any(d.startswith("kubernetes-validate") for d in extras["validate"])
    assert {d.split(">")[0] for d in extras["exporter"]} == {
        "prometheus-client",
        "nvidia-ml-py",
        "grpcio",
        "bcrypt",
        "protobuf",
    }


_TRICKY = [
    "",
    "null",
    "~",
    "yes",
    "No",
    "on",
    "true",
    "1",
    "0x1F",
    "1e3",
    "1.5",
    ".inf",
    "2026-11-23",
    "a: b",
    "- x",
    "#c",
    "x #c",
    "'q'",
    '"d"',
    "训练",
    "tab\there",
    "line\nbreak",
    " lead",
    "trail ",
    "=",
    "<<",
    "ip-10-0-1-30.us-west-2.compute.internal",
    "g4dn.xlarge",
    "a/b",
    "_x",
    "x" * 150,
    "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu. " * 2,
]


def _scalars():
    from hypothesis import strategies as st

    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
    return st.one_of(st.sampled_from(_TRICKY), text, st.integers(), st.floats(), st.booleans(), st.none())


def test_yaml_fast_rows_are_the_pure_python_bytes():
    """Long lists of flat rows take a memoised path; the bytes must equal PyYAML's safe_dump on any data."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    keys = st.one_of(
        st.sampled_from(["namespace", "name", "node", "reason", "yes", "a b", "1", ""]), st.text(max_size=8)
    )
    row = st.dictionaries(keys, _scalars(), min_size=1, max_size=6)

    @settings(max_examples=25, deadline=None)
    @given(rows=st.lists(row, min_size=1, max_size=6), extra=_scalars(), repeat=st.integers(40, 80))
    def check(rows: list[dict], extra: object, repeat: int) -> None:
        data = {"pods": [dict(r) for r in rows * repeat], "summary": {"n": extra}, "new_nodes": rows}
        expected = yaml.dump(
            data, Dumper=yaml.SafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
        )
        assert output.to_yaml(data) == expected

    check()


def test_yaml_fast_rows_with_list_values_are_the_pure_python_bytes():
    """Rows whose values may be lists (a pod's ``warnings``: mostly empty, sometimes flat mappings)."""
    import copy

    from hypothesis import given, settings
    from hypothesis import strategies as st

    warning = st.dictionaries(st.sampled_from(["code", "message"]), _scalars(), min_size=1, max_size=2)
    value = st.one_of(_scalars(), st.just([]), st.lists(warning, min_size=1, max_size=2))
    row = st.dictionaries(st.sampled_from(["namespace", "name", "node", "warnings", "reason"]), value, min_size=1)

    @settings(max_examples=25, deadline=None)
    @given(rows=st.lists(row, min_size=1, max_size=6), repeat=st.integers(60, 80))
    def check(rows: list[dict], repeat: int) -> None:
        data = {"pods": [copy.deepcopy(r) for r in rows * repeat], "summary": {"n": 1}}
        expected = yaml.dump(
            data, Dumper=yaml.SafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
        )
        assert output.to_yaml(data) == expected

    check()


def test_yaml_rows_shared_elsewhere_keep_pythons_anchors():
    row = {"name": "a", "node": None}
    data = {"pods": [row] + [{"name": f"p{i}", "node": "n"} for i in range(300)], "first": row}
    expected = yaml.dump(
        data, Dumper=yaml.SafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    assert "&id001" in expected and output.to_yaml(data) == expected


# --- global flags before the verb, "did you mean", rough edges ------------------------------------------------

KGPU = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "kgpu"
KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "dev",
    "clusters": [{"name": "dev", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "dev", "user": {"token": "t0ken"}}],
    "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": "dev", "namespace": "ml"}},
                 {"name": "prod", "context": {"cluster": "dev", "user": "dev", "namespace": "serving"}}],
}


@pytest.fixture()
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    return str(path)


def kgpu(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed entry point, as a shell runs it."""
    return subprocess.run([str(KGPU), *args], capture_output=True, text=True, timeout=120, check=False)


def test_cluster_flags_before_the_verb_reach_it(kubeconfig: str):
    """kubectl's global flags: `kgpu --kubeconfig F --context C -n NS doctor` is `kgpu doctor --kubeconfig F ...`;
    each value reaches the verb (the errors kubectl's resolution gives for them say so)."""
    res = run("--kubeconfig", "/nonexistent/config", "doctor")
    assert res.exit_code == 2 and "/nonexistent/config: no such kubeconfig file" in res.output
    res = run("--kubeconfig", kubeconfig, "--context", "staging", "top")
    assert res.exit_code == 2 and "context 'staging' not found (contexts: dev, prod)" in res.output
    res = run("--kubeconfig", kubeconfig, "-n", "Not_A_Namespace", "snapshot")
    assert res.exit_code == 2 and "-n/--namespace: 'Not_A_Namespace' is not a valid namespace name" in res.output
    res = run(f"--kubeconfig={kubeconfig}", "--request-timeout", "0", "doctor")
    assert res.exit_code == 2 and "--request-timeout" in res.output
    # given after the verb too, the later one wins (kubectl's rule): the bad namespace is never checked
    res = run("--kubeconfig", kubeconfig, "-n", "Not_A_Namespace", "doctor", "-n", "ml", "--request-timeout", "2")
    assert res.exit_code == 2 and "Not_A_Namespace" not in res.output and "cannot reach https://127.0.0.1:1" in res.output


def test_cluster_flags_before_a_verb_that_takes_none_are_refused():
    res = run("-n", "ml", "plan")
    assert res.exit_code == 2
    assert " plan` takes no -n/--namespace: it does not read a cluster" in res.output
    res = run("--context", "prod", "tke", "match", "--gpu-type", "T4", "--gpus", "1")
    assert res.exit_code == 2 and " tke` takes no --context" in res.output
    res = kgpu("-n", "ml", "plan")
    assert res.returncode == 2 and "`kgpu plan` takes no -n/--namespace" in res.stderr


def test_cluster_flags_before_the_verb_in_the_installed_kgpu(kubeconfig: str):
    res = kgpu("--kubeconfig", kubeconfig, "--context", "staging", "doctor")
    assert res.returncode == 2 and "context 'staging' not found" in res.stderr and "Traceback" not in res.stderr
    res = kgpu("-n", "Not_A_Namespace", "--kubeconfig", kubeconfig, "doctor")
    assert res.returncode == 2 and "'Not_A_Namespace' is not a valid namespace name" in res.stderr
    assert kgpu("-n", "ml", "doctor", "--help").stdout.startswith("Usage: kgpu doctor")


def test_exporter_flags_still_start_the_exporter_not_a_verb():
    """A DaemonSet written for dcgm-exporter passes `-n` (--no-hostname, no value): that is the exporter's, not
    kubectl's -n, because no verb follows."""
    from kgpu.cli.main import _global_prefix

    assert _global_prefix(["-n", "ml", "doctor"]) and _global_prefix(["--context=prod", "--namespace", "ml", "top"])
    assert not _global_prefix(["-n"]) and not _global_prefix(["-n", "-f", "/etc/dcgm/counters.csv"])
    assert not _global_prefix(["--web.listen-address", ":9400"])
    assert not _global_prefix(["-n", "ml", "--web.listen-address", ":9400"])


@pytest.mark.parametrize(("typed", "meant"), [("rendr", "render"), ("simualte", "simulate"), ("doctr", "doctor"),
                                              ("snap", "snapshot"), ("catalgo", "catalog")])
def test_mistyped_verb_gets_did_you_mean(typed: str, meant: str):
    res = run(typed)
    assert res.exit_code == 2
    assert f"Error: No such command '{typed}'. Did you mean '{meant}'?" in res.output


def test_did_you_mean_in_the_installed_kgpu_and_nothing_when_nothing_is_close():
    res = kgpu("rendr")
    assert res.returncode == 2 and "No such command 'rendr'. Did you mean 'render'?" in res.stderr
    res = kgpu("zzzz")
    assert res.returncode == 2 and "No such command 'zzzz'." in res.stderr and "Did you mean" not in res.stderr


def test_tke_match_checks_every_file(tmp_path: Path):
    def pod(name: str, gpu_type: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                             "annotations": {"eks.tke.cloud.tencent.com/gpu-type": gpu_type}},
                "spec": {"containers": [{"name": "c", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "4", "memory": "16Gi"}}}]}}

    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump(pod("infer", "T4")))
    b.write_text(yaml.safe_dump(pod("train", "V100")))
    data = json.loads(run("tke", "match", "-f", str(a), "-f", str(b), "-o", "json").stdout)
    assert [r["object"] for r in data] == [f"{a}: Pod default/infer", f"{b}: Pod default/train"]
    assert [r["gpu_type"] for r in data] == ["T4", "V100"]
    res = run("tke", "match", "-f", "-", "-f", "-")
    assert res.exit_code == 2 and "standard input can be read once" in res.output


def test_run_help_says_nothing_users_cannot_use():
    text = run("run", "-h").output.lower()
    assert "seed" not in text and "vector-add" in text


def test_profile_error_names_the_other_errors(tmp_path: Path):
    prof = tmp_path / "kgpu.yaml"
    prof.write_text(
        "apiVersion: kgpu.dev/v1alpha1\nkind: ClusterProfile\nmetadata: {name: x}\nprovider: eks\n"
        "cluster: {name: a, region: us-west-2}\npools:\n- name: gpu\n  kind: karpenter\n  weigth: 10\n"
        "  tains: []\n  lables: {}\n  capacityType: [spot]\n"
    )
    res = run("plan", "-f", str(prof))
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    line = res.output
    for field in ("autoscaler: required field missing", "pools[0].weigth: unknown field",
                  "pools[0].tains: unknown field", "pools[0].lables: unknown field"):
        assert field in line, line
    assert "and 1 more)" in line  # the fifth is counted
