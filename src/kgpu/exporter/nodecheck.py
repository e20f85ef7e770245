"""``kgpu node-check``: seed 002's prerequisites for a GPU node, checked on the host.

Every check reads files under ``root`` (``/`` on a real host, a fixture tree in tests) or asks NVML through
the injected facade, and returns a :class:`Check`: pass, warn or fail, what it found, and for anything not
passing the fix, taken from seed 002's instructions. Only ``fail`` makes the command exit 1: a missing
device-plugin socket (the plugin is deployed after the node is prepared) and persistence mode off are
warnings.

containerd's configuration is read as the installed containerd reads it
(:mod:`kgpu.exporter.containerd_config`): 1.x replaces a plugin's whole section with an imported file's; 2.0-2.2
merge the files as written and migrate version 2 settings only when the last file that sets a version says
2; 2.3 migrates each file first, and 2.3.0-2.3.4 refuse a drop-in whose version is higher than
config.toml's. The same files can be right for one release and drop the host's CRI settings, or stop
containerd, on another. Which containerd runs comes from :func:`containerd_version`, down to the patch
release where it is known; where it is not, every reading it allows is made and a verdict that differs
between them is a warning naming the releases. The only command node-check ever runs is
``containerd --version``, and only on the host itself (root ``/``), never a binary under a mounted root.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.exporter import containerd_config as cc
from kgpu.exporter.containerd_config import Malformed, Reading
from kgpu.exporter.nodecheck_fixes import (
    FIX_CGROUP,
    FIX_CONTAINERD,
    FIX_CRI,
    FIX_DOCKER,
    FIX_DRIVER,
    FIX_KUBELET,
    FIX_PERSISTENCE,
    FIX_PLUGIN,
    fix_containerd,
    fix_driver,
    fix_toolkit,
    os_family,
)
from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text
from kgpu.model.safeyaml import MAX_BYTES, load_json

PASS, WARN, FAIL = "pass", "warn", "fail"
MIN_DRIVER = (384, 81)  # k8s-device-plugin's stated minimum ("NVIDIA drivers ~= 384.81")
RUNTIME_BINARY = "nvidia-container-runtime"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
BIN_DIRS = ("usr/bin", "usr/local/bin", "usr/sbin", "bin", "usr/local/nvidia/toolkit")

@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# --- NVML checks -------------------------------------------------------------------------------------


def check_driver(nv: Nvml, fix: str = FIX_DRIVER) -> tuple[Check, bool]:
    try:
        nv.ensure_init()
    except NvmlUnavailable as exc:
        return Check("nvidia driver", FAIL, f"NVML cannot start: {exc}", fix), False
    version = nv.driver_version() or "unknown"
    if version != "unknown" and _version_tuple(version)[:2] < MIN_DRIVER:
        return Check("nvidia driver", FAIL, f"driver {version} is older than 384.81", fix), True
    return Check("nvidia driver", PASS, f"loaded, version {version}"), True


def check_gpus(nv: Nvml, fix: str = FIX_DRIVER) -> Check:
    try:
        count = nv.device_count()
        found = []
        for i in range(count):
            h = nv.handle(i)
            name = as_text(nv.query("nvmlDeviceGetName", h) or "unknown GPU")
            cc = nv.query("nvmlDeviceGetCudaComputeCapability", h)
            found.append(f"{i}: {name}" + (f" (compute {cc[0]}.{cc[1]})" if cc else ""))
    except NvmlUnavailable as exc:
        return Check("gpus", FAIL, f"NVML error: {exc}", fix)
    if not found:
        return Check("gpus", FAIL, "the driver is loaded but reports no GPU", fix)
    return Check("gpus", PASS, f"{count} GPU(s): " + "; ".join(found))


def check_cuda(nv: Nvml, fix: str = FIX_DRIVER) -> Check:
    try:
        cuda = nv.cuda_driver_version()
    except NvmlUnavailable as exc:
        return Check("cuda driver", FAIL, f"NVML error: {exc}", fix)
    if cuda is None:
        return Check("cuda driver", FAIL, "the driver reports no CUDA version", fix)
    return Check("cuda driver", PASS, f"CUDA {cuda} (containers may use CUDA up to {cuda})")


def check_persistence(nv: Nvml, fix: str = FIX_DRIVER) -> Check:
    off = []
    try:
        for i in range(nv.device_count()):
            mode = nv.query("nvmlDeviceGetPersistenceMode", nv.handle(i))
            if mode is not None and int(mode) != 1:
                off.append(str(i))
    except NvmlUnavailable as exc:
        return Check("persistence mode", FAIL, f"NVML error: {exc}", fix)
    if off:
        return Check("persistence mode", WARN, f"off on GPU {', '.join(off)}", FIX_PERSISTENCE)
    return Check("persistence mode", PASS, "on for every GPU")


# --- files ---------------------------------------------------------------------------------------------


def find_runtime_binary(root: Path) -> Path | None:
    for d in BIN_DIRS:
        candidate = root / d / RUNTIME_BINARY
        if candidate.is_file():
            return candidate
    return None


def check_toolkit(root: Path, fix: str = "") -> Check:
    fix = fix or fix_toolkit(os_family(root))
    binary = find_runtime_binary(root)
    if binary is None:
        where = ", ".join("/" + d for d in BIN_DIRS)
        return Check("nvidia-container-toolkit", FAIL, f"no {RUNTIME_BINARY} in {where}", fix)
    shown = "/" + str(binary.relative_to(root))
    if not os.access(binary, os.X_OK):
        return Check("nvidia-container-toolkit", FAIL, f"{shown} is not executable", fix)
    return Check("nvidia-container-toolkit", PASS, f"{shown}")


# --- containerd's version -----------------------------------------------------------------------------

_VERSION_LINE = re.compile(r"^containerd\s+\S+\s+(v?\d+\.\d+\S*)")
_RELEASE = re.compile(r"^(?:\d+:)?v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")  # an optional Debian epoch
_SCAN_LIMIT = 512 * 2**20  # bytes of a containerd binary read to find its module path


@dataclass(frozen=True)
class ContainerdVersion:
    """The host's containerd release as far as it is known (None: not found) and where it was found."""

    major: int | None
    source: str
    minor: int | None = None
    patch: int | None = None

    def text(self) -> str:
        parts = [p for p in (self.major, self.minor, self.patch) if p is not None]
        return ".".join(map(str, parts)) + (".x" if len(parts) == 1 else "")

    def describe(self) -> str:
        return f"containerd {self.text()} ({self.source})" if self.major else "containerd version unknown"

    def readings(self, config_version: int = 0) -> list[Reading]:
        return cc.readings(self.major, self.minor, self.patch, config_version)


def parse_release(version: str, source: str) -> ContainerdVersion:
    """A ContainerdVersion from a release string: ``2.1.4``, ``v2.1.4``, ``2.1``, Debian's
    ``1.6.20~ds1-1+deb12u3`` or ``1:2.1.3-1``, ``2.1.4+unknown`` (a build without release flags)."""
    match = _RELEASE.match(version.strip())
    if not match:
        return ContainerdVersion(None, source)
    major, minor, patch = (int(g) if g is not None else None for g in match.groups())
    return ContainerdVersion(major, source, minor, patch if minor is not None else None)


def parse_containerd_version(text: str) -> str | None:
    """``major.minor`` from ``containerd --version``'s first line (Debian's ``containerd
    github.com/containerd/containerd 1.6.20~ds1 ...``, Docker's ``containerd containerd.io 1.7.27 ...``,
    2.x's ``containerd github.com/containerd/containerd/v2 v2.1.4 ...``)."""
    release = _release_of(text)
    if release is None:
        return None
    parsed = parse_release(release, "")
    return f"{parsed.major}.{parsed.minor}" if parsed.minor is not None else None


def _release_of(text: str) -> str | None:
    match = _VERSION_LINE.match(text.strip().splitlines()[0] if text.strip() else "")
    return match[1] if match else None


def _from_dpkg(root: Path) -> str | None:
    """The installed containerd package's version from dpkg's status file (Debian/Ubuntu hosts)."""
    path = _under(root, "/var/lib/dpkg/status")
    if not _is_file(path):
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[: 64 * MAX_BYTES]
    except OSError:
        return None
    for stanza in text.split("\n\n"):
        fields = dict(
            (k.strip(), v.strip())
            for k, _, v in (
                ln.partition(":") for ln in stanza.splitlines() if ":" in ln and not ln.startswith(" ")
            )
        )
        if fields.get("Package") in ("containerd", "containerd.io") and fields.get("Status", "").endswith(
            " installed"
        ):
            return fields.get("Version")
    return None


def _from_binary(root: Path) -> int | None:
    """containerd 2.x is the Go module github.com/containerd/containerd/v2, whose path every 2.x binary
    carries; 1.x binaries carry only github.com/containerd/containerd."""
    for d in BIN_DIRS:
        binary = root / d / "containerd"
        if not _is_file(binary):
            continue
        found_v1 = False
        tail = b""
        try:
            with open(binary, "rb") as fh:
                read = 0
                while read < _SCAN_LIMIT:
                    chunk = fh.read(2**20)
                    if not chunk:
                        break
                    read += len(chunk)
                    window = tail + chunk
                    if b"github.com/containerd/containerd/v2/" in window:
                        return 2
                    found_v1 = found_v1 or b"github.com/containerd/containerd/" in window
                    tail = chunk[-64:]
        except OSError:
            continue
        if found_v1:
            return 1
    return None


def containerd_version(root: Path, override: str | None = None) -> ContainerdVersion:
    """Which containerd the host runs, because its releases read imported files differently: the override
    (``--containerd-version``); on the host itself (root ``/``) ``containerd --version``; dpkg's status
    file; the module path inside the containerd binary (major only); a config.toml at version 3 (2.x) or 4
    (2.3 and later)."""
    if override:
        return parse_release(override, "--containerd-version")
    if str(root) == "/":
        binary = shutil.which("containerd")
        if binary:
            try:
                out = subprocess.run(
                    [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
                ).stdout
            except (OSError, subprocess.SubprocessError):
                out = ""
            release = _release_of(out)
            if release and parse_release(release, "").minor is not None:
                return parse_release(release, f"{release}, containerd --version")
    package = _from_dpkg(root)
    if package and parse_release(package, "").major:
        return parse_release(package, f"{package}, dpkg")
    major = _from_binary(root)
    if major:
        return ContainerdVersion(major, "the containerd binary's module path")
    try:
        version = cc.config_version(root, CONTAINERD_CONFIG)
    except Malformed:
        version = 0
    if version >= 3:
        return ContainerdVersion(2, f"{CONTAINERD_CONFIG} is config version {version}")
    return ContainerdVersion(None, "")


_FIRST = (".sandbox_image = ", ".registry.", ".SystemdCgroup = ", ".default_runtime_name = ", ".runtimes.")


def _shown(settings: list[str]) -> str:
    """Five settings, the ones a GPU node most depends on first (a full config dump has dozens)."""
    ranked = sorted(settings, key=lambda s: next((i for i, k in enumerate(_FIRST) if k in s), len(_FIRST)))
    return "; ".join(ranked[:5]) + (f"; and {len(ranked) - 5} more" if len(ranked) > 5 else "")


CRI_DISABLED = "containerd's CRI plugin is disabled"
_CRI_PLUGINS = frozenset({"cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"})


def _runtime_problems(root: Path, path: str, reading: Reading) -> tuple[list[str], str]:
    """What is wrong with the nvidia runtime as ``reading`` loads the files, and its binary."""
    loaded = cc.load(root, path, reading)
    if loaded.refused:
        return [f"{reading.label} does not start: {loaded.refused}"], ""
    disabled = loaded.config.get("disabled_plugins")
    off = [d for d in disabled if isinstance(d, str) and d in _CRI_PLUGINS] if isinstance(disabled, list) else []
    if off:  # Docker's containerd.io package ships `disabled_plugins = ["cri"]`
        return [f"{CRI_DISABLED} (disabled_plugins {quote(off)}): the kubelet cannot run pods through it"], ""
    default, nvidia, plugin_id = cc.runtime_config(loaded.config, reading)
    problems = []
    binary = ""
    if nvidia is None:
        problems.append(f'no [plugins."{plugin_id}".containerd.runtimes.nvidia]')
    else:
        raw = (nvidia.get("options") or {}).get("BinaryName") or ""
        binary = raw if isinstance(raw, str) else ""
        if not isinstance(raw, str):
            problems.append(f"runtimes.nvidia BinaryName must be a string, got {quote(raw)}")
        elif RUNTIME_BINARY not in binary:
            problems.append(
                f"runtimes.nvidia BinaryName is {quote(binary or 'unset')}, not nvidia-container-runtime"
            )
        elif not _is_file(_under(root, binary)):
            problems.append(f"runtimes.nvidia BinaryName {quote(binary)} does not exist")
    if default is None:
        problems.append("default_runtime_name is unset (containerd's default: 'runc'), not 'nvidia'")
    elif default != "nvidia":
        problems.append(f"default_runtime_name is {quote(default)}, not 'nvidia'")
    if loaded.ignored and reading.major == 1:
        problems.append(
            f"containerd 1.x does not read config version 3 ({', '.join(loaded.ignored)}): "
            "its io.containerd.cri.v1.* sections do nothing"
        )
    elif loaded.ignored:
        problems.append(
            f"{reading.label} does not read config version {reading.max_version + 1} "
            f"({', '.join(loaded.ignored)}): it starts only because a later file says version "
            f"{reading.max_version} or less, and reads every file as that version"
        )
    if loaded.lost:
        problems.append(f"{loaded.lost_why}: {_shown(loaded.lost)}")
    return problems, binary


def _releases(readings: list[Reading], of: list[Reading]) -> str:
    """Readings by name; every 2.x reading among the candidates is "containerd 2.x"."""
    two = [r for r in of if r.major == 2]
    if len(two) > 1 and all(r in readings for r in two):
        rest = [r.label for r in readings if r.major != 2]
        return ", ".join([*rest, "containerd 2.x"])
    return ", ".join(r.label for r in readings)


def check_containerd(
    root: Path, path: str = CONTAINERD_CONFIG, version: ContainerdVersion | None = None
) -> Check:
    """The nvidia runtime as the host's containerd reads config.toml and its imports. Where the release is
    not known exactly, every reading it allows is made: one verdict for all is given as is; files that some
    releases read right and others do not are a warning naming both, and what goes wrong."""
    name = "containerd runtime"
    version = version if version is not None else containerd_version(root)
    try:
        config_version = cc.config_version(root, path)
        candidates = version.readings(config_version)
        results = {r: _runtime_problems(root, path, r) for r in candidates}
    except Malformed as exc:
        detail = str(exc) if str(exc).startswith(path) else f"{path}: {exc}"
        return Check(name, FAIL, detail, FIX_CONTAINERD)
    fix = fix_containerd(config_version, version.major or 0)
    bad = [r for r in candidates if results[r][0]]
    if any(p.startswith(CRI_DISABLED) for r in bad for p in results[r][0]):
        fix = FIX_CRI + fix
    good = [r for r in candidates if not results[r][0]]
    where = f"; read as {version.describe()}" if version.major else ""
    if bad and good:
        unknown = (
            f"{version.describe()} does not say which"
            if version.major
            else "containerd's version was not found (no containerd binary or dpkg status under the root)"
        )
        return Check(
            name,
            WARN,
            f"{path}: correct for {_releases(good, candidates)} but not {_releases(bad, candidates)} "
            f"({'; '.join(results[bad[0]][0])}); {unknown}: say which with --containerd-version",
            fix,
        )
    if bad:
        return Check(name, FAIL, f"{path}: " + "; ".join(results[bad[0]][0]) + where, fix)
    return Check(name, PASS, f"{path}: default runtime nvidia -> {results[good[0]][1]}{where}")


def kubelet_cgroup_driver(root: Path) -> str | None:
    """``cgroupDriver`` from /var/lib/kubelet/config.yaml (kubeadm writes it); None when there is no file."""
    path = _under(root, "/var/lib/kubelet/config.yaml")
    if not _is_file(path):
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:MAX_BYTES]
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "cgroupDriver" and not line.startswith((" ", "\t")):
            return value.split("#", 1)[0].strip().strip("'\"") or None
    return "cgroupfs"  # the kubelet's own default when the file does not set it


def check_cgroup(
    root: Path, path: str = CONTAINERD_CONFIG, version: ContainerdVersion | None = None
) -> Check:
    """The nvidia runtime's SystemdCgroup against the kubelet's cgroup driver, as the first reading the
    host's containerd may make loads the files."""
    name = "containerd cgroup driver"
    version = version if version is not None else containerd_version(root)
    try:
        reading = version.readings(cc.config_version(root, path))[0]
        loaded = cc.load(root, path, reading)
        _, nvidia, _ = cc.runtime_config(loaded.config, reading)
    except Malformed:
        return Check(name, WARN, f"{path}: cannot be read (see containerd runtime)", FIX_CGROUP)
    if loaded.refused:
        return Check(
            name, WARN, f"{path}: {reading.label} does not start (see containerd runtime)", FIX_CGROUP
        )
    if nvidia is None:
        return Check(name, WARN, f"{path}: no nvidia runtime to check", FIX_CGROUP)
    raw = (nvidia.get("options") or {}).get("SystemdCgroup")
    systemd = raw is True
    driver = kubelet_cgroup_driver(root)
    shown = "true" if raw is True else "false" if raw is False else "unset"
    if driver is None:
        if systemd:
            return Check(name, PASS, "runtimes.nvidia SystemdCgroup = true (kubeadm's systemd cgroup driver)")
        return Check(
            name,
            WARN,
            f"runtimes.nvidia SystemdCgroup is {shown}; no /var/lib/kubelet/config.yaml says which cgroup "
            "driver the kubelet uses (kubeadm's default is systemd)",
            FIX_CGROUP,
        )
    if systemd == (driver == "systemd"):
        return Check(name, PASS, f"runtimes.nvidia SystemdCgroup = {shown}, kubelet cgroupDriver {driver}")
    return Check(
        name,
        FAIL,
        f"runtimes.nvidia SystemdCgroup is {shown} but the kubelet's cgroupDriver is {driver}",
        FIX_CGROUP,
    )


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def check_docker(root: Path, path: str = "/etc/docker/daemon.json") -> Check:
    name = "docker runtime"
    try:
        try:
            config = load_json(cc.read_text(root, path), path)
        except InputError as exc:
            raise Malformed(exc.line()) from None
        config = cc.table(config, "the file") if config is not None else {}
        runtime = cc.table(config.get("runtimes"), '"runtimes"').get("nvidia")
    except Malformed as exc:
        detail = str(exc) if str(exc).startswith(path) else f"{path}: {exc}"
        return Check(name, FAIL, detail.replace("must be a table", "must be an object"), FIX_DOCKER)
    problems = []
    if not isinstance(runtime, dict) or RUNTIME_BINARY not in str(runtime.get("path", "")):
        problems.append('no "runtimes": {"nvidia": {"path": ".../nvidia-container-runtime"}}')
    if config.get("default-runtime") != "nvidia":
        problems.append(f'"default-runtime" is {quote(config.get("default-runtime"))}, not "nvidia"')
    if problems:
        return Check(name, FAIL, f"{path}: " + "; ".join(problems), FIX_DOCKER)
    assert isinstance(runtime, dict)
    return Check(name, PASS, f"{path}: default runtime nvidia -> {runtime['path']}")


def check_runtimes(root: Path, containerd: str | None = None) -> list[Check]:
    """containerd if configured, docker if configured; one of them must exist. ``containerd``: the host's
    containerd version when known (``--containerd-version``)."""
    out = []
    if _under(root, CONTAINERD_CONFIG).is_file():
        version = containerd_version(root, containerd)
        out.append(check_containerd(root, version=version))
        out.append(check_cgroup(root, version=version))
    if _under(root, "/etc/docker/daemon.json").is_file():
        out.append(check_docker(root))
    if not out:
        out.append(
            Check(
                "container runtime",
                FAIL,
                "neither /etc/containerd/config.toml nor /etc/docker/daemon.json exists",
                FIX_CONTAINERD + "\n\nor, for docker:\n" + FIX_DOCKER,
            )
        )
    return out


def check_kubelet(root: Path) -> list[Check]:
    d = _under(root, "/var/lib/kubelet/device-plugins")
    if not d.is_dir():
        return [
            Check(
                "kubelet device-plugins", FAIL, "/var/lib/kubelet/device-plugins does not exist", FIX_KUBELET
            )
        ]
    out = [Check("kubelet device-plugins", PASS, "/var/lib/kubelet/device-plugins exists")]
    socks = sorted(p.name for p in d.iterdir() if p.name.startswith("nvidia"))
    if socks:
        out.append(Check("nvidia device plugin", PASS, "registered: " + ", ".join(socks)))
    else:
        out.append(
            Check(
                "nvidia device plugin", WARN, "no nvidia*.sock in /var/lib/kubelet/device-plugins", FIX_PLUGIN
            )
        )
    return out


def run_checks(
    root: Path | str = "/", nvml: Nvml | None = None, containerd_version: str | None = None
) -> list[Check]:
    """Every check, in the order seed 002 sets a node up."""
    root = Path(root)
    nv = nvml if nvml is not None else Nvml()
    family = os_family(root)  # the fixes in the host's own package manager's commands
    driver_fix = fix_driver(family)
    checks: list[Check] = []
    driver, loaded = check_driver(nv, driver_fix)
    checks.append(driver)
    if loaded:
        checks += [check_gpus(nv, driver_fix), check_cuda(nv, driver_fix)]
    checks.append(check_toolkit(root, fix_toolkit(family)))
    checks += check_runtimes(root, containerd_version)
    checks += check_kubelet(root)
    if loaded:
        checks.append(check_persistence(nv, driver_fix))
    return checks


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)


def load_containerd_config(root: Path, path: str = CONTAINERD_CONFIG, major: int = 2) -> dict[str, Any]:
    """config.toml with its imports as containerd ``major`` (1.x, or 2.3.5 and later) loads them."""
    return cc.load(root, path, cc.READ_1X if major == 1 else cc.READ_235).config
