"""What ``kgpu node-check`` tells the user to run, for the host it checks: the driver and the container toolkit
with the host's own package manager (apt on Debian and Ubuntu, dnf or yum on the RHEL family, from
``/etc/os-release`` under the checked root), and containerd's nvidia runtime for the containerd major version
the host runs first (1.x replaces a whole plugin section on import; 2.x merges a drop-in at config.toml's
version). The commands are NVIDIA's install guides' (driver, container toolkit) and seed 002's.
"""

from __future__ import annotations

from pathlib import Path

from kgpu.render import onprem

DEBIAN, RHEL = "debian", "rhel"

_DRIVER = {
    DEBIAN: "  sudo apt-get install -y nvidia-driver   # Ubuntu: sudo ubuntu-drivers install",
    RHEL: "  sudo dnf install -y nvidia-driver       # or yum where there is no dnf",
}
_TOOLKIT = {
    DEBIAN: """  curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | \\
    sudo gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
  curl -s -L https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list | \\
    sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g' | \\
    sudo tee /etc/apt/sources.list.d/nvidia-container-toolkit.list
  sudo apt-get update && sudo apt-get install -y nvidia-container-toolkit""",
    RHEL: """  curl -s -L https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo | \\
    sudo tee /etc/yum.repos.d/nvidia-container-toolkit.repo
  yum-config-manager --enable nvidia-container-toolkit-experimental
  yum install -y nvidia-container-toolkit""",
}


def os_family(root: Path) -> str:
    """``debian`` or ``rhel`` from ``/etc/os-release``'s ID and ID_LIKE under ``root``; "" when unknown."""
    try:
        text = (root / "etc/os-release").read_text(errors="replace")[:65536]
    except OSError:
        return ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            fields[key.strip()] = value.strip().strip("\"'").lower()
    words = set(fields.get("ID", "").split()) | set(fields.get("ID_LIKE", "").split())
    if words & {"debian", "ubuntu"}:
        return DEBIAN
    if words & {"rhel", "fedora", "centos", "rocky", "almalinux", "amzn"}:
        return RHEL
    return ""


def _for(family: str, table: dict[str, str]) -> str:
    if family in table:
        return table[family]
    return f"Debian, Ubuntu:\n{table[DEBIAN]}\nRHEL family:\n{table[RHEL]}"


def fix_driver(family: str = "") -> str:
    """How to install and load the driver on a host of ``family`` (both families when unknown)."""
    return (
        "Install the NVIDIA driver for this GPU and load it (nvidia-smi must list the GPUs), e.g.\n"
        + _for(family, _DRIVER)
        + "\n(or the .run installer from nvidia.com); then reboot or modprobe nvidia.\n"
        "The NVIDIA device plugin needs driver >= 384.81."
    )


FIX_DRIVER = fix_driver()


def fix_toolkit(family: str = "") -> str:
    """How to install nvidia-container-toolkit on a host of ``family`` (NVIDIA's install guide)."""
    return "Install nvidia-container-toolkit (>= 1.7.0):\n" + _for(family, _TOOLKIT)


def fix_containerd(config_version: int = 3, major: int = 0) -> str:
    """How to make nvidia containerd's default runtime, with the drop-in for a config.toml at
    ``config_version`` (2, 3 or 4; the version 3 one for anything else); the host's own containerd major
    version (``major``: 1 or 2, 0 when unknown) first."""
    version = config_version if config_version in (2, 3, 4) else 3
    dropin = "".join(
        f"  {line}\n" if line else "\n" for line in onprem.containerd_dropin(version).splitlines()
    )
    two = (
        f"""containerd 2.x: write {onprem.CONTAINERD_DROPIN} at the version of /etc/containerd/config.toml
(version {version} here) exactly as `kgpu render --target onprem` renders it (its bootstrap-gpu-host.sh
does every step of this, idempotently):
"""
        + dropin
        + f"""and import it from /etc/containerd/config.toml (top level, before any table):
  {onprem.IMPORTS_LINE}
(A drop-in at config.toml's own version is read right by every containerd 2.x. Under a version 2
 config.toml a version 3 drop-in makes containerd 2.0-2.2 ignore the host's version 2 CRI settings (sandbox
 image, registry config_path, runc SystemdCgroup) without a word, and containerd 2.3.0-2.3.4 refuse to start.)
"""
    )
    one = """containerd 1.x replaces a whole plugin section on import, so a drop-in with only the nvidia runtime wipes
the host's CRI settings (sandbox image, registry config_path, runc options): run the rendered
bootstrap-gpu-host.sh (it writes the whole CRI section from `containerd config dump`, nvidia added), or
edit config.toml in place with
  nvidia-ctk runtime configure --runtime=containerd --set-as-default
"""
    return (one + two if major == 1 else two + one) + "Then:\n  systemctl restart containerd"


FIX_CONTAINERD = fix_containerd(3)

FIX_CRI = """Docker's containerd.io package ships a config.toml that disables the CRI plugin; write containerd's own
default config first (kubeadm's instructions), then make nvidia the default runtime as below:
  containerd config default | sudo tee /etc/containerd/config.toml

"""

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
