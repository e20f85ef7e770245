"""Seed 002's on-prem rows, each from the guide's own text: the container toolkit installed with the guide's
yum commands (a CentOS 7 host has yum and no dnf)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kgpu.render import onprem

CENTOS7 = 'NAME="CentOS Linux"\nVERSION="7 (Core)"\nID="centos"\nID_LIKE="rhel fedora"\nVERSION_ID="7"\n'
# The repository file NVIDIA serves at the guide's URL (nvidia.github.io/libnvidia-container/stable/rpm/).
TOOLKIT_REPO = """[nvidia-container-toolkit]
name=nvidia-container-toolkit
baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch
repo_gpgcheck=1
gpgcheck=0
enabled=1
gpgkey=https://nvidia.github.io/libnvidia-container/gpgkey
sslverify=1
sslcacert=/etc/pki/tls/certs/ca-bundle.crt

[nvidia-container-toolkit-experimental]
name=nvidia-container-toolkit-experimental
baseurl=https://nvidia.github.io/libnvidia-container/experimental/rpm/$basearch
repo_gpgcheck=1
gpgcheck=0
enabled=0
gpgkey=https://nvidia.github.io/libnvidia-container/gpgkey
sslverify=1
sslcacert=/etc/pki/tls/certs/ca-bundle.crt
"""
# Seed 002, section 2.1, verbatim.
GUIDE_YUM = """curl -s -L https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo | \\
  sudo tee /etc/yum.repos.d/nvidia-container-toolkit.repo

yum-config-manager --enable nvidia-container-toolkit-experimental

yum install -y nvidia-container-toolkit"""


def _yum_host(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A CentOS 7 host under tmp_path/root: driver present (nvidia-smi), no toolkit yet (no nvidia-ctk),
    yum and yum-config-manager (no dnf) and curl as stubs that log their arguments, containerd 2.x."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text(CENTOS7)
    runtime = root / onprem.RUNTIME.lstrip("/")
    runtime.parent.mkdir(parents=True)
    runtime.write_text("#!/bin/sh\n")
    runtime.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "commands.log"
    (tmp_path / "repo").write_text(TOOLKIT_REPO)
    stubs = {
        "nvidia-smi": "echo 570.86.15",
        "yum": f'echo "yum $*" >> {log}',
        "yum-config-manager": f'echo "yum-config-manager $*" >> {log}',
        "curl": f'echo "curl $*" >> {log}; cat {tmp_path / "repo"}',
        "systemctl": f'echo "systemctl $*" >> {log}',
        "containerd": "echo 'containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7'",
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    assert shutil.which("dnf", path=path) is None and shutil.which("nvidia-ctk", path=path) is None
    env = {"PATH": path, "KGPU_ROOT": str(root), "HOME": str(tmp_path)}
    return root, env, log


def _script(tmp_path: Path) -> Path:
    script = tmp_path / onprem.BOOTSTRAP
    script.write_text(onprem.bootstrap_script())
    script.chmod(0o755)
    return script


def test_yum_host_installs_the_toolkit_with_the_guides_commands(tmp_path: Path) -> None:
    """On a yum-only host the bootstrap runs the guide's steps: NVIDIA's repository file from the guide's
    URL into /etc/yum.repos.d/nvidia-container-toolkit.repo, then `yum install -y nvidia-container-toolkit`;
    the experimental channel only when asked (NVIDIA_TOOLKIT_EXPERIMENTAL=1, the guide's
    yum-config-manager line). dnf is never called."""
    root, env, log = _yum_host(tmp_path)
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    words = GUIDE_YUM.split()
    url = words[words.index("-L") + 1]
    repo_file = words[words.index("tee") + 1]
    assert (root / repo_file.lstrip("/")).read_text() == TOOLKIT_REPO
    calls = log.read_text().splitlines()
    assert calls[0] == f"curl -fsSL {url}"
    assert "yum install -y -q nvidia-container-toolkit" in calls
    assert not any("experimental" in c for c in calls)
    assert calls[-1] == "systemctl restart containerd"

    log.unlink()
    (root / "etc/yum.repos.d/nvidia-container-toolkit.repo").unlink()
    env["NVIDIA_TOOLKIT_EXPERIMENTAL"] = "1"
    again = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    calls = log.read_text().splitlines()
    enable = "yum-config-manager --enable nvidia-container-toolkit-experimental"
    assert enable in GUIDE_YUM and enable in calls
    assert calls.index(enable) < calls.index("yum install -y -q nvidia-container-toolkit")


def test_yum_host_without_a_driver_takes_nvidias_rhel7_repository(tmp_path: Path) -> None:
    """No nvidia-smi: the driver comes from NVIDIA's CUDA repository for rhel7 with yum (latest-dkms: RHEL 7
    has no per-branch DKMS flavor and no module streams)."""
    _root, env, log = _yum_host(tmp_path)
    (tmp_path / "bin/nvidia-smi").unlink()
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    arch = os.uname().machine
    assert (
        f"yum-config-manager --add-repo https://developer.download.nvidia.com/compute/cuda/repos/rhel7/{arch}/"
        "cuda-rhel7.repo" in calls
    )
    assert "yum install -y -q nvidia-driver-latest-dkms" in calls
    assert not any(c.startswith("dnf") for c in calls)


def test_rpm_host_without_dnf_or_yum_stops_with_an_error(tmp_path: Path) -> None:
    """Neither package manager: one error line, non-zero, nothing installed."""
    root, env, log = _yum_host(tmp_path)
    (tmp_path / "bin/yum").unlink()
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "neither dnf nor yum is installed" in result.stderr
    assert not (root / "etc/yum.repos.d/nvidia-container-toolkit.repo").exists()
    assert not log.exists()
