"""On-premises GPU hosts: make ``nvidia`` the default container runtime (containerd or docker).

Output is host configuration, not cluster objects, so it is rendered twice from one source: as
:func:`host_files` (path -> content, written by ``kgpu render --output-dir DIR`` under ``onprem-files/``) and as a
ConfigMap holding the same files, which validates like every other document and can be mounted by a node
set-up DaemonSet. containerd reads imported files differently by release, so the containerd file is per
release and per ``config.toml`` version (the releases' readings are in :mod:`kgpu.exporter.containerd_config`,
measured with ``containerd config dump`` of containerd 2.1.4, 2.3.4 and 2.4.2):

- containerd 2.x merges an import's plugin tables into the main config (containerd#9982), so the drop-in
  ``/etc/containerd/conf.d/99-nvidia.toml`` carries only the nvidia runtime, at ``config.toml``'s own
  version (2, 3 or 4): containerd 2.0-2.2 take the merged version from the last file and migrate version 2
  settings only when it is 2, so a version 3 drop-in under a version 2 ``config.toml`` silently drops the
  host's sandbox image, registry ``config_path`` and runc ``SystemdCgroup``; 2.3.0-2.3.4 refuse to start
  with a drop-in whose version is higher than ``config.toml``'s; 2.3.5 and later read any. A drop-in at the
  same version is read right by all of them. The rendered static file is the version 3 one (containerd 2.x's
  own ``config.toml`` version up to 2.2; 2.3 and later migrate it under a version 4 one); the bootstrap
  script writes the one for the ``config.toml`` it finds.
- containerd 1.x replaces a plugin's whole section on import (containerd#5837), so a drop-in with only the
  nvidia runtime wipes the host's own CRI settings. On 1.x the bootstrap script writes the whole CRI section
  instead, taken from the host's own ``containerd config dump`` with nvidia added: what ``nvidia-ctk runtime
  configure`` does by editing the main file.

``SystemdCgroup = true`` matches kubelet's default systemd cgroup driver: a runtime that disagrees with
kubelet restarts pods at random (on 1.x the nvidia runtime takes runc's setting).

The host set-up seed 002 does by hand is rendered too: ``bootstrap-gpu-host.sh`` installs the NVIDIA driver
and the NVIDIA container toolkit (Ubuntu/Debian with apt, RHEL-family with dnf, or with yum where there is no dnf
as on seed 002's CentOS 7 host: the guide's own yum commands, from NVIDIA's repositories)
and writes the containerd configuration above for the containerd it finds (or lets ``nvidia-ctk`` set docker's default runtime). It is
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

_NVIDIA_RUNTIME = """[{table}.containerd]
  default_runtime_name = "nvidia"

[{table}.containerd.runtimes.nvidia]
  privileged_without_host_devices = false
  runtime_type = "io.containerd.runc.v2"

[{table}.containerd.runtimes.nvidia.options]
  BinaryName = "{runtime}"
  SystemdCgroup = true
"""

CRI_V2 = '"io.containerd.grpc.v1.cri"'  # the CRI plugin in config version 2 (containerd 1.x; 2.x migrates it)
CRI_V3 = "'io.containerd.cri.v1.runtime'"  # config versions 3 and 4: the CRI runtime half (containerd 2.x)


def containerd_dropin(version: int = 3) -> str:
    """The drop-in for containerd 2.x under a ``config.toml`` at config ``version``, exactly as written on
    hosts (and expected by ``kgpu node-check``).

    containerd 2.x merges an imported file's plugin tables into the main config's (containerd#9982), so the
    drop-in carries only the nvidia runtime. Config versions 3 and 4 name the CRI runtime plugin
    ``io.containerd.cri.v1.runtime`` (containerd's docs/PLUGINS.md and docs/cri/config.md at v2.0.0; version
    4 moves only server settings); version 2 names it ``io.containerd.grpc.v1.cri``. The version must be
    ``config.toml``'s: a higher one makes containerd 2.0-2.2 skip the migration of the host's version 2
    settings and 2.3.0-2.3.4 refuse to start; a lower one under a version 3 ``config.toml`` is migrated by
    2.0-2.2 only into keys that file leaves unset.

    Not for containerd 1.x: 1.x replaces a whole plugin section on import, so this file would wipe the
    host's own CRI settings; the bootstrap script writes the whole CRI section there instead
    (:func:`bootstrap_script`)."""
    if version not in (2, 3, 4):
        raise ValueError(f"containerd config version {version}: 2, 3 or 4")
    table = f"plugins.{CRI_V2 if version == 2 else CRI_V3}"
    under = {
        2: "says version = 2",
        3: "says version = 3 (or 4: containerd 2.3 and later migrate this file)",
        4: "says version = 4 (containerd 2.3 and later)",
    }[version]
    head = (
        f"# {CONTAINERD_DROPIN}: nvidia as containerd 2.x's default runtime (config version {version}).\n"
        f"# Only where /etc/containerd/config.toml {under}:\n"
        "# under a config.toml of another version containerd 2.0-2.2 ignore the host's own CRI settings or\n"
        "# this file, and 2.3.0-2.3.4 do not start (bootstrap-gpu-host.sh writes the matching one).\n"
        f"# config.toml must contain: {IMPORTS_LINE}\n"
        "# Apply with: systemctl restart containerd\n"
        f"version = {version}\n\n"
    )
    return head + _NVIDIA_RUNTIME.format(table=table, runtime=RUNTIME)


BOOTSTRAP = "bootstrap-gpu-host.sh"
CLOUD_INIT = "cloud-init.yaml"
BOOTSTRAP_PATH = "/usr/local/sbin/kgpu-bootstrap-gpu-host.sh"
DRIVER_BRANCH = "570"  # NVIDIA's production branch; DRIVER_BRANCH=... overrides it on the host
IMPORTS_LINE = 'imports = ["/etc/containerd/conf.d/*.toml"]'


def bootstrap_script() -> str:
    """A bash script that prepares a GPU host: driver, container toolkit, nvidia as the default runtime."""
    return (
        _BOOTSTRAP.replace("@DRIVER_BRANCH@", DRIVER_BRANCH)
        .replace("@DROPIN_V3@", containerd_dropin(3))
        .replace("@DROPIN_V2@", containerd_dropin(2))
        .replace("@DROPIN_V4@", containerd_dropin(4))
        .replace("@DROPIN@", CONTAINERD_DROPIN)
        .replace("@IMPORTS@", IMPORTS_LINE)
        .replace("@RUNTIME@", RUNTIME)
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


_BOOTSTRAP = r"""#!/usr/bin/env bash
# kgpu: prepare a GPU host for Kubernetes (seed 002's manual steps): the NVIDIA driver, the NVIDIA container
# toolkit, and nvidia as the container runtime's default. Ubuntu/Debian (apt) and RHEL-family hosts (RHEL,
# Rocky, AlmaLinux, CentOS, Fedora, Amazon Linux; dnf, or yum where there is no dnf). Idempotent: run it
# again at any time.
#   sudo ./bootstrap-gpu-host.sh                 # containerd (or docker when only docker is installed)
#   sudo DRIVER_BRANCH=550 ./bootstrap-gpu-host.sh
#   sudo NVIDIA_TOOLKIT_EXPERIMENTAL=1 ./bootstrap-gpu-host.sh   # seed 002's experimental toolkit channel
# A fresh driver install may need a reboot before nvidia-smi works; run the script again afterwards.
# Check the result with `kgpu node-check`.
set -euo pipefail

ROOT="${KGPU_ROOT:-}"
DRIVER_BRANCH="${DRIVER_BRANCH:-@DRIVER_BRANCH@}"
NVIDIA_TOOLKIT_EXPERIMENTAL="${NVIDIA_TOOLKIT_EXPERIMENTAL:-0}"  # 1: NVIDIA's experimental toolkit channel
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

# The directory of NVIDIA's CUDA repository for this host: rhel<major> for RHEL and its rebuilds,
# fedora<version>, amzn2023 for Amazon Linux 2023, and rhel7 for Amazon Linux 2 (an EL7 derivative that
# NVIDIA publishes no repository of its own for).
cuda_repo_distro() {
    local id version
    # shellcheck disable=SC1091
    id="$(. "${ROOT}/etc/os-release"; echo "${ID:-}")"
    # shellcheck disable=SC1091
    version="$(. "${ROOT}/etc/os-release"; echo "${VERSION_ID:-}")"
    case "${id}" in
        amzn) if [ "${version%%.*}" = 2 ]; then echo rhel7; else echo "amzn${version%%.*}"; fi ;;
        fedora) echo "fedora${version%%.*}" ;;
        *) echo "rhel${version%%.*}" ;;
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
        local distro repo
        distro="$(cuda_repo_distro)"
        repo="https://developer.download.nvidia.com/compute/cuda/repos/${distro}/$(uname -m)/cuda-${distro}.repo"
        if [ "$(rpm_tool)" = dnf ]; then
            dnf install -y -q dnf-plugins-core
            dnf config-manager --add-repo "${repo}"
            dnf module install -y -q "nvidia-driver:${DRIVER_BRANCH}-dkms"
        else
            # yum-only hosts (RHEL/CentOS 7, seed 002's host): no module streams, and NVIDIA's RHEL 7
            # repository has no per-branch DKMS flavor, only latest-dkms
            yum install -y -q yum-utils
            yum-config-manager --add-repo "${repo}"
            yum install -y -q nvidia-driver-latest-dkms
        fi
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
        local keyring=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
        mkdir -p "${ROOT}/usr/share/keyrings" "${ROOT}/etc/apt/sources.list.d"
        curl -fsSL "${NVIDIA_REPO}/gpgkey" | gpg --batch --yes --dearmor -o "${ROOT}${keyring}"
        curl -fsSL "${NVIDIA_REPO}/deb/nvidia-container-toolkit.list" |
            sed "s#deb https://#deb [signed-by=${keyring}] https://#g" > "${ROOT}/etc/apt/sources.list.d/nvidia-container-toolkit.list"
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-container-toolkit
    else
        # seed 002's commands: NVIDIA's repository file, the experimental channel on request, then the package
        local pm
        pm="$(rpm_tool)"
        mkdir -p "${ROOT}/etc/yum.repos.d"
        curl -fsSL "${NVIDIA_REPO}/rpm/nvidia-container-toolkit.repo" > "${ROOT}/etc/yum.repos.d/nvidia-container-toolkit.repo"
        if [ "${NVIDIA_TOOLKIT_EXPERIMENTAL}" = 1 ]; then
            if [ "${pm}" = dnf ]; then
                dnf config-manager --enable nvidia-container-toolkit-experimental
            else
                yum-config-manager --enable nvidia-container-toolkit-experimental
            fi
        fi
        "${pm}" install -y -q nvidia-container-toolkit
    fi
}

# RHEL-family package manager: dnf where it exists (RHEL 8+, Fedora, Amazon Linux 2023), else yum
# (RHEL/CentOS 7, Amazon Linux 2).
rpm_tool() {
    if command -v dnf >/dev/null 2>&1; then
        echo dnf
    elif command -v yum >/dev/null 2>&1; then
        echo yum
    else
        die "neither dnf nor yum is installed"
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

# containerd's release from `containerd --version`, as "major minor" (minor empty when not printed):
#   containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3     (Debian bookworm)
#   containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da       (Docker's packages)
#   containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376
containerd_release() {
    containerd --version 2>/dev/null | awk 'NR == 1 { v = $3; sub(/^v/, "", v); split(v, p, "."); sub(/[^0-9].*/, "", p[2]); if (p[1] ~ /^[0-9]+$/) print p[1], p[2] }'
}

# The top-level `version = N` of a containerd config file (containerd reads a file without one as
# version 1); a `version` key inside a table is another setting.
config_version() {
    awk -F= '/^[[:space:]]*\[/ { exit } /^[[:space:]]*version[[:space:]]*=/ { v = $2; sub(/#.*/, "", v); gsub(/[[:space:]"]/, "", v); print v; found = 1; exit } END { if (!found) print 1 }' "$1"
}

# Whether config.toml disables containerd's CRI plugin (the kubelet's way in), and whether that is all it
# does: Docker's containerd.io package ships a file with `disabled_plugins = ["cri"]` and comments only.
cri_disabled() {
    grep -Eq '^[[:space:]]*disabled_plugins[[:space:]]*=.*"(cri|io\.containerd\.grpc\.v1\.cri)"' "$1"
}
only_disables_cri() {
    awk '/^[[:space:]]*(#|$)/ { next } /^[[:space:]]*disabled_plugins[[:space:]]*=[[:space:]]*\[[[:space:]]*"(cri|io\.containerd\.grpc\.v1\.cri)"[[:space:]]*\][[:space:]]*(#.*)?$/ { cri = 1; next } { other = 1 } END { exit !(cri && !other) }' "$1"
}

# containerd 1.x replaces a whole plugin section with an imported file's (containerd#5837; merging came
# with 2.0): a drop-in with only the nvidia runtime would wipe the host's CRI settings (sandbox image,
# registry config_path, runc options). So on 1.x the drop-in is the whole CRI section as this host's
# containerd reads its configuration without the drop-in (`containerd config dump`), with nvidia added as
# the default runtime; the nvidia runtime takes runc's SystemdCgroup. Run the script again after changing
# the CRI section of config.toml.
cri_section_1x() {
    local config="$1" dropin="${ROOT}${DROPIN}" saved dump rc=0
    saved="$(mktemp)"
    if [ -f "${dropin}" ]; then mv "${dropin}" "${saved}"; fi
    dump="$(containerd --config "${config}" config dump 2>/dev/null)" || rc=$?
    if [ -s "${saved}" ]; then mv "${saved}" "${dropin}"; else rm -f "${saved}"; fi
    [ "${rc}" -eq 0 ] || return "${rc}"
    printf '# %s: written by kgpu-bootstrap for containerd 1.x (config version 2).\n' "${DROPIN}"
    printf '# containerd 1.x replaces a whole plugin section on import, so this is the whole CRI section as\n'
    printf '# containerd config dump showed it without this file, with nvidia as the default runtime.\n'
    printf '# Run the bootstrap script again after changing the CRI section of config.toml.\n'
    printf 'version = 2\n\n'
    printf '%s\n' "${dump}" | awk -v binary="${RUNTIME_BINARY}" '
        function name(line,   h) { h = line; sub(/^[[:space:]]*\[+[[:space:]]*/, "", h); sub(/[[:space:]]*\]+[[:space:]]*(#.*)?$/, "", h); return h }
        function under(h, p) { return h == p || index(h, p ".") == 1 }
        BEGIN {
            cri = "plugins.\"io.containerd.grpc.v1.cri\""; ctrd = cri ".containerd"
            nvidia = ctrd ".runtimes.nvidia"; runc = ctrd ".runtimes.runc.options"; systemd = "true"
        }
        /^[[:space:]]*\[/ {
            h = name($0); keep = under(h, cri) && !under(h, nvidia); opts = (h == runc)
            if (keep) print
            if (h == ctrd) { print "      default_runtime_name = \"nvidia\""; seen = 1 }
            next
        }
        h == ctrd && $1 == "default_runtime_name" { next }
        opts && $1 == "SystemdCgroup" && ($3 == "true" || $3 == "false") { systemd = $3 }
        keep { print }
        END {
            if (!seen) { print ""; print "  [" ctrd "]"; print "      default_runtime_name = \"nvidia\"" }
            print ""
            print "        [" nvidia "]"
            print "          privileged_without_host_devices = false"
            print "          runtime_type = \"io.containerd.runc.v2\""
            print ""
            print "          [" nvidia ".options]"
            print "            BinaryName = \"" binary "\""
            print "            SystemdCgroup = " systemd
        }'
}

dropin_v2() {
    cat <<'KGPU_DROPIN'
@DROPIN_V2@KGPU_DROPIN
}

dropin_v3() {
    cat <<'KGPU_DROPIN'
@DROPIN_V3@KGPU_DROPIN
}

dropin_v4() {
    cat <<'KGPU_DROPIN'
@DROPIN_V4@KGPU_DROPIN
}

# containerd 2.x: the drop-in at config.toml's own version. containerd 2.0-2.2 take the merged version from
# the last file and migrate version 2 settings only when it is 2 (a version 3 drop-in under a version 2
# config.toml silently drops the host's CRI settings); 2.3.0-2.3.4 refuse to start with a drop-in whose
# version is higher than config.toml's; 2.3.5 and later read any. The same version suits them all.
dropin_2x() {
    local config="$1" minor="$2" version
    version="$(config_version "${config}")"
    case "${version}" in
        2) dropin_v2 ;;
        3) dropin_v3 ;;
        4)
            if [ -n "${minor}" ] && [ "${minor}" -lt 3 ]; then
                die "${config} is config version 4, which containerd 2.${minor} does not read (2.3 and later do)"
            fi
            dropin_v4
            ;;
        *) die "${config} is config version ${version}: containerd 2.x with kgpu needs version = 2, 3 or 4 (\`containerd config default\` writes one)" ;;
    esac
}

configure_containerd() {
    local config="${ROOT}/etc/containerd/config.toml" changed="" major minor release content
    release="$(containerd_release)"
    major="${release%% *}"
    minor="${release#* }"
    case "${major}" in
        1 | 2) ;;
        *) die "cannot tell containerd's version from \`containerd --version\` (containerd 1.x and 2.x are supported)" ;;
    esac
    if [ -s "${config}" ] && cri_disabled "${config}"; then
        only_disables_cri "${config}" ||
            die "${config} disables containerd's CRI plugin (disabled_plugins), which the kubelet needs: remove \"cri\" from disabled_plugins, then run again"
        # Docker's containerd.io default: nothing else in the file, so it becomes `containerd config default`
        # (CRI on, at the release's own config version), the original kept beside it
        local fresh
        fresh="$(mktemp)"
        if ! containerd config default > "${fresh}" 2>/dev/null || [ ! -s "${fresh}" ]; then
            rm -f "${fresh}"
            die "\`containerd config default\` failed: write ${config} with the CRI plugin enabled, then run again"
        fi
        cp -p "${config}" "${config}.kgpu-orig"
        install -m 0644 "${fresh}" "${config}"
        rm -f "${fresh}"
        log "containerd: ${config} only disabled the CRI plugin (Docker's containerd.io default): replaced by \`containerd config default\`, the original kept as ${config}.kgpu-orig"
        changed=yes
    fi
    if [ ! -s "${config}" ]; then
        mkdir -p "$(dirname "${config}")"
        # the version `containerd config default` writes: 2 on 1.x, 3 on 2.0-2.2, 4 on 2.3 and later
        # (3 when the minor version is not known: every 2.x reads it)
        local fresh=3
        if [ "${major}" = 1 ]; then
            fresh=2
        elif [ -n "${minor}" ] && [ "${minor}" -ge 3 ]; then
            fresh=4
        fi
        printf 'version = %s\n%s\n' "${fresh}" "${IMPORTS}" > "${config}"
        changed=yes
    elif ! grep -qF '/etc/containerd/conf.d/*.toml' "${config}"; then
        local tmp empty='^[[:space:]]*imports[[:space:]]*=[[:space:]]*\[[[:space:]]*\][[:space:]]*$'
        tmp="$(mktemp)"
        if grep -q "${empty}" "${config}"; then
            # `containerd config default` (1.x, 2.0 and 2.1) writes `imports = []`: that line becomes ours
            awk -v line="${IMPORTS}" '!done && /^[[:space:]]*imports[[:space:]]*=[[:space:]]*\[[[:space:]]*\][[:space:]]*$/ { print line; done = 1; next } { print }' "${config}" > "${tmp}"
        elif grep -q '^[[:space:]]*imports[[:space:]]*=' "${config}"; then
            rm -f "${tmp}"
            die "${config} has an imports line without /etc/containerd/conf.d/*.toml: add it, then run again"
        else
            { printf '%s\n' "${IMPORTS}"; cat "${config}"; } > "${tmp}"
        fi
        install -m 0644 "${tmp}" "${config}"
        rm -f "${tmp}"
        changed=yes
    fi
    if [ "${major}" = 1 ]; then
        local version
        version="$(config_version "${config}")"
        [ "${version}" = 2 ] || die "${config} is config version ${version}: containerd 1.x with kgpu needs version = 2"
        content="$(cri_section_1x "${config}")" || die "\`containerd --config ${config} config dump\` failed: fix ${config}, then run again"
    else
        content="$(dropin_2x "${config}" "${minor}")" || exit 1
    fi
    if [ -n "$(printf '%s\n' "${content}" | write_if_changed "${ROOT}${DROPIN}")" ]; then
        changed=yes
    fi
    if [ -n "${changed}" ]; then
        log "containerd ${major}.x: nvidia is the default runtime (${DROPIN}); restarting containerd"
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
        '  # expect: default_runtime_name = "nvidia" and BinaryName = "' + RUNTIME + "\", and the host's own",
        "  # sandbox image, registry config_path and SystemdCgroup as config.toml sets them",
        "  containerd config dump | grep -E 'default_runtime_name|BinaryName|SystemdCgroup|sandbox|config_path'",
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
        CONTAINERD_DROPIN: containerd_dropin(),
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
                "99-nvidia.toml": containerd_dropin(),
                "daemon.json": _docker(),
                "verify-gpu-runtime.sh": _verify(profile),
                BOOTSTRAP: bootstrap_script(),
            },
        }
    ]
