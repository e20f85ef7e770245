"""``kgpu node-check``: seed 002's prerequisites for a GPU node, checked on the host.

Every check reads files under ``root`` (``/`` on a real host, a fixture tree in tests) or asks NVML through
the injected facade, and returns a :class:`Check`: pass, warn or fail, what it found, and for anything not
passing the fix, taken from seed 002's instructions. Only ``fail`` makes the command exit 1: a missing
device-plugin socket (the plugin is deployed after the node is prepared) and persistence mode off are
warnings.
"""

from __future__ import annotations

import glob
import os
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text
from kgpu.model.safeyaml import MAX_BYTES, load_json
from kgpu.render import onprem

PASS, WARN, FAIL = "pass", "warn", "fail"
MIN_DRIVER = (384, 81)  # k8s-device-plugin's stated minimum ("NVIDIA drivers ~= 384.81")
RUNTIME_BINARY = "nvidia-container-runtime"
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
    f"""Write {onprem.CONTAINERD_DROPIN} exactly as `kgpu render --target onprem` renders it (its
bootstrap-gpu-host.sh does every step of this, idempotently):
"""
    + "".join(f"  {line}\n" if line else "\n" for line in onprem.containerd_dropin().splitlines())
    + f"""and import it from /etc/containerd/config.toml (top level, before any table):
  {onprem.IMPORTS_LINE}
(containerd 2.x reads the version-2 drop-in too; `nvidia-ctk runtime configure --runtime=containerd
 --set-as-default` writes an equivalent one.) Then:
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
            data = fh.read(MAX_BYTES + 1)
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


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_containerd_config(root: Path, path: str = "/etc/containerd/config.toml") -> dict[str, Any]:
    """config.toml with its ``imports`` (drop-ins nvidia-ctk may write) merged in, paths taken under root.

    Raises Malformed for a file that cannot be read or parsed, or ``imports`` that are not a list of paths."""
    config = _toml(root, path)
    imports = config.get("imports") or []
    if not isinstance(imports, list) or not all(isinstance(p, str) for p in imports):
        raise Malformed(f"{path}: imports must be a list of paths, got {quote(imports)}")
    for pattern in imports:
        full = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(path), pattern)
        for match in sorted(glob.glob(glob.escape(str(root)) + "/" + full.lstrip("/"))):
            shown = "/" + os.path.relpath(match, root)
            if not os.path.isfile(match):
                raise Malformed(f"{path}: imports {quote(pattern)} matches {shown}, which is not a file")
            config = _merge(config, _toml(root, shown))
    return config


def containerd_runtime(config: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None, str]:
    """(default_runtime_name, runtimes.nvidia, plugin id) for config version 2 or 3; Malformed for a config
    whose keys have the wrong types."""
    plugins = _table(config.get("plugins"), "plugins")
    raw_version = config.get("version", 1)
    if isinstance(raw_version, bool) or not isinstance(raw_version, int) or not 1 <= raw_version <= 100:
        raise Malformed(f"version must be 1, 2 or 3, got {quote(raw_version)}")
    version = raw_version
    ids = (
        ["io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"]
        if version >= 3
        else ["io.containerd.grpc.v1.cri"]
    )
    for plugin_id in ids:
        cri = plugins.get(plugin_id)
        if not isinstance(cri, dict):
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


def check_containerd(root: Path, path: str = "/etc/containerd/config.toml") -> Check:
    name = "containerd runtime"
    try:
        config = load_containerd_config(root, path)
        default, nvidia, plugin_id = containerd_runtime(config)
    except Malformed as exc:
        return Check(name, FAIL, str(exc) if str(exc).startswith(path) else f"{path}: {exc}", FIX_CONTAINERD)
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
    if default != "nvidia":
        problems.append(f"default_runtime_name is {quote(default or 'unset')}, not 'nvidia'")
    if problems:
        return Check(name, FAIL, f"{path}: " + "; ".join(problems), FIX_CONTAINERD)
    return Check(name, PASS, f"{path}: default runtime nvidia -> {binary}")


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


def check_cgroup(root: Path, path: str = "/etc/containerd/config.toml") -> Check:
    """The nvidia runtime's SystemdCgroup against the kubelet's cgroup driver."""
    name = "containerd cgroup driver"
    try:
        _, nvidia, _ = containerd_runtime(load_containerd_config(root, path))
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


def check_runtimes(root: Path) -> list[Check]:
    """containerd if configured, docker if configured; one of them must exist."""
    out = []
    if _under(root, "/etc/containerd/config.toml").is_file():
        out.append(check_containerd(root))
        out.append(check_cgroup(root))
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


def run_checks(root: Path | str = "/", nvml: Nvml | None = None) -> list[Check]:
    """Every check, in the order seed 002 sets a node up."""
    root = Path(root)
    nv = nvml if nvml is not None else Nvml()
    checks: list[Check] = []
    driver, loaded = check_driver(nv)
    checks.append(driver)
    if loaded:
        checks += [check_gpus(nv), check_cuda(nv)]
    checks.append(check_toolkit(root))
    checks += check_runtimes(root)
    checks += check_kubelet(root)
    if loaded:
        checks.append(check_persistence(nv))
    return checks


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)
