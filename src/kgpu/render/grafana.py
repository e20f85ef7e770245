"""Grafana for kgpu's GPU exporter: kgpu's own dashboard, dashboard 14574 (seed 002's "Nvidia GPU Metrics",
packaged unchanged in ``render/dashboards``) with its data source wired, the ConfigMaps Grafana's dashboard
sidecar loads, and a Prometheus data source for the grafana chart's datasource sidecar.

Both dashboards chart nvidia_gpu_exporter's metric names, which kgpu's exporter serves. Pure: returns
dicts. :mod:`kgpu.render.monitoring` renders them with the rest of the monitoring stack.
"""

from __future__ import annotations

from typing import Any

from kgpu.render import MANAGED_BY, yamltext


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
