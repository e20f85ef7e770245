"""`make test` sets itself up without leaving a service behind: Debian packages that carry one (prometheus listens
on :9090 on every interface once installed; containerd starts its daemon) are unpacked for their binaries, never
installed. The recipe is run here as make runs it, on a PATH without those binaries."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()
SERVICES = ("prometheus", "containerd")


def test_no_package_with_a_service_is_installed() -> None:
    installs = re.findall(r"apt-get install[^\n]*", MAKEFILE)
    assert installs, "the Makefile installs its other Debian packages with apt-get install"
    for line in installs:
        assert not any(name in line for name in SERVICES), line
    for target, binary in (("promtool", "promtool"), ("containerd", "containerd")):
        recipe = re.search(rf"^{target}:\n((?:\t[^\n]*\n)+)", MAKEFILE, re.M)
        assert recipe is not None and "deb_unpack" in recipe.group(1), target
        assert f"command -v {binary}" in recipe.group(1)


def test_the_unpack_recipe_as_make_runs_it(tmp_path: Path) -> None:
    """``make -n`` on a PATH without promtool: the commands are apt-get download and dpkg-deb -x into the
    cache, and the cache's usr/bin comes first on the recipes' PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "make", "id", "echo", "mkdir", "rm", "ls", "head"):
        found = subprocess.run(
            ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True
        ).stdout.strip()
        if found:
            os.symlink(found, bin_dir / tool)
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "promtool", f"DEB_ROOT={tmp_path / 'deb'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        timeout=60,
    )
    if out.returncode != 0:
        pytest.fail(out.stdout + out.stderr)
    text = out.stdout
    assert (
        "apt-get download -qq prometheus" in text
        and f"dpkg-deb -x {tmp_path / 'deb'}/pkg/prometheus_" in text
    )
    assert "apt-get install" not in text
    path = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "--eval",
            "show-path: ; @echo $$PATH",
            "show-path",
            f"DEB_ROOT={tmp_path / 'deb'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir)},
        timeout=60,
    ).stdout.strip()
    assert path.split(":")[0] == f"{tmp_path / 'deb'}/usr/bin", path
