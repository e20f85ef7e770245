"""Shared set-up for the conformance suite: where `conformance/build.sh` put the real binaries."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def binary(module: str, name: str) -> Path:
    root = os.environ.get("KGPU_CONFORMANCE_BIN")
    if not root:
        pytest.fail("KGPU_CONFORMANCE_BIN is not set: run the conformance suite with `make conformance`")
    path = Path(root) / module / name
    if not path.exists():
        pytest.fail(f"{path} is missing: `make conformance` builds it (conformance/build.sh)")
    return path


def cases(default: int) -> int:
    return int(os.environ.get("KGPU_CONFORMANCE_CASES", default))


def seed() -> int:
    return int(os.environ.get("KGPU_CONFORMANCE_SEED", "20261122"))


@pytest.fixture(scope="module")
def kueue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Kueue's minimal manager on a kube-apiserver and etcd of its own, for one test module (kueue_rig)."""
    from kueue_rig import BINARY, KueueRig, start_api_server

    work = tmp_path_factory.mktemp("kueue")
    server = start_api_server(binary("kube", "kube-apiserver").parent.parent, work)
    try:
        rig = KueueRig(server, binary(*BINARY), work, log_level=os.environ.get("KGPU_KUEUE_LOG_LEVEL", "error")).start()
        try:
            yield rig
        finally:
            rig.stop()
    finally:
        server.stop()
