"""`make image`: says what is missing in one line and exits 2 (no builder; a docker client without an
engine; a build that fails), and builds with the version and uid arguments when an engine answers. The
builders are small scripts on PATH standing in for docker's client, so this runs where no engine does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kgpu import __version__

ROOT = Path(__file__).resolve().parent.parent


def make_image(tmp_path: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    assert make, "make is needed to build kgpu (README)"
    env = {**os.environ, "PATH": path if path is not None else f"{tmp_path}:/usr/bin:/bin"}
    env.pop("DOCKER_HOST", None)
    return subprocess.run(
        [make, "-s", "--no-print-directory", "-C", str(ROOT), "image", *args],
        env=env, capture_output=True, text=True, timeout=60,
    )


def fake_docker(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "docker"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def test_no_builder_on_path(tmp_path: Path):
    res = make_image(tmp_path, "ENGINE=")
    assert res.returncode == 2
    assert "error: make image needs a container builder: docker, podman or buildah" in res.stderr


def test_docker_client_without_an_engine_says_so(tmp_path: Path):
    """What docker's client prints when no daemon listens, as on a machine with only the CLI installed."""
    log = tmp_path / "calls"
    fake_docker(
        tmp_path,
        f'echo "$@" >> {log}\n'
        'if [ "$1" = info ]; then\n'
        '  echo "Client:"; echo " Version:    27.3.1"; echo ""; echo "Server:"\n'
        '  echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2\n'
        "  exit 1\nfi\nexit 0\n",
    )
    res = make_image(tmp_path, f"ENGINE={tmp_path}/docker")
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, res.stderr
    assert "docker is installed but cannot reach a container engine" in lines[0]
    assert "Cannot connect to the Docker daemon at unix:///var/run/docker.sock" in lines[0]
    assert log.read_text().split("\n")[0] == "info"  # and nothing was built
    assert "build" not in log.read_text()


def test_failed_build_names_the_base_image(tmp_path: Path):
    fake_docker(tmp_path, '[ "$1" = info ] && exit 0\necho "pull access denied for python" >&2; exit 1\n')
    res = make_image(tmp_path, f"ENGINE={tmp_path}/docker")
    assert res.returncode == 2
    assert "needs the base image python:3.12-slim" in res.stderr


@pytest.mark.parametrize(("uid", "tag"), [("65532", __version__), ("0", f"{__version__}-root")])
def test_build_arguments_when_the_engine_answers(tmp_path: Path, uid: str, tag: str):
    log = tmp_path / "calls"
    fake_docker(tmp_path, f'echo "$@" >> {log}\nexit 0\n')
    res = make_image(tmp_path, f"ENGINE={tmp_path}/docker", f"IMAGE_UID={uid}")
    assert res.returncode == 0, res.stderr
    build = log.read_text().splitlines()[-1]
    assert build == (
        f"build --build-arg VERSION={__version__} --build-arg UID={uid} -t ghcr.io/kgpu/kgpu:{tag} ."
    )
    assert f"built ghcr.io/kgpu/kgpu:{tag}" in res.stdout


def test_this_machine_gets_a_clear_answer(tmp_path: Path):
    """Whatever this machine has (no docker, a client without an engine, a working engine), `make image`
    never ends in a bare make error: it builds, or says in one line what is missing."""
    if shutil.which("docker") is None and shutil.which("podman") is None and shutil.which("buildah") is None:
        res = make_image(tmp_path, path=os.environ["PATH"])
        assert res.returncode == 2 and "needs a container builder" in res.stderr
        return
    probe = subprocess.run(
        [shutil.which("docker") or shutil.which("podman") or "buildah", "info"],
        capture_output=True, text=True, timeout=60,
    )
    if probe.returncode != 0:
        res = make_image(tmp_path, path=os.environ["PATH"])
        assert res.returncode == 2 and "cannot reach a container engine" in res.stderr, res.stderr
