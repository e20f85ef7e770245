"""Under an address-space limit (``ulimit -v``), every verb that reads a file reads it: the reader's memory
follows the input, not the reader's size limit.

Each verb runs in a subprocess limited to 4 GiB of address space (below the reader's 4 GiB size limit) on a
small valid file, on /dev/null, on an empty file and on standard input: the outcome is the one without the
limit (its exit code), never a MemoryError.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hostile_inputs import TEMPLATES
from kgpu.model.safeyaml import MAX_BYTES, read_limited
from launch import launched

ROOT = Path(__file__).resolve().parent.parent
KGPU = [sys.executable, "-m", "kgpu.cli.main"]
ADDRESS_SPACE = 4 * 2**30
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
}


def _run(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        launched([*KGPU, *args], address_space=ADDRESS_SPACE), input=stdin, capture_output=True, timeout=120, env=env
    )


def _check(res: subprocess.CompletedProcess[bytes], rc: int, what: str) -> None:
    err = res.stderr.decode("utf-8", "replace")
    assert "MemoryError" not in err and "Traceback" not in err, f"{what}: {err[-2000:]}"
    assert res.returncode == rc, f"{what}: exit {res.returncode}: {err[-2000:]}"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "node.yaml").write_text(yaml.safe_dump(NODE))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(POD))
    (tmp_path / "empty.yaml").write_bytes(b"")
    (tmp_path / "prices.yaml").write_text(
        "- instance_type: g4dn.12xlarge\n  region: us-east-1\n  ondemand_usd_per_hour: 0.01\n"
    )
    return {
        "node": str(tmp_path / "node.yaml"),
        "pod": str(tmp_path / "pod.yaml"),
        "empty": str(tmp_path / "empty.yaml"),
        "prices": str(tmp_path / "prices.yaml"),
        "profile": str(TEMPLATES / "eks-karpenter.yaml"),
        "snapshot": str(ROOT / "tests/fixtures/snapshots/device-plugin-missing.json"),
    }


# (arguments with {FILE} for the file read, the exit code on the small valid file)
VERBS = [
    (["simulate", "-c", "{node}", "-w", "{FILE}"], "pod", 0),
    (["doctor", "--snapshot", "{FILE}"], "snapshot", 1),
    (["plan", "-f", "{FILE}"], "profile", 0),
    (["render", "-f", "{FILE}", "--target", "karpenter"], "profile", 0),
    (["profile", "validate", "-f", "{FILE}"], "profile", 0),
    (["catalog", "-f", "{FILE}"], "prices", 0),
    (["tke", "match", "-f", "{FILE}"], "pod", None),
]


@pytest.mark.parametrize(("args", "small", "rc"), VERBS, ids=[" ".join(v[0][:2]) for v in VERBS])
def test_verbs_read_small_files_under_an_address_space_limit(
    files: dict[str, str], args: list[str], small: str, rc: int | None
) -> None:
    def argv(path: str) -> list[str]:
        return [a.replace("{FILE}", path).format(**files) if "{" in a else a for a in args]

    expected = rc
    if expected is None:  # whatever the verb says without the limit
        expected = subprocess.run([*KGPU, *argv(files[small])], capture_output=True, timeout=120,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT / "src"))).returncode
        assert expected in (0, 1)
    _check(_run(argv(files[small])), expected, f"{args[0]} on a small file")
    for path in ("/dev/null", files["empty"]):
        res = _run(argv(path))
        _check(res, res.returncode if res.returncode in (0, 2) else -1, f"{args[0]} on {path}")
    data = Path(files[small]).read_bytes()
    _check(_run(argv("-"), stdin=data), expected, f"{args[0]} on standard input")


def test_node_check_reads_the_runtime_config_under_an_address_space_limit() -> None:
    root = ROOT / "tests/fixtures/nodecheck/good-containerd"
    res = _run(["node-check", "--root", str(root), "-o", "json"])
    _check(res, res.returncode if res.returncode in (0, 1) else -1, "node-check")
    assert b"nvidia-container-toolkit" in res.stdout


def test_the_size_limit_still_holds_and_is_named(tmp_path: Path) -> None:
    big = tmp_path / "cluster.json"
    with open(big, "wb") as fh:
        fh.truncate(MAX_BYTES + 1)
    res = _run(["simulate", "-c", str(big)])
    _check(res, 2, "simulate on a file over the size limit")
    assert f"larger than {MAX_BYTES // 2**20} MiB (size limit)" in res.stderr.decode()
    assert str(big) in res.stderr.decode()


def test_read_limited_reads_a_stream_past_its_limit_in_chunks() -> None:
    assert read_limited(io.BytesIO(b"x" * 10), limit=4) == b"xxxxx"  # limit + 1: the caller sees "over"
    assert read_limited(io.BytesIO(b"abc"), limit=4) == b"abc"
    assert read_limited(io.BytesIO(b""), limit=4) == b""
    assert len(read_limited(io.BytesIO(b"y" * (3 * 2**20)), limit=5 * 2**20)) == 3 * 2**20
