"""kgpu node-check over fixture host trees (tests/fixtures/nodecheck/) and the fake NVML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fakes.fake_nvml import FakeGpu, FakeNvml
from kgpu.exporter import nodecheck
from kgpu.exporter.nodecheck import FAIL, PASS, WARN, Check, run_checks
from kgpu.exporter.nvml import Nvml
from kgpu.render import onprem

HOSTS = Path(__file__).parent / "fixtures" / "nodecheck"


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def nv(**gpu: object) -> Nvml:
    return Nvml(FakeNvml([FakeGpu(**gpu)]))  # type: ignore[arg-type]


@pytest.mark.parametrize("host", ["good-containerd", "good-containerd-v3", "good-docker"])
def test_good_hosts_pass(host: str) -> None:
    """Seed 002's set-up (containerd v2, containerd 2.x v3 with a drop-in, docker) passes every check."""
    checks = run_checks(HOSTS / host, nv())
    assert not nodecheck.failed(checks), [c for c in checks if c.status == FAIL]
    c = by_name(checks)
    assert c["nvidia driver"].detail == "loaded, version 590.48.01"
    assert "NVIDIA H100 80GB HBM3 (compute 9.0)" in c["gpus"].detail
    assert c["cuda driver"].detail.startswith("CUDA 13.1")
    assert c["persistence mode"].status == PASS


def test_containerd_v3_reads_drop_in() -> None:
    c = by_name(run_checks(HOSTS / "good-containerd-v3", nv()))
    assert c["containerd runtime"].status == PASS
    assert "/usr/local/bin/nvidia-container-runtime" in c["containerd runtime"].detail
    assert c["nvidia device plugin"].status == WARN  # kubelet up, plugin not deployed yet
    assert "nvidia-device-plugin.yml" in c["nvidia device plugin"].fix


def test_broken_containerd_host() -> None:
    """runc default, no nvidia runtime, no toolkit, no kubelet: each fails with the seed's fix."""
    checks = run_checks(HOSTS / "broken-runc-default", nv())
    c = by_name(checks)
    assert nodecheck.failed(checks)
    assert c["containerd runtime"].status == FAIL
    assert "default_runtime_name is 'runc'" in c["containerd runtime"].detail
    assert (
        'no [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]'
        in c["containerd runtime"].detail
    )
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in c["containerd runtime"].fix
    assert c["nvidia-container-toolkit"].status == FAIL
    assert "yum install -y nvidia-container-toolkit" in c["nvidia-container-toolkit"].fix
    assert c["kubelet device-plugins"].status == FAIL


def test_broken_docker_host() -> None:
    c = by_name(run_checks(HOSTS / "broken-docker", nv()))
    assert c["docker runtime"].status == FAIL
    assert '"default-runtime" is None' in c["docker runtime"].detail
    assert '"default-runtime": "nvidia"' in c["docker runtime"].fix


def test_no_runtime_config_fails(tmp_path: Path) -> None:
    c = by_name(run_checks(tmp_path, nv()))
    assert c["container runtime"].status == FAIL


def test_invalid_toml_is_a_failed_check(tmp_path: Path) -> None:
    (tmp_path / "etc/containerd").mkdir(parents=True)
    (tmp_path / "etc/containerd/config.toml").write_text("version = [\n")
    c = by_name(run_checks(tmp_path, nv()))
    assert c["containerd runtime"].status == FAIL
    assert "not valid TOML" in c["containerd runtime"].detail


def test_no_driver() -> None:
    """DriverNotLoaded: the driver check fails with the fix; GPU checks are not attempted."""
    fake = FakeNvml()
    fake.driver_loaded = False
    checks = run_checks(HOSTS / "good-containerd", Nvml(fake))
    c = by_name(checks)
    assert c["nvidia driver"].status == FAIL
    assert "DriverNotLoaded" in c["nvidia driver"].detail
    assert "gpus" not in c and "persistence mode" not in c
    assert c["containerd runtime"].status == PASS


def test_old_driver_fails() -> None:
    checks = run_checks(HOSTS / "good-containerd", Nvml(FakeNvml(driver_version="375.66")))
    assert by_name(checks)["nvidia driver"].status == FAIL


def test_persistence_off_warns_only() -> None:
    checks = run_checks(HOSTS / "good-containerd", nv(persistence_mode=0))
    c = by_name(checks)
    assert c["persistence mode"].status == WARN
    assert "nvidia-smi -pm 1" in c["persistence mode"].fix
    assert not nodecheck.failed(checks)


def test_cli_json_and_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kgpu node-check --root ... -o json` exits 0 on a good host, 1 on a broken one."""
    from kgpu.cli.nodecheck_cmd import command

    monkeypatch.setattr(nodecheck, "Nvml", lambda: nv())
    runner = CliRunner()
    good = runner.invoke(command, ["--root", str(HOSTS / "good-docker"), "-o", "json"])
    assert good.exit_code == 0, good.output
    data = json.loads(good.output)
    assert data["ok"] is True and {c["status"] for c in data["checks"]} <= {PASS, WARN}
    bad = runner.invoke(command, ["--root", str(HOSTS / "broken-runc-default")])
    assert bad.exit_code == 1
    assert "FAIL containerd runtime: how to fix" in bad.output
    assert "check(s) failed" in bad.output


def test_containerd_1_host_with_an_nvidia_only_drop_in_fails() -> None:
    """A Debian 12 host (dpkg: containerd 1.6.20) whose conf.d drop-in carries only the nvidia runtime:
    containerd 1.x replaces the CRI section on import, so the sandbox mirror, the registry config_path and
    runc's SystemdCgroup are gone; node-check reads it as 1.x (from dpkg's status) and fails, naming them."""
    c = by_name(run_checks(HOSTS / "broken-containerd1-import", nv()))
    check = c["containerd runtime"]
    assert check.status == FAIL
    assert "importing /etc/containerd/conf.d/99-nvidia.toml replaces whole plugin sections" in check.detail
    assert "sandbox_image = 'registry.aliyuncs.com/google_containers/pause:3.9'" in check.detail
    assert "registry.config_path = '/etc/containerd/certs.d'" in check.detail
    assert "read as containerd 1.6.20 (1.6.20~ds1-1+deb12u3, dpkg)" in check.detail
    assert "bootstrap-gpu-host.sh" in check.fix and "nvidia-ctk runtime configure" in check.fix


def test_containerd_version_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """--containerd-version 2.1 reads the same host as containerd 2.1 does (a merge: passes); a version
    that is not 1.x or 2.x is a usage error (exit 2)."""
    from kgpu.cli.nodecheck_cmd import command

    monkeypatch.setattr(nodecheck, "Nvml", lambda: nv())
    runner = CliRunner()
    root = str(HOSTS / "broken-containerd1-import")
    assert runner.invoke(command, ["--root", root]).exit_code == 1
    two = runner.invoke(command, ["--root", root, "--containerd-version", "2.1", "-o", "json"])
    assert two.exit_code == 0, two.output
    checks = {c["name"]: c for c in json.loads(two.output)["checks"]}
    assert checks["containerd runtime"]["detail"].endswith("read as containerd 2.1 (--containerd-version)")
    bad = runner.invoke(command, ["--root", root, "--containerd-version", "3.0"])
    assert bad.exit_code == 2 and "'3.0' is not a containerd version" in bad.output


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", "1.6"),
        ("containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", "1.7"),
        (
            "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376",
            "2.1",
        ),
        ("", None),
        ("containerd: command not found", None),
    ],
)
def test_parse_containerd_version(line: str, version: str | None) -> None:
    """`containerd --version` as Debian's, Docker's and containerd 2.x's builds print it."""
    assert nodecheck.parse_containerd_version(line) == version


@pytest.mark.parametrize(
    ("release", "status"), [("2.0", PASS), ("2.3.4", FAIL), ("2.3.5", PASS), ("2.4.2", PASS)]
)
def test_only_containerd_2_3_0_to_2_3_4_refuse_a_higher_version_drop_in(
    tmp_path: Path, release: str, status: str
) -> None:
    """A version 3 drop-in under a version 2 config.toml that sets nothing of its own: 2.0-2.2 read it (the
    merged config is version 3, and there is nothing of version 2 to lose), 2.3.0-2.3.4 do not start
    ("drop-in config version 3 higher than root config version 2"), 2.3.5 and later read it."""
    (tmp_path / "etc/containerd/conf.d").mkdir(parents=True)
    (tmp_path / "etc/containerd/config.toml").write_text(
        'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    )
    (tmp_path / "etc/containerd/conf.d/99-nvidia.toml").write_text(onprem.containerd_dropin(3))
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/nvidia-container-runtime").write_text("#!/bin/sh\n")
    check = nodecheck.check_containerd(tmp_path, version=nodecheck.containerd_version(tmp_path, release))
    assert check.status == status, check.detail
    if status == FAIL:
        assert (
            "containerd 2.3.0-2.3.4 does not start: drop-in config version 3 higher than root config version 2"
            in check.detail
        )


DEBIAN_OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'
UBUNTU_OS_RELEASE = 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n'
ROCKY_OS_RELEASE = 'NAME="Rocky Linux"\nVERSION_ID="9.4"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'


def _host(tmp_path: Path, fixture: str, os_release: str | None) -> Path:
    import shutil

    root = tmp_path / fixture
    shutil.copytree(HOSTS / fixture, root, symlinks=True)
    if os_release is not None:
        (root / "etc").mkdir(exist_ok=True)
        (root / "etc" / "os-release").write_text(os_release)
    return root


@pytest.mark.parametrize(("os_release", "mine", "not_mine"), [
    (DEBIAN_OS_RELEASE, "apt-get install -y nvidia-container-toolkit", "yum"),
    (UBUNTU_OS_RELEASE, "apt-get install -y nvidia-container-toolkit", "dnf"),
    (ROCKY_OS_RELEASE, "yum install -y nvidia-container-toolkit", "apt-get"),
])
def test_fixes_use_the_hosts_package_manager(tmp_path: Path, os_release: str, mine: str, not_mine: str) -> None:
    root = _host(tmp_path, "broken-runc-default", os_release)
    (root / "usr" / "bin" / "nvidia-container-runtime").unlink(missing_ok=True)
    c = by_name(run_checks(root, nv()))
    toolkit = c["nvidia-container-toolkit"]
    assert toolkit.status == FAIL and mine in toolkit.fix and not_mine not in toolkit.fix, toolkit.fix
    fake = FakeNvml([FakeGpu()])
    fake.driver_loaded = False
    driver = by_name(run_checks(root, Nvml(fake)))["nvidia driver"]  # type: ignore[arg-type]
    assert driver.status == FAIL and not_mine not in driver.fix, driver.fix


def test_an_unknown_os_gets_both_families(tmp_path: Path) -> None:
    root = _host(tmp_path, "broken-runc-default", None)
    (root / "usr" / "bin" / "nvidia-container-runtime").unlink(missing_ok=True)
    fix = by_name(run_checks(root, nv()))["nvidia-container-toolkit"].fix
    assert "Debian, Ubuntu:" in fix and "RHEL family:" in fix and fix.index("apt-get") < fix.index("yum")


def test_a_containerd_1x_host_gets_the_1x_fix_first(tmp_path: Path) -> None:
    root = _host(tmp_path, "broken-containerd1-import", DEBIAN_OS_RELEASE)
    one = by_name(run_checks(root, nv(), containerd_version="1.6.20"))["containerd runtime"]
    other = _host(tmp_path / "b", "broken-runc-default", DEBIAN_OS_RELEASE)
    two = by_name(run_checks(other, nv(), containerd_version="2.1.4"))["containerd runtime"]
    assert one.status == two.status == FAIL
    assert one.fix.index("containerd 1.x") < one.fix.index("containerd 2.x"), one.fix
    assert two.fix.index("containerd 2.x") < two.fix.index("containerd 1.x"), two.fix


# /etc/containerd/config.toml as Docker's containerd.io package installs it (its comments shortened)
DOCKER_CONTAINERD_IO = """#   Copyright 2018-2022 Docker Inc.

disabled_plugins = ["cri"]

#root = "/var/lib/containerd"
#state = "/run/containerd"
"""


@pytest.mark.parametrize("release", ["1.7.27", "2.1.4", None])
def test_dockers_containerd_io_config_disables_cri(tmp_path: Path, release: str | None) -> None:
    """A host where Docker was installed first: containerd runs without its CRI plugin, so the kubelet cannot
    use it, whatever the nvidia runtime's settings. The fix writes containerd's default config first."""
    root = tmp_path / "host"
    (root / "etc" / "containerd").mkdir(parents=True)
    (root / "etc" / "containerd" / "config.toml").write_text(DOCKER_CONTAINERD_IO)
    (root / "usr" / "bin").mkdir(parents=True)
    runtime = root / "usr" / "bin" / "nvidia-container-runtime"
    runtime.write_text("#!/bin/sh\n")
    runtime.chmod(0o755)
    c = by_name(run_checks(root, nv(), containerd_version=release))["containerd runtime"]
    assert c.status == FAIL, c
    assert "containerd's CRI plugin is disabled" in c.detail and "kubelet cannot run pods" in c.detail
    assert c.fix.startswith("Docker's containerd.io package") and "containerd config default" in c.fix
