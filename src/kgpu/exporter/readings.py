"""One collection's NVML reads: what each GPU reports, as a :class:`GpuReading` of values keyed by family
suffix, already in the units the families serve.

``GpuReader`` is the reading half of :class:`kgpu.exporter.collector.GpuCollector`, which it is mixed into:
the collector owns the NVML facade, the options and the per-GPU cache declared here. What does not change
while NVML stays initialised (PCI ids, inforom, platform and fabric info, the NVML constants resolved:
``DeviceInfo`` and its ``ReadPlan``) is read once per NVML generation; the rest on every scrape, with one
``nvmlDeviceGetFieldValues`` call per GPU for the field values and the PCIe counters. A value NVML cannot
report is absent, so its series is too.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from kgpu.exporter.gpm import GpmSampler, GpmValues
from kgpu.exporter.metric_tables import (
    _NUMBER,
    _REASON_BITS,
    _VALUE_MEMBERS,
    CLOCK_REASONS,
    ECC_LOCATIONS,
    FIELD_GAUGES,
    PCIE_COUNTER_FIELDS,
    SRAM_ECC_FIELDS,
    CollectorOptions,
)
from kgpu.exporter.nvml import Nvml, NvmlUnavailable, as_text, strip_uuid


@dataclass
class ReadPlan:
    """How one GPU's per-scrape reads go, resolved once per NVML generation (constants, call variants)."""

    fields: list[tuple[int, str, float]] = field(default_factory=list)  # FIELD_GAUGES: (id, key, factor)
    field_ids: list[int] = field(default_factory=list)
    ecc: list[tuple[tuple[Any, ...], tuple[str, ...]]] = field(default_factory=list)  # (call args, keys)
    sram: Any = None  # the SRAM ECC status struct, when the module has it
    pcie: list[tuple[int, str]] = field(default_factory=list)  # PCIE_COUNTER_FIELDS: (id, key), after fields
    fabric: tuple[str, Any] | None = None  # the fabric-info call that answers for this GPU, and its struct
    fabric_states: tuple[int, int] = (0, 3)  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, _COMPLETED


@dataclass
class DeviceInfo:
    """What does not change while NVML stays initialised; read once per NVML generation."""

    index: int
    handle: Any
    raw_uuid: str
    uuid: str
    name: str
    info_labels: dict[str, str]
    static: dict[str, float] = field(default_factory=dict)  # gauges that stay put: PCI ids, inforom, ...
    plan: ReadPlan = field(default_factory=ReadPlan)


@dataclass
class GpuReading:
    device: DeviceInfo
    values: dict[str, float]
    migs: list[dict[str, Any]] = field(default_factory=list)
    processes: list[tuple[int, str, float | None]] = field(default_factory=list)
    processes_ok: bool = True
    activity: GpmValues = field(default_factory=GpmValues)  # GPM, since the previous collection


def _na(value: Any) -> str:
    return "[N/A]" if value is None else as_text(value)


def _number(text: str) -> float | None:
    """A text field as nvidia_gpu_exporter serves it: ``"7.16"`` -> 7.16, ``"1650123456789"`` -> that; else None."""
    text = text.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


def _raw(struct: Any, name: str, size: int) -> bytes:
    """The first ``size`` bytes of a ``c_char`` field, NULs included. Reading the attribute is no good: it stops at
    a NUL, and pynvml's structs decode it to ``str`` (failing on bytes >= 0x80)."""
    offset = getattr(type(struct), name).offset
    return bytes(struct)[offset : offset + size]


def _instance_ids(migs: list[dict[str, Any]]) -> list[int]:
    """The MIG GPU instances present (several MIG devices, one per compute instance, may share one)."""
    return sorted({int(m["gpu_instance_id"]) for m in migs if m["gpu_instance_id"].isdigit()})


class GpuReader:
    """NVML -> :class:`GpuReading`, one GPU at a time (mixed into the collector)."""

    nvml: Nvml
    options: CollectorOptions
    gpm: GpmSampler | None
    _devices: dict[int, DeviceInfo]
    _devices_generation: int
    _device_count: int
    _versions: tuple[str | None, str | None]
    _lost: NvmlUnavailable | None
    _pcie_last: dict[tuple[str, str], tuple[int, int, float | None]]

    def _device_infos(self) -> list[DeviceInfo]:
        """The GPUs, read once per NVML generation. A GPU lost while being enumerated is skipped and looked for
        again on the next collection; the others stay cached (and keep their state)."""
        nv = self.nvml
        nv.ensure_init()
        if self._devices_generation != nv.generation:
            self._devices = {}
            self._device_count = nv.device_count()
            self._versions = (nv.driver_version(), nv.cuda_driver_version())
            self._devices_generation = nv.generation
        self._lost = None
        for index in range(self._device_count):
            if index not in self._devices:
                try:
                    self._devices[index] = self._device_info(index)
                except NvmlUnavailable as exc:
                    if exc.kind != "GpuIsLost":
                        raise
                    self._lost = exc
        return [self._devices[i] for i in sorted(self._devices)]

    def _device_info(self, index: int) -> DeviceInfo:
        nv = self.nvml
        driver, cuda = self._versions
        handle = nv.handle(index)
        raw_uuid = nv.uuid(handle)
        name = _na(nv.query("nvmlDeviceGetName", handle))
        pci = nv.query("nvmlDeviceGetPciInfo", handle)
        cc = nv.query("nvmlDeviceGetCudaComputeCapability", handle)
        labels = {
            "uuid": strip_uuid(raw_uuid),
            "name": name,
            "driver_model_current": "[N/A]",  # a Windows-only notion (WDDM/TCC)
            "driver_model_pending": "[N/A]",
            "vbios_version": _na(nv.query("nvmlDeviceGetVbiosVersion", handle)),
            "driver_version": _na(driver),
            "pci_bus_id": "[N/A]" if pci is None else as_text(pci.busId),
            "serial": _na(nv.query("nvmlDeviceGetSerial", handle)),
            "compute_cap": "[N/A]" if cc is None else f"{cc[0]}.{cc[1]}",
            "pci_sub_device_id": "[N/A]" if pci is None else f"0x{int(pci.pciSubSystemId):08X}",
            "index": str(index),
            "cuda_version": _na(cuda),
        }
        device = DeviceInfo(index, handle, raw_uuid, labels["uuid"], name, labels)
        self._read_static(device, pci)
        return device

    def _fill(self, fn: str, handle: Any, struct: Any) -> bool:
        """Call an NVML function that fills a struct the caller allocates (passed by reference, as the C
        function takes it); False when NVML cannot report it (NotSupported and the like, or a pynvml without
        the function). Fatal errors raise, as from :meth:`Nvml.query`."""
        nv = self.nvml
        try:
            nv.call(fn, handle, ctypes.byref(struct))
        except NvmlUnavailable:
            raise
        except (nv.const("NVMLError", Exception), AttributeError):
            return False
        return True

    def _read_static(self, d: DeviceInfo, pci: Any) -> None:
        """Read what stays put while NVML is initialised into ``d``: the ``static`` gauges, and the ``plan``
        of the per-scrape reads (NVML constants resolved, the fabric-info call this GPU answers)."""
        nv, h, s = self.nvml, d.handle, d.static

        def put(key: str, value: Any) -> None:
            if value is not None:
                s[key] = float(value)

        put("serial", _number(d.info_labels["serial"]))  # "[N/A]", or a serial with letters: absent
        if pci is not None:
            put("pci_domain", pci.domain)
            put("pci_bus", pci.bus)
            put("pci_device", pci.device)
            put("pci_device_id", pci.pciDeviceId)  # 0x233010DE: device id << 16 | vendor id, as one number
            put("pci_sub_device_id", pci.pciSubSystemId)
        ext_struct = nv.const("nvmlPciInfoExt_v1_t")
        if ext_struct is not None:
            ext = ext_struct()
            ext.version = nv.const("nvmlPciInfoExt_v1", 0x1000040)
            if self._fill("nvmlDeviceGetPciInfoExt", h, ext):
                put("pci_base_class", ext.baseClass)
                put("pci_sub_class", ext.subClass)
        for key, const, default in (
            ("inforom_oem", "NVML_INFOROM_OEM", 0),
            ("inforom_ecc", "NVML_INFOROM_ECC", 1),
        ):
            text = nv.query("nvmlDeviceGetInforomVersion", h, nv.const(const, default))
            put(key, None if text is None else _number(as_text(text)))  # "7.16" -> 7.16
        platform_struct = nv.const("c_nvmlPlatformInfo_v2_t")  # its constructor sets the version
        if platform_struct is not None:
            info = platform_struct()
            if self._fill("nvmlDeviceGetPlatformInfo", h, info):
                # nvidia-smi prints the GUID's 8 significant bytes as hex; here their number (a float: the low
                # bits of a GUID above 2**53 round)
                put("platform_gpu_fabric_guid", int.from_bytes(_raw(info, "ibGuid", 8), "big"))
                put("platform_slot_number", _raw(info, "slotNumber", 1)[0])
                put("platform_tray_index", _raw(info, "trayIndex", 1)[0])
                put("platform_host_id", _raw(info, "hostId", 1)[0])
                put("platform_module_id", _raw(info, "moduleId", 1)[0])
        gsp = nv.query("nvmlDeviceGetGspFirmwareMode", h)
        if gsp is not None:
            put("gsp_mode_current", gsp[0])
            put("gsp_mode_default", gsp[1])
        c2c = nv.query("nvmlDeviceGetC2cModeInfoV", h)
        put("c2c_mode", None if c2c is None else c2c.isC2cEnabled)
        put("accounting_buffer_size", nv.query("nvmlDeviceGetAccountingBufferSize", h))
        put("pcie_link_gen_gpumax", nv.query("nvmlDeviceGetGpuMaxPcieLinkGeneration", h))

        plan = d.plan
        plan.fields = [(int(nv.const(c, fid)), key, factor) for c, (fid, key, factor) in FIELD_GAUGES.items()]
        plan.pcie = [(int(nv.const(c, fid)), key) for c, (fid, key) in PCIE_COUNTER_FIELDS.items()]
        plan.field_ids = [fid for fid, _, _ in plan.fields] + [fid for fid, _ in plan.pcie]
        for err, err_const in (
            ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
            ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        ):
            for counter, counter_const in (
                ("volatile", "NVML_VOLATILE_ECC"),
                ("aggregate", "NVML_AGGREGATE_ECC"),
            ):
                for loc_const, (loc_default, suffixes) in ECC_LOCATIONS.items():
                    plan.ecc.append(
                        (
                            (nv.const(err_const), nv.const(counter_const), nv.const(loc_const, loc_default)),
                            tuple(f"ecc_errors_{err}_{counter}_{suffix}" for suffix in suffixes),
                        )
                    )
        plan.sram = nv.const("c_nvmlEccSramErrorStatus_v1_t")  # its constructor sets the version
        plan.fabric_states = (
            int(nv.const("NVML_GPU_FABRIC_STATE_NOT_SUPPORTED", 0)),
            int(nv.const("NVML_GPU_FABRIC_STATE_COMPLETED", 3)),
        )
        for fn, struct_name in (
            ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
            ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),  # drivers before the versioned call
        ):
            struct = nv.const(struct_name)
            if struct is not None and self._fill(fn, h, struct()):
                plan.fabric = (fn, struct)
                break

    def _pcie_rate(self, uuid: str, key: str, fv: Any) -> float | None:
        """Bytes/s between this and the previous collection from one PCIe byte-counter field value.

        The first reading (after start-up or re-initialisation) only sets the baseline. A counter that went
        backwards starts a new baseline with no series that time (a GPU reset), except a 32-bit counter, which
        is taken to have wrapped once. A reading with the previous one's timestamp (NVML's cached value)
        repeats the last rate. The timestamps are NVML's own (microseconds). The baselines are kept by GPU
        uuid, so they survive an NVML re-initialisation.
        """
        slot = (uuid, key)
        if fv.nvmlReturn != 0 or not 0 <= fv.valueType < len(_VALUE_MEMBERS):
            self._pcie_last.pop(slot, None)
            return None
        count = int(getattr(fv.value, _VALUE_MEMBERS[fv.valueType]))
        stamp = int(fv.timestamp)
        last = self._pcie_last.get(slot)
        if last is not None and stamp == last[0]:
            return last[2]
        rate: float | None = None
        if last is not None and stamp > last[0]:
            moved = count - last[1]
            if moved < 0 and _VALUE_MEMBERS[fv.valueType] == "uiVal":
                moved += 1 << 32
            if moved >= 0:
                rate = moved * 1e6 / (stamp - last[0])
        self._pcie_last[slot] = (stamp, count, rate)
        return rate

    def _read_more(self, d: DeviceInfo, v: dict[str, float]) -> None:
        """The per-scrape readings beyond the classic set: field values (one call for all), ECC by location,
        SRAM ECC detail, row remapping, fabric, PCIe throughput, engines, display, accounting."""
        nv, h, plan = self.nvml, d.handle, d.plan
        query = nv.query

        if plan.field_ids:
            values = query("nvmlDeviceGetFieldValues", h, plan.field_ids)
            values = values or []
            for (_, key, factor), fv in zip(plan.fields, values, strict=False):
                # each field carries its own status: one NVML cannot report is absent, the others stay
                if fv.nvmlReturn == 0 and 0 <= fv.valueType < len(_VALUE_MEMBERS):
                    v[key] = float(getattr(fv.value, _VALUE_MEMBERS[fv.valueType])) * factor
            for (_, key), fv in zip(plan.pcie, values[len(plan.fields) :], strict=False):
                rate = self._pcie_rate(d.uuid, key, fv)
                if rate is not None:
                    v[key] = rate

        if v.get("ecc_mode_current") == 1.0:  # counters are meaningless with ECC off
            for args, keys in plan.ecc:
                n = query("nvmlDeviceGetMemoryErrorCounter", h, *args)
                if n is not None:
                    for key in keys:
                        v[key] = float(n)
            if plan.sram is not None:
                sram = plan.sram()
                if self._fill("nvmlDeviceGetSramEccErrorStatus", h, sram):
                    for name, key in SRAM_ECC_FIELDS.items():
                        v[key] = float(getattr(sram, name))

        rows = query("nvmlDeviceGetRemappedRows", h)
        if rows is not None:
            v["remapped_rows_correctable"] = float(rows[0])
            v["remapped_rows_uncorrectable"] = float(rows[1])
            v["remapped_rows_pending"] = float(rows[2])  # 0/1
            v["remapped_rows_failure"] = float(rows[3])  # 0/1
        hist = query("nvmlDeviceGetRowRemapperHistogram", h)
        if hist is not None:
            v["remapped_rows_histogram_max"] = float(hist.max)
            v["remapped_rows_histogram_high"] = float(hist.high)
            v["remapped_rows_histogram_partial"] = float(hist.partial)
            v["remapped_rows_histogram_low"] = float(hist.low)
            v["remapped_rows_histogram_none"] = float(hist.none)

        if plan.fabric is not None:
            fn, struct = plan.fabric
            fabric = struct()
            if self._fill(fn, h, fabric):
                state = int(fabric.state)
                not_supported, completed = plan.fabric_states
                if state != not_supported:
                    v["fabric_state"] = float(state)  # NVML_GPU_FABRIC_STATE_*: 1 not started .. 3 completed
                    if state == completed and int(fabric.status) == 0:
                        v["fabric_clique_id"] = float(fabric.cliqueId)

        if "pcie_link_gen_current" in v:  # nvidia-smi's gpucurrent is the same reading under its newer name
            v["pcie_link_gen_gpucurrent"] = v["pcie_link_gen_current"]

        jpg = query("nvmlDeviceGetJpgUtilization", h)
        if jpg is not None:
            v["utilization_jpeg_ratio"] = jpg[0] * 0.01
        ofa = query("nvmlDeviceGetOfaUtilization", h)
        if ofa is not None:
            v["utilization_ofa_ratio"] = ofa[0] * 0.01
        enc = query("nvmlDeviceGetEncoderStats", h)
        if enc is not None:
            v["encoder_stats_session_count"] = float(enc[0])
            v["encoder_stats_average_fps"] = float(enc[1])
            v["encoder_stats_average_latency"] = float(enc[2])  # us, as nvidia-smi prints it
        for key, fn in (
            ("temperature_gpu_tlimit", "nvmlDeviceGetMarginTemperature"),  # C below the slowdown threshold
            ("display_attached", "nvmlDeviceGetDisplayMode"),
            ("display_active", "nvmlDeviceGetDisplayActive"),
            ("accounting_mode", "nvmlDeviceGetAccountingMode"),
        ):
            value = query(fn, h)
            if value is not None:
                v[key] = float(value)
        protected = query("nvmlDeviceGetConfComputeProtectedMemoryUsage", h)
        if protected is not None:
            v["protected_memory_total_bytes"] = float(protected.total)
            v["protected_memory_used_bytes"] = float(protected.used)
            v["protected_memory_free_bytes"] = float(protected.free)

    def _read(self, d: DeviceInfo) -> GpuReading:
        nv, h = self.nvml, d.handle
        v: dict[str, float] = {"index": float(d.index), "count": float(self._device_count)}
        v.update(d.static)

        def put(key: str, value: Any, factor: float = 1.0) -> None:
            if value is not None:
                v[key] = float(value) * factor

        cc = d.info_labels["compute_cap"]
        if cc != "[N/A]":
            v["compute_cap"] = float(cc)
        util = nv.query("nvmlDeviceGetUtilizationRates", h)
        if util is not None:
            put("utilization_gpu_ratio", util.gpu, 0.01)
            put("utilization_memory_ratio", util.memory, 0.01)
        enc = nv.query("nvmlDeviceGetEncoderUtilization", h)
        put("utilization_encoder_ratio", None if enc is None else enc[0], 0.01)
        dec = nv.query("nvmlDeviceGetDecoderUtilization", h)
        put("utilization_decoder_ratio", None if dec is None else dec[0], 0.01)

        mem = nv.query("nvmlDeviceGetMemoryInfo", h, version=nv.const("nvmlMemory_v2"))
        if mem is None:  # drivers before 510 lack the v2 call (and so the reserved figure)
            mem = nv.query("nvmlDeviceGetMemoryInfo", h)
        if mem is not None:
            put("memory_total_bytes", mem.total)
            put("memory_reserved_bytes", getattr(mem, "reserved", None))
            put("memory_used_bytes", mem.used)
            put("memory_free_bytes", mem.free)

        put("temperature_gpu", nv.query("nvmlDeviceGetTemperature", h, nv.const("NVML_TEMPERATURE_GPU", 0)))
        put("fan_speed_ratio", nv.query("nvmlDeviceGetFanSpeed", h), 0.01)
        put("power_draw_watts", nv.query("nvmlDeviceGetPowerUsage", h), 1e-3)
        put("power_limit_watts", nv.query("nvmlDeviceGetPowerManagementLimit", h), 1e-3)
        put("enforced_power_limit_watts", nv.query("nvmlDeviceGetEnforcedPowerLimit", h), 1e-3)
        put("power_default_limit_watts", nv.query("nvmlDeviceGetPowerManagementDefaultLimit", h), 1e-3)
        limits = nv.query("nvmlDeviceGetPowerManagementLimitConstraints", h)
        if limits is not None:
            put("power_min_limit_watts", limits[0], 1e-3)
            put("power_max_limit_watts", limits[1], 1e-3)
        put("energy_joules_total", nv.query("nvmlDeviceGetTotalEnergyConsumption", h), 1e-3)

        for clock, const in (
            ("graphics", "NVML_CLOCK_GRAPHICS"),
            ("sm", "NVML_CLOCK_SM"),
            ("memory", "NVML_CLOCK_MEM"),
            ("video", "NVML_CLOCK_VIDEO"),
        ):
            kind = nv.const(const)
            put(f"clocks_current_{clock}_clock_hz", nv.query("nvmlDeviceGetClockInfo", h, kind), 1e6)
            if clock != "video":
                put(f"clocks_max_{clock}_clock_hz", nv.query("nvmlDeviceGetMaxClockInfo", h, kind), 1e6)

        pstate = nv.query("nvmlDeviceGetPerformanceState", h)
        if pstate is not None and 0 <= int(pstate) <= 15:  # 32 is NVML_PSTATE_UNKNOWN
            v["pstate"] = float(pstate)

        active = nv.query("nvmlDeviceGetCurrentClocksEventReasons", h)
        supported = nv.query("nvmlDeviceGetSupportedClocksEventReasons", h)
        for prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
            put(f"{prefix}_supported", supported)
            if active is not None:
                v[f"{prefix}_active"] = float(active)
                for const, suffix in CLOCK_REASONS.items():
                    bit = int(nv.const(const, _REASON_BITS[const]))
                    v[f"{prefix}_{suffix}"] = 1.0 if int(active) & bit else 0.0

        ecc_mode = nv.query("nvmlDeviceGetEccMode", h)
        if ecc_mode is not None:
            put("ecc_mode_current", ecc_mode[0])
            put("ecc_mode_pending", ecc_mode[1])
        if ecc_mode is not None and int(ecc_mode[0]) == 1:  # counters are meaningless with ECC off
            for err, err_const in (
                ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
                ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
            ):
                for counter, counter_const in (
                    ("volatile", "NVML_VOLATILE_ECC"),
                    ("aggregate", "NVML_AGGREGATE_ECC"),
                ):
                    put(
                        f"ecc_errors_{err}_{counter}_total",
                        nv.query(
                            "nvmlDeviceGetTotalEccErrors", h, nv.const(err_const), nv.const(counter_const)
                        ),
                    )

        put("persistence_mode", nv.query("nvmlDeviceGetPersistenceMode", h))
        put("compute_mode", nv.query("nvmlDeviceGetComputeMode", h))
        put("pcie_link_gen_current", nv.query("nvmlDeviceGetCurrPcieLinkGeneration", h))
        put("pcie_link_gen_max", nv.query("nvmlDeviceGetMaxPcieLinkGeneration", h))
        put("pcie_link_width_current", nv.query("nvmlDeviceGetCurrPcieLinkWidth", h))
        put("pcie_link_width_max", nv.query("nvmlDeviceGetMaxPcieLinkWidth", h))
        self._read_more(d, v)

        reading = GpuReading(d, v)
        mig = nv.query("nvmlDeviceGetMigMode", h)
        if mig is not None:
            put("mig_mode_current", mig[0])
            put("mig_mode_pending", mig[1])
            if self.options.mig and int(mig[0]) == int(nv.const("NVML_DEVICE_MIG_ENABLE", 1)):
                reading.migs = self._read_migs(h)
        if self.options.processes:
            procs = nv.query("nvmlDeviceGetComputeRunningProcesses", h)
            if procs is None:
                reading.processes_ok = False
            else:
                for p in procs:
                    name = nv.query("nvmlSystemGetProcessName", p.pid)
                    used = getattr(p, "usedGpuMemory", None)
                    reading.processes.append((int(p.pid), "" if name is None else as_text(name), used))
        if self.gpm is not None:
            reading.activity = self.gpm.read(
                h, d.uuid, _instance_ids(reading.migs), mig=v.get("mig_mode_current") == 1.0
            )
        return reading

    def _read_migs(self, h: Any) -> list[dict[str, Any]]:
        nv = self.nvml
        migs = []
        for i in range(int(nv.query("nvmlDeviceGetMaxMigDeviceCount", h) or 0)):
            mh = nv.query("nvmlDeviceGetMigDeviceHandleByIndex", h, i)
            if mh is None:  # slot not populated
                continue
            name = _na(nv.query("nvmlDeviceGetName", mh))
            mem = nv.query("nvmlDeviceGetMemoryInfo", mh)
            migs.append(
                {
                    "mig_uuid": _na(nv.query("nvmlDeviceGetUUID", mh)),
                    "gpu_instance_id": str(nv.query("nvmlDeviceGetGpuInstanceId", mh)),
                    "compute_instance_id": str(nv.query("nvmlDeviceGetComputeInstanceId", mh)),
                    # "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb"
                    "profile": name.rsplit("MIG ", 1)[-1] if "MIG " in name else name,
                    "used": None if mem is None else float(mem.used),
                    "total": None if mem is None else float(mem.total),
                }
            )
        return migs
