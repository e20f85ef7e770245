"""The on-prem host bootstrap `kgpu render --target onprem` writes: a bash script (checked by bash -n and
shellcheck, and run for real in a directory with stub commands) and its cloud-init variant; node-check
passes on exactly what it writes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kgpu.exporter import nodecheck
from kgpu.exporter.nodecheck import FAIL, PASS, WARN
from kgpu.model.profile import builtin_profile
from kgpu.render import onprem

UBUNTU = 'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
ROCKY = 'ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'


def tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: `make test` installs Debian's {package} package")
    return path


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / onprem.BOOTSTRAP
    path.write_text(onprem.bootstrap_script())
    path.chmod(0o755)
    return path


def test_script_parses_and_passes_shellcheck(script: Path) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    result = subprocess.run(
        [tool("shellcheck", "shellcheck"), "--severity=style", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def host(tmp_path: Path, os_release: str = UBUNTU) -> tuple[Path, dict[str, str], Path]:
    """A host tree under tmp_path/root, and PATH with stubs for nvidia-smi, nvidia-ctk, containerd and
    systemctl (which logs its arguments): the driver and toolkit count as installed."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text(os_release)
    runtime = root / onprem.RUNTIME.lstrip("/")
    runtime.parent.mkdir(parents=True)
    runtime.write_text("#!/bin/sh\n")
    runtime.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    stubs = {
        "nvidia-smi": "echo 570.86.15",
        "nvidia-ctk": "echo 'NVIDIA Container Toolkit CLI version 1.17.4'",
        "containerd": "exit 0",
        "systemctl": f'echo "$*" >> {log}',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KGPU_ROOT": str(root)}
    return root, env, log


def run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("os_release", [UBUNTU, ROCKY], ids=["ubuntu", "rocky"])
def test_script_configures_containerd_once_and_node_check_passes(
    tmp_path: Path, script: Path, os_release: str
) -> None:
    """First run: config.toml importing conf.d, the drop-in byte-for-byte as rendered, one restart. Second
    run: nothing changes, no restart. node-check then passes the runtime and the cgroup driver."""
    root, env, log = host(tmp_path, os_release)
    first = run(script, env)
    assert first.returncode == 0, first.stderr
    dropin = root / onprem.CONTAINERD_DROPIN.lstrip("/")
    assert dropin.read_text() == onprem.host_files(builtin_profile("onprem"))[onprem.CONTAINERD_DROPIN]
    assert onprem.IMPORTS_LINE in (root / "etc/containerd/config.toml").read_text()
    assert log.read_text() == "restart containerd\n"
    second = run(script, env)
    assert second.returncode == 0, second.stderr
    assert "containerd: already configured" in second.stderr
    assert log.read_text() == "restart containerd\n"  # no second restart

    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "var/lib/kubelet/config.yaml").write_text("kind: KubeletConfiguration\ncgroupDriver: systemd\n")
    assert nodecheck.check_containerd(root).status == PASS
    assert nodecheck.check_cgroup(root).status == PASS


def test_script_keeps_an_existing_config_and_adds_the_import(tmp_path: Path, script: Path) -> None:
    root, env, _ = host(tmp_path)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    original = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.10"\n'
    )
    config.write_text(original)
    assert run(script, env).returncode == 0
    assert config.read_text() == onprem.IMPORTS_LINE + "\n" + original


def test_script_refuses_an_imports_line_it_cannot_extend(tmp_path: Path, script: Path) -> None:
    root, env, log = host(tmp_path)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('version = 2\nimports = ["/etc/containerd/other.toml"]\n')
    result = run(script, env)
    assert result.returncode == 1
    assert "imports line without /etc/containerd/conf.d/*.toml" in result.stderr
    assert not log.exists()


def test_script_refuses_an_unsupported_os(tmp_path: Path, script: Path) -> None:
    _, env, _ = host(tmp_path, "ID=arch\n")
    result = run(script, env)
    assert result.returncode == 1 and "unsupported OS 'arch'" in result.stderr


def test_cloud_init_runs_the_same_script() -> None:
    text = onprem.cloud_init()
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    (entry,) = doc["write_files"]
    assert entry["content"] == onprem.bootstrap_script()
    assert entry["path"] == onprem.BOOTSTRAP_PATH and entry["permissions"] == "0755"
    assert doc["runcmd"] == [[onprem.BOOTSTRAP_PATH]]


def test_onprem_files_carry_the_bootstrap_and_cloud_init() -> None:
    files = onprem.host_files(builtin_profile("onprem"))
    assert files[onprem.BOOTSTRAP] == onprem.bootstrap_script()
    assert files[onprem.CLOUD_INIT] == onprem.cloud_init()


def test_node_check_wants_systemd_cgroup_as_render_writes_it(tmp_path: Path) -> None:
    """Seed 002's hand-written config has no SystemdCgroup: a warning without a kubelet config, a failure
    against kubeadm's systemd cgroup driver; its fix shows the rendered drop-in."""
    root = tmp_path / "root"
    (root / "etc/containerd").mkdir(parents=True)
    seed = Path(__file__).parent / "fixtures/nodecheck/good-containerd/etc/containerd/config.toml"
    (root / "etc/containerd/config.toml").write_text(seed.read_text())
    assert nodecheck.check_cgroup(root).status == WARN
    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "var/lib/kubelet/config.yaml").write_text("cgroupDriver: systemd\n")
    check = nodecheck.check_cgroup(root)
    assert check.status == FAIL
    assert "SystemdCgroup is unset but the kubelet's cgroupDriver is systemd" in check.detail
    assert "SystemdCgroup = true" in nodecheck.FIX_CONTAINERD
    assert onprem.CONTAINERD_DROPIN in nodecheck.FIX_CONTAINERD
