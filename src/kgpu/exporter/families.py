"""One collection's readings as Prometheus metric families, built fresh on every scrape.

nvidia_gpu_exporter's ``nvidia_smi_*`` names (the GPU gauges, the energy counter, the info series, MIG
devices, processes, XID errors, the pod holding each GPU, GPM activity), the collection's own health, and,
with ``--metrics dcgm`` or ``all``, the DCGM exporter's names with its labels. ``GpuFamilies`` is the
exposing half of :class:`kgpu.exporter.collector.GpuCollector`, which it is mixed into: it reads the
collector's options, XID watcher, pod-resources client, stats and host name, declared here.
``ExporterStats`` are the counters kept across scrapes that the health families serve.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from kgpu.exporter.metric_tables import (
    ACTIVITY_GAUGES,
    DCGM_GAUGES,
    DCGM_LABELS,
    DCGM_MIG_LABELS,
    DCGM_PROF_GAUGES,
    GPU_GAUGES,
    GPU_INFO_LABELS,
    CollectorOptions,
    P,
)
from kgpu.exporter.podresources import PodResources
from kgpu.exporter.readings import GpuReading
from kgpu.exporter.xid import XID_TEXT, XidWatcher


@dataclass
class ExporterStats:
    """Counters the exporter keeps across scrapes (everything else is read fresh)."""

    failed_collections: int = 0
    scrape_timeouts: int = 0
    last_success: bool = True
    last_error: str = ""
    last_duration: float = 0.0
    last_success_time: float = 0.0  # unix time of the last successful collection (0: none yet)
    last_return_code: int = 0  # NVML's return code of the last collection (0 success, -1 no NVML status)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _gi_profile(profile: str) -> str:
    """A GPU instance's profile from its MIG device's: ``1c.3g.40gb`` (one compute slice of it) -> ``3g.40gb``."""
    head, _, rest = profile.partition(".")
    return rest if rest and head.endswith("c") and head[:-1].isdigit() else profile


class GpuFamilies:
    """:class:`GpuReading` values -> metric families (mixed into the collector)."""

    options: CollectorOptions
    xid: XidWatcher | None
    pods: PodResources | None
    stats: ExporterStats
    hostname: str

    def _families(self, readings: list[GpuReading]) -> list[Metric]:
        out: list[Metric] = []
        gauges = {
            key: GaugeMetricFamily(P + key, help_, labels=["uuid"]) for key, help_ in GPU_GAUGES.items()
        }
        energy = CounterMetricFamily(
            P + "energy_joules",
            "Energy the GPU consumed since the driver was loaded (NVML total energy consumption) [J]",
            labels=["uuid"],
        )
        info = GaugeMetricFamily(
            P + "gpu_info",
            "A metric with a constant '1' value labeled by gpu " + ", ".join(GPU_INFO_LABELS) + ".",
            labels=list(GPU_INFO_LABELS),
        )
        energy_sample = energy.name + "_total"
        for r in readings:
            info.add_metric([r.device.info_labels[k] for k in GPU_INFO_LABELS], 1.0)
            # Samples are appended directly, all of one GPU sharing one label dict: add_metric would build a
            # dict per sample, the largest cost of a collection after NVML itself.
            labels = {"uuid": r.device.uuid}
            for key, value in r.values.items():
                if key == "energy_joules_total":
                    energy.samples.append(Sample(energy_sample, labels, value))
                else:
                    family = gauges[key]
                    family.samples.append(Sample(family.name, labels, value))
        out.append(info)
        out.extend(g for g in gauges.values() if g.samples)
        if energy.samples:
            out.append(energy)
        if self.options.mig:
            out.extend(self._mig_families(readings))
        if self.options.processes:
            out.extend(self._process_families(readings))
        if self.xid is not None:
            out.extend(self._xid_families())
        if self.options.pods and self.pods is not None:
            out.extend(self._pod_families(readings))
        out.extend(self._activity_families(readings))
        return out

    def _activity_families(self, readings: list[GpuReading]) -> list[Metric]:
        gauges = {
            key: GaugeMetricFamily(P + key, help_, labels=["uuid"]) for key, help_ in ACTIVITY_GAUGES.items()
        }
        for r in readings:
            for key, value in r.activity.gpu.items():
                gauges[key].add_metric([r.device.uuid], value)
        return [g for g in gauges.values() if g.samples]

    def _mig_families(self, readings: list[GpuReading]) -> list[Metric]:
        info = GaugeMetricFamily(
            P + "mig_info",
            "A metric with a constant '1' value for each MIG device, labeled by its parent GPU and profile.",
            labels=["uuid", "gpu_instance_id", "compute_instance_id", "mig_uuid", "profile"],
        )
        used = GaugeMetricFamily(
            P + "mig_memory_used_bytes", "MIG device memory used [bytes]", labels=["uuid", "gpu_instance_id"]
        )
        total = GaugeMetricFamily(
            P + "mig_memory_total_bytes",
            "MIG device memory total [bytes]",
            labels=["uuid", "gpu_instance_id"],
        )
        activity = {
            key: GaugeMetricFamily(
                P + "mig_" + key,
                help_ + ", of one MIG GPU instance",
                labels=["uuid", "gpu_instance_id"],
            )
            for key, help_ in ACTIVITY_GAUGES.items()
        }
        for r in readings:
            for m in r.migs:
                gi = m["gpu_instance_id"]
                info.add_metric(
                    [r.device.uuid, gi, m["compute_instance_id"], m["mig_uuid"], m["profile"]], 1.0
                )
                if m["used"] is not None:
                    used.add_metric([r.device.uuid, gi], m["used"])
                    total.add_metric([r.device.uuid, gi], m["total"])
            for gi_id, values in r.activity.instances.items():
                for key, value in values.items():
                    activity[key].add_metric([r.device.uuid, str(gi_id)], value)
        return [f for f in (info, used, total, *activity.values()) if f.samples]

    def _process_families(self, readings: list[GpuReading]) -> list[Metric]:
        apps = GaugeMetricFamily(
            P + "compute_apps", "Number of processes with a compute context on the GPU.", labels=["uuid"]
        )
        app_info = GaugeMetricFamily(
            P + "compute_app_info",
            "A metric with a constant '1' value labeled by the identity of a process with a compute context on a GPU.",
            labels=["pid", "process_name", "uuid"],
        )
        app_mem = GaugeMetricFamily(
            P + "compute_app_used_memory_bytes",
            "GPU memory used by the process. Absent when the driver cannot report it.",
            labels=["pid", "process_name", "uuid"],
        )
        ok = True
        for r in readings:
            ok = ok and r.processes_ok
            if not r.processes_ok:
                continue
            apps.add_metric([r.device.uuid], float(len(r.processes)))
            for pid, name, used in r.processes:
                app_info.add_metric([str(pid), name, r.device.uuid], 1.0)
                if used is not None:
                    app_mem.add_metric([str(pid), name, r.device.uuid], float(used))
        success = GaugeMetricFamily(
            P + "compute_apps_last_collect_success",
            "Whether the most recent per-process collection succeeded (1) or not (0)",
            value=1.0 if ok and readings else 0.0,
        )
        return [apps, app_info, app_mem, success]

    def _xid_families(self) -> list[Metric]:
        assert self.xid is not None
        snap = self.xid.snapshot()
        total = CounterMetricFamily(
            P + "xid_errors",
            "XID errors NVML reported since the exporter started, by XID code.",
            labels=["uuid", "xid"],
        )
        for (uuid, xid), n in sorted(snap.counts.items()):
            total.add_metric([uuid, str(xid)], float(n))
        last = GaugeMetricFamily(
            P + "xid_last_timestamp_seconds",
            "Unix time of the most recent XID error on the GPU, by XID code.",
            labels=["uuid", "xid"],
        )
        for (uuid, xid), ts in sorted(snap.last_timestamp.items()):
            last.add_metric([uuid, str(xid)], ts)
        return [total, last]

    def _pod_families(self, readings: list[GpuReading]) -> list[Metric]:
        assert self.pods is not None
        mapping = self.pods.mapping()
        fam = GaugeMetricFamily(
            P + "gpu_pod_info",
            "A metric with a constant '1' value for each container holding the GPU (kubelet pod-resources); "
            "join on uuid to label GPU series by pod.",
            labels=["uuid", "mig_uuid", "namespace", "pod", "container", "resource"],
        )
        for r in readings:
            for ref in mapping.get(r.device.uuid, []):
                fam.add_metric([r.device.uuid, "", ref.namespace, ref.pod, ref.container, ref.resource], 1.0)
            for m in r.migs:
                for ref in mapping.get(m["mig_uuid"].lower(), []):
                    fam.add_metric(
                        [r.device.uuid, m["mig_uuid"], ref.namespace, ref.pod, ref.container, ref.resource],
                        1.0,
                    )
        return [fam] if fam.samples else []

    def _health_families(self) -> list[Metric]:
        s = self.stats
        with s.lock:
            success, failed, timeouts, duration, success_time, code = (
                s.last_success,
                s.failed_collections,
                s.scrape_timeouts,
                s.last_duration,
                s.last_success_time,
                s.last_return_code,
            )
        return [
            GaugeMetricFamily(
                P + "last_collect_success",
                "Whether the most recent collection succeeded (1) or not (0)",
                value=1.0 if success else 0.0,
            ),
            GaugeMetricFamily(  # nvidia_gpu_exporter's nvidia-smi exit code; last_collect_success's twin
                P + "command_exit_code",
                "Exit code of the most recent collection: 0 succeeded, 1 failed (the nvidia-smi-compatible twin "
                "of nvidia_smi_last_collect_success)",
                value=0.0 if success else 1.0,
            ),
            CounterMetricFamily(P + "failed_scrapes", "Number of failed collections", value=float(failed)),
            # nvidia_gpu_exporter's collection health (docs/METRICS.md there), its NVML backend's status code
            GaugeMetricFamily(
                P + "last_collect_success_timestamp_seconds",
                "Unix timestamp of the most recent successful collection",
                value=success_time,
            ),
            GaugeMetricFamily(
                P + "last_collect_duration_seconds", "Duration of the most recent collection", value=duration
            ),
            GaugeMetricFamily(
                P + "nvml_return_code",
                "NVML's return code of the most recent collection: 0 succeeded, -1 no NVML status",
                value=float(code),
            ),
            CounterMetricFamily(
                "kgpu_exporter_scrape_timeouts",
                "Scrapes answered 503 because collection exceeded the per-scrape timeout",
                value=float(timeouts),
            ),
            GaugeMetricFamily(
                "kgpu_exporter_collect_duration_seconds",
                "Time the most recent NVML collection took",
                value=duration,
            ),
        ]

    def _dcgm_families(self, readings: list[GpuReading]) -> list[Metric]:
        with_pods = self.options.pods and self.pods is not None
        mapping = self.pods.mapping() if with_pods and self.pods is not None else {}
        labels = list(DCGM_LABELS) + (["namespace", "pod", "container"] if with_pods else [])
        gauges = {
            name: GaugeMetricFamily(name, help_, labels=labels) for name, (_, _, help_) in DCGM_GAUGES.items()
        }
        # dcgm-exporter types this a counter but names it without ``_total``; prometheus_client would add the
        # suffix to a counter family, so it is served as a gauge: queries do not see the type.
        energy = GaugeMetricFamily(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "Total energy consumption since boot (in mJ).",
            labels=labels,
        )
        # dcgm-exporter labels the last XID with its code and meaning (err_code, err_msg), which its users'
        # alerts select on: DCGM_FI_DEV_XID_ERRORS{err_code=~"48|79|..."} (NVIDIA/dcgm-exporter#309)
        xid_gauge = GaugeMetricFamily(
            "DCGM_FI_DEV_XID_ERRORS",
            "Value of the last XID error encountered.",
            labels=[*labels, "err_code", "err_msg"],
        )
        # Profiling (GPM) series of MIG GPU instances carry dcgm-exporter's GPU_I_PROFILE/GPU_I_ID; whole-GPU
        # series leave them empty, which Prometheus reads as absent, as dcgm-exporter has them.
        with_gi = any(r.activity.instances for r in readings)
        prof_labels = (
            list(DCGM_LABELS) + (list(DCGM_MIG_LABELS) if with_gi else []) + labels[len(DCGM_LABELS) :]
        )
        prof = {
            name: GaugeMetricFamily(name, help_, labels=prof_labels)
            for name, (_, help_) in DCGM_PROF_GAUGES.items()
        }

        def pod_values(*uuids: str) -> list[str]:
            if not with_pods:
                return []
            refs = next((refs for u in uuids if (refs := mapping.get(u.lower(), []))), [])
            return [refs[0].namespace, refs[0].pod, refs[0].container] if refs else ["", "", ""]

        last_xid = self.xid.snapshot().last_xid if self.xid is not None else {}
        for r in readings:
            d = r.device
            ident = [
                str(d.index),
                d.raw_uuid,
                d.info_labels["pci_bus_id"],
                f"nvidia{d.index}",
                d.name,
                self.hostname,
                d.info_labels["driver_version"],
            ]
            vals = ident + pod_values(d.uuid)
            for name, (key, factor, _) in DCGM_GAUGES.items():
                if key in r.values:
                    gauges[name].add_metric(vals, r.values[key] * factor)
            if "energy_joules_total" in r.values:
                energy.add_metric(vals, r.values["energy_joules_total"] * 1000.0)
            code = last_xid.get(d.uuid, 0)
            xid_gauge.add_metric([*vals, str(code), XID_TEXT.get(code, "")], float(code))
            gpu_vals = ident + (["", ""] if with_gi else []) + pod_values(d.uuid)
            for name, (key, _) in DCGM_PROF_GAUGES.items():
                if key in r.activity.gpu:
                    prof[name].add_metric(gpu_vals, r.activity.gpu[key])
            for gi_id, values in r.activity.instances.items():
                migs = [m for m in r.migs if m["gpu_instance_id"] == str(gi_id)]
                profile = _gi_profile(migs[0]["profile"]) if migs else ""
                gi_vals = [*ident, profile, str(gi_id), *pod_values(*(m["mig_uuid"] for m in migs))]
                for name, (key, _) in DCGM_PROF_GAUGES.items():
                    if key in values:
                        prof[name].add_metric(gi_vals, values[key])
        out: list[Metric] = [g for g in gauges.values() if g.samples]
        out += [f for f in (energy, xid_gauge, *prof.values()) if f.samples]
        return out
