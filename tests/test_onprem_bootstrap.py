"""The on-prem host bootstrap `kgpu render --target onprem` writes: a bash script (checked by bash -n and
shellcheck, and run for real in a directory with stub commands) and its cloud-init variant; node-check
passes on exactly what it writes. On containerd 1.x the script and node-check are checked against Debian's
real containerd package (`containerd config dump` reads the files as the daemon would, no daemon needed).
containerd 2.x, which Debian does not package, is a `containerd --version` stub here; what the script writes
for it is checked against the real 2.1.4, 2.3.4 and 2.4.2 dumps of the same host shapes
(tests/fixtures/containerd/, tests/test_containerd_configs.py) and against those releases themselves in
`make conformance` (conformance/tests/test_containerd_configs.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

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
        pytest.fail(f"{name} is not installed: `make test` installs or unpacks Debian's {package} package")
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


CONTAINERD_2 = (
    "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376"
)


def host(
    tmp_path: Path, os_release: str = UBUNTU, containerd: str | None = CONTAINERD_2
) -> tuple[Path, dict[str, str], Path]:
    """A host tree under tmp_path/root, and PATH with stubs for nvidia-smi, nvidia-ctk and systemctl (which
    logs its arguments): the driver and toolkit count as installed. ``containerd``: the version line of a
    containerd stub (2.x), or None for the real containerd on PATH (Debian's 1.6)."""
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
        "systemctl": f'echo "$*" >> {log}',
    }
    if containerd is not None:
        stubs["containerd"] = f"echo '{containerd}'"
    else:
        tool("containerd", "containerd")
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
    """containerd 2.x, no config yet: config.toml at version 3 importing conf.d, the drop-in byte-for-byte as
    rendered (version 3), one restart. Second run: nothing changes, no restart. node-check then passes the
    runtime and the cgroup driver, reading the files as 2.x does (config version 3 says so)."""
    root, env, log = host(tmp_path, os_release)
    first = run(script, env)
    assert first.returncode == 0, first.stderr
    dropin = root / onprem.CONTAINERD_DROPIN.lstrip("/")
    assert dropin.read_text() == onprem.host_files(builtin_profile("onprem"))[onprem.CONTAINERD_DROPIN]
    assert (root / "etc/containerd/config.toml").read_text() == f"version = 3\n{onprem.IMPORTS_LINE}\n"
    assert log.read_text() == "restart containerd\n"
    second = run(script, env)
    assert second.returncode == 0, second.stderr
    assert "containerd: already configured" in second.stderr
    assert log.read_text() == "restart containerd\n"  # no second restart

    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "var/lib/kubelet/config.yaml").write_text("kind: KubeletConfiguration\ncgroupDriver: systemd\n")
    runtime = nodecheck.check_containerd(root)
    assert (
        runtime.status == PASS
        and "containerd 2.x (/etc/containerd/config.toml is config version 3)" in runtime.detail
    )
    assert nodecheck.check_cgroup(root).status == PASS


def test_script_keeps_an_existing_config_and_adds_the_import(tmp_path: Path, script: Path) -> None:
    """containerd 2.x with a version 2 config.toml: the import is added and the drop-in is the version 2
    one (a version 3 one would make 2.0-2.2 ignore the host's version 2 settings, and stop 2.3.0-2.3.4)."""
    root, env, _ = host(tmp_path)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    original = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.10"\n'
    )
    config.write_text(original)
    assert run(script, env).returncode == 0
    assert config.read_text() == onprem.IMPORTS_LINE + "\n" + original
    assert (root / onprem.CONTAINERD_DROPIN.lstrip("/")).read_text() == onprem.containerd_dropin(2)


FIXTURES = Path(__file__).parent / "fixtures" / "containerd"


def version_line(release: str) -> str:
    return (
        f"containerd github.com/containerd/containerd/v2 v{release} 0123456789abcdef0123456789abcdef01234567"
    )


@pytest.mark.parametrize(
    ("shape", "release", "version"),
    [
        ("v2-hand-written", "2.1.4", 2),
        ("v2-config-default", "2.3.4", 2),
        ("v3-config-default", "2.1.4", 3),
        ("v4-config-default", "2.4.2", 4),
        ("v4-untouched", "2.4.2", 4),
        ("v4-untouched", "2.3.4", 4),
    ],
)
def test_script_writes_the_drop_in_at_config_tomls_version(
    tmp_path: Path, script: Path, shape: str, release: str, version: int
) -> None:
    """Each host shape of tests/fixtures/containerd (config.toml already importing conf.d, as containerd
    2.4's own default config does): config.toml is left as it is, the drop-in is the rendered one at its
    version, containerd restarts once, and node-check, told the release, passes."""
    root, env, log = host(tmp_path, containerd=version_line(release))
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    original = (FIXTURES / shape / "config.toml").read_text()
    config.write_text(original)
    result = run(script, env)
    assert result.returncode == 0, result.stderr
    assert config.read_text() == original
    assert (root / onprem.CONTAINERD_DROPIN.lstrip("/")).read_text() == onprem.containerd_dropin(version)
    assert log.read_text() == "restart containerd\n"
    check = nodecheck.check_containerd(root, version=nodecheck.containerd_version(root, release))
    assert check.status == PASS, check.detail


def test_script_takes_over_the_empty_imports_of_config_default(tmp_path: Path, script: Path) -> None:
    """`containerd config default` of 1.x, 2.0 and 2.1 writes `imports = []`: the script puts its imports
    there instead of stopping at a second imports line."""
    root, env, _ = host(tmp_path)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('version = 2\nimports = []\noom_score = 0\n\n[plugins."io.containerd.grpc.v1.cri"]\n')
    result = run(script, env)
    assert result.returncode == 0, result.stderr
    assert config.read_text() == (
        f'version = 2\n{onprem.IMPORTS_LINE}\noom_score = 0\n\n[plugins."io.containerd.grpc.v1.cri"]\n'
    )
    assert tomllib.loads(config.read_text())["imports"] == ["/etc/containerd/conf.d/*.toml"]


@pytest.mark.parametrize(("release", "version"), [("2.1.4", 3), ("2.4.2", 4)])
def test_script_writes_a_fresh_config_at_the_releases_own_version(
    tmp_path: Path, script: Path, release: str, version: int
) -> None:
    """No config.toml: the version `containerd config default` of that release writes (3 before 2.3, 4
    from 2.3), and the drop-in at the same version."""
    root, env, _ = host(tmp_path, containerd=version_line(release))
    assert run(script, env).returncode == 0
    config = (root / "etc/containerd/config.toml").read_text()
    assert config == f"version = {version}\n{onprem.IMPORTS_LINE}\n"
    assert (root / onprem.CONTAINERD_DROPIN.lstrip("/")).read_text() == onprem.containerd_dropin(version)


def test_script_refuses_a_version_4_config_under_containerd_2_1(tmp_path: Path, script: Path) -> None:
    """containerd 2.0-2.2 do not read config version 4 (2.1.4: "expected containerd config version equal to
    or less than `3`, got `4`"): the script says so and changes nothing."""
    root, env, log = host(tmp_path, containerd=version_line("2.1.4"))
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text((FIXTURES / "v4-untouched" / "config.toml").read_text())
    result = run(script, env)
    assert result.returncode == 1
    assert "config version 4, which containerd 2.1 does not read (2.3 and later do)" in result.stderr
    assert not (root / onprem.CONTAINERD_DROPIN.lstrip("/")).exists() and not log.exists()


def test_config_version_is_the_top_level_key(tmp_path: Path, script: Path) -> None:
    """A `version` key inside a table is not the file's version: a file with none is version 1, which
    the script does not configure on containerd 2.x."""
    root, env, _ = host(tmp_path)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('oom_score = 0\n\n[plugins.x]\n  version = 3\n')
    result = run(script, env)
    assert result.returncode == 1
    assert "config version 1: containerd 2.x with kgpu needs version = 2, 3 or 4" in result.stderr


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


# --- containerd 1.x, against Debian's real containerd ---------------------------------------------------

HOST_CONFIG = """version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.example.cn/google_containers/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
"""
CRI = "io.containerd.grpc.v1.cri"


def dump(root: Path) -> dict[str, Any]:
    """`containerd config dump` of root's config.toml and its imports, as Debian's containerd reads them (no
    daemon): a copy of config.toml whose absolute imports point under root."""
    config = root / "etc/containerd/config.toml"
    text = config.read_text().replace(
        onprem.IMPORTS_LINE, f'imports = ["{root}/etc/containerd/conf.d/*.toml"]'
    )
    copy = root.parent / "dump-config.toml"
    copy.write_text(text)
    result = subprocess.run(
        [tool("containerd", "containerd"), "--config", str(copy), "config", "dump"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return tomllib.loads(result.stdout)


def debian_containerd() -> nodecheck.ContainerdVersion:
    """What node-check finds on this machine (root /): Debian's containerd, from `containerd --version`."""
    tool("containerd", "containerd")
    version = nodecheck.containerd_version(Path("/"))
    assert version.major == 1 and version.source.endswith(", containerd --version"), version
    return version


def cri_settings(config: dict[str, Any]) -> tuple[Any, ...]:
    cri = config["plugins"][CRI]
    runtimes = cri["containerd"]["runtimes"]
    return (
        cri["sandbox_image"],
        cri["registry"]["config_path"],
        runtimes.get("runc", {}).get("options", {}).get("SystemdCgroup"),
        cri["containerd"]["default_runtime_name"],
    )


def test_script_on_containerd_1_keeps_the_hosts_cri_settings(tmp_path: Path, script: Path) -> None:
    """Debian's containerd 1.6 and a host config.toml with a sandbox image mirror, a registry config_path and
    runc's SystemdCgroup: after the bootstrap, containerd reads all three as before, nvidia is the default
    runtime with runc's cgroup setting; a second run changes nothing; node-check passes, reading as 1.x."""
    root, env, log = host(tmp_path, containerd=None)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(HOST_CONFIG)
    before = cri_settings(dump(root))
    assert before == (
        "registry.example.cn/google_containers/pause:3.9",
        "/etc/containerd/certs.d",
        True,
        "runc",
    )

    first = run(script, env)
    assert first.returncode == 0, first.stderr
    assert "containerd 1.x: nvidia is the default runtime" in first.stderr
    after = dump(root)
    assert cri_settings(after)[:3] == before[:3]
    assert cri_settings(after)[3] == "nvidia"
    nvidia = after["plugins"][CRI]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"] == {"BinaryName": onprem.RUNTIME, "SystemdCgroup": True}
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"

    dropin = (root / onprem.CONTAINERD_DROPIN.lstrip("/")).read_text()
    assert run(script, env).returncode == 0
    assert (root / onprem.CONTAINERD_DROPIN.lstrip("/")).read_text() == dropin
    assert log.read_text() == "restart containerd\n"

    version = debian_containerd()
    check = nodecheck.check_containerd(root, version=version)
    assert check.status == PASS, check.detail
    assert f"read as containerd 1.6.20 ({version.source})" in check.detail
    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "var/lib/kubelet/config.yaml").write_text("cgroupDriver: systemd\n")
    assert nodecheck.check_cgroup(root, version=version).status == PASS


def test_nvidia_only_drop_in_wipes_cri_settings_on_containerd_1(tmp_path: Path) -> None:
    """The drop-in kgpu wrote before (version 2, only the nvidia runtime) under Debian's containerd: the
    host's sandbox image, config_path and runc options are gone. node-check reading as 1.x fails and names
    them; read as 2.x (which merges) the same files pass; with the version unknown it warns."""
    root = tmp_path / "root"
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    (root / "etc/containerd/config.toml").write_text(onprem.IMPORTS_LINE + "\n" + HOST_CONFIG)
    (root / onprem.CONTAINERD_DROPIN.lstrip("/")).write_text(onprem.containerd_dropin(2))
    runtime = root / onprem.RUNTIME.lstrip("/")
    runtime.parent.mkdir(parents=True)
    runtime.write_text("#!/bin/sh\n")
    real = cri_settings(dump(root))
    assert real[0] != "registry.example.cn/google_containers/pause:3.9"
    assert real[1] == "" and real[2] is None and real[3] == "nvidia"

    check = nodecheck.check_containerd(root, version=debian_containerd())
    assert check.status == FAIL
    assert "replaces whole plugin sections (containerd 1.x)" in check.detail
    for lost in (
        "sandbox_image = 'registry.example.cn/google_containers/pause:3.9'",
        "registry.config_path = '/etc/containerd/certs.d'",
        "containerd.runtimes.runc.options.SystemdCgroup = True",
    ):
        assert lost in check.detail
    assert "bootstrap-gpu-host.sh" in check.fix
    two = nodecheck.check_containerd(root, version=nodecheck.containerd_version(root, "2.1"))
    assert two.status == PASS, two.detail
    unknown = nodecheck.check_containerd(root, version=nodecheck.containerd_version(root))
    assert unknown.status == WARN
    assert "correct for containerd 2.x but not containerd 1.x" in unknown.detail


def test_version_3_drop_in_does_nothing_on_containerd_1(tmp_path: Path) -> None:
    """The containerd 2.x drop-in on a 1.x host: Debian's containerd keeps runc as the default; node-check
    reading as 1.x fails and says 1.x does not read version 3."""
    root = tmp_path / "root"
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    (root / "etc/containerd/config.toml").write_text(onprem.IMPORTS_LINE + "\n" + HOST_CONFIG)
    (root / onprem.CONTAINERD_DROPIN.lstrip("/")).write_text(onprem.containerd_dropin(3))
    assert cri_settings(dump(root))[3] == "runc"
    check = nodecheck.check_containerd(root, version=debian_containerd())
    assert check.status == FAIL
    assert "default_runtime_name is unset (containerd's default: 'runc')" in check.detail
    assert "containerd 1.x does not read config version 3" in check.detail


@pytest.mark.parametrize(
    "dropins",
    [
        {},
        {"99-nvidia.toml": onprem.containerd_dropin(2)},
        {
            "10-mirror.toml": 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "m/pause:1"\n',
            "99-nvidia.toml": onprem.containerd_dropin(2),
        },
        {
            "50-runc.toml": 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
            '  default_runtime_name = "runc"\n',
        },
    ],
    ids=["no drop-in", "nvidia only", "two drop-ins", "runc drop-in"],
)
def test_node_check_reads_imports_as_containerd_1_does(tmp_path: Path, dropins: dict[str, str]) -> None:
    """node-check's 1.x reading of config.toml and its drop-ins gives the CRI settings Debian's containerd
    reads from the same files."""
    root = tmp_path / "root"
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    (root / "etc/containerd/config.toml").write_text(onprem.IMPORTS_LINE + "\n" + HOST_CONFIG)
    for name, text in dropins.items():
        (root / "etc/containerd/conf.d" / name).write_text(text)
    real = dump(root)["plugins"][CRI]
    ours = nodecheck.load_containerd_config(root, major=1)["plugins"][CRI]
    assert ours.get("sandbox_image", real["sandbox_image"]) == real["sandbox_image"]
    if ours.get("sandbox_image") is None:
        assert real["sandbox_image"].startswith("registry.k8s.io/pause:")  # containerd's default
    assert ours.get("registry", {}).get("config_path", "") == real["registry"]["config_path"]
    assert (
        ours.get("containerd", {}).get("default_runtime_name", "runc")
        == real["containerd"]["default_runtime_name"]
    )
    assert set(ours.get("containerd", {}).get("runtimes", {})) <= set(real["containerd"]["runtimes"])


# Docker's containerd.io package (1.7.x, /etc/containerd/config.toml as it ships): the CRI plugin disabled
DOCKER_CONTAINERD_IO = """#   Copyright 2018-2022 Docker Inc.

#   Licensed under the Apache License, Version 2.0 (the "License");
#   you may not use this file except in compliance with the License.
#   You may obtain a copy of the License at

#       http://www.apache.org/licenses/LICENSE-2.0

#   Unless required by applicable law or agreed to in writing, software
#   distributed under the License is distributed on an "AS IS" BASIS,
#   WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#   See the License for the specific language governing permissions and
#   limitations under the License.

disabled_plugins = ["cri"]

#root = "/var/lib/containerd"
#state = "/run/containerd"
#subreaper = true
#oom_score = 0

#[grpc]
#  address = "/run/containerd/containerd.sock"
#  uid = 0
#  gid = 0

#[debug]
#  address = "/run/containerd/debug.sock"
#  uid = 0
#  gid = 0
#  level = "info"
"""


def test_script_replaces_dockers_config_that_only_disables_cri(tmp_path: Path, script: Path) -> None:
    """The file Docker's containerd.io ships disables the CRI plugin and says nothing else: the script puts
    `containerd config default` in its place (the original kept beside it), so containerd serves the kubelet
    with nvidia as the default runtime; a second run changes nothing."""
    root, env, log = host(tmp_path, containerd=None)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(DOCKER_CONTAINERD_IO)
    first = run(script, env)
    assert first.returncode == 0, first.stderr
    assert "only disabled the CRI plugin (Docker's containerd.io default)" in first.stderr
    assert (root / "etc/containerd/config.toml.kgpu-orig").read_text() == DOCKER_CONTAINERD_IO
    text = config.read_text()
    assert "version = 2" in text and onprem.IMPORTS_LINE in text
    after = dump(root)
    assert CRI not in after.get("disabled_plugins", [])
    assert after["plugins"][CRI]["containerd"]["default_runtime_name"] == "nvidia"
    assert run(script, env).returncode == 0
    assert config.read_text() == text
    assert log.read_text() == "restart containerd\n"


def test_script_refuses_a_config_that_disables_cri_among_other_settings(tmp_path: Path, script: Path) -> None:
    root, env, log = host(tmp_path)
    config = root / "etc/containerd/config.toml"
    config.parent.mkdir(parents=True)
    original = 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\noom_score = -999\n'
    config.write_text(original)
    result = run(script, env)
    assert result.returncode == 1
    assert "disables containerd's CRI plugin (disabled_plugins), which the kubelet needs" in result.stderr
    assert config.read_text() == original and not log.exists()
