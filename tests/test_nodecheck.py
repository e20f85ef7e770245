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
