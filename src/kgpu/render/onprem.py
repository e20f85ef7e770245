"""On-premises GPU hosts: make ``nvidia`` the default container runtime (containerd or docker).

Output is host configuration, not cluster objects, so it is rendered twice from one source: as
:func:`host_files` (path -> content, written by ``kgpu render --output-dir DIR`` under ``onprem-files/``) and as a
ConfigMap holding the same files, which validates like every other document and can be mounted by a node
set-up DaemonSet. The containerd drop-in is config version 2 (containerd 1.7); the main config must import
``/etc/containerd/conf.d/*.toml``. ``SystemdCgroup = true`` matches kubelet's default systemd cgroup driver:
a runtime that disagrees with kubelet restarts pods at random. ``nvidia-ctk runtime configure
--runtime=containerd --set-as-default`` writes an equivalent file.

The host set-up seed 002 does by hand is rendered too: ``bootstrap-gpu-host.sh`` installs the NVIDIA driver
and the NVIDIA container toolkit (Ubuntu/Debian with apt, RHEL-family with dnf, from NVIDIA's repositories)
and writes the very same containerd drop-in (or lets ``nvidia-ctk`` set docker's default runtime). It is
idempotent: every step checks first and containerd restarts only when a file changed. ``KGPU_ROOT`` prefixes
every path it reads or writes, which is how the tests run it in a directory. ``cloud-init.yaml`` carries the
same script for hosts provisioned by cloud-init. ``kgpu node-check`` expects exactly these files.
"""

from __future__ import annotations

import json
from typing import Any

from kgpu.model.profile import PoolKind, Profile
from kgpu.render import MANAGED_BY

NAME = "kgpu-nvidia-runtime"
NAMESPACE = "kube-system"
CONTAINERD_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
DOCKER_DAEMON = "/etc/docker/daemon.json"
RUNTIME = "/usr/bin/nvidia-container-runtime"

_CONTAINERD = f"""# {CONTAINERD_DROPIN}: nvidia as containerd's default runtime (containerd 1.7, config version 2).
# /etc/containerd/config.toml must contain: imports = ["/etc/containerd/conf.d/*.toml"]
# Apply with: systemctl restart containerd
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  privileged_without_host_devices = false
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "{RUNTIME}"
  SystemdCgroup = true
"""


BOOTSTRAP = "bootstrap-gpu-host.sh"
CLOUD_INIT = "cloud-init.yaml"
BOOTSTRAP_PATH = "/usr/local/sbin/kgpu-bootstrap-gpu-host.sh"
DRIVER_BRANCH = "570"  # NVIDIA's production branch; DRIVER_BRANCH=... overrides it on the host
IMPORTS_LINE = 'imports = ["/etc/containerd/conf.d/*.toml"]'


def containerd_dropin() -> str:
    """The containerd drop-in exactly as written on hosts (and expected by ``kgpu node-check``)."""
    return _CONTAINERD


def bootstrap_script() -> str:
    """A bash script that prepares a GPU host: driver, container toolkit, nvidia as the default runtime."""
    return (
        _BOOTSTRAP_HEAD.replace("@DRIVER_BRANCH@", DRIVER_BRANCH)
        .replace("@DROPIN@", CONTAINERD_DROPIN)
        .replace("@IMPORTS@", IMPORTS_LINE)
        .replace("@RUNTIME@", RUNTIME)
        + _CONTAINERD
        + _BOOTSTRAP_TAIL
    )


def cloud_init() -> str:
    """A ``#cloud-config`` that writes the bootstrap script and runs it once at first boot."""
    from kgpu.render import yamltext

    doc = {
        "write_files": [
            {
                "path": BOOTSTRAP_PATH,
                "permissions": "0755",
                "owner": "root:root",
                "content": bootstrap_script(),
            }
        ],
        "runcmd": [[BOOTSTRAP_PATH]],
    }
    return (
        "#cloud-config\n# kgpu: NVIDIA driver, container toolkit and nvidia as containerd's default runtime.\n"
        + (yamltext.dump(doc))
    )


_BOOTSTRAP_HEAD = r"""#!/usr/bin/env bash
# kgpu: prepare a GPU host for Kubernetes (seed 002's manual steps): the NVIDIA driver, the NVIDIA container
# toolkit, and nvidia as the container runtime's default. Ubuntu/Debian (apt) and RHEL-family hosts (RHEL,
# Rocky, AlmaLinux, CentOS Stream, Fedora, Amazon Linux; dnf). Idempotent: run it again at any time.
#   sudo ./bootstrap-gpu-host.sh                 # containerd (or docker when only docker is installed)
#   sudo DRIVER_BRANCH=550 ./bootstrap-gpu-host.sh
# A fresh driver install may need a reboot before nvidia-smi works; run the script again afterwards.
# Check the result with `kgpu node-check`.
set -euo pipefail

ROOT="${KGPU_ROOT:-}"
DRIVER_BRANCH="${DRIVER_BRANCH:-@DRIVER_BRANCH@}"
DROPIN="@DROPIN@"
IMPORTS='@IMPORTS@'
RUNTIME_BINARY="@RUNTIME@"
NVIDIA_REPO="https://nvidia.github.io/libnvidia-container/stable"

log() { printf 'kgpu-bootstrap: %s
' "$*" >&2; }
die() { log "error: $*"; exit 1; }

os_family() {
    local id="" like=""
    # shellcheck disable=SC1091
    [ -r "${ROOT}/etc/os-release" ] && { id="$(. "${ROOT}/etc/os-release"; echo "${ID:-}")"; like="$(. "${ROOT}/etc/os-release"; echo "${ID_LIKE:-}")"; }
    case " ${id} ${like} " in
        *" ubuntu "* | *" debian "*) echo debian ;;
        *" rhel "* | *" fedora "* | *" centos "* | *" rocky "* | *" almalinux "* | *" amzn "*) echo rhel ;;
        *) die "unsupported OS '${id}' (Ubuntu/Debian or RHEL-family)" ;;
    esac
}

install_driver() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        log "NVIDIA driver: present ($(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1 || echo 'not loaded yet'))"
        return
    fi
    log "NVIDIA driver: installing branch ${DRIVER_BRANCH}"
    if [ "$1" = debian ]; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "nvidia-headless-${DRIVER_BRANCH}-server" "nvidia-utils-${DRIVER_BRANCH}-server"
    else
        local major arch
        # shellcheck disable=SC1091
        major="$(. "${ROOT}/etc/os-release"; echo "${VERSION_ID%%.*}")"
        arch="$(uname -m)"
        dnf install -y -q dnf-plugins-core
        dnf config-manager --add-repo "https://developer.download.nvidia.com/compute/cuda/repos/rhel${major}/${arch}/cuda-rhel${major}.repo"
        dnf module install -y -q "nvidia-driver:${DRIVER_BRANCH}-dkms"
    fi
    log "NVIDIA driver: installed; reboot if nvidia-smi cannot talk to the driver yet"
}

install_toolkit() {
    if command -v nvidia-ctk >/dev/null 2>&1; then
        log "NVIDIA container toolkit: present ($(nvidia-ctk --version 2>/dev/null | head -n1))"
        return
    fi
    log "NVIDIA container toolkit: installing"
    if [ "$1" = debian ]; then
        curl -fsSL "${NVIDIA_REPO}/gpgkey" | gpg --batch --yes --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
        curl -fsSL "${NVIDIA_REPO}/deb/nvidia-container-toolkit.list"             | sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g'             > /etc/apt/sources.list.d/nvidia-container-toolkit.list
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-container-toolkit
    else
        curl -fsSL "${NVIDIA_REPO}/rpm/nvidia-container-toolkit.repo" > /etc/yum.repos.d/nvidia-container-toolkit.repo
        dnf install -y -q nvidia-container-toolkit
    fi
}

# Write $1 with the content of standard input unless it already has exactly that content.
# Prints "changed" when it wrote.
write_if_changed() {
    local target="$1" tmp
    tmp="$(mktemp)"
    cat > "${tmp}"
    if [ -f "${target}" ] && cmp -s "${tmp}" "${target}"; then
        rm -f "${tmp}"
        return
    fi
    mkdir -p "$(dirname "${target}")"
    install -m 0644 "${tmp}" "${target}"
    rm -f "${tmp}"
    echo changed
}

configure_containerd() {
    local config="${ROOT}/etc/containerd/config.toml" changed=""
    if [ ! -s "${config}" ]; then
        mkdir -p "$(dirname "${config}")"
        printf 'version = 2
%s
' "${IMPORTS}" > "${config}"
        changed=yes
    elif ! grep -qF '/etc/containerd/conf.d/*.toml' "${config}"; then
        if grep -q '^[[:space:]]*imports[[:space:]]*=' "${config}"; then
            die "${config} has an imports line without /etc/containerd/conf.d/*.toml: add it, then run again"
        fi
        local tmp
        tmp="$(mktemp)"
        { printf '%s
' "${IMPORTS}"; cat "${config}"; } > "${tmp}"
        install -m 0644 "${tmp}" "${config}"
        rm -f "${tmp}"
        changed=yes
    fi
    if [ -n "$(write_if_changed "${ROOT}${DROPIN}" <<'KGPU_DROPIN'
"""

_BOOTSTRAP_TAIL = r"""KGPU_DROPIN
)" ]; then
        changed=yes
    fi
    if [ -n "${changed}" ]; then
        log "containerd: nvidia is the default runtime (${DROPIN}); restarting containerd"
        systemctl restart containerd
    else
        log "containerd: already configured"
    fi
}

configure_docker() {
    local daemon="${ROOT}/etc/docker/daemon.json"
    if [ -f "${daemon}" ] && grep -q '"default-runtime"[[:space:]]*:[[:space:]]*"nvidia"' "${daemon}"; then
        log "docker: already configured"
        return
    fi
    log "docker: nvidia as the default runtime (${daemon}); restarting docker"
    nvidia-ctk runtime configure --runtime=docker --set-as-default --config="${daemon}"
    systemctl restart docker
}

main() {
    [ -n "${ROOT}" ] || [ "$(id -u)" -eq 0 ] || die "run as root (sudo)"
    local family
    family="$(os_family)"
    install_driver "${family}"
    install_toolkit "${family}"
    [ -x "${ROOT}${RUNTIME_BINARY}" ] || die "${RUNTIME_BINARY} is missing: is nvidia-container-toolkit installed?"
    if command -v containerd >/dev/null 2>&1; then
        configure_containerd
    elif command -v docker >/dev/null 2>&1; then
        configure_docker
    else
        die "neither containerd nor docker is installed"
    fi
    log "done: check with \`kgpu node-check\`"
}

main "$@"
"""


def _docker() -> str:
    data = {"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": RUNTIME, "runtimeArgs": []}}}
    return json.dumps(data, indent=4) + "\n"


def _verify(profile: Profile) -> str:
    nodes = [
        n.name for p in profile.pools if p.kind == PoolKind.STATIC and p.is_gpu for n in p.nodes if n.gpus
    ]
    lines = [
        "#!/bin/sh",
        "# On each GPU host: driver, container toolkit, default runtime.",
        "nvidia-smi || echo 'FAIL: NVIDIA driver not loaded'",
        "nvidia-ctk --version || echo 'FAIL: nvidia-container-toolkit not installed'",
        "if command -v containerd >/dev/null; then",
        '  # expect: default_runtime_name = "nvidia" and BinaryName = "' + RUNTIME + '"',
        "  containerd config dump | grep -E 'default_runtime_name|BinaryName'",
        "fi",
        "if command -v docker >/dev/null; then",
        "  # expect: nvidia",
        "  docker info --format '{{.DefaultRuntime}}'",
        "fi",
        "",
        "# From a machine with kubectl: every GPU node advertises nvidia.com/gpu.",
        "kubectl get nodes -o custom-columns='NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu'",
    ]
    lines += [f"kubectl describe node {n} | grep nvidia.com/gpu" for n in nodes]
    return "\n".join(lines) + "\n"


def host_files(profile: Profile) -> dict[str, str]:
    """Files to put on every GPU host, by absolute path (plus the verification script)."""
    if not applies(profile):
        return {}
    return {
        CONTAINERD_DROPIN: _CONTAINERD,
        DOCKER_DAEMON: _docker(),
        "verify-gpu-runtime.sh": _verify(profile),
        BOOTSTRAP: bootstrap_script(),
        CLOUD_INIT: cloud_init(),
    }


def applies(profile: Profile) -> bool:
    return any(p.kind == PoolKind.STATIC and p.is_gpu for p in profile.pools)


def render(profile: Profile) -> list[dict[str, Any]]:
    if not applies(profile):
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                "labels": dict(MANAGED_BY),
                "annotations": {
                    "kgpu.dev/containerd-dropin": CONTAINERD_DROPIN,
                    "kgpu.dev/docker-daemon": DOCKER_DAEMON,
                },
            },
            "data": {
                "99-nvidia.toml": _CONTAINERD,
                "daemon.json": _docker(),
                "verify-gpu-runtime.sh": _verify(profile),
                BOOTSTRAP: bootstrap_script(),
            },
        }
    ]
