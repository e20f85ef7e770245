"""A fake of the part of nvidia-ml-py (``pynvml``) that kgpu calls.

It has the same function names, constants and exception classes (``NVMLError_NotSupported``,
``NVMLError_GpuIsLost``, ...) as pynvml, so the exporter's facade runs the same code against it as against
the real library. Values are in NVML's own units (mW, mJ, MHz, percent, bytes), so the tests prove kgpu's
unit conversions.

Knobs a test turns:
- ``FakeGpu.unsupported``: names of NVML functions that raise NotSupported for that GPU;
- ``FakeGpu.unsupported_fields``: ``NVML_FI_*`` ids that ``nvmlDeviceGetFieldValues`` answers with a
  per-field NotSupported (the call itself succeeds, as NVML's does);
- ``FakeGpu.field_timestamp_us``: the timestamp field values carry (None: the wall clock), with
  ``FakeGpu.pcie_bytes`` the PCIe byte counters whose rate the exporter serves;
- ``FakeGpu.lost``: every call on that GPU raises GpuIsLost (the "fell off the bus" case);
- ``FakeNvml.driver_loaded = False``: nvmlInit raises DriverNotLoaded;
- ``FakeNvml.push_xid(index, xid)``: an XID event for ``nvmlEventSetWait``.
"""

from __future__ import annotations

import collections
import ctypes
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fakes.fake_gpm import FakeGpmMixin

# --- errors, as pynvml defines them (NVMLError(value) maps to the subclass) --------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999


class NVMLError(Exception):
    _valClassMapping: dict[int, type[NVMLError]] = {}  # noqa: RUF012 - same shape as pynvml

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value  # type: ignore[attr-defined]
        return obj

    def __init__(self, value: int) -> None:
        self.value = value

    def __str__(self) -> str:
        return type(self).__name__.removeprefix("NVMLError_")


def _error_class(name: str, value: int) -> type[NVMLError]:
    cls = type(name, (NVMLError,), {})
    NVMLError._valClassMapping[value] = cls
    return cls


NVMLError_Uninitialized = _error_class("NVMLError_Uninitialized", NVML_ERROR_UNINITIALIZED)
NVMLError_InvalidArgument = _error_class("NVMLError_InvalidArgument", NVML_ERROR_INVALID_ARGUMENT)
NVMLError_NotSupported = _error_class("NVMLError_NotSupported", NVML_ERROR_NOT_SUPPORTED)
NVMLError_NoPermission = _error_class("NVMLError_NoPermission", NVML_ERROR_NO_PERMISSION)
NVMLError_NotFound = _error_class("NVMLError_NotFound", NVML_ERROR_NOT_FOUND)
NVMLError_DriverNotLoaded = _error_class("NVMLError_DriverNotLoaded", NVML_ERROR_DRIVER_NOT_LOADED)
NVMLError_Timeout = _error_class("NVMLError_Timeout", NVML_ERROR_TIMEOUT)
NVMLError_GpuIsLost = _error_class("NVMLError_GpuIsLost", NVML_ERROR_GPU_IS_LOST)
NVMLError_ArgumentVersionMismatch = _error_class(
    "NVMLError_ArgumentVersionMismatch", NVML_ERROR_ARGUMENT_VERSION_MISMATCH
)
NVMLError_Unknown = _error_class("NVMLError_Unknown", NVML_ERROR_UNKNOWN)

# --- constants, with pynvml's values ------------------------------------------------------------------
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_CLOCK_VIDEO = 3
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_PSTATE_UNKNOWN = 32
nvmlMemory_v2 = 0x2000028
nvmlEventTypeXidCriticalError = 0x8
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonApplicationsClocksSetting = 0x2
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonSyncBoost = 0x10
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonDisplayClockSetting = 0x100
NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2
NVML_MEMORY_LOCATION_DRAM = 2  # the same location under its newer name
NVML_MEMORY_LOCATION_SRAM = 7
NVML_INFOROM_OEM = 0
NVML_INFOROM_ECC = 1
NVML_INFOROM_POWER = 2
NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197
NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3
NVML_GPU_RECOVERY_ACTION_NONE = 0
NVML_GPU_RECOVERY_ACTION_GPU_RESET = 1
NVML_GPU_RECOVERY_ACTION_NODE_REBOOT = 2
NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG = 2
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
NVML_VALUE_TYPE_SIGNED_INT = 5
NVML_VALUE_TYPE_UNSIGNED_SHORT = 6
NVML_FI_DEV_ECC_SBE_VOL_DEV = 11
NVML_FI_DEV_ECC_DBE_VOL_DEV = 12
NVML_FI_DEV_ECC_SBE_AGG_DEV = 22
NVML_FI_DEV_ECC_DBE_AGG_DEV = 23
NVML_FI_DEV_PERF_POLICY_POWER = 74
NVML_FI_DEV_PERF_POLICY_SYNC_BOOST = 76
NVML_FI_DEV_MEMORY_TEMP = 82
NVML_FI_DEV_REMAPPED_COR = 142
NVML_FI_DEV_REMAPPED_UNC = 143
NVML_FI_DEV_REMAPPED_PENDING = 144
NVML_FI_DEV_REMAPPED_FAILURE = 145
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP = NVML_FI_DEV_PERF_POLICY_POWER
NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST = NVML_FI_DEV_PERF_POLICY_SYNC_BOOST
NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN = 269
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN = 270
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN = 271
NVML_FI_DEV_EDPP_MULTIPLIER = 274
nvmlPciInfoExt_v1 = 0x1000040
nvmlPlatformInfo_v2 = 0x200002C
nvmlEccSramErrorStatus_v1 = 0x1000068
nvmlGpuFabricInfo_v2 = 0x02000024

# The union member that holds a field value of each NVML_VALUE_TYPE_*, as in pynvml's c_nvmlValue_t.
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


# --- structs the caller allocates and passes by reference (ctypes.byref), with pynvml's field layout ---
class _Structure(ctypes.Structure):
    """As pynvml's structs: a ``c_char`` or ``c_char * n`` field reads back as ``str``, not ``bytes``."""

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        return value.decode() if isinstance(value, bytes) else value


class nvmlPciInfoExt_v1_t(_Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("baseClass", ctypes.c_uint),
        ("subClass", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class c_nvmlPlatformInfo_v2_t(_Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("ibGuid", ctypes.c_char * 16),
        ("chassisSerialNumber", ctypes.c_char * 16),
        ("slotNumber", ctypes.c_char),
        ("trayIndex", ctypes.c_char),
        ("hostId", ctypes.c_char),
        ("peerType", ctypes.c_char),
        ("moduleId", ctypes.c_char),
    ]

    def __init__(self) -> None:
        super().__init__(version=nvmlPlatformInfo_v2)


class c_nvmlEccSramErrorStatus_v1_t(_Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("aggregateUncParity", ctypes.c_ulonglong),
        ("aggregateUncSecDed", ctypes.c_ulonglong),
        ("aggregateCor", ctypes.c_ulonglong),
        ("volatileUncParity", ctypes.c_ulonglong),
        ("volatileUncSecDed", ctypes.c_ulonglong),
        ("volatileCor", ctypes.c_ulonglong),
        ("aggregateUncBucketL2", ctypes.c_ulonglong),
        ("aggregateUncBucketSm", ctypes.c_ulonglong),
        ("aggregateUncBucketPcie", ctypes.c_ulonglong),
        ("aggregateUncBucketMcu", ctypes.c_ulonglong),
        ("aggregateUncBucketOther", ctypes.c_ulonglong),
        ("bThresholdExceeded", ctypes.c_uint),
    ]

    def __init__(self) -> None:
        super().__init__(version=nvmlEccSramErrorStatus_v1)


class c_nvmlGpuFabricInfo_t(_Structure):  # the unversioned struct of the deprecated call
    _fields_ = [
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
    ]


class c_nvmlGpuFabricInfo_v2_t(_Structure):  # pynvml's c_nvmlGpuFabricInfoV_t
    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
        ("healthMask", ctypes.c_uint32),
    ]

    def __init__(self) -> None:
        super().__init__(version=nvmlGpuFabricInfo_v2)


def _by_ref(ref: Any, cls: type[ctypes.Structure], version: int | None = None) -> Any:
    """The struct behind ``ctypes.byref(struct)``, as the C function would see it; checks its version word.

    pynvml passes these arguments to the C library unchanged, so a struct passed by value (not byref), or
    of another type, would be a crash or garbage there: here it is a TypeError, so a test fails loudly.
    """
    obj = getattr(ref, "_obj", None)
    if type(ref).__name__ != "CArgObject" or not isinstance(obj, cls):
        raise TypeError(f"expected ctypes.byref({cls.__name__}()), got {ref!r}")
    if version is not None and obj.version != version:
        raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    return obj


@dataclass
class _Struct:
    """Stands in for pynvml's ctypes structs / friendly objects: attribute access only."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class FakeMig:
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    name: str
    memory_total: int
    memory_used: int


@dataclass
class FakeGpu:
    """One GPU, in NVML units."""

    index: int = 0
    uuid: str = "GPU-5D1B2D6E-0000-4A5B-8C9D-000000000000"
    name: str = "NVIDIA H100 80GB HBM3"
    serial: str = "1650123456789"
    vbios: str = "96.00.A5.00.01"
    bus_id: str = "00000000:00:09.0"
    pci_sub_system_id: int = 0x16C110DE
    compute_capability: tuple[int, int] = (9, 0)
    util_gpu: int = 100  # percent
    util_memory: int = 11  # percent
    util_encoder: int = 0
    util_decoder: int = 0
    memory_total: int = 85_520_809_984  # bytes
    memory_reserved: int = 502_267_904
    memory_used: int = 20_780_679_168
    temperature: int = 59  # C
    fan: int = 38  # percent
    power_usage: int = 631_950  # mW
    power_limit: int = 700_000  # mW (management limit)
    enforced_power_limit: int = 700_000
    default_power_limit: int = 700_000
    power_min_limit: int = 200_000
    power_max_limit: int = 700_000
    energy: int = 123_456_789  # mJ since driver load
    clocks: dict[int, int] = field(default_factory=lambda: {0: 1980, 1: 1980, 2: 2619, 3: 1545})  # MHz
    max_clocks: dict[int, int] = field(default_factory=lambda: {0: 1980, 1: 1980, 2: 2619, 3: 1755})
    pstate: int = 0
    clocks_event_reasons: int = 0x0
    supported_clocks_event_reasons: int = 0x1FF
    ecc: dict[tuple[int, int], int] = field(
        default_factory=lambda: {(0, 0): 3, (0, 1): 17, (1, 0): 0, (1, 1): 2}
    )
    ecc_mode: tuple[int, int] = (1, 1)
    persistence_mode: int = 1
    compute_mode: int = 0
    pcie_gen: tuple[int, int] = (5, 5)  # current, max
    pcie_width: tuple[int, int] = (16, 16)
    mig_mode: tuple[int, int] = (0, 0)
    migs: list[FakeMig] = field(default_factory=list)
    processes: list[tuple[int, int | None, str]] = field(default_factory=list)  # pid, bytes, name
    # -- identity and configuration that stays put while NVML is initialised ------------------------
    pci_device_id: int = 0x233010DE  # device 0x2330 (H100 SXM5 80GB), vendor 0x10DE
    pci_class: tuple[int, int] = (0x03, 0x02)  # base class display controller, sub class 3D controller
    inforom: dict[int, str] = field(default_factory=lambda: {0: "2.1", 1: "7.16"})  # NVML_INFOROM_* -> text
    # ibGuid (8 significant bytes, then zeros), slot number, tray index, host id, peer type, module id
    platform: tuple[bytes, int, int, int, int, int] = (
        bytes.fromhex("b8cef60300a1b2c3") + bytes(8),
        2,
        1,
        1,
        0,
        7,
    )
    gsp_mode: tuple[int, int] = (1, 1)  # enabled, default
    c2c_enabled: int = 0
    accounting_buffer_size: int = 4000
    gpu_max_pcie_gen: int = 5
    # -- readings -----------------------------------------------------------------------------------
    accounting_mode: int = 0
    display_mode: int = 1  # nvidia-smi's display_attached
    display_active: int = 0
    # (error type, counter type, NVML_MEMORY_LOCATION_*) -> count; DRAM + SRAM add up to the totals above
    ecc_locations: dict[tuple[int, int, int], int] = field(
        default_factory=lambda: {
            (0, 0, 2): 2,
            (0, 1, 2): 12,
            (1, 0, 2): 0,
            (1, 1, 2): 1,
            (0, 0, 7): 1,
            (0, 1, 7): 5,
            (1, 0, 7): 0,
            (1, 1, 7): 1,
        }
    )
    # c_nvmlEccSramErrorStatus_v1_t's counters by field name (bThresholdExceeded 0/1)
    sram_ecc: dict[str, int] = field(
        default_factory=lambda: {
            "aggregateUncParity": 0,
            "aggregateUncSecDed": 1,
            "aggregateCor": 5,
            "volatileUncParity": 0,
            "volatileUncSecDed": 0,
            "volatileCor": 1,
            "aggregateUncBucketL2": 0,
            "aggregateUncBucketSm": 1,
            "aggregateUncBucketPcie": 0,
            "aggregateUncBucketMcu": 0,
            "aggregateUncBucketOther": 0,
            "bThresholdExceeded": 0,
        }
    )
    encoder_stats: tuple[int, int, int] = (0, 0, 0)  # sessions, average fps, average latency (us)
    fabric: tuple[int, int, int] = (3, 0, 0)  # NVML_GPU_FABRIC_STATE_*, status (nvmlReturn), clique id
    protected_memory: tuple[int, int, int] = (0, 0, 0)  # total, free, used bytes (confidential computing off)
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)  # correctable, uncorrectable, pending, failure
    row_remapper_histogram: tuple[int, int, int, int, int] = (
        2560,
        0,
        0,
        0,
        0,
    )  # max, high, partial, low, none
    margin_temperature: int = 26  # C below the slowdown threshold
    util_jpeg: int = 0  # percent
    util_ofa: int = 0
    pcie_bytes: tuple[int, int] = (
        41_000_000_000,
        163_000_000_000,
    )  # tx, rx byte counters (NVML_FI_DEV_PCIE_COUNT_*)
    field_timestamp_us: int | None = None  # field values' timestamp; None: the wall clock, as NVML's
    power_average: int = 631_950  # mW, NVML_FI_DEV_POWER_AVERAGE
    power_instant: int = 625_680  # mW
    memory_temperature: int = 54  # C
    edpp_multiplier: int = 100  # percent
    recovery_action: int = 0  # NVML_GPU_RECOVERY_ACTION_NONE
    # NVML_FI_DEV_CLOCKS_EVENT_REASON_* -> ns spent in that reason since the driver loaded
    clocks_event_ns: dict[int, int] = field(
        default_factory=lambda: {74: 1_250_000_000, 76: 0, 269: 0, 270: 40_000_000, 271: 0}
    )
    unsupported_fields: set[int] = field(default_factory=set)  # NVML_FI_* ids answered NotSupported
    field_value_types: dict[int, int] = field(default_factory=dict)  # NVML_FI_* id -> NVML_VALUE_TYPE_*
    unsupported: set[str] = field(default_factory=set)
    lost: bool = False


class _EventSet:
    __slots__ = ("session",)

    def __init__(self, session: int) -> None:
        self.session = session  # the nvmlInit it was created under


class _Handle:
    __slots__ = ("gpu", "mig")

    def __init__(self, gpu: FakeGpu, mig: FakeMig | None = None) -> None:
        self.gpu = gpu
        self.mig = mig


class FakeNvml(FakeGpmMixin):
    """An object with pynvml's module surface; pass it to ``kgpu.exporter.nvml.Nvml(lib=...)``."""

    # errors and constants are reachable as attributes, as on the pynvml module
    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_Timeout = NVMLError_Timeout
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_ArgumentVersionMismatch = NVMLError_ArgumentVersionMismatch
    NVMLError_Unknown = NVMLError_Unknown
    # caller-allocated structs and their version words, as the pynvml module has them
    nvmlPciInfoExt_v1_t = nvmlPciInfoExt_v1_t
    nvmlPciInfoExt_v1 = nvmlPciInfoExt_v1
    c_nvmlPlatformInfo_v2_t = c_nvmlPlatformInfo_v2_t
    nvmlPlatformInfo_v2 = nvmlPlatformInfo_v2
    c_nvmlEccSramErrorStatus_v1_t = c_nvmlEccSramErrorStatus_v1_t
    nvmlEccSramErrorStatus_v1 = nvmlEccSramErrorStatus_v1
    c_nvmlGpuFabricInfo_t = c_nvmlGpuFabricInfo_t
    c_nvmlGpuFabricInfo_v2_t = c_nvmlGpuFabricInfo_v2_t
    c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfo_v2_t
    nvmlGpuFabricInfo_v2 = nvmlGpuFabricInfo_v2

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        driver_version: str = "590.48.01",
        cuda_version: int = 13010,
    ) -> None:
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.driver_loaded = True
        self.init_calls = 0
        self.shutdown_calls = 0
        self._refs = 0
        self._events: collections.deque[tuple[int, int]] = collections.deque()
        self._event_cv = threading.Condition()
        self._waiting = 0  # threads inside nvmlEventSetWait
        self.shutdowns_during_wait = 0  # nvmlShutdown while one was: the session's event set pulled away
        self.event_set_stale_frees = 0  # nvmlEventSetFree of a set from a session already shut down
        self.calls: collections.Counter[str] = collections.Counter()
        for name, value in globals().items():
            if (
                name.startswith(("NVML_", "nvmlClocksEventReason", "nvmlEventType"))
                or name == "nvmlMemory_v2"
            ):
                setattr(self, name, value)

    # -- test helpers ---------------------------------------------------------------------------------
    def push_xid(self, index: int, xid: int) -> None:
        with self._event_cv:
            self._events.append((index, xid))
            self._event_cv.notify_all()

    # -- lifecycle ------------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.init_calls += 1
        if not self.driver_loaded:
            raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED)
        self._refs += 1

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1
        with self._event_cv:
            if self._waiting:  # another thread is inside nvmlEventSetWait on this session's event set
                self.shutdowns_during_wait += 1
        if self._refs == 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        self._refs -= 1

    def _check(self) -> None:
        if self._refs == 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: _Handle, fn: str) -> FakeGpu:
        self._check()
        self.calls[fn] += 1
        gpu = handle.gpu
        if gpu.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.unsupported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu

    # -- system ---------------------------------------------------------------------------------------
    def nvmlSystemGetDriverVersion(self) -> str:
        self._check()
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check()
        return self.cuda_version

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._check()
        for gpu in self.gpus:
            for p, _, name in gpu.processes:
                if p == pid:
                    return name
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._check()
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(self.gpus[index])

    # -- identity -------------------------------------------------------------------------------------
    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        gpu = self._gpu(h, "nvmlDeviceGetUUID")
        return h.mig.uuid if h.mig else gpu.uuid

    def nvmlDeviceGetName(self, h: _Handle) -> str:
        gpu = self._gpu(h, "nvmlDeviceGetName")
        return h.mig.name if h.mig else gpu.name

    def nvmlDeviceGetIndex(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetIndex").index

    def nvmlDeviceGetSerial(self, h: _Handle) -> str:
        return self._gpu(h, "nvmlDeviceGetSerial").serial

    def nvmlDeviceGetVbiosVersion(self, h: _Handle) -> str:
        return self._gpu(h, "nvmlDeviceGetVbiosVersion").vbios

    def nvmlDeviceGetPciInfo(self, h: _Handle) -> _Struct:
        gpu = self._gpu(h, "nvmlDeviceGetPciInfo")
        domain, bus, device = _bus_id_parts(gpu.bus_id)
        return _Struct(
            {
                "busId": gpu.bus_id.encode(),
                "domain": domain,
                "bus": bus,
                "device": device,
                "pciDeviceId": gpu.pci_device_id,
                "pciSubSystemId": gpu.pci_sub_system_id,
            }
        )

    def nvmlDeviceGetPciInfoExt(self, handle: _Handle, c_info: Any) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetPciInfoExt")
        info = _by_ref(c_info, nvmlPciInfoExt_v1_t, nvmlPciInfoExt_v1)
        info.domain, info.bus, info.device = _bus_id_parts(gpu.bus_id)
        info.pciDeviceId, info.pciSubSystemId = gpu.pci_device_id, gpu.pci_sub_system_id
        info.baseClass, info.subClass = gpu.pci_class
        info.busId = gpu.bus_id.encode()
        return NVML_SUCCESS  # pynvml's wrapper returns None; nothing reads it

    def nvmlDeviceGetInforomVersion(self, handle: _Handle, infoRomObject: int) -> str:
        gpu = self._gpu(handle, "nvmlDeviceGetInforomVersion")
        if infoRomObject not in gpu.inforom:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu.inforom[infoRomObject]

    def nvmlDeviceGetPlatformInfo(self, device: _Handle, platformInfo: Any) -> int:
        gpu = self._gpu(device, "nvmlDeviceGetPlatformInfo")
        info = _by_ref(platformInfo, c_nvmlPlatformInfo_v2_t, nvmlPlatformInfo_v2)
        guid, slot, tray, host, peer, module = gpu.platform
        ctypes.memmove(ctypes.addressof(info) + c_nvmlPlatformInfo_v2_t.ibGuid.offset, guid, 16)
        info.chassisSerialNumber = b"1654922000123"
        info.slotNumber, info.trayIndex, info.hostId = bytes([slot]), bytes([tray]), bytes([host])
        info.peerType, info.moduleId = bytes([peer]), bytes([module])
        return NVML_SUCCESS

    def nvmlDeviceGetGspFirmwareMode(
        self, handle: _Handle, isEnabled: Any = None, defaultMode: Any = None
    ) -> list[int]:
        return list(self._gpu(handle, "nvmlDeviceGetGspFirmwareMode").gsp_mode)

    def nvmlDeviceGetC2cModeInfoV(self, handle: _Handle) -> _Struct:
        return _Struct({"isC2cEnabled": self._gpu(handle, "nvmlDeviceGetC2cModeInfoV").c2c_enabled})

    def nvmlDeviceGetAccountingBufferSize(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetAccountingBufferSize").accounting_buffer_size

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetGpuMaxPcieLinkGeneration").gpu_max_pcie_gen

    def nvmlDeviceGetCudaComputeCapability(self, h: _Handle) -> tuple[int, int]:
        return self._gpu(h, "nvmlDeviceGetCudaComputeCapability").compute_capability

    # -- readings -------------------------------------------------------------------------------------
    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> _Struct:
        gpu = self._gpu(h, "nvmlDeviceGetUtilizationRates")
        return _Struct({"gpu": gpu.util_gpu, "memory": gpu.util_memory})

    def nvmlDeviceGetEncoderUtilization(self, h: _Handle) -> list[int]:
        return [self._gpu(h, "nvmlDeviceGetEncoderUtilization").util_encoder, 167000]

    def nvmlDeviceGetDecoderUtilization(self, h: _Handle) -> list[int]:
        return [self._gpu(h, "nvmlDeviceGetDecoderUtilization").util_decoder, 167000]

    def nvmlDeviceGetMemoryInfo(self, h: _Handle, version: int | None = None) -> _Struct:
        gpu = self._gpu(h, "nvmlDeviceGetMemoryInfo")
        if h.mig:
            total, used, reserved = h.mig.memory_total, h.mig.memory_used, 0
        else:
            total, used, reserved = gpu.memory_total, gpu.memory_used, gpu.memory_reserved
        if version is None:  # v1: free includes reserved
            return _Struct({"total": total, "used": used, "free": total - used})
        return _Struct(
            {
                "version": version,
                "total": total,
                "reserved": reserved,
                "used": used,
                "free": total - used - reserved,
            }
        )

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        return self._gpu(h, "nvmlDeviceGetTemperature").temperature

    def nvmlDeviceGetFanSpeed(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetFanSpeed").fan

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetPowerUsage").power_usage

    def nvmlDeviceGetPowerManagementLimit(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetPowerManagementLimit").power_limit

    def nvmlDeviceGetEnforcedPowerLimit(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetEnforcedPowerLimit").enforced_power_limit

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetPowerManagementDefaultLimit").default_power_limit

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h: _Handle) -> list[int]:
        gpu = self._gpu(h, "nvmlDeviceGetPowerManagementLimitConstraints")
        return [gpu.power_min_limit, gpu.power_max_limit]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetTotalEnergyConsumption").energy

    def nvmlDeviceGetClockInfo(self, h: _Handle, clock_type: int) -> int:
        return self._gpu(h, "nvmlDeviceGetClockInfo").clocks[clock_type]

    def nvmlDeviceGetMaxClockInfo(self, h: _Handle, clock_type: int) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxClockInfo").max_clocks[clock_type]

    def nvmlDeviceGetPerformanceState(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetPerformanceState").pstate

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrentClocksEventReasons").clocks_event_reasons

    def nvmlDeviceGetSupportedClocksEventReasons(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetSupportedClocksEventReasons").supported_clocks_event_reasons

    def nvmlDeviceGetTotalEccErrors(self, h: _Handle, error_type: int, counter_type: int) -> int:
        return self._gpu(h, "nvmlDeviceGetTotalEccErrors").ecc[(error_type, counter_type)]

    def nvmlDeviceGetEccMode(self, h: _Handle) -> list[int]:
        return list(self._gpu(h, "nvmlDeviceGetEccMode").ecc_mode)

    def nvmlDeviceGetPersistenceMode(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetPersistenceMode").persistence_mode

    def nvmlDeviceGetComputeMode(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetComputeMode").compute_mode

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkGeneration").pcie_gen[0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkGeneration").pcie_gen[1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkWidth").pcie_width[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: _Handle) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkWidth").pcie_width[1]

    def nvmlDeviceGetAccountingMode(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetAccountingMode").accounting_mode

    def nvmlDeviceGetDisplayMode(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetDisplayMode").display_mode

    def nvmlDeviceGetDisplayActive(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetDisplayActive").display_active

    def nvmlDeviceGetMemoryErrorCounter(
        self, handle: _Handle, errorType: int, counterType: int, locationType: int
    ) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryErrorCounter")
        if (errorType, counterType, locationType) not in gpu.ecc_locations:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu.ecc_locations[(errorType, counterType, locationType)]

    def nvmlDeviceGetSramEccErrorStatus(self, device: _Handle, status: Any) -> int:
        gpu = self._gpu(device, "nvmlDeviceGetSramEccErrorStatus")
        out = _by_ref(status, c_nvmlEccSramErrorStatus_v1_t, nvmlEccSramErrorStatus_v1)
        for name, value in gpu.sram_ecc.items():
            setattr(out, name, value)
        return NVML_SUCCESS

    def nvmlDeviceGetEncoderStats(self, handle: _Handle) -> tuple[int, int, int]:
        return self._gpu(handle, "nvmlDeviceGetEncoderStats").encoder_stats

    def nvmlDeviceGetGpuFabricInfoV(self, device: _Handle, gpuFabricInfo: Any) -> int:
        gpu = self._gpu(device, "nvmlDeviceGetGpuFabricInfoV")
        info = _by_ref(gpuFabricInfo, c_nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfo_v2)
        info.state, info.status, info.cliqueId = gpu.fabric
        return NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfo(self, device: _Handle, gpuFabricInfo: Any) -> int:
        gpu = self._gpu(device, "nvmlDeviceGetGpuFabricInfo")
        info = _by_ref(gpuFabricInfo, c_nvmlGpuFabricInfo_t)
        info.state, info.status, info.cliqueId = gpu.fabric
        return NVML_SUCCESS

    def nvmlDeviceGetConfComputeProtectedMemoryUsage(self, device: _Handle) -> _Struct:
        gpu = self._gpu(device, "nvmlDeviceGetConfComputeProtectedMemoryUsage")
        total, free, used = gpu.protected_memory
        return _Struct({"total": total, "free": free, "used": used})

    def nvmlDeviceGetRemappedRows(self, device: _Handle) -> tuple[int, int, int, int]:
        return self._gpu(device, "nvmlDeviceGetRemappedRows").remapped_rows

    def nvmlDeviceGetRowRemapperHistogram(self, device: _Handle) -> _Struct:
        gpu = self._gpu(device, "nvmlDeviceGetRowRemapperHistogram")
        return _Struct(
            dict(zip(("max", "high", "partial", "low", "none"), gpu.row_remapper_histogram, strict=True))
        )

    def nvmlDeviceGetMarginTemperature(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetMarginTemperature").margin_temperature

    def nvmlDeviceGetJpgUtilization(self, handle: _Handle) -> list[int]:
        return [self._gpu(handle, "nvmlDeviceGetJpgUtilization").util_jpeg, 167000]

    def nvmlDeviceGetOfaUtilization(self, handle: _Handle) -> list[int]:
        return [self._gpu(handle, "nvmlDeviceGetOfaUtilization").util_ofa, 167000]

    def nvmlDeviceGetFieldValues(self, handle: _Handle, fieldIds: list[Any]) -> list[_Struct]:
        """One ``c_nvmlFieldValue_t``-like object per requested id, in order; each has its own nvmlReturn."""
        gpu = self._gpu(handle, "nvmlDeviceGetFieldValues")
        stamp = gpu.field_timestamp_us if gpu.field_timestamp_us is not None else time.time_ns() // 1000
        out = []
        for entry in fieldIds:
            field_id, scope = entry if isinstance(entry, tuple) else (entry, 0)
            value = _field_value(gpu, field_id)
            value_type = gpu.field_value_types.get(field_id, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG)
            ret = NVML_SUCCESS
            if value is None or field_id in gpu.unsupported_fields:
                ret, value = NVML_ERROR_NOT_SUPPORTED, 0
            member = _VALUE_MEMBER[value_type]
            out.append(
                _Struct(
                    {
                        "fieldId": field_id,
                        "scopeId": scope,
                        "timestamp": stamp,
                        "latencyUsec": 0,
                        "valueType": value_type,
                        "nvmlReturn": ret,
                        # only the member valueType names: reading another one is an AttributeError here
                        "value": _Struct({member: float(value) if member == "dVal" else int(value)}),
                    }
                )
            )
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[_Struct]:
        gpu = self._gpu(h, "nvmlDeviceGetComputeRunningProcesses")
        return [
            _Struct(
                {
                    "pid": pid,
                    "usedGpuMemory": mem,
                    "gpuInstanceId": 0xFFFFFFFF,
                    "computeInstanceId": 0xFFFFFFFF,
                }
            )
            for pid, mem, _ in gpu.processes
        ]

    # -- MIG ------------------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, h: _Handle) -> list[int]:
        return list(self._gpu(h, "nvmlDeviceGetMigMode").mig_mode)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Handle) -> int:
        self._gpu(h, "nvmlDeviceGetMaxMigDeviceCount")
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Handle, index: int) -> _Handle:
        gpu = self._gpu(h, "nvmlDeviceGetMigDeviceHandleByIndex")
        if index >= len(gpu.migs):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return _Handle(gpu, gpu.migs[index])

    def nvmlDeviceGetGpuInstanceId(self, h: _Handle) -> int:
        self._gpu(h, "nvmlDeviceGetGpuInstanceId")
        if h.mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return h.mig.gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, h: _Handle) -> int:
        self._gpu(h, "nvmlDeviceGetComputeInstanceId")
        if h.mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return h.mig.compute_instance_id

    # -- events ---------------------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> _EventSet:
        self._check()
        return _EventSet(self.init_calls)

    def nvmlEventSetFree(self, event_set: _EventSet) -> None:
        self._check()
        if event_set.session != self.init_calls:  # created under an NVML session that has been shut down
            self.event_set_stale_frees += 1
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceRegisterEvents(self, h: _Handle, event_types: int, event_set: object) -> None:
        self._gpu(h, "nvmlDeviceRegisterEvents")

    def nvmlEventSetWait(self, event_set: _EventSet, timeout_ms: int) -> _Struct:
        deadline = time.monotonic() + timeout_ms / 1000
        with self._event_cv:
            self._waiting += 1
        try:
            return self._event_wait(deadline)
        finally:
            with self._event_cv:
                self._waiting -= 1

    def _event_wait(self, deadline: float) -> _Struct:
        with self._event_cv:
            while not self._events:
                self._check()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NVMLError(NVML_ERROR_TIMEOUT)
                self._event_cv.wait(min(left, 0.05))
            index, xid = self._events.popleft()
        return _Struct(
            {
                "device": _Handle(self.gpus[index]),
                "eventType": nvmlEventTypeXidCriticalError,
                "eventData": xid,
                "gpuInstanceId": 0xFFFFFFFF,
                "computeInstanceId": 0xFFFFFFFF,
            }
        )


def _bus_id_parts(bus_id: str) -> tuple[int, int, int]:
    """``"00000000:00:09.0"`` -> (domain, bus, device)."""
    domain, bus, rest = bus_id.split(":")
    return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)


def _field_value(gpu: FakeGpu, field_id: int) -> int | None:
    """The reading behind an ``NVML_FI_*`` id, in NVML's unit; None for an id the fake does not serve."""
    if field_id in gpu.clocks_event_ns:
        return gpu.clocks_event_ns[field_id]
    ecc = {
        NVML_FI_DEV_ECC_SBE_VOL_DEV: (0, 0),
        NVML_FI_DEV_ECC_DBE_VOL_DEV: (1, 0),
        NVML_FI_DEV_ECC_SBE_AGG_DEV: (0, 1),
        NVML_FI_DEV_ECC_DBE_AGG_DEV: (1, 1),
    }
    if field_id in ecc:  # single bit = corrected, double bit = uncorrected
        return gpu.ecc_locations.get((*ecc[field_id], NVML_MEMORY_LOCATION_DRAM))
    remapped = (NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_UNC, NVML_FI_DEV_REMAPPED_PENDING)
    if field_id in (*remapped, NVML_FI_DEV_REMAPPED_FAILURE):
        return gpu.remapped_rows[(*remapped, NVML_FI_DEV_REMAPPED_FAILURE).index(field_id)]
    return {
        NVML_FI_DEV_MEMORY_TEMP: gpu.memory_temperature,
        NVML_FI_DEV_POWER_AVERAGE: gpu.power_average,
        NVML_FI_DEV_POWER_INSTANT: gpu.power_instant,
        NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: gpu.recovery_action,
        NVML_FI_DEV_EDPP_MULTIPLIER: gpu.edpp_multiplier,
        NVML_FI_DEV_PCIE_COUNT_TX_BYTES: gpu.pcie_bytes[0],
        NVML_FI_DEV_PCIE_COUNT_RX_BYTES: gpu.pcie_bytes[1],
    }.get(field_id)


def make_gpus(n: int) -> list[FakeGpu]:
    """``n`` distinct H100s with distinct UUIDs and bus ids."""
    return [
        FakeGpu(
            index=i,
            uuid=f"GPU-5D1B2D6E-{i:04X}-4A5B-8C9D-00000000000{i % 10}",
            bus_id=f"00000000:{0x10 + i:02X}:00.0",
            serial=f"16501234567{i:02d}",
        )
        for i in range(n)
    ]
