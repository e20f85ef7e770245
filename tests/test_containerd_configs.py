"""kgpu's reading of containerd 2.x configurations against what the real releases print.

tests/fixtures/containerd/ holds five host config.toml shapes (config versions 2, 3 and 4, hand-written and
from `containerd config default`, with a sandbox image mirror, registry hosts in certs.d and runc's
SystemdCgroup) and, per shape, the exact `containerd config dump` of containerd 2.1.4, 2.3.4 and 2.4.2 (built
from their Go modules by `make conformance`, which checks that the stored dumps are still what they print)
with no drop-in and with kgpu's rendered drop-in at config versions 2, 3 and 4. No Go needed here: node-check's
readings (kgpu.exporter.containerd_config) are compared with those dumps, and its verdict with what the dump
shows the daemon would run."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kgpu.exporter import containerd_config as cc
from kgpu.exporter import nodecheck
from kgpu.exporter.nodecheck import FAIL, PASS, WARN
from kgpu.render import onprem

FIXTURES = Path(__file__).parent / "fixtures" / "containerd"
RELEASES = ("2.1.4", "2.3.4", "2.4.2")
DROPINS = ("none", "v2", "v3", "v4")
SHAPES = sorted(p.parent.name for p in FIXTURES.glob("*/config.toml"))
MIRROR = "registry.example.cn/google_containers/pause:3.9"
CERTS = "/etc/containerd/certs.d"


def test_fixtures_are_complete() -> None:
    assert SHAPES == [
        "v2-config-default",
        "v2-hand-written",
        "v3-config-default",
        "v4-config-default",
        "v4-untouched",
    ]
    for shape in SHAPES:
        for release in RELEASES:
            for dropin in DROPINS:
                base = FIXTURES / shape / "dumps" / release / dropin
                assert base.with_suffix(".toml").exists() != base.with_suffix(".refused").exists()


def stored(shape: str, release: str, dropin: str) -> dict[str, Any] | str:
    """The stored dump, parsed, or containerd's error line when the release refuses the files."""
    base = FIXTURES / shape / "dumps" / release / dropin
    if base.with_suffix(".refused").exists():
        return base.with_suffix(".refused").read_text().strip()
    return tomllib.loads(base.with_suffix(".toml").read_text())


def host(tmp_path: Path, shape: str, dropin: str) -> Path:
    """A host root with the shape's config.toml, the drop-in (the rendered one, "vN") and the runtime."""
    root = tmp_path / "root"
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    shutil.copy(FIXTURES / shape / "config.toml", root / "etc/containerd/config.toml")
    if dropin != "none":
        (root / onprem.CONTAINERD_DROPIN.lstrip("/")).write_text(onprem.containerd_dropin(int(dropin[1:])))
    binary = root / onprem.RUNTIME.lstrip("/")
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return root


def get(tree: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def facts(config: dict[str, Any]) -> dict[str, Any]:
    """What a GPU node depends on, from a version 3/4 config (a dump, or kgpu's reading of the files)."""
    images = get(config, "plugins", cc.CRI_IMAGES)
    ctrd = get(config, "plugins", cc.CRI_RUNTIME, "containerd")
    return {
        "sandbox": get(images, "pinned_images", "sandbox"),
        "config_path": get(images, "registry", "config_path"),
        "runc SystemdCgroup": get(ctrd, "runtimes", "runc", "options", "SystemdCgroup"),
        "default runtime": get(ctrd, "default_runtime_name"),
        "nvidia BinaryName": get(ctrd, "runtimes", "nvidia", "options", "BinaryName"),
        "nvidia SystemdCgroup": get(ctrd, "runtimes", "nvidia", "options", "SystemdCgroup"),
    }


def reading(release: str) -> cc.Reading:
    (only,) = nodecheck.parse_release(release, "test").readings()
    return only


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("dropin", DROPINS)
@pytest.mark.parametrize("shape", SHAPES)
def test_reading_matches_the_real_dump(tmp_path: Path, shape: str, dropin: str, release: str) -> None:
    """Each setting kgpu reads is the one the release's dump shows (an unset one: the release's default);
    where the release refuses the files, kgpu's reading refuses them with containerd's own words."""
    loaded = cc.load(host(tmp_path, shape, dropin), nodecheck.CONTAINERD_CONFIG, reading(release))
    real = stored(shape, release, dropin)
    if isinstance(real, str):
        assert loaded.refused, real
        assert loaded.refused.split(" (")[0] in real
        return
    assert not loaded.refused, loaded.refused
    default = facts(tomllib.loads((FIXTURES / "defaults" / f"{release}.toml").read_text()))
    ours = facts(loaded.config)
    assert {k: default[k] if v is None else v for k, v in ours.items()} == facts(real)


def works(shape: str, release: str, dropin: str) -> bool:
    """What the dump says the daemon runs: nvidia by default, the host's own settings as without kgpu."""
    real, before = stored(shape, release, dropin), stored(shape, release, "none")
    if isinstance(real, str) or isinstance(before, str):
        return False
    got, want = facts(real), facts(before)
    keep = ("sandbox", "config_path", "runc SystemdCgroup")
    return (
        got["default runtime"] == "nvidia"
        and got["nvidia BinaryName"] == onprem.RUNTIME
        and all(got[k] == want[k] for k in keep)
    )


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("dropin", ("v2", "v3", "v4"))
@pytest.mark.parametrize("shape", SHAPES)
def test_node_check_passes_exactly_where_the_release_works(
    tmp_path: Path, shape: str, dropin: str, release: str
) -> None:
    """node-check, told the release, passes the files where the real dump runs nvidia and keeps every
    host setting, and fails them everywhere else."""
    version = nodecheck.containerd_version(tmp_path, release)
    check = nodecheck.check_containerd(host(tmp_path, shape, dropin), version=version)
    assert (check.status == PASS) == works(shape, release, dropin), check.detail
    assert check.status in (PASS, FAIL)
    assert f"read as containerd {release} (--containerd-version)" in check.detail


@pytest.mark.parametrize("shape", SHAPES)
def test_the_drop_in_at_config_tomls_version_works_on_every_release_that_reads_it(shape: str) -> None:
    """The bootstrap's choice, config.toml's own version, keeps the host's settings with nvidia the default
    on 2.1.4, 2.3.4 and 2.4.2 (2.1.4 reads no version 4 config.toml at all)."""
    version = tomllib.loads((FIXTURES / shape / "config.toml").read_text())["version"]
    for release in RELEASES:
        if version == 4 and release == "2.1.4":
            assert isinstance(stored(shape, release, "none"), str)
            continue
        assert works(shape, release, f"v{version}"), (shape, release)


@pytest.mark.parametrize("shape", ["v2-hand-written", "v2-config-default"])
def test_version_3_drop_in_under_version_2_per_release(tmp_path: Path, shape: str) -> None:
    """The static version 3 drop-in under a version 2 config.toml: 2.1.4 runs nvidia but with the sandbox
    image, config_path and runc SystemdCgroup at their defaults (node-check names them); 2.3.4 does not
    start; 2.4.2 keeps all. Not knowing the minor release is a warning that says which releases fail."""
    root = host(tmp_path, shape, "v3")
    checks = {
        r: nodecheck.check_containerd(root, version=nodecheck.containerd_version(root, r)) for r in RELEASES
    }
    two_one = checks["2.1.4"]
    assert two_one.status == FAIL
    assert "takes the merged version from the last file that sets one" in two_one.detail
    assert "(/etc/containerd/conf.d/99-nvidia.toml: version 3)" in two_one.detail
    for lost in (f"sandbox_image = '{MIRROR}'", f"registry.config_path = '{CERTS}'", "SystemdCgroup = True"):
        assert lost in two_one.detail
    assert "version 2 here" in two_one.fix and "version = 2\n" in two_one.fix
    assert checks["2.3.4"].status == FAIL
    assert (
        "containerd 2.3.0-2.3.4 does not start: drop-in config version 3 higher than root config version 2"
        in checks["2.3.4"].detail
    )
    assert checks["2.4.2"].status == PASS
    assert facts(stored(shape, "2.1.4", "v3"))["sandbox"] != MIRROR  # type: ignore[arg-type]

    unknown = nodecheck.check_containerd(root, version=nodecheck.containerd_version(root, "2"))
    assert unknown.status == WARN
    assert (
        "correct for containerd 2.3.5 and later but not containerd 2.0-2.2, containerd 2.3.0-2.3.4"
        in unknown.detail
    )
    assert "containerd 2.x (--containerd-version) does not say which" in unknown.detail
    patchless = nodecheck.check_containerd(root, version=nodecheck.containerd_version(root, "2.3"))
    assert patchless.status == WARN and "but not containerd 2.3.0-2.3.4" in patchless.detail


def test_version_2_drop_in_under_config_default_version_3_on_2_1(tmp_path: Path) -> None:
    """2.0-2.2 migrate a version 2 drop-in only into keys the version 3 config.toml leaves unset: under
    2.1.4's own default config, runc stays the default and there is no nvidia runtime."""
    root = host(tmp_path, "v3-config-default", "v2")
    real = stored("v3-config-default", "2.1.4", "v2")
    assert not isinstance(real, str) and facts(real)["default runtime"] == "runc"
    check = nodecheck.check_containerd(root, version=nodecheck.containerd_version(root, "2.1.4"))
    assert check.status == FAIL
    assert "only into keys that the version 3 tables leave unset" in check.detail
    assert "default_runtime_name = 'nvidia'" in check.detail


def test_a_version_4_config_rules_out_releases_before_2_3(tmp_path: Path) -> None:
    """With only the major release known (the containerd binary's module path), a version 4 config.toml
    is read as 2.3 and later read it: containerd 2.4's own default config with the static drop-in passes."""
    root = host(tmp_path, "v4-untouched", "v3")
    version = nodecheck.containerd_version(root)
    assert version.major == 2 and version.source == "/etc/containerd/config.toml is config version 4"
    assert version.readings(4) == [cc.READ_23, cc.READ_235]
    check = nodecheck.check_containerd(root, version=version)
    assert check.status == PASS, check.detail


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.1.4", (2, 1, 4)),
        ("v2.4.2", (2, 4, 2)),
        ("2.3", (2, 3, None)),
        ("2", (2, None, None)),
        ("1.6.20~ds1-1+deb12u3", (1, 6, 20)),
        ("1:2.1.3-1", (2, 1, 3)),
        ("2.1.4+unknown", (2, 1, 4)),
        ("banana", (None, None, None)),
    ],
)
def test_parse_release(text: str, expected: tuple[int | None, ...]) -> None:
    v = nodecheck.parse_release(text, "x")
    assert (v.major, v.minor, v.patch) == expected


@pytest.mark.parametrize(
    ("version", "config_version", "labels"),
    [
        ((1, 7, 27), 2, ["containerd 1.x"]),
        ((2, 0, 6), 2, ["containerd 2.0-2.2"]),
        ((2, 2, 9), 3, ["containerd 2.0-2.2"]),
        ((2, 3, 2), 2, ["containerd 2.3.0-2.3.4"]),
        ((2, 3, 5), 2, ["containerd 2.3.5 and later"]),
        ((2, 3, None), 2, ["containerd 2.3.0-2.3.4", "containerd 2.3.5 and later"]),
        ((2, 4, 2), 4, ["containerd 2.3.5 and later"]),
        ((2, None, None), 3, ["containerd 2.0-2.2", "containerd 2.3.0-2.3.4", "containerd 2.3.5 and later"]),
        (
            (None, None, None),
            2,
            ["containerd 1.x", "containerd 2.0-2.2", "containerd 2.3.0-2.3.4", "containerd 2.3.5 and later"],
        ),
        ((None, None, None), 4, ["containerd 2.3.0-2.3.4", "containerd 2.3.5 and later"]),
    ],
)
def test_readings_per_release(
    version: tuple[int | None, int | None, int | None], config_version: int, labels: list[str]
) -> None:
    assert [r.label for r in cc.readings(*version, config_version=config_version)] == labels


def test_merge_replaces_lists_in_plugin_tables_and_extends_top_level_lists() -> None:
    """containerd's mergeConfig, as measured with 2.1.4, 2.3.4 and 2.4.2: a drop-in's cdi_spec_dirs replaces
    config.toml's (an empty list too), disabled_plugins gain the drop-in's; SystemdCgroup = false wins."""
    base = {
        "disabled_plugins": ["io.containerd.x.v1.a"],
        "plugins": {cc.CRI_RUNTIME: {"cdi_spec_dirs": ["/a", "/c"], "x": {"SystemdCgroup": True}}},
    }
    extra = {
        "disabled_plugins": ["io.containerd.x.v1.b"],
        "plugins": {cc.CRI_RUNTIME: {"cdi_spec_dirs": [], "x": {"SystemdCgroup": False}}},
    }
    merged = cc.merge_2x(base, extra)
    assert merged["disabled_plugins"] == ["io.containerd.x.v1.a", "io.containerd.x.v1.b"]
    assert merged["plugins"][cc.CRI_RUNTIME] == {"cdi_spec_dirs": [], "x": {"SystemdCgroup": False}}


def test_conformance_builds_the_releases_the_dumps_come_from() -> None:
    """conformance/versions.env, each containerd module's go.mod and the fixture releases name the same
    three releases, so `make conformance` re-checks the very dumps `make test` reads."""
    conformance = Path(__file__).parents[1] / "conformance"
    pinned = dict(
        line.split("=", 1)
        for line in (conformance / "versions.env").read_text().splitlines()
        if line.startswith("CONTAINERD_")
    )
    assert sorted(v.lstrip("v") for v in pinned.values()) == list(RELEASES)
    for key, version in pinned.items():
        module = conformance / "containerd" / f"v{key.split('_')[1]}"
        assert (
            f"\tgithub.com/containerd/containerd/v2 {version} // indirect\n"
            in (module / "go.mod").read_text()
        )
        assert "tool github.com/containerd/containerd/v2/cmd/containerd\n" in (module / "go.mod").read_text()
    for shape in SHAPES:
        assert sorted(p.name for p in (FIXTURES / shape / "dumps").iterdir()) == list(RELEASES)
