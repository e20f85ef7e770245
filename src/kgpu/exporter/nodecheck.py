"""``kgpu node-check``: seed 002's prerequisites for a GPU node, checked on the host.

Every check reads files under ``root`` (``/`` on a real host, a fixture tree in tests) or asks NVML through
the injected facade, and returns a :class:`Check`: pass, warn or fail, what it found, and for anything not
passing the fix, taken from seed 002's instructions. Only ``fail`` makes the command exit 1: a missing
device-plugin socket (the plugin is deployed after the node is prepared) and persistence mode off are
warnings.
"""

from __future__ import annotations

import glob
import json
import os
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text

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

FIX_CONTAINERD = """Make nvidia-container-runtime containerd's default runtime in /etc/containerd/config.toml:
  version = 2
  [plugins]
    [plugins."io.containerd.grpc.v1.cri"]
      [plugins."io.containerd.grpc.v1.cri".containerd]
        default_runtime_name = "nvidia"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
            privileged_without_host_devices = false
            runtime_engine = ""
            runtime_root = ""
            runtime_type = "io.containerd.runc.v2"
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
              BinaryName = "/usr/bin/nvidia-container-runtime"
(containerd 2.x, config version 3: the same keys under [plugins."io.containerd.cri.v1.runtime".containerd];
 `nvidia-ctk runtime configure --runtime=containerd --set-as-default` writes either.) Then:
  systemctl restart containerd"""

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


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_containerd_config(root: Path, path: str = "/etc/containerd/config.toml") -> dict[str, Any]:
    """config.toml with its ``imports`` (drop-ins nvidia-ctk may write) merged in, paths taken under root."""
    config = tomllib.loads(_under(root, path).read_text())
    for pattern in config.get("imports", []) or []:
        full = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(path), pattern)
        for match in sorted(glob.glob(str(_under(root, full)))):
            config = _merge(config, tomllib.loads(Path(match).read_text()))
    return config


def containerd_runtime(config: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None, str]:
    """(default_runtime_name, runtimes.nvidia, plugin id) for config version 2 or 3."""
    plugins = config.get("plugins", {}) or {}
    version = int(config.get("version", 1) or 1)
    ids = (
        ["io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri"]
        if version >= 3
        else ["io.containerd.grpc.v1.cri"]
    )
    for plugin_id in ids:
        cri = plugins.get(plugin_id)
        if not isinstance(cri, dict):
            continue
        ctrd = cri.get("containerd", {}) or {}
        runtimes = ctrd.get("runtimes", {}) or {}
        return ctrd.get("default_runtime_name"), runtimes.get("nvidia"), plugin_id
    return None, None, ids[0]


def check_containerd(root: Path, path: str = "/etc/containerd/config.toml") -> Check:
    name = "containerd runtime"
    try:
        config = load_containerd_config(root, path)
    except tomllib.TOMLDecodeError as exc:
        return Check(name, FAIL, f"{path} is not valid TOML: {exc}", FIX_CONTAINERD)
    default, nvidia, plugin_id = containerd_runtime(config)
    problems = []
    if nvidia is None:
        problems.append(f'no [plugins."{plugin_id}".containerd.runtimes.nvidia]')
    else:
        binary = ((nvidia.get("options") or {}).get("BinaryName")) or ""
        if RUNTIME_BINARY not in binary:
            problems.append(
                f"runtimes.nvidia BinaryName is {binary or 'unset'!r}, not nvidia-container-runtime"
            )
        elif not _under(root, binary).is_file():
            problems.append(f"runtimes.nvidia BinaryName {binary} does not exist")
    if default != "nvidia":
        problems.append(f"default_runtime_name is {default or 'unset'!r}, not 'nvidia'")
    if problems:
        return Check(name, FAIL, f"{path}: " + "; ".join(problems), FIX_CONTAINERD)
    return Check(name, PASS, f"{path}: default runtime nvidia -> {nvidia['options']['BinaryName']}")  # type: ignore[index]


def check_docker(root: Path, path: str = "/etc/docker/daemon.json") -> Check:
    name = "docker runtime"
    try:
        config = json.loads(_under(root, path).read_text())
    except json.JSONDecodeError as exc:
        return Check(name, FAIL, f"{path} is not valid JSON: {exc}", FIX_DOCKER)
    problems = []
    runtime = (config.get("runtimes") or {}).get("nvidia")
    if not isinstance(runtime, dict) or RUNTIME_BINARY not in str(runtime.get("path", "")):
        problems.append('no "runtimes": {"nvidia": {"path": ".../nvidia-container-runtime"}}')
    if config.get("default-runtime") != "nvidia":
        problems.append(f'"default-runtime" is {config.get("default-runtime")!r}, not "nvidia"')
    if problems:
        return Check(name, FAIL, f"{path}: " + "; ".join(problems), FIX_DOCKER)
    return Check(name, PASS, f"{path}: default runtime nvidia -> {runtime['path']}")  # type: ignore[index]


def check_runtimes(root: Path) -> list[Check]:
    """containerd if configured, docker if configured; one of them must exist."""
    out = []
    if _under(root, "/etc/containerd/config.toml").is_file():
        out.append(check_containerd(root))
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
