"""``kgpu node-check``: seed 002's prerequisites for a GPU node, checked on the host.

Every check reads files under ``root`` (``/`` on a real host, a fixture tree in tests) or asks NVML through
the injected facade, and returns a :class:`Check`: pass, warn or fail, what it found, and for anything not
passing the fix, taken from seed 002's instructions. Only ``fail`` makes the command exit 1: a missing
device-plugin socket (the plugin is deployed after the node is prepared) and persistence mode off are
warnings.

containerd's configuration is read as the installed containerd reads it (:func:`load_containerd`): 1.x
replaces a plugin's whole section with an imported file's, 2.x merges them, so the same files can be right
for one and wipe the host's CRI settings on the other. Which containerd runs comes from
:func:`containerd_version`; the only command node-check ever runs is ``containerd --version``, and only on
the host itself (root ``/``), never a binary under a mounted root.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text
from kgpu.model.safeyaml import MAX_BYTES, load_json, read_limited
from kgpu.render import onprem

PASS, WARN, FAIL = "pass", "warn", "fail"
MIN_DRIVER = (384, 81)  # k8s-device-plugin's stated minimum ("NVIDIA drivers ~= 384.81")
RUNTIME_BINARY = "nvidia-container-runtime"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CRI_V2 = "io.containerd.grpc.v1.cri"  # config version 2: the CRI plugin (containerd 1.x; 2.x migrates it)
CRI_V3 = "io.containerd.cri.v1.runtime"  # config version 3: the CRI runtime plugin (containerd 2.x)
BIN_DIRS = ("usr/bin", "usr/local/bin", "usr/sbin", "bin", "usr/local/nvidia/toolkit")

FIX_DRIVER = """Install the NVIDIA driver for this GPU and load it (nvidia-smi must list the GPUs), e.g.
  dnf install -y nvidia-driver   # or the .run installer from nvidia.com; then reboot or modprobe nvidia
The NVIDIA device plugin needs driver >= 384.81."""

FIX_TOOLKIT = """Install nvidia-container-toolkit (>= 1.7.0):
  curl -s -L https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo | \\
    sudo tee /etc/yum.repos.d/nvidia-container-toolkit.repo
  yum-config-manager --enable nvidia-container-toolkit-experimental
  yum install -y nvidia-container-toolkit"""

FIX_CONTAINERD = (
    f"""containerd 2.x: write {onprem.CONTAINERD_DROPIN} exactly as `kgpu render --target onprem` renders it
(its bootstrap-gpu-host.sh does every step of this, idempotently):
"""
    + "".join(f"  {line}\n" if line else "\n" for line in onprem.containerd_dropin().splitlines())
    + f"""and import it from /etc/containerd/config.toml (top level, before any table):
  {onprem.IMPORTS_LINE}
(a config.toml that says version = 2 needs the same drop-in in version 2 terms, version = 2 and
 [plugins."io.containerd.grpc.v1.cri".containerd...]: containerd 2.x refuses a drop-in whose version is
 higher than config.toml's.)
containerd 1.x replaces a whole plugin section on import, so a drop-in with only the nvidia runtime wipes
the host's CRI settings (sandbox image, registry config_path, runc options): run the rendered
bootstrap-gpu-host.sh (it writes the whole CRI section from `containerd config dump`, nvidia added), or
edit config.toml in place with
  nvidia-ctk runtime configure --runtime=containerd --set-as-default
Then:
  systemctl restart containerd"""
)

FIX_CGROUP = """Make the nvidia runtime use the kubelet's cgroup driver: in the [...runtimes.nvidia.options] table
  SystemdCgroup = true     # kubelet cgroupDriver: systemd (kubeadm's default)
  SystemdCgroup = false    # kubelet cgroupDriver: cgroupfs
Then: systemctl restart containerd. Two cgroup managers on one node make pods restart under pressure."""

FIX_DOCKER = """Make nvidia-container-runtime docker's default runtime in /etc/docker/daemon.json:
  {
      "default-runtime": "nvidia",
      "runtimes": {
          "nvidia": {
              "path": "/usr/bin/nvidia-container-runtime",
              "runtimeArgs": []
          }
      }
  }
Then: systemctl restart docker"""

FIX_KUBELET = """The kubelet's device-plugin directory /var/lib/kubelet/device-plugins is missing: join this host to
the cluster (kubeadm join ...) and start the kubelet (systemctl enable --now kubelet)."""

FIX_PLUGIN = """No NVIDIA device plugin has registered with this kubelet yet. Deploy it (once the node is ready):
  kubectl create -f https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/v0.14.3/nvidia-device-plugin.yml
(production: the Helm chart; `kgpu render` writes a DaemonSet that tolerates your GPU node taints)."""

FIX_PERSISTENCE = """Turn on persistence mode so the driver stays loaded between GPU jobs (slow first calls otherwise):
  nvidia-smi -pm 1        # or: systemctl enable --now nvidia-persistenced"""


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


def check_driver(nv: Nvml) -> tuple[Check, bool]:
    try:
        nv.ensure_init()
    except NvmlUnavailable as exc:
        return Check("nvidia driver", FAIL, f"NVML cannot start: {exc}", FIX_DRIVER), False
    version = nv.driver_version() or "unknown"
    if version != "unknown" and _version_tuple(version)[:2] < MIN_DRIVER:
        return Check("nvidia driver", FAIL, f"driver {version} is older than 384.81", FIX_DRIVER), True
    return Check("nvidia driver", PASS, f"loaded, version {version}"), True


def check_gpus(nv: Nvml) -> Check:
    try:
        count = nv.device_count()
        found = []
        for i in range(count):
            h = nv.handle(i)
            name = as_text(nv.query("nvmlDeviceGetName", h) or "unknown GPU")
            cc = nv.query("nvmlDeviceGetCudaComputeCapability", h)
            found.append(f"{i}: {name}" + (f" (compute {cc[0]}.{cc[1]})" if cc else ""))
    except NvmlUnavailable as exc:
        return Check("gpus", FAIL, f"NVML error: {exc}", FIX_DRIVER)
    if not found:
        return Check("gpus", FAIL, "the driver is loaded but reports no GPU", FIX_DRIVER)
    return Check("gpus", PASS, f"{count} GPU(s): " + "; ".join(found))


def check_cuda(nv: Nvml) -> Check:
    try:
        cuda = nv.cuda_driver_version()
    except NvmlUnavailable as exc:
        return Check("cuda driver", FAIL, f"NVML error: {exc}", FIX_DRIVER)
    if cuda is None:
        return Check("cuda driver", FAIL, "the driver reports no CUDA version", FIX_DRIVER)
    return Check("cuda driver", PASS, f"CUDA {cuda} (containers may use CUDA up to {cuda})")


def check_persistence(nv: Nvml) -> Check:
    off = []
    try:
        for i in range(nv.device_count()):
            mode = nv.query("nvmlDeviceGetPersistenceMode", nv.handle(i))
            if mode is not None and int(mode) != 1:
                off.append(str(i))
    except NvmlUnavailable as exc:
        return Check("persistence mode", FAIL, f"NVML error: {exc}", FIX_DRIVER)
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


def check_toolkit(root: Path) -> Check:
    binary = find_runtime_binary(root)
    if binary is None:
        where = ", ".join("/" + d for d in BIN_DIRS)
        return Check("nvidia-container-toolkit", FAIL, f"no {RUNTIME_BINARY} in {where}", FIX_TOOLKIT)
    shown = "/" + str(binary.relative_to(root))
    if not os.access(binary, os.X_OK):
        return Check("nvidia-container-toolkit", FAIL, f"{shown} is not executable", FIX_TOOLKIT)
    return Check("nvidia-container-toolkit", PASS, f"{shown}")


class Malformed(Exception):
    """A runtime config file that cannot be read or does not have the expected shape."""


def _read(root: Path, path: str) -> str:
    """A config file as text; unreadable, not UTF-8 or too large is Malformed, never an exception."""
    full = _under(root, path)
    try:
        with open(full, "rb") as fh:
            data = read_limited(fh)
    except OSError as exc:
        raise Malformed(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise Malformed(f"{path}: larger than {MAX_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _toml(root: Path, path: str) -> dict[str, Any]:
    try:
        return tomllib.loads(_read(root, path))
    except tomllib.TOMLDecodeError as exc:
        raise Malformed(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise Malformed(f"{path} is not valid TOML: nested too deep") from None


def _table(value: Any, what: str) -> dict[str, Any]:
    """A TOML table / JSON object, or Malformed naming the key; a missing one is empty."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Malformed(f"{what} must be a table, got {type(value).__name__} {quote(value)}")
    return value


def _merge_2x(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """containerd 2.x's import merge (mergo with override, containerd#9982): tables merge key by key at
    every depth, lists gain the items they lack, other values are replaced."""
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = _merge_2x(old, value)
        elif isinstance(value, list) and isinstance(old, list):
            out[key] = old + [v for v in value if v not in old]
        else:
            out[key] = value
    return out


def _leaves(table: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_leaves(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def _merge_1x(base: dict[str, Any], extra: dict[str, Any], lost: list[str]) -> dict[str, Any]:
    """containerd 1.x's import merge: as 2.x outside ``plugins``, but each plugin's section in the imported
    file replaces the earlier one whole (``to.Plugins[k] = v`` in services/server/config/config.go up to
    1.7; containerd#5837). Settings of an earlier section that the new one does not have go to ``lost``."""
    out = _merge_2x(
        {k: v for k, v in base.items() if k != "plugins"}, {k: v for k, v in extra.items() if k != "plugins"}
    )
    plugins = base.get("plugins")
    new = extra.get("plugins")
    if isinstance(plugins, dict) and isinstance(new, dict):
        merged = dict(plugins)
        for plugin_id, section in new.items():
            old = merged.get(plugin_id)
            if isinstance(old, dict) and isinstance(section, dict):
                kept = _leaves(section)
                for path, value in _leaves(old).items():
                    if path not in kept:
                        lost.append(f'plugins."{plugin_id}".{".".join(path)} = {quote(value)}')
            merged[plugin_id] = section
        out["plugins"] = merged
    elif "plugins" in extra or "plugins" in base:
        out["plugins"] = new if "plugins" in extra else plugins
    return out


def _version(config: dict[str, Any], path: str) -> int:
    """A config's ``version``; containerd reads a file without one as version 1."""
    raw = config.get("version", 1)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 100:
        raise Malformed(f"{path}: version must be 1, 2 or 3, got {quote(raw)}")
    return raw


def _migrate_to_v3(config: dict[str, Any]) -> dict[str, Any]:
    """The part of containerd 2.x's version 2 -> 3 migration that the checks read: the CRI plugin's
    ``containerd`` table (default runtime, runtimes) moves to ``io.containerd.cri.v1.runtime``
    (containerd v2.0 docs/PLUGINS.md and docs/cri/config.md)."""
    plugins = config.get("plugins")
    if not isinstance(plugins, dict):
        return config
    cri = plugins.get(CRI_V2)
    if not isinstance(cri, dict) or not isinstance(cri.get("containerd"), dict):
        return config
    found = plugins.get(CRI_V3)
    runtime: dict[str, Any] = dict(found) if isinstance(found, dict) else {}
    ctrd = runtime.get("containerd")
    runtime["containerd"] = _merge_2x(ctrd if isinstance(ctrd, dict) else {}, cri["containerd"])
    rest = {k: v for k, v in cri.items() if k != "containerd"}
    return {**config, "plugins": {**plugins, CRI_V2: rest, CRI_V3: runtime}}


@dataclass
class Loaded:
    """config.toml with its imports, read as one containerd major version reads them."""

    config: dict[str, Any]
    major: int
    files: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # 1.x: settings an import's section replaced away
    replaced_by: str = ""  # 1.x: the import that replaced them
    ignored: list[str] = field(default_factory=list)  # 1.x: version 3 files (1.x has no such plugins)


def load_containerd(root: Path, path: str = "/etc/containerd/config.toml", major: int = 2) -> Loaded:
    """config.toml and its ``imports`` (recursively, each file once, in containerd's order: the file, then
    what it imports, globs sorted), paths taken under root, merged as containerd ``major`` merges them.

    Raises Malformed for a file that cannot be read or parsed, ``imports`` that are not a list of paths, or
    (2.x) a drop-in whose version is higher than config.toml's, which containerd 2.x refuses to start with."""
    pending = [path]
    seen: set[str] = set()
    loaded = Loaded({}, major)
    root_version = 0
    while pending:
        current, pending = pending[0], pending[1:]
        if current in seen:
            continue
        seen.add(current)
        config = _toml(root, current)
        version = _version(config, current)
        root_version = root_version or version
        if major >= 2:
            if version > root_version:
                raise Malformed(
                    f"{current}: drop-in config version {version} higher than root config version "
                    f"{root_version} (containerd 2.x does not start)"
                )
            if version < 3:
                config = _migrate_to_v3(config)
            loaded.config = _merge_2x(loaded.config, config)
        else:
            if version >= 3:
                loaded.ignored.append(current)
            lost: list[str] = []
            loaded.config = _merge_1x(loaded.config, config, lost)
            if lost:
                loaded.lost += lost
                loaded.replaced_by = current
        loaded.files.append(current)
        imports = config.get("imports") or []
        if not isinstance(imports, list) or not all(isinstance(p, str) for p in imports):
            raise Malformed(f"{current}: imports must be a list of paths, got {quote(imports)}")
        for pattern in imports:
            full = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(current), pattern)
            for match in sorted(glob.glob(glob.escape(str(root)) + "/" + full.lstrip("/"))):
                shown = "/" + os.path.relpath(match, root)
                if not os.path.isfile(match):
                    raise Malformed(
                        f"{current}: imports {quote(pattern)} matches {shown}, which is not a file"
                    )
                pending.append(shown)
    return loaded


def load_containerd_config(
    root: Path, path: str = "/etc/containerd/config.toml", major: int = 2
) -> dict[str, Any]:
    """The merged configuration of :func:`load_containerd`."""
    return load_containerd(root, path, major).config


def containerd_runtime(
    config: dict[str, Any], major: int = 2
) -> tuple[str | None, dict[str, Any] | None, str]:
    """(default_runtime_name, runtimes.nvidia, plugin id) of the merged config; Malformed for a config
    whose keys have the wrong types. containerd 1.x only has the version 2 CRI plugin."""
    plugins = _table(config.get("plugins"), "plugins")
    ids = [CRI_V3, CRI_V2] if major >= 2 else [CRI_V2]
    for plugin_id in ids:
        cri = plugins.get(plugin_id)
        if not isinstance(cri, dict) or (plugin_id == CRI_V2 and major >= 2 and "containerd" not in cri):
            continue
        ctrd = _table(cri.get("containerd"), f'plugins."{plugin_id}".containerd')
        runtimes = _table(ctrd.get("runtimes"), f'plugins."{plugin_id}".containerd.runtimes')
        nvidia = runtimes.get("nvidia")
        if nvidia is not None:
            nvidia = _table(nvidia, "runtimes.nvidia")
            _table(nvidia.get("options"), "runtimes.nvidia.options")
        default = ctrd.get("default_runtime_name")
        if default is not None and not isinstance(default, str):
            raise Malformed(f"default_runtime_name must be a string, got {quote(default)}")
        return default, nvidia, plugin_id
    return None, None, ids[0]


# --- containerd's version -----------------------------------------------------------------------------

_VERSION_LINE = re.compile(r"^containerd\s+\S+\s+v?(\d+)\.(\d+)\S*")
_SCAN_LIMIT = 512 * 2**20  # bytes of a containerd binary read to find its module path


@dataclass(frozen=True)
class ContainerdVersion:
    """The major version of the host's containerd (None: not found) and where it was found."""

    major: int | None
    source: str

    def describe(self) -> str:
        return f"containerd {self.major}.x ({self.source})" if self.major else "containerd version unknown"


def parse_containerd_version(text: str) -> str | None:
    """``major.minor`` from ``containerd --version``'s first line (Debian's ``containerd
    github.com/containerd/containerd 1.6.20~ds1 ...``, Docker's ``containerd containerd.io 1.7.27 ...``,
    2.x's ``containerd github.com/containerd/containerd/v2 v2.1.4 ...``)."""
    match = _VERSION_LINE.match(text.strip().splitlines()[0] if text.strip() else "")
    return f"{match[1]}.{match[2]}" if match else None


def _major(version: str) -> int | None:
    head = version.strip().lstrip("v").split(".", 1)[0]
    if ":" in head:  # a Debian epoch
        head = head.split(":", 1)[1]
    return int(head) if head.isdigit() else None


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
    """Which containerd the host runs, because 1.x and 2.x read imported files differently: the override
    (``--containerd-version``); on the host itself (root ``/``) ``containerd --version``; dpkg's status
    file; the module path inside the containerd binary; a config.toml at version 3, which only 2.x reads."""
    if override:
        return ContainerdVersion(_major(override), "--containerd-version")
    if str(root) == "/":
        binary = shutil.which("containerd")
        if binary:
            try:
                out = subprocess.run(
                    [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
                ).stdout
            except (OSError, subprocess.SubprocessError):
                out = ""
            version = parse_containerd_version(out)
            if version:
                return ContainerdVersion(_major(version), f"{version}, containerd --version")
    package = _from_dpkg(root)
    if package and _major(package):
        return ContainerdVersion(_major(package), f"{package}, dpkg")
    major = _from_binary(root)
    if major:
        return ContainerdVersion(major, "the containerd binary's module path")
    try:
        if _version(_toml(root, CONTAINERD_CONFIG), CONTAINERD_CONFIG) >= 3:
            return ContainerdVersion(2, f"{CONTAINERD_CONFIG} is config version 3")
    except Malformed:
        pass
    return ContainerdVersion(None, "")


def _runtime_problems(root: Path, path: str, major: int) -> tuple[list[str], str]:
    """What is wrong with the nvidia runtime as containerd ``major`` reads the files, and its binary."""
    loaded = load_containerd(root, path, major)
    default, nvidia, plugin_id = containerd_runtime(loaded.config, major)
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
    if loaded.ignored:
        problems.append(
            f"containerd 1.x does not read config version 3 ({', '.join(loaded.ignored)}): "
            "its io.containerd.cri.v1.* sections do nothing"
        )
    if loaded.lost:
        shown = "; ".join(loaded.lost[:5]) + (
            f"; and {len(loaded.lost) - 5} more" if len(loaded.lost) > 5 else ""
        )
        problems.append(
            f"importing {loaded.replaced_by} replaces whole plugin sections (containerd 1.x), which drops "
            f"settings of earlier files: {shown}"
        )
    return problems, binary


def check_containerd(
    root: Path, path: str = CONTAINERD_CONFIG, version: ContainerdVersion | None = None
) -> Check:
    """The nvidia runtime as the host's containerd reads config.toml and its imports. With the version
    unknown both readings are made: the same verdict is given as is; a config that only 2.x reads right is
    a warning that names what 1.x would lose."""
    name = "containerd runtime"
    version = version if version is not None else containerd_version(root)
    majors = [version.major] if version.major in (1, 2) else [1, 2]
    results: dict[int, tuple[list[str], str]] = {}
    for major in majors:
        try:
            results[major] = _runtime_problems(root, path, major)
        except Malformed as exc:
            return Check(
                name, FAIL, str(exc) if str(exc).startswith(path) else f"{path}: {exc}", FIX_CONTAINERD
            )
    first, binary = results[majors[0]]
    if len(majors) == 2 and bool(first) != bool(results[2][0]):
        bad = 1 if first else 2
        return Check(
            name,
            WARN,
            f"{path}: correct for containerd {3 - bad}.x but not {bad}.x ({'; '.join(results[bad][0])}); "
            "containerd's version was not found (no containerd binary or dpkg status under the root): "
            "say which with --containerd-version",
            FIX_CONTAINERD,
        )
    where = f"; read as {version.describe()}" if version.major else ""
    if first:
        return Check(name, FAIL, f"{path}: " + "; ".join(first) + where, FIX_CONTAINERD)
    return Check(name, PASS, f"{path}: default runtime nvidia -> {binary}{where}")


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
    """The nvidia runtime's SystemdCgroup against the kubelet's cgroup driver."""
    name = "containerd cgroup driver"
    version = version if version is not None else containerd_version(root)
    major = version.major if version.major in (1, 2) else 1
    try:
        _, nvidia, _ = containerd_runtime(load_containerd_config(root, path, major), major)
    except Malformed:
        return Check(name, WARN, f"{path}: cannot be read (see containerd runtime)", FIX_CGROUP)
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
            config = load_json(_read(root, path), path)
        except InputError as exc:
            raise Malformed(exc.line()) from None
        config = _table(config, "the file") if config is not None else {}
        runtime = _table(config.get("runtimes"), '"runtimes"').get("nvidia")
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
    checks: list[Check] = []
    driver, loaded = check_driver(nv)
    checks.append(driver)
    if loaded:
        checks += [check_gpus(nv), check_cuda(nv)]
    checks.append(check_toolkit(root))
    checks += check_runtimes(root, containerd_version)
    checks += check_kubelet(root)
    if loaded:
        checks.append(check_persistence(nv))
    return checks


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)
