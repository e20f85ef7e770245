"""The NVIDIA device plugin DaemonSet (k8s-device-plugin v0.20.x), scoped to the profile's GPU pools.

Based on the upstream static manifest (``deployments/static/nvidia-device-plugin.yml`` at v0.20.0: same
image, names, security context and kubelet socket mount). Two changes make it agree with the profile:

- tolerations: upstream's ``nvidia.com/gpu`` Exists and ``CriticalAddonsOnly``, plus one for every taint of
  every pool that needs the plugin, so a pool tainted with anything else (``ray.io/node-type=worker``)
  still gets its GPUs advertised;
- required node affinity: one term per pool (its labels), each excluding nodes labelled
  ``kgpu.dev/device-plugin: builtin``. Bottlerocket NVIDIA images run the plugin themselves; a second one
  would fight over the kubelet socket, so those pools carry that label and are left out. TKE super nodes
  expose ``nvidia.com/gpu`` without a plugin and run no DaemonSets.

Time-slicing and MIG use the plugin's config file (``CONFIG_FILE``), from a ConfigMap.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.render import (
    DEVICE_PLUGIN_BUILTIN,
    DEVICE_PLUGIN_LABEL,
    EKSCTL_GROUP_LABEL,
    GPU_RESOURCE,
    MANAGED_BY,
    gpu_pools_needing_plugin,
    group_names,
    pool_selector,
    tolerations,
    yamltext,
)

NAME = "nvidia-device-plugin-daemonset"
NAMESPACE = "kube-system"
POD_LABEL = {"name": "nvidia-device-plugin-ds"}
CONFIG_NAME = "nvidia-device-plugin-config"
CONFIG_PATH = "/etc/nvidia-device-plugin"
UPSTREAM_TOLERATIONS: list[dict[str, str]] = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
]


def _covered(tol: dict[str, str], by: list[dict[str, str]]) -> bool:
    for other in by:
        if other == tol:
            return True
        same_key = other.get("operator") == "Exists" and other.get("key") == tol.get("key")
        if same_key and (not other.get("effect") or other.get("effect") == tol.get("effect")):
            return True
    return False


def plugin_tolerations(profile: Profile) -> list[dict[str, str]]:
    out = [dict(t) for t in UPSTREAM_TOLERATIONS]
    extra: list[dict[str, str]] = []
    for pool in gpu_pools_needing_plugin(profile):
        for tol in tolerations(pool):
            if not _covered(tol, out + extra):
                extra.append(tol)
    extra.sort(key=lambda t: (t["key"], t.get("value", ""), t.get("effect", "")))
    return out + extra


def _term(profile: Profile, pool: Pool, *, exclude_builtin: bool = True) -> dict[str, Any]:
    exprs: list[dict[str, Any]] = []
    selector = pool_selector(pool)
    for key, value in selector.items():
        exprs.append({"key": key, "operator": "In", "values": [value]})
    if not selector:
        if pool.kind == PoolKind.STATIC:
            exprs.append(
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [n.name for n in pool.nodes]}
            )
        else:
            exprs.append({"key": EKSCTL_GROUP_LABEL, "operator": "In", "values": group_names(profile, pool)})
    if exclude_builtin:
        exprs.append({"key": DEVICE_PLUGIN_LABEL, "operator": "NotIn", "values": [DEVICE_PLUGIN_BUILTIN]})
    return {"matchExpressions": exprs}


def _node_gpu_pools(profile: Profile) -> list[Pool]:
    """GPU pools made of real nodes (TKE super nodes are virtual and run no DaemonSets)."""
    return [p for p in profile.gpu_pools if p.kind != PoolKind.TKE_SUPERNODE]


def node_selector_terms(profile: Profile, *, include_builtin: bool = False) -> list[dict[str, Any]]:
    """Node selector terms (ORed) for GPU nodes.

    By default exactly the nodes that need the plugin DaemonSet; ``include_builtin`` adds the pools whose
    AMI has the plugin built in (what a GPU exporter DaemonSet wants: every real GPU node).
    """
    pools = _node_gpu_pools(profile) if include_builtin else gpu_pools_needing_plugin(profile)
    terms: list[dict[str, Any]] = []
    for pool in pools:
        term = _term(profile, pool, exclude_builtin=not include_builtin)
        if term not in terms:
            terms.append(term)
    return terms


def gpu_tolerations(profile: Profile) -> list[dict[str, str]]:
    """Tolerations for every taint of every real GPU pool (for GPU DaemonSets such as an exporter)."""
    out = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    for pool in _node_gpu_pools(profile):
        for tol in tolerations(pool):
            if not _covered(tol, out):
                out.append(tol)
    return out[:1] + sorted(out[1:], key=lambda t: (t["key"], t.get("value", ""), t.get("effect", "")))


def plugin_config(profile: Profile) -> dict[str, Any] | None:
    dp = profile.device_plugin
    if dp.strategy == "none":
        return None
    config: dict[str, Any] = {"version": "v1"}
    if dp.strategy == "mig":
        config["flags"] = {"migStrategy": dp.mig_strategy}
    else:
        config["flags"] = {"migStrategy": "none"}
        config["sharing"] = {
            "timeSlicing": {"resources": [{"name": GPU_RESOURCE, "replicas": dp.time_slicing_replicas}]}
        }
    return config


SHARED_CONFIG_DIR = "/available-configs"
SHARED_CONFIG_FILE = "/config/config.yaml"
SERVICE_ACCOUNT = "nvidia-device-plugin"


def shared_configs(profile: Profile) -> dict[str, dict[str, Any]] | None:
    """Per-node configs (the helm chart's ``config.map``): ``default`` plus one key per shared pool, chosen on
    each node by its ``nvidia.com/device-plugin.config`` label; None when no pool shares its GPUs."""
    if not any(p.sharing is not None for p in profile.pools):
        return None
    from kgpu.model.sharing import configs

    out = {"default": plugin_config(profile) or {"version": "v1", "flags": {"migStrategy": "none"}}}
    for key, cfg in configs(profile).items():
        if key != "default":
            out[key] = cfg.as_plugin_config()
    return out


def _config_manager(name: str, oneshot: bool, image: str) -> dict[str, Any]:
    """The plugin image's config-manager (the helm chart's init container and sidecar): it copies the key
    the node's label names into the plugin's config file, and on a label change signals the plugin."""
    env = [
        {"name": "ONESHOT", "value": "true" if oneshot else "false"},
        {"name": "KUBECONFIG", "value": ""},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NODE_LABEL", "value": "nvidia.com/device-plugin.config"},
        {"name": "CONFIG_FILE_SRCDIR", "value": SHARED_CONFIG_DIR},
        {"name": "CONFIG_FILE_DST", "value": SHARED_CONFIG_FILE},
        {"name": "DEFAULT_CONFIG", "value": "default"},
        {"name": "FALLBACK_STRATEGIES", "value": "named,single"},
        {"name": "SEND_SIGNAL", "value": "false" if oneshot else "true"},
        {"name": "SIGNAL", "value": "" if oneshot else "1"},
        {"name": "PROCESS_TO_SIGNAL", "value": "" if oneshot else "nvidia-device-plugin"},
    ]
    return {
        "image": image,
        "name": name,
        "command": ["config-manager"],
        "env": env,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "available-configs", "mountPath": SHARED_CONFIG_DIR},
            {"name": "config", "mountPath": "/config"},
        ],
    }


def _rbac(labels: dict[str, str]) -> list[dict[str, Any]]:
    """config-manager reads its node's labels: a service account allowed to get, list and watch nodes."""
    meta = {"name": SERVICE_ACCOUNT, "labels": dict(labels)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "namespace": NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": dict(meta),
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": dict(meta),
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": SERVICE_ACCOUNT,
            },
        },
    ]


def render(profile: Profile) -> list[dict[str, Any]]:
    if not gpu_pools_needing_plugin(profile):
        return []
    docs: list[dict[str, Any]] = []
    config = plugin_config(profile)
    shared = shared_configs(profile)
    labels = {"app.kubernetes.io/name": "nvidia-device-plugin", **MANAGED_BY}
    container: dict[str, Any] = {
        "image": f"nvcr.io/nvidia/k8s-device-plugin:{profile.device_plugin.version}",
        "name": "nvidia-device-plugin-ctr",
        "env": [],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "kubelet-device-plugins-dir", "mountPath": "/var/lib/kubelet/device-plugins"}
        ],
    }
    volumes: list[dict[str, Any]] = [
        {
            "name": "kubelet-device-plugins-dir",
            "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"},
        }
    ]
    pod_extra: dict[str, Any] = {}
    if shared is not None:
        image = container["image"]
        docs.extend(_rbac(labels))
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CONFIG_NAME, "namespace": NAMESPACE, "labels": dict(labels)},
                "data": {key: yamltext.dump(cfg) for key, cfg in shared.items()},
            }
        )
        container["env"] = [{"name": "CONFIG_FILE", "value": SHARED_CONFIG_FILE}]
        container["volumeMounts"].append({"name": "config", "mountPath": "/config"})
        volumes.append({"name": "available-configs", "configMap": {"name": CONFIG_NAME}})
        volumes.append({"name": "config", "emptyDir": {}})
        pod_extra = {
            "serviceAccountName": SERVICE_ACCOUNT,
            "shareProcessNamespace": True,
            "initContainers": [_config_manager("nvidia-device-plugin-init", True, image)],
        }
        sidecar = _config_manager("nvidia-device-plugin-sidecar", False, image)
    elif config is not None:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CONFIG_NAME, "namespace": NAMESPACE, "labels": dict(labels)},
                "data": {"config.yaml": yamltext.dump(config)},
            }
        )
        container["env"] = [{"name": "CONFIG_FILE", "value": f"{CONFIG_PATH}/config.yaml"}]
        container["volumeMounts"].append({"name": "config", "mountPath": CONFIG_PATH, "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": CONFIG_NAME}})
    excluded = sorted(
        p.name for p in profile.gpu_pools if p.device_plugin_builtin and p.device_plugin != "daemonset"
    )
    annotations = {"kgpu.dev/excluded-pools": ",".join(excluded)} if excluded else {}
    meta: dict[str, Any] = {"name": NAME, "namespace": NAMESPACE, "labels": dict(labels)}
    if annotations:
        meta["annotations"] = annotations
    docs.append(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta,
            "spec": {
                "selector": {"matchLabels": dict(POD_LABEL)},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": dict(POD_LABEL)},
                    "spec": {
                        "tolerations": plugin_tolerations(profile),
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": node_selector_terms(profile)
                                }
                            }
                        },
                        "priorityClassName": "system-node-critical",
                        **pod_extra,
                        "containers": [container, sidecar] if shared is not None else [container],
                        "volumes": volumes,
                    },
                },
            },
        }
    )
    return docs


def notes(profile: Profile) -> list[str]:
    out: list[str] = []
    for pool in profile.gpu_pools:
        if pool.kind == PoolKind.TKE_SUPERNODE:
            out.append(
                f"pool {pool.name}: TKE super nodes expose nvidia.com/gpu themselves and run no DaemonSets; no plugin."
            )
        elif pool.device_plugin_builtin and pool.device_plugin != "daemonset":
            out.append(
                f"pool {pool.name}: Bottlerocket NVIDIA runs the device plugin built in; the DaemonSet stays off "
                f"its nodes (label {DEVICE_PLUGIN_LABEL}={DEVICE_PLUGIN_BUILTIN}) so two plugins never share the kubelet socket."
            )
        elif pool.device_plugin == "none":
            out.append(f"pool {pool.name}: device plugin disabled in the profile (devicePlugin: none).")
    if not gpu_pools_needing_plugin(profile):
        out.append("No GPU pool needs the device-plugin DaemonSet: nothing to apply.")
    return out


# --- Helm values for NVIDIA's chart -----------------------------------------------------------------------

CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
CHART_VALUES_FILE = "nvidia-device-plugin.helm-values.yaml"  # the chart's values.yaml at v0.20.0 (SOURCES.md)


def chart_values(profile: Profile) -> list[dict[str, Any]]:
    """Values for NVIDIA's ``nvidia-device-plugin`` Helm chart (seed 002: "生产建议用helm部署") that give the
    chart's DaemonSet what :func:`render` gives kgpu's: the same image tag, tolerations and required node
    affinity (the chart's default affinity, NFD's ``pci-10de.present`` label, is replaced by the pools'
    terms), and the sharing configs as the chart's ``config.map`` with ``default`` as ``config.default``
    (the chart then runs the same config-manager, keyed by the ``nvidia.com/device-plugin.config`` label).
    Every key is one of the chart's own (``kgpu render --validate`` checks them against its values.yaml)."""
    if not gpu_pools_needing_plugin(profile):
        return []
    values: dict[str, Any] = {
        "image": {
            "repository": "nvcr.io/nvidia/k8s-device-plugin",
            "tag": profile.device_plugin.version,
        },
        "tolerations": plugin_tolerations(profile),
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": node_selector_terms(profile)
                }
            }
        },
    }
    shared = shared_configs(profile)
    single = plugin_config(profile)
    configs = shared if shared is not None else ({"default": single} if single is not None else None)
    if configs is not None:
        values["config"] = {"map": {k: yamltext.dump(v) for k, v in configs.items()}, "default": "default"}
    return [values]


def chart_notes(profile: Profile) -> list[str]:
    chart = profile.device_plugin.version.removeprefix("v")
    return [
        f"Helm values for NVIDIA's nvidia-device-plugin chart {chart} (instead of device-plugin.yaml, never both:",
        "two plugins fight over the kubelet socket):",
        f"  helm repo add nvdp {CHART_REPO} && helm repo update",
        f"  helm upgrade -i nvdp nvdp/nvidia-device-plugin --namespace {NAMESPACE} --version {chart} "
        "-f device-plugin-chart-values.yaml",
        *notes(profile),
    ]
