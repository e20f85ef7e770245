"""The readers' size and count limits: sized for the largest cluster Kubernetes supports, refused past them.

A ``kgpu snapshot`` of 150,000 pods on 5,000 nodes is about 700 MiB, and ``kubectl get -o json`` prints the
same cluster indented in 1-2 GiB: both must be read; a larger file is refused by its size before a byte of
it is read (a sparse file stands for it here), with the one-line error every bad input gets.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kgpu.model.load import MAX_PODS
from kgpu.model.safeyaml import MAX_BYTES

KGPU = [sys.executable, "-m", "kgpu.cli.main"]


def test_limits_hold_the_largest_supported_cluster() -> None:
    assert MAX_BYTES >= 2 * 2**30  # a 150,000-pod cluster as kubectl prints it, with headroom
    assert MAX_PODS >= 2 * 150_000  # Kubernetes' limit per cluster, with headroom


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = _sparse(tmp_path / "cluster.json", MAX_BYTES + 1)
    for args in (["simulate", "-c", str(big)], ["doctor", "--snapshot", str(big)]):
        start = time.monotonic()
        res = subprocess.run([*KGPU, *args], capture_output=True, text=True, timeout=60)
        assert time.monotonic() - start < 20
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr
        assert str(big) in lines[0] and f"larger than {MAX_BYTES // 2**20} MiB (size limit)" in lines[0]


def test_a_file_at_the_old_limit_is_not_refused_for_its_size(tmp_path: Path) -> None:
    # past the old 512 MiB limit: read whole (no size error), then decoded
    path = tmp_path / "cluster.json"
    with open(path, "wb") as fh:
        fh.write(b'{"apiVersion": "v1", "kind": "List", "items": []}')
        fh.truncate(513 * 2**20)  # NUL bytes after the document: invalid JSON, but not a size error
    res = subprocess.run([*KGPU, "simulate", "-c", str(path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "size limit" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
