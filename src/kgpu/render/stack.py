"""The whole stack: which targets a profile has, their documents in apply order, and the files they make.

``render_stack`` is the library entry point (target -> documents); ``render_files`` turns that into the
exact text ``kgpu render`` writes (one YAML file per target, headed by a comment naming the profile and
kgpu's version, plus any notes the target has), and is what the golden-file tests compare. Both are pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kgpu import __version__
from kgpu.errors import InputError
from kgpu.model.profile import Autoscaler, PoolKind, Profile
from kgpu.render import (
    addons,
    deviceplugin,
    dra,
    eksctl,
    gpu_pools_needing_plugin,
    karpenter,
    kuberay,
    kueue,
    onprem,
    rbac,
    storage,
    workloads,
    yamltext,
)
from kgpu.render.sort import apply_order

TARGETS: tuple[str, ...] = (
    "karpenter",
    "karpenter-chart",
    "interruption-queue",
    "eksctl",
    "cluster-autoscaler",
    "node-termination-handler",
    "device-plugin",
    "device-plugin-chart",
    "dra-driver",
    "dra-driver-chart",
    "storage",
    "workloads",
    "kuberay",
    "kuberay-operator",
    "kueue",
    "monitoring",
    "onprem",
    "rbac",
)
# Targets whose documents are Helm values, not Kubernetes objects: never apply-sorted or schema-checked.
# (and the CloudFormation template of the interruption queue).
VALUES_TARGETS = frozenset(
    {
        "cluster-autoscaler",
        "karpenter-chart",
        "node-termination-handler",
        "kuberay-operator",
        "interruption-queue",
        "device-plugin-chart",
        "dra-driver-chart",
    }
)
# Targets that start GPU pods rather than build the cluster (example workloads and the verification pods):
# `kgpu render` leaves them out of standard output and kustomization.yaml unless asked (`--target workloads`,
# `--with-workloads`), so that `kgpu render | kubectl apply -f -` sets up infrastructure only.
ON_REQUEST: dict[str, str] = {
    "workloads": "the example GPU workloads and test pods (per GPU pool: a training Job, an inference "
    "Deployment + Service, two verification pods)",
}
FILE_NAMES = {t: f"{t}-values.yaml" if t in VALUES_TARGETS else f"{t}.yaml" for t in TARGETS}
FILE_NAMES["interruption-queue"] = "interruption-queue.cfn.yaml"

Renderer = Callable[[Profile], list[dict[str, Any]]]


def _monitoring_module() -> Any | None:
    try:
        from kgpu.render import monitoring
    except ImportError:
        return None
    return monitoring if hasattr(monitoring, "render_monitoring") else None


def _render_monitoring(profile: Profile) -> list[dict[str, Any]]:
    module = _monitoring_module()
    if module is None:
        return []
    static_targets = [
        {"targets": [n.address], "labels": {"node": n.name, **({"gpu": n.gpu_name} if n.gpu_name else {})}}
        for p in profile.pools
        if p.kind == PoolKind.STATIC
        for n in p.nodes
        if n.address and n.gpus
    ]
    docs: list[dict[str, Any]] = module.render_monitoring(
        namespace=profile.monitoring.namespace,
        image=profile.monitoring.exporter_image,
        gpu_node_selector_terms=deviceplugin.node_selector_terms(profile, include_builtin=True),
        tolerations=deviceplugin.gpu_tolerations(profile),
        static_targets=static_targets,
        job=profile.monitoring.job_name,
        run_as_root=profile.monitoring.exporter_run_as_root,
        prometheus_operator=profile.monitoring.prometheus_operator,
        datasource_uid=profile.monitoring.grafana_datasource_uid,
        prometheus_url=profile.monitoring.prometheus_url,
    )
    return docs


RENDERERS: dict[str, Renderer] = {
    "karpenter": karpenter.render,
    "karpenter-chart": addons.karpenter_chart_values,
    "interruption-queue": addons.interruption_queue,
    "eksctl": eksctl.render,
    "cluster-autoscaler": eksctl.render_autoscaler_values,
    "node-termination-handler": addons.node_termination_handler_values,
    "device-plugin": deviceplugin.render,
    "device-plugin-chart": deviceplugin.chart_values,
    "dra-driver": dra.render,
    "dra-driver-chart": dra.chart_values,
    "storage": storage.render,
    "workloads": workloads.render,
    "kuberay": kuberay.render,
    "kuberay-operator": addons.kuberay_operator_values,
    "kueue": kueue.render,
    "monitoring": _render_monitoring,
    "onprem": onprem.render,
    "rbac": rbac.render,
}


def applicable_targets(profile: Profile) -> list[str]:
    """The targets this profile has something to say about, in TARGETS order."""
    kinds = {p.kind for p in profile.pools}
    has_gpu = bool(profile.gpu_pools)
    wanted = {
        "karpenter": PoolKind.KARPENTER in kinds,
        "karpenter-chart": PoolKind.KARPENTER in kinds,
        "interruption-queue": PoolKind.KARPENTER in kinds and profile.spot_interruptions.enabled,
        "eksctl": PoolKind.NODE_GROUP in kinds,
        "node-termination-handler": bool(addons.spot_self_managed_groups(profile))
        and profile.spot_interruptions.enabled,
        "cluster-autoscaler": PoolKind.NODE_GROUP in kinds
        and profile.autoscaler == Autoscaler.CLUSTER_AUTOSCALER,
        "device-plugin": has_gpu and profile.device_plugin.install == "manifest",
        "device-plugin-chart": has_plugin_chart(profile) and profile.device_plugin.install == "helm",
        "dra-driver": bool(dra.dra_pools(profile)),
        "dra-driver-chart": bool(dra.dra_pools(profile)),
        "storage": storage.applies(profile),
        "workloads": has_gpu,
        "kuberay": profile.kuberay is not None,
        "kuberay-operator": profile.kuberay is not None,
        "kueue": kueue.applies(profile),
        "monitoring": profile.monitoring.enabled and has_gpu and _monitoring_module() is not None,
        "onprem": onprem.applies(profile),
        "rbac": True,
    }
    return [t for t in TARGETS if wanted[t]]


def select_targets(profile: Profile, targets: Iterable[str] | None) -> list[str]:
    available = applicable_targets(profile)
    if targets is None:
        return available
    if has_plugin_chart(profile) and "device-plugin-chart" not in available:
        available = [t for t in TARGETS if t in available or t == "device-plugin-chart"]  # by name only
    chosen: list[str] = []
    for t in targets:
        if t not in TARGETS:
            import difflib

            close = difflib.get_close_matches(t, TARGETS, n=1)
            hint = f"did you mean {close[0]}?" if close else f"one of {', '.join(TARGETS)}"
            raise InputError(f"unknown target {t!r}", where="--target", hint=hint)
        if t not in available:
            raise InputError(
                f"target {t!r} does not apply to profile {profile.metadata.name}",
                where="--target",
                hint=f"this profile renders {', '.join(available)}",
            )
        if t not in chosen:
            chosen.append(t)
    return [t for t in TARGETS if t in chosen]


def render_stack(profile: Profile, targets: Iterable[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Target -> its documents in apply order (Helm values targets as rendered)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for target in select_targets(profile, targets):
        docs = RENDERERS[target](profile)
        out[target] = docs if target in VALUES_TARGETS else apply_order(docs)
    return out


def has_plugin_chart(profile: Profile) -> bool:
    """Whether the chart's values can be rendered: some pool needs the plugin (by default only with
    ``devicePlugin.install: helm``; ``--target device-plugin-chart`` asks for them by name)."""
    return bool(gpu_pools_needing_plugin(profile))


def target_notes(profile: Profile, target: str) -> list[str]:
    """Comment lines for a target's file: what was left out and why."""
    if target == "device-plugin":
        return deviceplugin.notes(profile)
    if target == "storage":
        return storage.notes(profile)
    if target == "device-plugin-chart":
        return deviceplugin.chart_notes(profile)
    if target == "dra-driver":
        return dra.notes(profile)
    if target == "dra-driver-chart":
        return dra.chart_notes(profile)
    if target == "kueue":
        return kueue.notes(profile)
    if target == "onprem":
        return [
            f"Host files (also under onprem-files/ with --output-dir DIR): {onprem.CONTAINERD_DROPIN} (containerd) or "
            f"{onprem.DOCKER_DAEMON} (docker); {onprem.BOOTSTRAP} (or {onprem.CLOUD_INIT}) sets a host up: driver, "
            "container toolkit, the drop-in; run verify-gpu-runtime.sh or `kgpu node-check` on each GPU host."
        ]
    if target == "cluster-autoscaler":
        return [
            "Helm values for the kubernetes/autoscaler cluster-autoscaler chart:",
            "  helm upgrade --install cluster-autoscaler autoscaler/cluster-autoscaler -n kube-system -f cluster-autoscaler-values.yaml",
        ]
    if target == "kuberay":
        return [
            "Needs the KubeRay operator: kuberay-operator-values.yaml (kgpu render --target kuberay-operator)."
        ]
    if target == "kuberay-operator" and profile.kuberay is not None:
        v = profile.kuberay.operator_version
        return [
            f"Helm values for the kuberay-operator chart {v} (the RayCluster CRD kgpu validates against):",
            "  helm repo add kuberay https://ray-project.github.io/kuberay-helm/",
            f"  helm upgrade --install kuberay-operator kuberay/kuberay-operator --version {v} "
            "-f kuberay-operator-values.yaml",
        ]
    if target == "karpenter":
        return [
            f"Extra policies for pool {p.name}'s node role: aws iam attach-role-policy --role-name "
            f"{p.role or 'KarpenterNodeRole-' + profile.cluster.name} --policy-arn {arn}"
            for p in profile.pools
            if p.kind == PoolKind.KARPENTER and not p.instance_profile
            for arn in p.iam_policy_arns
        ]
    if target == "karpenter-chart":
        return [
            "Helm values for the Karpenter chart (merge with your install's values):",
            "  helm upgrade --install karpenter oci://public.ecr.aws/karpenter/karpenter -n kube-system "
            "--reuse-values -f karpenter-chart-values.yaml",
        ]
    if target == "interruption-queue":
        return [
            "CloudFormation for Karpenter's interruption queue (SQS + EventBridge rules):",
            f"  aws cloudformation deploy --stack-name karpenter-interruption-{profile.cluster.name} "
            "--template-file interruption-queue.cfn.yaml",
            "The Karpenter controller's role needs sqs:DeleteMessage, sqs:GetQueueUrl, sqs:ReceiveMessage on it.",
        ]
    if target == "node-termination-handler":
        groups = ", ".join(addons.spot_self_managed_groups(profile))
        return [
            f"Helm values for aws-node-termination-handler (IMDS mode) for the spot node groups {groups}:",
            "  helm upgrade --install aws-node-termination-handler oci://public.ecr.aws/aws-ec2/helm/"
            "aws-node-termination-handler -n kube-system -f node-termination-handler-values.yaml",
        ]
    if target == "eksctl":
        return ["eksctl create cluster -f eksctl.yaml  (or: eksctl create nodegroup -f eksctl.yaml)"]
    return []


def dump_documents(docs: list[dict[str, Any]]) -> str:
    return yamltext.dump_documents(docs)


def file_header(profile: Profile, target: str, notes: list[str]) -> str:
    lines = [
        f"# kgpu {__version__}: target {target}, rendered from profile {profile.metadata.name}.",
        "# Generated: edit the profile and run `kgpu render` again instead of editing this file.",
    ]
    lines += [f"# {n}" for n in notes]
    return "\n".join(lines) + "\n"


def render_files(profile: Profile, targets: Iterable[str] | None = None) -> dict[str, str]:
    """File name -> text, exactly as ``kgpu render --output-dir DIR`` writes them."""
    stack = render_stack(profile, targets)
    files: dict[str, str] = {}
    for target, docs in stack.items():
        files[FILE_NAMES[target]] = file_header(
            profile, target, target_notes(profile, target)
        ) + dump_documents(docs)
    return files
