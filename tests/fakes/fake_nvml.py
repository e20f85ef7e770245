"""A fake of the part of nvidia-ml-py (``pynvml``) that kgpu calls.

It has the same function names, constants and exception classes (``NVMLError_NotSupported``,
``NVMLError_GpuIsLost``, ...) as pynvml, so the exporter's facade runs the same code against it as against
the real library. Values are in NVML's own units (mW, mJ, MHz, percent, bytes), so the tests prove kgpu's
unit conversions.

Knobs a test turns:
- ``FakeGpu.unsupported``: names of NVML functions that raise NotSupported for that GPU;
- ``FakeGpu.lost``: every call on that GPU raises GpuIsLost (the "fell off the bus" case);
- ``FakeNvml.driver_loaded = False``: nvmlInit raises DriverNotLoaded;
- ``FakeNvml.push_xid(index, xid)``: an XID event for ``nvmlEventSetWait``.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Any

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
    unsupported: set[str] = field(default_factory=set)
    lost: bool = False


class _Handle:
    __slots__ = ("gpu", "mig")

    def __init__(self, gpu: FakeGpu, mig: FakeMig | None = None) -> None:
        self.gpu = gpu
        self.mig = mig


class FakeNvml:
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
    NVMLError_Unknown = NVMLError_Unknown

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
        return _Struct({"busId": gpu.bus_id.encode(), "pciSubSystemId": gpu.pci_sub_system_id})

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
    def nvmlEventSetCreate(self) -> object:
        self._check()
        return object()

    def nvmlEventSetFree(self, event_set: object) -> None:
        return None

    def nvmlDeviceRegisterEvents(self, h: _Handle, event_types: int, event_set: object) -> None:
        self._gpu(h, "nvmlDeviceRegisterEvents")

    def nvmlEventSetWait(self, event_set: object, timeout_ms: int) -> _Struct:
        deadline = time.monotonic() + timeout_ms / 1000
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
