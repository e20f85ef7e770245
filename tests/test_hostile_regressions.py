"""Every class of hostile input found by the reliability campaign, kept as a regression test.

Each test names its class. In-process through click's CliRunner where a failure is an exception; in a
subprocess where the failure was a segfault (deep YAML), or where it needs a real file descriptor
(stdout on /dev/full) or a resource limit (a full disk).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hostile_inputs import EXAMPLES, TEMPLATES, check_result, invoke, tree
from kgpu.errors import InputError, quote
from launch import launched

ROOT = Path(__file__).resolve().parent.parent
KGPU = [sys.executable, "-m", "kgpu.cli.main"]
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"}},
}


def pod(**spec: object) -> dict[str, object]:
    base: dict[str, object] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
    }
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": base}


def write(path: Path, value: object) -> str:
    if isinstance(value, bytes):
        path.write_bytes(value)
    elif isinstance(value, str):
        path.write_text(value)
    else:
        path.write_text(yaml.safe_dump_all(value if isinstance(value, list) else [value]))
    return str(path)


def input_error(args: list[str], names: str, *fragments: str) -> str:
    """Run; expect exit 2 with one error line that names ``names`` and every fragment."""
    result = invoke(args)
    check_result(result, names=names, what=" ".join(args)[:200])
    assert result.exit_code == 2, result.stderr + result.stdout
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for f in fragments:
        assert f in errors[0], errors[0]
    return errors[0]


def profile_text(template: str = "eks-karpenter") -> dict[str, object]:
    data: dict[str, object] = yaml.safe_load((TEMPLATES / f"{template}.yaml").read_text())
    return data


def run_cli(
    args: list[str], *, timeout: float = 60, file_size: int | None = None, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """kgpu in a subprocess; ``file_size``: under that RLIMIT_FSIZE, SIGXFSZ ignored (writes then fail with
    EFBIG, as on a full disk)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    if "stdout" not in kwargs:
        kwargs["capture_output"] = True
    cmd = [*KGPU, *args]
    if file_size is not None:
        cmd = launched(cmd, file_size=file_size, ignore_xfsz=True)
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        cmd, text=True, timeout=timeout, env=env, **kwargs
    )


# --- crashes: deep nesting ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "verb", [["simulate", "-c"], ["plan", "-f"], ["render", "-f"], ["profile", "validate", "-f"]]
)
def test_deep_yaml_is_refused_not_a_segfault(verb: list[str], tmp_path: Path) -> None:
    """100,000 levels of '[' segfaulted libyaml's composer (exit 139): a subprocess, so a crash shows."""
    f = write(tmp_path / "deep.yaml", b"a: " + b"[" * 100_000)
    proc = run_cli([*verb, f])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"error: {f}: nested deeper than 100 levels at line 1 (depth limit: 100)"
    ]


def test_deep_block_yaml_is_refused(tmp_path: Path) -> None:
    f = write(tmp_path / "deep.yaml", b"- " * 50_000 + b"x\n")
    input_error(["simulate", "-c", f], f, "depth limit")


@pytest.mark.parametrize("verb", [["tke", "match", "-f"], ["catalog", "-f"], ["simulate", "-c"]])
def test_deep_json_is_refused(verb: list[str], tmp_path: Path) -> None:
    """Deep JSON raised RecursionError in tke match and catalog -f."""
    f = write(tmp_path / "deep.json", b'{"kind": "Pod", "spec": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    input_error([*verb, f], f, "depth limit")


def test_node_check_deep_daemon_json(tmp_path: Path) -> None:
    (tmp_path / "etc/docker").mkdir(parents=True)
    (tmp_path / "etc/docker/daemon.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    result = invoke(["node-check", "--root", str(tmp_path), "-o", "json"])
    check_result(result, names=None, what="node-check")
    docker = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "docker runtime")
    assert docker["status"] == "fail" and "depth limit" in docker["detail"]


# --- crashes: huge integers, overflowing quantities ------------------------------------------------------


@pytest.mark.parametrize(
    ("verb", "text"),
    [
        (["simulate", "-c"], "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: %s}}\n"),
        (["profile", "validate", "-f"], "apiVersion: kgpu.dev/v1alpha1\nprovider: %s\n"),
        (["tke", "match", "-f"], "kind: Pod\nspec: {containers: [{resources: {limits: {cpu: %s}}}]}\n"),
        (["catalog", "-f"], "- {instance_type: g5.xlarge, max_pods: %s}\n"),
    ],
)
def test_integers_over_4300_digits(verb: list[str], text: str, tmp_path: Path) -> None:
    f = write(tmp_path / "big.yaml", text % ("9" * 5000))
    input_error([*verb, f], f, "integer digits limit: 100")


def test_integer_over_4300_digits_in_json(tmp_path: Path) -> None:
    f = write(
        tmp_path / "big.json",
        '{"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": %s}}' % ("9" * 5000),
    )
    input_error(["simulate", "-c", f], f)


def test_allocatable_cpu_1e400_is_refused(tmp_path: Path) -> None:
    """cpu: 1e400 reached the scorer as a float overflow."""
    node = {**NODE, "status": {"allocatable": {"cpu": "1e400", "memory": "1Gi", "pods": "10"}}}
    f = write(tmp_path / "n.yaml", node)
    input_error(["simulate", "-c", f], f, "Node n1: status.allocatable.cpu", "too large", "int64")


@pytest.mark.parametrize("flag", [["--cpu", "1e400"], ["--memory", "1e400"], ["--cpu", "-4"]])
def test_tke_match_flag_quantities(flag: list[str]) -> None:
    input_error(["tke", "match", "--gpu-type", "V100", "--gpus", "1", *flag], flag[0])


def test_catalog_memory_1e308(tmp_path: Path) -> None:
    rows = [{"instance_type": "g9.big", "region": "us-east-1", "vcpus": 4, "memory_gib": 1e308}]
    f = write(tmp_path / "c.yaml", [rows])
    input_error(["catalog", "-f", f], f, "row 1: memory_gib")


# --- crashes: paths and output faults ---------------------------------------------------------------------


def test_paths_over_name_max(tmp_path: Path) -> None:
    long = str(tmp_path / ("x" * 300))
    for args in (
        ["simulate", "-c", long],
        ["plan", "-f", long],
        ["plan", "-w", long],
        ["tke", "match", "-f", long],
        ["catalog", "-f", long],
        ["profile", "validate", "-f", long],
        ["init", "-f", long],
        ["render", "--template", "onprem", "--output-dir", long + "/out"],
    ):
        input_error(args, long[:100], "File name too long")


def test_profile_workload_path_over_name_max(tmp_path: Path) -> None:
    data = profile_text()
    data["workloads"] = ["y" * 300 + ".yaml"]
    f = write(tmp_path / "kgpu.yaml", data)
    input_error(["plan", "-f", f], "yyyy", "File name too long")


def test_output_faults(tmp_path: Path) -> None:
    """-o under a regular file, a dangling symlink, a symlink loop, a read-only file system."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for target, fragment in (
        (tmp_path / "file" / "out", "ot a directory"),  # "not a directory", "Not a directory"
        (tmp_path / "dangling", "dangling symbolic link"),
        (tmp_path / "loop", "symbolic links"),
        (Path("/proc/kgpu-out"), "cannot"),
    ):
        input_error(
            ["render", "--template", "onprem", "--output-dir", str(target)], str(target.parent), fragment
        )
        input_error(["init", "-f", str(target / "kgpu.yaml")], str(target.parent), fragment)
    assert (tmp_path / "file").read_text() == "x"
    assert not (tmp_path / "nowhere").exists()


def test_full_disk_leaves_the_directory_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "karpenter.yaml").write_text("old\n")
    before = tree(out)
    proc = run_cli(["render", "--template", "eks-karpenter", "--output-dir", str(out)], file_size=2000)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {out}: cannot write: File too large"]
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging directory left behind


@pytest.mark.parametrize(
    "args",
    [
        ["render", "--template", "onprem"],
        ["simulate", "-c", str(EXAMPLES / "002-vector-add-pod.yaml")],
        ["catalog"],
    ],
)
def test_stdout_on_dev_full(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = run_cli(args, stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: cannot write to standard output: No space left on device"
    ]


def test_stdout_closed_pipe_is_quiet() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    reader = subprocess.Popen(
        [*KGPU, "catalog", "--min-gpus", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.read(10)
    reader.stdout.close()
    err = reader.stderr.read().decode()
    assert reader.wait(30) == 0 and "Traceback" not in err and "Exception ignored" not in err


# --- crashes: tke match, catalog, node-check --------------------------------------------------------------


def test_tke_list_items_not_a_list(tmp_path: Path) -> None:
    f = write(tmp_path / "l.yaml", {"apiVersion": "v1", "kind": "List", "items": 5})
    input_error(["tke", "match", "-f", f], f, "items: must be a list, got int")


@pytest.mark.parametrize("value", ["²", "١٢", "4.5", True])
def test_catalog_non_ascii_digits(value: object, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", [[{"instance_type": "g5.xlarge", "vcpus": value}]])
    input_error(["catalog", "-f", f], f, "row 1: vcpus", "whole number")


def test_catalog_huge_csv_field(tmp_path: Path) -> None:
    f = write(tmp_path / "c.csv", "instance_type,region\n" + "x" * 140_000 + ",us-east-1\n")
    input_error(["catalog", "-f", f], f, "invalid CSV at line", "field larger than field limit")


def test_catalog_negative_max_pods(tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", [[{"instance_type": "g5.xlarge", "max_pods": -5}]])
    input_error(["catalog", "-f", f], f, "row 1: max_pods")


CONTAINERD_OK = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
"""
MALFORMED_HOSTS: list[tuple[str, str, bytes, str]] = [
    (
        "toml",
        "version string",
        CONTAINERD_OK.replace("version = 2", 'version = "abc"').encode(),
        "version must be",
    ),
    (
        "toml",
        "version float",
        CONTAINERD_OK.replace("version = 2", "version = 2.5").encode(),
        "version must be",
    ),
    ("toml", "invalid utf-8", b"version = 2\n# \xff\xfe\n", "not UTF-8"),
    ("toml", "plugins a string", b'version = 2\nplugins = "x"\n', "plugins must be a table"),
    ("toml", "cri a list", b'version = 2\n[[plugins."io.containerd.grpc.v1.cri"]]\n', "no [plugins"),
    (
        "toml",
        "containerd a string",
        b'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\ncontainerd = "x"\n',
        "must be a table",
    ),
    (
        "toml",
        "runtimes an int",
        b'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nruntimes = 1\n',
        "must be a table",
    ),
    (
        "toml",
        "options a list",
        CONTAINERD_OK.replace(
            '.options]\n    BinaryName = "/usr/bin/nvidia-container-runtime"', "]\n    options = []"
        ).encode(),
        "options must be a table",
    ),
    (
        "toml",
        "BinaryName an int",
        CONTAINERD_OK.replace('"/usr/bin/nvidia-container-runtime"', "5").encode(),
        "BinaryName must be a string",
    ),
    (
        "toml",
        "default runtime a list",
        CONTAINERD_OK.replace('"nvidia"', "[]", 1).encode(),
        "default_runtime_name must be a string",
    ),
    ("toml", "imports an int", b"version = 2\nimports = 5\n", "imports must be a list"),
    ("toml", "imports a directory", b'version = 2\nimports = ["conf.d"]\n', "which is not a file"),
    ("json", "a list", b"[]", "must be an object"),
    ("json", "invalid utf-8", b'{"a": "\xff"}', "not UTF-8"),
    ("json", "runtimes a string", b'{"runtimes": "x", "default-runtime": "nvidia"}', "must be an object"),
    ("json", "not json", b"{", "invalid JSON"),
]


@pytest.mark.parametrize(
    ("kind", "case", "data", "fragment"), MALFORMED_HOSTS, ids=[c[1] + " " + c[0] for c in MALFORMED_HOSTS]
)
def test_node_check_malformed_runtime_configs(
    kind: str, case: str, data: bytes, fragment: str, tmp_path: Path
) -> None:
    """Fourteen malformed config.toml / daemon.json inputs crashed node-check; each is a failed check now."""
    (tmp_path / "etc/containerd/conf.d").mkdir(parents=True)
    (tmp_path / "etc/docker").mkdir(parents=True)
    path = "etc/containerd/config.toml" if kind == "toml" else "etc/docker/daemon.json"
    (tmp_path / path).write_bytes(data)
    result = invoke(["node-check", "--root", str(tmp_path), "-o", "json"])
    check_result(result, names=None, what=case)
    assert result.exit_code == 1
    name = "containerd runtime" if kind == "toml" else "docker runtime"
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == name)
    assert check["status"] == "fail" and fragment in check["detail"], check["detail"]


# --- hangs ---------------------------------------------------------------------------------------------


def _timed(args: list[str], names: str, *fragments: str) -> None:
    start = time.monotonic()
    input_error(args, names, *fragments)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (
            {"kind": "Deployment", "spec": {"replicas": 100_000_000, "template": {"spec": {}}}},
            "spec.replicas",
        ),
        ({"kind": "Job", "spec": {"parallelism": 100_000_000, "template": {"spec": {}}}}, "spec.parallelism"),
        (
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "spec": {"workerGroupSpecs": [{"replicas": 100_000_000, "template": {"spec": {}}}]},
            },
            "spec.workerGroupSpecs[0].replicas",
        ),
    ],
)
def test_replica_counts_are_bounded(doc: dict[str, object], field: str, tmp_path: Path) -> None:
    api = "batch/v1" if doc["kind"] in ("Job", "CronJob") else "apps/v1"
    doc = {"apiVersion": api, "metadata": {"name": "big"}, **doc}
    f = write(tmp_path / "w.yaml", doc)
    _timed(["simulate", "-c", str(EXAMPLES / "002-vector-add-pod.yaml"), "-w", f], f, field, "300000 pods")


def test_replicas_1e30_in_json(tmp_path: Path) -> None:
    f = write(
        tmp_path / "w.json",
        '{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1000000000000000000000000000000, "template": {}}}',
    )
    _timed(["plan", "-w", f], f, "spec.replicas")


def test_node_group_desired_size_is_bounded(tmp_path: Path) -> None:
    data = profile_text("eks-eksctl")
    data["pools"][0]["desiredSize"] = 100_000_000  # type: ignore[index]
    f = write(tmp_path / "p.yaml", data)
    _timed(["plan", "-f", f], f, "pools[0].desiredSize", "5000")


ALIAS_BOMB = "\n".join(
    [f'a: &a ["{"x" * 10}"' + ', "x"' * 9 + "]"]
    + [f"{chr(98 + n)}: &{chr(98 + n)} [" + ", ".join([f"*{chr(97 + n)}"] * 10) + "]" for n in range(8)]
)


@pytest.mark.parametrize(
    "verb", [["profile", "validate", "-f"], ["render", "-f"], ["plan", "-f"], ["tke", "match", "-f"]]
)
def test_alias_bomb(verb: list[str], tmp_path: Path) -> None:
    """provider: *i (10^9 strings) hung validate, render and plan for the error message's repr()."""
    key = "kind" if verb[0] == "tke" else "provider"
    f = write(tmp_path / "bomb.yaml", ALIAS_BOMB + f"\n{key}: *i\n")
    _timed([*verb, f], f, "alias expansion limit: 100000")


def test_small_alias_values_are_quoted_capped(tmp_path: Path) -> None:
    """Below the budget, a large aliased value is still quoted in a few dozen characters."""
    f = write(tmp_path / "p.yaml", 'x: &x ["' + "y" * 50 + '"' + ', "y"' * 3000 + "]\nprovider: *x\n")
    result = invoke(["profile", "validate", "-f", f])
    check_result(result, names=f, what="validate")
    lines = [ln for ln in result.stderr.splitlines() if "provider:" in ln]
    assert len(lines) == 1 and len(lines[0]) < len(f) + 200, lines


def test_quote_does_bounded_work() -> None:
    nested: list[object] = ["x"]
    for _ in range(50):
        nested = [nested] * 10
    start = time.monotonic()
    assert len(quote(nested)) <= 80 and len(quote("x" * 10**7)) <= 80 and "digits" in quote(10**5000)
    assert time.monotonic() - start < 1


# --- data loss --------------------------------------------------------------------------------------------


def test_render_failing_partway_changes_nothing(tmp_path: Path) -> None:
    """One target path is a directory: two files used to be replaced before the traceback."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("karpenter.yaml", "device-plugin.yaml", "rbac.yaml"):
        (out / name).write_text(f"old {name}\n")
    (out / "monitoring.yaml").mkdir()
    (out / "monitoring.yaml" / "keep").write_text("x")
    before = tree(out)
    input_error(
        ["render", "--template", "eks-karpenter", "--output-dir", str(out)],
        str(out),
        "monitoring.yaml",
        "in the way",
    )
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_render_rolls_back_when_a_rename_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename failing after others succeeded (the checks cannot foresee every fault) restores the old files."""
    from kgpu.cli import files

    out = tmp_path / "out"
    out.mkdir()
    (out / "karpenter.yaml").write_text("old\n")
    before = tree(out)
    real_replace = os.replace
    calls = {"n": 0}

    def flaky(src: object, dst: object) -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(files.os, "replace", flaky)
    with pytest.raises(InputError, match="nothing changed"):
        files.write_tree(
            out, {"karpenter.yaml": "new\n", "a/b.yaml": "b\n", "c.yaml": "c\n", "d.yaml": "d\n"}
        )
    assert tree(out) == before


# --- wrong exit codes and unclear errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("pools", 1, "limits", "nvidia.com/gpu"), "abc", "pools[1].limits"),
        (("pools", 1, "limits", "cpu"), "-1", "pools[1].limits"),
    ],
)
def test_profile_quantities_are_validated(
    path: tuple[object, ...], value: str, field: str, tmp_path: Path
) -> None:
    data = profile_text()
    target: object = data
    for p in path[:-1]:
        target = target[p]  # type: ignore[index]
    target[path[-1]] = value  # type: ignore[index]
    f = write(tmp_path / "p.yaml", data)
    for verb in (["profile", "validate", "-f"], ["render", "-f"], ["plan", "-f"]):
        input_error([*verb, f], f, field)


@pytest.mark.parametrize(("key", "value"), [("cpu", "abc"), ("memory", "-5Gi"), ("cpu", "1e400")])
def test_static_node_quantities(key: str, value: str, tmp_path: Path) -> None:
    data = profile_text("onprem")
    data["pools"][0]["nodes"][0][key] = value  # type: ignore[index]
    f = write(tmp_path / "p.yaml", data)
    input_error(["profile", "validate", "-f", f], f, "pools[0].nodes[0]", key)


def test_hourly_price_inf(tmp_path: Path) -> None:
    data = profile_text("onprem")
    data["pools"][0]["nodes"][0]["hourlyPrice"] = float("inf")  # type: ignore[index]
    f = write(tmp_path / "p.yaml", data)
    input_error(["profile", "validate", "-f", f], f, "hourlyPrice")


def test_unknown_node_group_instance_type(tmp_path: Path) -> None:
    data = profile_text("eks-eksctl")
    data["pools"][1]["instanceTypes"] = ["p3.2xlarj"]  # type: ignore[index]
    f = write(tmp_path / "p.yaml", data)
    for verb in (["profile", "validate", "-f"], ["render", "-f"], ["plan", "-f"]):
        input_error([*verb, f], f, "pools[1].instanceTypes[0]", "unknown instance type", "p3.2xlarge")


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ({"key": "gpu", "operator": "Foo", "values": ["a"]}, "not a valid selector operator"),
        ({"key": "gpu", "operator": "in", "values": ["a"]}, "not a valid selector operator"),
        ({"key": "gpu", "operator": "Gt", "values": ["abc"]}, "must be an integer"),
        ({"key": "gpu", "operator": "Gt", "values": ["1", "2"]}, "single value"),
        ({"key": "gpu", "operator": "Exists", "values": ["a"]}, "may not be specified"),
        ({"key": "gpu", "operator": "In", "values": []}, "must be specified"),
        ({"key": "bad key!", "operator": "Exists"}, "not a valid label key"),
    ],
)
def test_node_affinity_validated_like_the_api_server(
    expr: dict[str, object], fragment: str, tmp_path: Path
) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    }
    f = write(tmp_path / "w.yaml", pod(affinity=affinity))
    input_error(
        ["simulate", "-c", write(tmp_path / "n.yaml", NODE), "-w", f], f, "matchExpressions[0]", fragment
    )


def test_list_items_not_a_list(tmp_path: Path) -> None:
    f = write(tmp_path / "l.yaml", {"apiVersion": "v1", "kind": "List", "items": {"a": 1}})
    input_error(["simulate", "-c", f], f, "items: must be a list, got dict")


@pytest.mark.parametrize(
    ("kind", "suggestion"),
    [("Deplyment", "Deployment (apiVersion apps/v1)"), ("pod", "Pod"), ("Widget", None)],
)
def test_unknown_kinds_are_named(kind: str, suggestion: str | None, tmp_path: Path) -> None:
    """A kind the core group (apiVersion v1) does not serve is what the API server rejects: exit 2."""
    docs = [NODE, {**pod(), "kind": kind}]
    f = write(tmp_path / "w.yaml", docs)
    line = input_error(["simulate", "-c", f], f, "kind", f"no matches for kind '{kind}' in version 'v1'")
    if suggestion:
        assert line.endswith(f"(did you mean {suggestion}?)")


def test_unknown_kinds_of_custom_resources_are_named(tmp_path: Path) -> None:
    docs = [NODE, {**pod(), "apiVersion": "example.com/v1", "kind": "Widget"}]
    f = write(tmp_path / "w.yaml", docs)
    result = invoke(["simulate", "-c", f])
    check_result(result, names=f, what="Widget")
    assert "unknown kind 'Widget'" in result.stderr


def test_quiet_kinds_are_not_reported(tmp_path: Path) -> None:
    f = write(tmp_path / "w.yaml", [NODE, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}])
    result = invoke(["simulate", "-c", f])
    assert result.exit_code == 0 and "unknown kind" not in result.stderr


def test_tke_misspelt_kind_is_named(tmp_path: Path) -> None:
    docs = [
        {"kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": []}},
        {"kind": "Deplyment", "spec": {}},
    ]
    f = write(tmp_path / "w.yaml", docs)
    result = invoke(["tke", "match", "-f", f])
    check_result(result, names=f, what="tke")
    assert "ignored kind 'Deplyment' (did you mean Deployment?)" in result.stderr


@pytest.mark.parametrize("limit", [-1, "-1"])
def test_tke_negative_gpu_limit(limit: object, tmp_path: Path) -> None:
    doc = {
        "kind": "Pod",
        "metadata": {"name": "a"},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": limit}}}]},
    }
    f = write(tmp_path / "w.yaml", doc)
    input_error(["tke", "match", "-f", f], f, "limits.nvidia.com/gpu", "greater than or equal to 0")


@pytest.mark.parametrize(
    ("field", "port"), [("hostPort", 70000), ("hostPort", -5), ("containerPort", 0x10000)]
)
def test_ports_out_of_range(field: str, port: int, tmp_path: Path) -> None:
    spec = {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, field: port}]}]}
    f = write(tmp_path / "w.yaml", pod(**spec))
    input_error(
        ["simulate", "-c", write(tmp_path / "n.yaml", NODE), "-w", f],
        f,
        f"ports[0].{field}",
        "between 1 and 65535",
    )


def test_nul_byte_in_profile_is_one_line(tmp_path: Path) -> None:
    f = write(tmp_path / "p.yaml", (TEMPLATES / "onprem.yaml").read_bytes().replace(b"name:", b"na\0me:", 1))
    input_error(["profile", "validate", "-f", f], f, "invalid YAML", "control characters")


@pytest.mark.parametrize(
    "content",
    [
        "just a string\n",
        "- a\n- b\n",
        "kind: List\nitems: [5]\n",
        "kind: CronJob\nmetadata: {name: c}\nspec: {}\n",
    ],
)
def test_tke_errors_name_the_file(content: str, tmp_path: Path) -> None:
    f = write(tmp_path / "w.yaml", content)
    input_error(["tke", "match", "-f", f], f)


def test_messages_never_span_lines(tmp_path: Path) -> None:
    f = write(
        tmp_path / "w.yaml",
        {"kind": "Pod", "metadata": {"name": "a"}, "spec": {"tolerations": [{"operator": "x\ny\0"}]}},
    )
    line = input_error(["simulate", "-c", f], f, "tolerations[0].operator")
    assert "\\n" in line and "\\x00" in line


# --- found by the fuzz suite ------------------------------------------------------------------------------

SNAPSHOT = Path(__file__).parent / "fixtures" / "snapshots" / "device-plugin-untolerated.json"


def test_doctor_deep_snapshot(tmp_path: Path) -> None:
    f = write(
        tmp_path / "s.json", b'{"kind": "ClusterSnapshot", "items": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    )
    input_error(["doctor", "--snapshot", f], f, "depth limit")


def test_invalid_utf8_inside_a_json_string(tmp_path: Path) -> None:
    """msgspec raises UnicodeDecodeError (not a DecodeError) for a bad byte inside a string."""
    data = SNAPSHOT.read_bytes().replace(b'"ip-192', b'"\xf0ip-192')
    f = write(tmp_path / "s.json", data)
    input_error(["doctor", "--snapshot", f], f, "not UTF-8")
    input_error(["simulate", "-c", f], f, "not UTF-8")


def test_doctor_node_conditions_not_a_list(tmp_path: Path) -> None:
    doc = json.loads(SNAPSHOT.read_text())
    for item in doc["items"]:
        if item.get("kind") == "Node":
            item["status"]["conditions"] = 5
    f = write(tmp_path / "s.json", json.dumps(doc))
    check_result(invoke(["doctor", "--snapshot", f]), names=f, what="doctor")


def test_kubeconfig_deep_yaml(tmp_path: Path) -> None:
    f = write(tmp_path / "kubeconfig", b"a: " + b"[" * 100_000)
    proc = run_cli(["snapshot", "--kubeconfig", f, "-o", str(tmp_path / "s.json")])
    assert proc.returncode == 2 and "depth limit" in proc.stderr and "Traceback" not in proc.stderr


def test_monitoring_without_gpu_pools_renders(tmp_path: Path) -> None:
    """No GPU pool: nothing to monitor, and the exporter DaemonSet has no node selector to render."""
    data = profile_text()
    data["pools"] = [p for p in data["pools"] if p["name"] != "gpu"]  # type: ignore[index, attr-defined]
    f = write(tmp_path / "p.yaml", data)
    result = invoke(["render", "-f", f, "-o", "name"])
    check_result(result, names=f, what="render")
    assert result.exit_code == 0 and "daemonset.apps/kgpu-exporter" not in result.stdout


def test_monitoring_on_tke_super_nodes_is_an_input_error(tmp_path: Path) -> None:
    data = profile_text("tke-supernode")
    data["monitoring"] = {"enabled": True}
    f = write(tmp_path / "p.yaml", data)
    input_error(["render", "-f", f], f, "monitoring.enabled", "TKE super nodes run no DaemonSets")


def test_concurrent_renders_into_one_directory(tmp_path: Path) -> None:
    """Four renders racing for one directory: each exits 0 or 2 with one line, and the directory ends up
    holding one complete render (each file is replaced whole, never interleaved)."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    args = [*KGPU, "render", "--template", "eks-karpenter", "--output-dir", str(out)]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(4)
    ]
    results = [(p.wait(60), p.stderr.read().decode()) for p in procs if p.stderr is not None]
    assert all(code in (0, 2) and "Traceback" not in err for code, err in results), results
    assert any(code == 0 for code, _ in results)
    reference = tmp_path / "ref"
    assert run_cli(["render", "--template", "eks-karpenter", "--output-dir", str(reference)]).returncode == 0
    assert tree(out) == tree(reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "ref"]


@pytest.mark.parametrize("args", [["simulate", "-c", ""], ["plan", "-w", " "], ["catalog", "-f", " "]])
def test_empty_path_is_not_the_current_directory(args: list[str]) -> None:
    input_error(args, "empty path", "empty path")


def test_a_utf16_file_invalid_past_its_start_is_one_error_line(tmp_path: Path) -> None:
    """libyaml reads UTF-16 with a byte-order mark and fails inside it; kgpu's second look for its own limits
    reads the text as UTF-8 (NUL bytes), which PyYAML's reader refuses at once: still an input error."""
    text = '{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n"}}, {"a": ]}'
    f = write(tmp_path / "cluster.json", "\ufeff".encode("utf-16-le") + text.encode("utf-16-le"))
    line = input_error(["simulate", "-c", f], "cluster.json", "invalid YAML")
    assert f in line
