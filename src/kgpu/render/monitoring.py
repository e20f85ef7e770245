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
"""

from __future__ import annotations

import copy
from typing import Any

from kgpu.errors import InputError
from kgpu.model.profile import EXPORTER_PORT
from kgpu.render import MANAGED_BY, yamltext

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


def _panel(
    pid: int, title: str, exprs: list[tuple[str, str]], unit: str, x: int, y: int, kind: str = "timeseries"
) -> dict[str, Any]:
    return {
        "id": pid,
        "type": kind,
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def grafana_dashboard() -> dict[str, Any]:
    """A Grafana dashboard over kgpu's metric names (importable JSON model)."""
    sel = 'instance=~"$instance", uuid=~"$gpu"'
    legend = "{{instance}} {{uuid}}"
    specs: list[tuple[str, list[tuple[str, str]], str]] = [
        ("GPU utilization", [(f"nvidia_smi_utilization_gpu_ratio{{{sel}}}", legend)], "percentunit"),
        (
            "Memory used",
            [(f"nvidia_smi_memory_used_bytes{{{sel}}} / nvidia_smi_memory_total_bytes{{{sel}}}", legend)],
            "percentunit",
        ),
        ("Temperature", [(f"nvidia_smi_temperature_gpu{{{sel}}}", legend)], "celsius"),
        (
            "Power",
            [
                (f"nvidia_smi_power_draw_watts{{{sel}}}", "draw " + legend),
                (f"rate(nvidia_smi_energy_joules_total{{{sel}}}[$__rate_interval])", "energy rate " + legend),
            ],
            "watt",
        ),
        (
            "Clocks",
            [
                (f"nvidia_smi_clocks_current_sm_clock_hz{{{sel}}}", "sm " + legend),
                (f"nvidia_smi_clocks_current_memory_clock_hz{{{sel}}}", "mem " + legend),
            ],
            "hertz",
        ),
        (
            "Clock event reasons (throttling)",
            [(f"nvidia_smi_clocks_event_reasons_active{{{sel}}} > 0", legend)],
            "none",
        ),
        ("XID errors by code", [(f"nvidia_smi_xid_errors_total{{{sel}}}", "XID {{xid}} " + legend)], "none"),
        (
            "Uncorrected ECC errors",
            [(f"nvidia_smi_ecc_errors_uncorrected_volatile_total{{{sel}}}", legend)],
            "none",
        ),
        (
            "GPU by pod",
            [
                (
                    f"nvidia_smi_utilization_gpu_ratio{{{sel}}} * on(uuid, instance) group_left(namespace, pod, container) "
                    f"nvidia_smi_gpu_pod_info{{{sel}}}",
                    "{{namespace}}/{{pod}} {{uuid}}",
                )
            ],
            "percentunit",
        ),
        (
            "Exporter health",
            [('nvidia_smi_last_collect_success{instance=~"$instance"}', "{{instance}}")],
            "none",
        ),
    ]
    panels = [
        _panel(i + 1, title, exprs, unit, (i % 2) * 12, (i // 2) * 8)
        for i, (title, exprs, unit) in enumerate(specs)
    ]
    return {
        "title": "kgpu GPU metrics",
        "uid": "kgpu-gpu",
        "tags": ["kgpu", "gpu", "nvidia"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {
                    "name": "instance",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": "label_values(nvidia_smi_index, instance)",
                    "includeAll": True,
                    "multi": True,
                },
                {
                    "name": "gpu",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": 'label_values(nvidia_smi_index{instance=~"$instance"}, uuid)',
                    "includeAll": True,
                    "multi": True,
                },
            ]
        },
        "panels": panels,
    }


def dashboard_configmap(*, namespace: str = "kgpu-system") -> dict[str, Any]:
    """The dashboard for Grafana's sidecar (``grafana_dashboard: "1"``), as kube-prometheus-stack loads it."""
    import json

    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kgpu-gpu-dashboard",
            "namespace": namespace,
            "labels": {"grafana_dashboard": "1", **MANAGED_BY},
        },
        "data": {"kgpu-gpu.json": json.dumps(grafana_dashboard(), indent=1, sort_keys=True)},
    }


GUIDE_DASHBOARD = "grafana-14574.json"  # packaged unchanged; sources in render/dashboards/SOURCES.md
DEFAULT_DATASOURCE_UID = "prometheus"  # the uid kube-prometheus-stack's Grafana gives its Prometheus


def wire_datasource(dashboard: dict[str, Any], uid: str) -> dict[str, Any]:
    """A dashboard JSON model whose Prometheus data source is ``uid``, loadable as it is by Grafana's
    dashboard sidecar or provisioning (neither resolves import-time inputs: a left ``${DS_PROMETHEUS}``
    shows as "Datasource ${DS_PROMETHEUS} was not found").

    Both ways dashboards name their data source are wired: ``__inputs`` of type datasource (a dashboard
    exported for sharing externally: each ``${DS_X}`` becomes ``uid``, the inputs go), and template
    variables of type datasource (14574's ``datasource``: it starts on ``uid``, still switchable)."""
    import json

    text = json.dumps(dashboard)
    for entry in dashboard.get("__inputs") or []:
        if isinstance(entry, dict) and entry.get("type") == "datasource" and entry.get("name"):
            text = text.replace("${" + str(entry["name"]) + "}", uid)
    out: dict[str, Any] = json.loads(text)
    out.pop("__inputs", None)
    for var in (out.get("templating") or {}).get("list") or []:
        if isinstance(var, dict) and var.get("type") == "datasource" and var.get("query") == "prometheus":
            var["current"] = {"selected": True, "text": uid, "value": uid}
    out["id"] = None
    return out


def guide_dashboard(datasource_uid: str = DEFAULT_DATASOURCE_UID) -> dict[str, Any]:
    """Grafana dashboard 14574 ("Nvidia GPU Metrics", seed 002's), unchanged but for its data source: it
    charts nvidia_gpu_exporter's metric names, which kgpu's exporter serves."""
    import json
    from importlib import resources

    raw = (resources.files("kgpu.render") / "dashboards" / GUIDE_DASHBOARD).read_text(encoding="utf-8")
    return wire_datasource(json.loads(raw), datasource_uid)


def guide_dashboard_configmap(*, namespace: str = "kgpu-system", datasource_uid: str) -> dict[str, Any]:
    """Dashboard 14574 beside kgpu's own, for the same sidecar (compact JSON: it stays far below
    ``kubectl apply``'s 256 KiB annotation limit)."""
    import json

    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kgpu-gpu-dashboard-14574",
            "namespace": namespace,
            "labels": {"grafana_dashboard": "1", **MANAGED_BY},
            "annotations": {"kgpu.dev/grafana-dashboard": "https://grafana.com/grafana/dashboards/14574"},
        },
        "data": {
            "nvidia-gpu-metrics-14574.json": json.dumps(
                guide_dashboard(datasource_uid), separators=(",", ":"), sort_keys=True, ensure_ascii=False
            )
        },
    }


def datasource_configmap(*, namespace: str, uid: str, url: str) -> dict[str, Any]:
    """A Grafana data source for the Prometheus at ``url`` with the uid the dashboards use, for the
    grafana chart's datasource sidecar (label ``grafana_datasource: "1"``) or /etc/grafana/provisioning."""
    doc = {
        "apiVersion": 1,
        "datasources": [
            {"name": "Prometheus (kgpu)", "type": "prometheus", "uid": uid, "access": "proxy", "url": url}
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kgpu-grafana-datasource",
            "namespace": namespace,
            "labels": {"grafana_datasource": "1", **MANAGED_BY},
        },
        "data": {"kgpu-datasource.yaml": yamltext.dump(doc)},
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
