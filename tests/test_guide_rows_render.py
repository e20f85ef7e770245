"""Render-time rows of the guides a user did by hand: seed 004's head pool, seed 001's node groups, seed
000's EC2NodeClass and verify pods. Each starts from the template of its guide, changed as the guide's
text says, and goes through `kgpu render` as a user runs it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from kgpu.cli.main import cli


def _profile(tmp_path: Path, template: str, change: Callable[[dict[str, Any]], None]) -> Path:
    path = tmp_path / "kgpu.yaml"
    res = CliRunner().invoke(cli, ["init", "-t", template, "-f", str(path)])
    assert res.exit_code == 0, res.output
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _render(profile: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["render", "-f", str(profile), *args])


def _pool(data: dict[str, Any], name: str) -> dict[str, Any]:
    pool: dict[str, Any] = next(p for p in data["pools"] if p["name"] == name)
    return pool


# --- seed 004: the Ray head on the GPU node group ----------------------------------------------------------


def test_head_pool_on_the_guides_one_node_gpu_group_is_a_render_error(tmp_path: Path) -> None:
    """The guide's GPU group is one g5.xlarge (4 vCPU, 16 GiB, max 1). With headPool set to it the head
    takes that node and the GPU worker can never be placed: render refuses, naming kuberay.headPool."""

    def head_on_gpu(data: dict[str, Any]) -> None:
        data["kuberay"]["headPool"] = "gpu-node-group"

    res = _render(_profile(tmp_path, "kuberay", head_on_gpu))
    assert res.exit_code == 1, res.output
    assert "pool gpu-node-group: kuberay.headPool:" in res.output
    assert "Ray GPU worker(s) at maxReplicas can never be placed" in res.output
    assert "Insufficient cpu" in res.output and "max node group size reached" in res.output


def test_head_pool_on_a_gpu_group_with_room_is_a_warning(tmp_path: Path) -> None:
    """On a g5.2xlarge (8 vCPU, 32 GiB) the head and the worker share the node: render writes the stack
    and warns that the head keeps a GPU node up."""

    def head_on_bigger_gpu(data: dict[str, Any]) -> None:
        data["kuberay"]["headPool"] = "gpu-node-group"
        _pool(data, "gpu-node-group")["instanceTypes"] = ["g5.2xlarge"]

    res = _render(_profile(tmp_path, "kuberay", head_on_bigger_gpu))
    assert res.exit_code == 0, res.output
    assert "warning: pool gpu-node-group: kuberay.headPool: the Ray head runs on GPU pool" in res.stderr
    assert "kind: RayCluster" in res.stdout


def test_two_workers_beside_the_head_need_a_third_node(tmp_path: Path) -> None:
    """maxSize 2 gives the worker group maxReplicas 2: with the head on one of the two g5.xlarge nodes, the
    second worker has nowhere to go."""

    def two(data: dict[str, Any]) -> None:
        data["kuberay"]["headPool"] = "gpu-node-group"
        _pool(data, "gpu-node-group")["maxSize"] = 2

    res = _render(_profile(tmp_path, "kuberay", two))
    assert res.exit_code == 1 and "gpu-node-group-worker-1" in res.output


def test_the_guides_head_on_the_cpu_group_says_nothing(tmp_path: Path) -> None:
    res = _render(_profile(tmp_path, "kuberay", lambda data: None))
    assert res.exit_code == 0, res.output
    assert "kuberay.headPool" not in res.stderr
