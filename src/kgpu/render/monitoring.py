"""Monitoring for kgpu's GPU exporter: alert rules, scrape config, DaemonSet, Service(Monitor), dashboard.

With prometheus-operator (``monitoring.prometheusOperator``, the default) the scrape and the rules are a
ServiceMonitor and a PrometheusRule; without it those kinds do not exist in the cluster, and the same
scrape job (DNS discovery of the headless exporter Service) and rules come as plain
``prometheus.yml`` and rules files in a ConfigMap.

Pure: returns dicts; the caller writes files or applies objects.

The alert rules fix seed 002's: its "GPU load" rule compares ``nvidia_smi_utilization_gpu_ratio`` (0..1)
with 90 and can never fire, and its "GPU memory" rule watches memory *bandwidth* utilisation
(``utilization_memory_ratio``), not memory in use. Here memory is used/total bytes, utilisation is a ratio
against 0.9, and the exporter's health, XID errors and uncorrectable ECC errors are covered too. The XID rule
watches ``nvidia_smi_xid_last_timestamp_seconds`` rather than ``increase()`` of the counter, because a
counter series that appears with its first event has no earlier sample for ``increase()`` to compare with.

The static scrape config spells ``labels`` right (seed 002 writes ``lables``, which Prometheus rejects).

Both scrape paths give the series the same ``job`` label, the profile's ``monitoring.jobName``, which is what
the alert rules select: the static job's ``job_name``, and for prometheus-operator the ServiceMonitor's
``jobLabel`` pointing at the Service's ``kgpu.dev/job`` label (otherwise the job would be the Service name).
On-prem, where Prometheus scrapes hosts at ``address:9835`` (seed 002's static targets), the DaemonSet runs
in the host's network namespace with ``hostPort: 9835``, so that the address the scrape config names is the
exporter itself and not a closed port on the host.

The Grafana side (dashboards, data source) is :mod:`kgpu.render.grafana`; ``render_monitoring`` renders
both.
"""

from __future__ import annotations

import copy
from typing import Any

from kgpu.errors import InputError
from kgpu.model.profile_nodes import EXPORTER_PORT
from kgpu.render import MANAGED_BY, yamltext
from kgpu.render.grafana import (
    DEFAULT_DATASOURCE_UID,
    dashboard_configmap,
    datasource_configmap,
    guide_dashboard_configmap,
)

NAME = "kgpu-exporter"
JOB = NAME
PORT = EXPORTER_PORT
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
APP_LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "gpu-exporter"}
JOB_LABEL = "kgpu.dev/job"  # the Service label whose value the ServiceMonitor uses as the job
EXPORTER_UID = 65532  # the Dockerfile's default user

# alert -> (expr template, severity, summary, description); {for_job} is filled with the job name.
ALERTS: list[dict[str, str]] = [
    {
        "alert": "GPUMemoryUsedHigh",
        "expr": "nvidia_smi_memory_used_bytes / nvidia_smi_memory_total_bytes > 0.9",
        "severity": "warning",
        "summary": "GPU memory is over 90% used",
        "description": "GPU {{ $labels.uuid }} on {{ $labels.instance }} has {{ $value | humanizePercentage }} of its memory in use.",
    },
    {
        "alert": "GPUTemperatureHigh",
        "expr": "nvidia_smi_temperature_gpu > 80",
        "severity": "critical",
        "summary": "GPU temperature is above 80 C",
        "description": "GPU {{ $labels.uuid }} on {{ $labels.instance }} is at {{ $value }} C.",
    },
    {
        "alert": "GPUUtilizationHigh",
        "expr": "nvidia_smi_utilization_gpu_ratio > 0.9",
        "severity": "warning",
        "summary": "GPU utilization is above 90%",
        "description": "GPU {{ $labels.uuid }} on {{ $labels.instance }} is {{ $value | humanizePercentage }} busy.",
    },
    {
        "alert": "GPUExporterDown",
        "expr": 'up{{job="{job}"}} == 0',
        "severity": "critical",
        "summary": "The GPU exporter cannot be scraped",
        "description": "Prometheus cannot scrape {{ $labels.instance }} (job {{ $labels.job }}).",
    },
    {
        "alert": "GPUExporterNVMLFailing",
        "expr": 'nvidia_smi_last_collect_success{{job="{job}"}} == 0',
        "severity": "critical",
        "summary": "The GPU exporter cannot read NVML",
        "description": "The exporter on {{ $labels.instance }} answers but NVML fails (GPU lost or driver not loaded).",
    },
    {
        "alert": "GPUXidErrors",
        "expr": "time() - nvidia_smi_xid_last_timestamp_seconds < 600",
        "severity": "warning",
        "summary": "The GPU reported XID errors",
        "description": "GPU {{ $labels.uuid }} on {{ $labels.instance }} reported an XID error in the last 10 minutes.",
    },
    {
        "alert": "GPUEccUncorrectedErrors",
        "expr": "nvidia_smi_ecc_errors_uncorrected_volatile_total > 0",
        "severity": "critical",
        "summary": "The GPU has uncorrectable ECC errors",
        "description": "GPU {{ $labels.uuid }} on {{ $labels.instance }} has {{ $value }} uncorrectable ECC errors since the driver loaded; drain it and reset the GPU.",
    },
]
# down/failing/ECC alerts fire quickly; load-type alerts wait out short spikes
FOR_OVERRIDES = {
    "GPUExporterDown": "2m",
    "GPUExporterNVMLFailing": "2m",
    "GPUXidErrors": "0s",
    "GPUEccUncorrectedErrors": "0s",
}


def alert_rules(*, job: str = JOB, for_: str | None = None) -> list[dict[str, Any]]:
    """The rules of the ``kgpu-gpu`` group. ``for_`` overrides every rule's ``for`` (tests use ``0s``)."""
    rules = []
    for a in ALERTS:
        rules.append(
            {
                "alert": a["alert"],
                "expr": a["expr"].format(job=job) if "{job}" in a["expr"] else a["expr"],
                "for": for_ if for_ is not None else FOR_OVERRIDES.get(a["alert"], "5m"),
                "labels": {"severity": a["severity"]},
                "annotations": {"summary": a["summary"], "description": a["description"]},
            }
        )
    return rules


def alert_rules_file(*, job: str = JOB, for_: str | None = None) -> dict[str, Any]:
    """A plain Prometheus rules file (``rule_files:``), as a dict."""
    return {"groups": [{"name": "kgpu-gpu", "rules": alert_rules(job=job, for_=for_)}]}


def prometheus_rule(*, namespace: str = "kgpu-system", job: str = JOB) -> dict[str, Any]:
    """The same rules as a prometheus-operator ``PrometheusRule``."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "kgpu-gpu-alerts",
            "namespace": namespace,
            "labels": {**APP_LABELS, **MANAGED_BY},
        },
        "spec": alert_rules_file(job=job),
    }


def scrape_config(
    static_targets: list[dict[str, Any]], *, job: str = JOB, interval: str = "15s"
) -> dict[str, Any]:
    """A ``scrape_configs`` entry for on-prem hosts: ``[{"targets": ["10.0.0.5:9835"], "labels": {...}}]``."""
    configs = []
    for i, entry in enumerate(static_targets):
        where = f"static_targets[{i}]"
        if "lables" in entry:
            raise InputError("unknown key 'lables'", where=where, hint="did you mean 'labels'?")
        unknown = set(entry) - {"targets", "labels"}
        if unknown:
            raise InputError(
                f"unknown keys {sorted(unknown)}", where=where, hint="use 'targets' and 'labels'"
            )
        targets = entry.get("targets")
        if (
            not isinstance(targets, list)
            or not targets
            or not all(isinstance(t, str) and ":" in t for t in targets)
        ):
            raise InputError(
                "targets must be a non-empty list of HOST:PORT strings", where=f"{where}.targets"
            )
        item: dict[str, Any] = {"targets": list(targets)}
        labels = entry.get("labels")
        if labels:
            if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
                raise InputError("labels must map names to strings", where=f"{where}.labels")
            item["labels"] = dict(labels)
        configs.append(item)
    return {"job_name": job, "scrape_interval": interval, "static_configs": configs}


def cluster_scrape_config(
    *, namespace: str = "kgpu-system", job: str = JOB, interval: str = "15s"
) -> dict[str, Any]:
    """A ``scrape_configs`` entry that finds the exporter pods from inside the cluster without
    prometheus-operator: DNS service discovery of the headless exporter Service (one A record per ready
    pod), with the same ``job`` label as the ServiceMonitor. DNS rather than ``kubernetes_sd_configs``:
    it needs no RBAC for Prometheus, and every Prometheus build has it (Debian's, whose promtool checks
    these files in the tests, is built without Kubernetes discovery). The node's name is in the DCGM-style
    series' ``Hostname`` label; the ServiceMonitor path adds ``node`` from the pod."""
    return {
        "job_name": job,
        "scrape_interval": interval,
        "scrape_timeout": "10s",
        "dns_sd_configs": [{"names": [f"{NAME}.{namespace}.svc"], "type": "A", "port": PORT}],
    }


def prometheus_config(
    static_targets: list[dict[str, Any]],
    *,
    rule_files: list[str] | None = None,
    job: str = JOB,
    namespace: str = "kgpu-system",
) -> dict[str, Any]:
    """A whole minimal ``prometheus.yml``: :func:`scrape_config` for static targets, otherwise
    :func:`cluster_scrape_config`."""
    cfg: dict[str, Any] = {"global": {"scrape_interval": "15s", "evaluation_interval": "15s"}}
    if rule_files:
        cfg["rule_files"] = list(rule_files)
    cfg["scrape_configs"] = [
        scrape_config(static_targets, job=job)
        if static_targets
        else cluster_scrape_config(namespace=namespace, job=job)
    ]
    return cfg


RULES_FILE = "kgpu-gpu.rules.yml"


def prometheus_files(
    static_targets: list[dict[str, Any]], *, job: str = JOB, namespace: str = "kgpu-system"
) -> dict[str, str]:
    """``prometheus.yml`` and the rules file it names, as text: what a Prometheus without the operator
    loads (``promtool check config prometheus.yml`` checks both)."""
    return {
        "prometheus.yml": yamltext.dump(
            prometheus_config(static_targets, rule_files=[RULES_FILE], job=job, namespace=namespace)
        ),
        RULES_FILE: yamltext.dump(alert_rules_file(job=job)),
    }


def exporter_daemonset(
    *,
    namespace: str = "kgpu-system",
    image: str,
    gpu_node_selector_terms: list[dict[str, Any]],
    tolerations: list[dict[str, Any]],
    host_network: bool = False,
    run_as_root: bool = False,
) -> dict[str, Any]:
    """``kgpu exporter`` on every GPU node.

    ``host_network``: listen on the node's own address (``hostPort``), for scrape configs that name hosts.
    ``run_as_root``: uid 0, which the kubelet's pod-resources socket needs for pod labels; otherwise the
    image's unprivileged uid, enforced with ``runAsNonRoot``.

    No GPU is requested (that would take one from workloads): ``NVIDIA_VISIBLE_DEVICES=all`` makes the NVIDIA
    container runtime mount every GPU and the driver library, as for dcgm-exporter. No hostPID: NVML reports
    host pids either way; process names are best effort.
    """
    if not gpu_node_selector_terms:
        raise InputError("at least one node selector term is needed", where="gpu_node_selector_terms")
    port: dict[str, Any] = {"name": "metrics", "containerPort": PORT, "protocol": "TCP"}
    if host_network:
        port["hostPort"] = PORT
    identity: dict[str, Any] = (
        {"runAsUser": 0, "runAsNonRoot": False}
        if run_as_root
        else {"runAsUser": EXPORTER_UID, "runAsGroup": EXPORTER_UID, "runAsNonRoot": True}
    )
    ds: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": namespace, "labels": {**APP_LABELS, **MANAGED_BY}},
        "spec": {
            "selector": {"matchLabels": dict(APP_LABELS)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": dict(APP_LABELS)},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": copy.deepcopy(gpu_node_selector_terms)
                            }
                        }
                    },
                    "tolerations": copy.deepcopy(tolerations),
                    "containers": [
                        {
                            "name": "exporter",
                            "image": image,
                            "args": ["exporter", "--listen", f":{PORT}"],
                            "env": [
                                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
                                {
                                    "name": "NODE_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                },
                            ],
                            "ports": [port],
                            "readinessProbe": {
                                "httpGet": {"path": "/healthz", "port": "metrics"},
                                "periodSeconds": 10,
                            },
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": "metrics"},
                                "periodSeconds": 30,
                                "failureThreshold": 5,
                            },
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "64Mi"},
                                "limits": {"memory": "128Mi"},
                            },
                            "securityContext": {
                                **identity,
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "pod-resources",
                            "hostPath": {"path": POD_RESOURCES_DIR, "type": "Directory"},
                        }
                    ],
                },
            },
        },
    }
    if host_network:
        pod_spec = ds["spec"]["template"]["spec"]
        pod_spec["hostNetwork"] = True
        pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    return ds


def exporter_service(*, namespace: str = "kgpu-system", job: str = JOB) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": NAME,
            "namespace": namespace,
            "labels": {**APP_LABELS, JOB_LABEL: job, **MANAGED_BY},
        },
        "spec": {
            "clusterIP": "None",  # one endpoint per node; Prometheus scrapes each
            "selector": dict(APP_LABELS),
            "ports": [{"name": "metrics", "port": PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def service_monitor(*, namespace: str = "kgpu-system") -> dict[str, Any]:
    """Its ``job`` label is the Service's ``kgpu.dev/job`` label (``jobLabel``): the job the rules select."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": NAME, "namespace": namespace, "labels": {**APP_LABELS, **MANAGED_BY}},
        "spec": {
            "jobLabel": JOB_LABEL,
            "selector": {"matchLabels": dict(APP_LABELS)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [
                {
                    "port": "metrics",
                    "interval": "15s",
                    "scrapeTimeout": "10s",
                    "relabelings": [
                        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
                    ],
                }
            ],
        },
    }


def render_monitoring(
    *,
    namespace: str = "kgpu-system",
    image: str,
    gpu_node_selector_terms: list[dict[str, Any]],
    tolerations: list[dict[str, Any]],
    static_targets: list[dict[str, Any]],
    job: str = JOB,
    run_as_root: bool = False,
    prometheus_operator: bool = True,
    datasource_uid: str = DEFAULT_DATASOURCE_UID,
    prometheus_url: str | None = None,
) -> list[dict[str, Any]]:
    """Every Kubernetes object of the monitoring stack.

    With prometheus-operator, a ServiceMonitor and a PrometheusRule. Without it (``prometheus_operator``
    false) neither kind exists in the cluster, so none is rendered: a ConfigMap carries a plain
    ``prometheus.yml`` (the scrape job, DNS discovery of the headless exporter Service) and the rules
    file it names. With ``static_targets`` (on-prem hosts scraped at their own address), the ConfigMap's
    scrape job names those hosts, whether or not the operator runs, and the DaemonSet listens on the hosts'
    network (hostNetwork + hostPort) where those targets point.
    """
    for i, entry in enumerate(static_targets):
        for target in entry.get("targets", []):
            if isinstance(target, str) and not target.endswith(f":{PORT}"):
                raise InputError(
                    f"target {target!r} does not point at the exporter's port {PORT}",
                    where=f"static_targets[{i}].targets",
                    hint=f"the exporter DaemonSet listens on hostPort {PORT}",
                )
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": dict(MANAGED_BY)},
        },
        exporter_daemonset(
            namespace=namespace,
            image=image,
            gpu_node_selector_terms=gpu_node_selector_terms,
            tolerations=tolerations,
            host_network=bool(static_targets),
            run_as_root=run_as_root,
        ),
        exporter_service(namespace=namespace, job=job),
    ]
    if prometheus_operator:
        objs += [service_monitor(namespace=namespace), prometheus_rule(namespace=namespace, job=job)]
    objs.append(dashboard_configmap(namespace=namespace))
    objs.append(guide_dashboard_configmap(namespace=namespace, datasource_uid=datasource_uid))
    if prometheus_url:
        objs.append(datasource_configmap(namespace=namespace, uid=datasource_uid, url=prometheus_url))
    if static_targets or not prometheus_operator:
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "kgpu-prometheus-onprem" if static_targets else "kgpu-prometheus",
                    "namespace": namespace,
                    "labels": dict(MANAGED_BY),
                },
                "data": prometheus_files(static_targets, job=job, namespace=namespace),
            }
        )
    return objs
