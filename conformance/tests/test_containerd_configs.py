"""kgpu's containerd files against the real containerd 2.1.4, 2.3.4 and 2.4.2 (built from their Go modules by
conformance/build.sh): `containerd --config F config dump` of every host shape in tests/fixtures/containerd
with every rendered drop-in, and of what bootstrap-gpu-host.sh writes on each, with the release's own
`containerd --version` on PATH. The host's sandbox image, registry config_path and runc SystemdCgroup must
survive and nvidia must be the default runtime; the stored dumps that `make test` reads must still be what the
releases print."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from containerd_cases import DROPINS, FIXTURES, HOST_IMPORTS, RELEASES, default_config, dump, shapes, stored

from conftest import binary
from kgpu.exporter import nodecheck
from kgpu.exporter.nodecheck import PASS
from kgpu.render import onprem

SHAPES = shapes()
KEEP = ("sandbox", "config_path", "runc SystemdCgroup")


def containerd(release: str) -> Path:
    return binary(RELEASES[release], "containerd")


def facts(dump_text: str) -> dict[str, Any]:
    config = tomllib.loads(dump_text)
    plugins = config["plugins"]
    images, ctrd = (
        plugins["io.containerd.cri.v1.images"],
        plugins["io.containerd.cri.v1.runtime"]["containerd"],
    )
    runtimes = ctrd["runtimes"]
    nvidia = runtimes.get("nvidia", {}).get("options", {})
    return {
        "sandbox": images["pinned_images"]["sandbox"],
        "config_path": images["registry"]["config_path"],
        "runc SystemdCgroup": runtimes["runc"]["options"].get("SystemdCgroup"),
        "default runtime": ctrd["default_runtime_name"],
        "nvidia BinaryName": nvidia.get("BinaryName"),
        "nvidia SystemdCgroup": nvidia.get("SystemdCgroup"),
    }


def config_version(shape: str) -> int:
    return int(tomllib.loads((FIXTURES / shape / "config.toml").read_text())["version"])


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_release_and_its_default_config(release: str) -> None:
    """The binary is the release (its own `--version`) and prints the stored default config."""
    out = subprocess.run(
        [str(containerd(release)), "--version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    got = nodecheck.parse_release(out.split()[2], "")
    assert ".".join(map(str, (got.major, got.minor, got.patch))) == release, out
    assert default_config(containerd(release)) == (FIXTURES / "defaults" / f"{release}.toml").read_text()


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("dropin", DROPINS)
@pytest.mark.parametrize("shape", SHAPES)
def test_stored_dumps_are_what_the_release_prints(shape: str, dropin: str, release: str) -> None:
    text = None if dropin == "none" else onprem.containerd_dropin(int(dropin[1:]))
    rc, out = dump(containerd(release), (FIXTURES / shape / "config.toml").read_text(), text)
    want_rc, want = stored(shape, release, dropin)
    assert (rc == 0) == (want_rc == 0), out
    assert out.strip() == want.strip()


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("shape", SHAPES)
def test_drop_in_at_config_tomls_version_keeps_the_host_settings(shape: str, release: str) -> None:
    """The drop-in the bootstrap writes (config.toml's own version) under every shape: nvidia is the
    default with the systemd cgroup driver, and the host's settings are as without it. containerd 2.1.4
    reads no version 4 config.toml at all, with or without kgpu."""
    config = (FIXTURES / shape / "config.toml").read_text()
    version = config_version(shape)
    rc_before, before = dump(containerd(release), config, None)
    rc, after = dump(containerd(release), config, onprem.containerd_dropin(version))
    if version == 4 and release == "2.1.4":
        assert rc_before != 0 and rc != 0, (before, after)
        assert "expected containerd config version equal to or less than `3`, got `4`" in after
        return
    assert rc_before == 0 and rc == 0, (before, after)
    got, want = facts(after), facts(before)
    assert {k: got[k] for k in KEEP} == {k: want[k] for k in KEEP}
    assert got["default runtime"] == "nvidia"
    assert got["nvidia BinaryName"] == onprem.RUNTIME and got["nvidia SystemdCgroup"] is True
    if shape != "v4-untouched":
        assert want["sandbox"] == "registry.example.cn/google_containers/pause:3.9"
        assert want["config_path"] == "/etc/containerd/certs.d" and want["runc SystemdCgroup"] is True


def pristine(shape: str) -> str:
    """The shape as the host had it before the bootstrap: `containerd config default` of 1.x and 2.1
    writes `imports = []`, a hand-written file none."""
    text = (FIXTURES / shape / "config.toml").read_text()
    line = f'imports = ["{HOST_IMPORTS}"]\n'
    if shape.endswith("config-default") and line in text:
        return text.replace(line, "imports = []\n")
    return text.replace(line, "")


def run_bootstrap(tmp_path: Path, release: str, config: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """bootstrap-gpu-host.sh in a directory (KGPU_ROOT) with the release's containerd first on PATH and
    stubs for the driver, the toolkit and systemctl."""
    root = tmp_path / "root"
    (root / "etc/containerd").mkdir(parents=True)
    (root / "etc/os-release").write_text('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n')
    (root / "etc/containerd/config.toml").write_text(config)
    runtime = root / onprem.RUNTIME.lstrip("/")
    runtime.parent.mkdir(parents=True)
    runtime.write_text("#!/bin/sh\n")
    runtime.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "containerd").symlink_to(containerd(release))
    for name, body in {
        "nvidia-smi": "echo 570.86.15",
        "nvidia-ctk": "echo 1.17.4",
        "systemctl": "true",
    }.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = tmp_path / onprem.BOOTSTRAP
    script.write_text(onprem.bootstrap_script())
    script.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KGPU_ROOT": str(root)}
    result = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=120)
    return result, root


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("shape", SHAPES)
def test_bootstrap_on_each_shape(tmp_path: Path, shape: str, release: str) -> None:
    """The script on the host as it was (before any imports line), with the real release: containerd then
    loads the files with nvidia as the default and the host's settings kept, and node-check (told the
    release by the binary's own --version) passes. 2.1.4 and a version 4 config.toml: the script refuses."""
    result, root = run_bootstrap(tmp_path, release, pristine(shape))
    if config_version(shape) == 4 and release == "2.1.4":
        assert result.returncode == 1 and "which containerd 2.1 does not read" in result.stderr
        return
    assert result.returncode == 0, result.stderr
    config = (root / "etc/containerd/config.toml").read_text()
    assert config == (FIXTURES / shape / "config.toml").read_text()
    rc, after = dump(containerd(release), config, (root / onprem.CONTAINERD_DROPIN.lstrip("/")).read_text())
    assert rc == 0, after
    _, before = stored(shape, release, "none")
    got, want = facts(after), facts(before)
    assert {k: got[k] for k in KEEP} == {k: want[k] for k in KEEP}
    assert got["default runtime"] == "nvidia" and got["nvidia BinaryName"] == onprem.RUNTIME
    out = subprocess.run(
        [str(containerd(release)), "--version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    version = nodecheck.containerd_version(root, out.split()[2])
    assert nodecheck.check_containerd(root, version=version).status == PASS
