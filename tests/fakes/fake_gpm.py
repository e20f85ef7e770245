"""The GPM (GPU Performance Monitoring) part of the fake NVML: pynvml's GPM functions, constants and structs.

Every sampled entity, a whole GPU or one MIG GPU instance, accumulates busy time at activity fractions the
test sets, on a clock the test can drive. A sample is a snapshot of that clock and those counters, so what
``nvmlGpmMetricsGet`` computes between two samples is exactly the time-weighted fractions in force between
them, in NVML's unit (percent).

Knobs a test turns (on the ``FakeNvml`` object):
- ``set_gpm_activity(uuid, gpu_instance_id=None, sm=, occupancy=, tensor=)``: fractions from now on (0 until
  set);
- ``advance_gpm(seconds)``: move the clock (from then on it moves only this way; before the first call it
  follows ``time.monotonic``), and ``gpm_now()`` reads it;
- GPM support follows the GPU's compute capability (9.0, Hopper, and newer); ``FakeGpu.unsupported`` can
  name GPM functions as any other;
- ``gpm_unsupported_metrics``: metric ids ``nvmlGpmMetricsGet`` answers NotSupported for;
- ``gpm_live``: sample buffers allocated and not yet freed; ``gpm_freed``: those freed; ``gpm_stale_frees``:
  frees of buffers from an NVML session already shut down (NVML's handles die with the session).
"""

from __future__ import annotations

import ctypes
import itertools
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import collections

# pynvml's values
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_GPM_METRIC_GRAPHICS_UTIL = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_MAX = 477
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_SUPPORT_VERSION = 1

Key = tuple[str, int | None]  # (GPU uuid as NVML spells it, GPU instance id or None)


# --- pynvml's GPM structs, with its ctypes layout: a sample is a pointer to an opaque NVML buffer -------
class struct_c_nvmlGpmSample_t(ctypes.Structure):
    _fields_ = [("serial", ctypes.c_uint)]  # opaque to the caller; the fake keeps its buffer number here


c_nvmlGpmSample_t = ctypes.POINTER(struct_c_nvmlGpmSample_t)


class c_metricInfo_t(ctypes.Structure):
    _fields_ = [("shortName", ctypes.c_char_p), ("longName", ctypes.c_char_p), ("unit", ctypes.c_char_p)]


class c_nvmlGpmMetric_t(ctypes.Structure):
    _fields_ = [
        ("metricId", ctypes.c_uint),
        ("nvmlReturn", ctypes.c_uint),
        ("value", ctypes.c_double),
        ("metricInfo", c_metricInfo_t),
    ]


class c_nvmlGpmMetricsGet_t(ctypes.Structure):
    """The caller sets version, numMetrics, the two samples and each metric's id; NVML fills in the rest."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("numMetrics", ctypes.c_uint),
        ("sample1", c_nvmlGpmSample_t),
        ("sample2", c_nvmlGpmSample_t),
        ("metrics", c_nvmlGpmMetric_t * NVML_GPM_METRIC_MAX),
    ]


@dataclass
class FakeGpmSample:
    """What an NVML sample buffer holds: empty until a sample call fills it."""

    serial: int
    key: Key | None = None
    time: float = 0.0
    busy: tuple[float, float, float] = (0.0, 0.0, 0.0)  # SM, occupancy, tensor: fraction-seconds
    session: int = 0  # the nvmlInit that was current when it was allocated


@dataclass
class _GpmState:
    clock: float | None = None  # None: follow time.monotonic
    last: float | None = None  # when the counters were last brought up to date
    rates: dict[Key, tuple[float, float, float]] = field(default_factory=dict)
    busy: dict[Key, tuple[float, float, float]] = field(default_factory=dict)
    serials: itertools.count[int] = field(default_factory=lambda: itertools.count(1))


class FakeGpmMixin:
    """pynvml's GPM surface; ``FakeNvml`` inherits it. State lives here, keyed by GPU uuid and instance id."""

    NVML_GPM_METRIC_GRAPHICS_UTIL = NVML_GPM_METRIC_GRAPHICS_UTIL
    NVML_GPM_METRIC_SM_UTIL = NVML_GPM_METRIC_SM_UTIL
    NVML_GPM_METRIC_SM_OCCUPANCY = NVML_GPM_METRIC_SM_OCCUPANCY
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = NVML_GPM_METRIC_ANY_TENSOR_UTIL
    NVML_GPM_METRIC_MAX = NVML_GPM_METRIC_MAX
    NVML_GPM_METRICS_GET_VERSION = NVML_GPM_METRICS_GET_VERSION
    NVML_GPM_SUPPORT_VERSION = NVML_GPM_SUPPORT_VERSION
    c_nvmlGpmSample_t = c_nvmlGpmSample_t
    c_nvmlGpmMetric_t = c_nvmlGpmMetric_t
    c_nvmlGpmMetricsGet_t = c_nvmlGpmMetricsGet_t

    if TYPE_CHECKING:  # provided by FakeNvml
        NVMLError: Any
        calls: collections.Counter[str]

        def _check(self) -> None: ...
        def _gpu(self, handle: Any, fn: str) -> Any: ...

    # -- state and test helpers -----------------------------------------------------------------------
    @property
    def _gpm(self) -> _GpmState:
        state = self.__dict__.get("_gpm_state")
        if state is None:
            state = self.__dict__["_gpm_state"] = _GpmState()
        return state

    @property
    def gpm_live(self) -> dict[int, FakeGpmSample]:
        return self.__dict__.setdefault("_gpm_live", {})

    @property
    def gpm_freed(self) -> set[int]:
        return self.__dict__.setdefault("_gpm_freed", set())

    @property
    def gpm_stale_frees(self) -> list[int]:
        """Buffers a caller tried to free after the NVML session that allocated them was shut down."""
        return self.__dict__.setdefault("_gpm_stale_frees", [])

    @property
    def gpm_unsupported_metrics(self) -> set[int]:
        return self.__dict__.setdefault("_gpm_unsupported_metrics", set())

    def gpm_now(self) -> float:
        clock = self._gpm.clock
        return time.monotonic() if clock is None else clock

    def advance_gpm(self, seconds: float) -> None:
        self._gpm_catch_up()
        self._gpm.clock = self.gpm_now() + seconds
        self._gpm_catch_up()

    def set_gpm_activity(
        self,
        uuid: str,
        gpu_instance_id: int | None = None,
        *,
        sm: float = 0.0,
        occupancy: float = 0.0,
        tensor: float = 0.0,
    ) -> None:
        self._gpm_catch_up()
        self._gpm.rates[(uuid, gpu_instance_id)] = (sm, occupancy, tensor)

    def _gpm_catch_up(self) -> None:
        state, now = self._gpm, self.gpm_now()
        if state.last is not None and now > state.last:
            dt = now - state.last
            for key, rates in state.rates.items():
                busy = state.busy.get(key, (0.0, 0.0, 0.0))
                state.busy[key] = (busy[0] + rates[0] * dt, busy[1] + rates[1] * dt, busy[2] + rates[2] * dt)
        state.last = now

    def _gpm_live_sample(self, sample: Any) -> FakeGpmSample:
        if not isinstance(sample, c_nvmlGpmSample_t):  # a crash in the C library; here a loud failure
            raise TypeError(f"expected a c_nvmlGpmSample_t from nvmlGpmSampleAlloc, got {sample!r}")
        if not sample or sample.contents.serial not in self.gpm_live:  # NULL, or freed
            raise self.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self.gpm_live[sample.contents.serial]

    def _gpm_fill(self, sample: Any, key: Key) -> FakeGpmSample:
        buffer = self._gpm_live_sample(sample)
        self._gpm_catch_up()
        buffer.key, buffer.time = key, self.gpm_now()
        buffer.busy = self._gpm.busy.get(key, (0.0, 0.0, 0.0))
        return buffer

    # -- pynvml's GPM functions -----------------------------------------------------------------------
    def nvmlGpmQueryDeviceSupport(self, h: Any) -> SimpleNamespace:
        gpu = self._gpu(h, "nvmlGpmQueryDeviceSupport")
        if h.mig is not None:
            raise self.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        supported = tuple(gpu.compute_capability) >= (9, 0)
        return SimpleNamespace(version=NVML_GPM_SUPPORT_VERSION, isSupportedDevice=int(supported))

    def nvmlGpmSampleAlloc(self) -> Any:
        self._check()
        self.calls["nvmlGpmSampleAlloc"] += 1
        buffer = FakeGpmSample(next(self._gpm.serials), session=self.init_calls)
        self.gpm_live[buffer.serial] = buffer
        return ctypes.pointer(struct_c_nvmlGpmSample_t(buffer.serial))

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._check()
        self.calls["nvmlGpmSampleFree"] += 1
        buffer = self._gpm_live_sample(sample)  # freeing twice is an error
        if buffer.session != self.init_calls:  # allocated under an NVML session that has been shut down
            self.gpm_stale_frees.append(buffer.serial)
            raise self.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        del self.gpm_live[buffer.serial]
        self.gpm_freed.add(buffer.serial)

    def nvmlGpmSampleGet(self, h: Any, sample: Any) -> Any:
        gpu = self._gpu(h, "nvmlGpmSampleGet")
        if h.mig is not None:
            raise self.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if tuple(gpu.compute_capability) < (9, 0):
            raise self.NVMLError(NVML_ERROR_NOT_SUPPORTED)
        self._gpm_fill(sample, (gpu.uuid, None))
        return sample

    def nvmlGpmMigSampleGet(self, h: Any, gpu_instance_id: int, sample: Any) -> Any:
        gpu = self._gpu(h, "nvmlGpmMigSampleGet")
        if h.mig is not None or gpu.mig_mode[0] != 1:  # the parent GPU's handle, in MIG mode
            raise self.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if tuple(gpu.compute_capability) < (9, 0):
            raise self.NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not any(m.gpu_instance_id == gpu_instance_id for m in gpu.migs):
            raise self.NVMLError(NVML_ERROR_NOT_FOUND)
        self._gpm_fill(sample, (gpu.uuid, gpu_instance_id))
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self._check()
        self.calls["nvmlGpmMetricsGet"] += 1
        if not isinstance(request, c_nvmlGpmMetricsGet_t):  # pynvml passes it on byref, unchecked
            raise TypeError(f"expected a c_nvmlGpmMetricsGet_t, got {request!r}")
        if request.version != NVML_GPM_METRICS_GET_VERSION:
            raise self.NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if not 0 < request.numMetrics <= NVML_GPM_METRIC_MAX:
            raise self.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        first = self._gpm_live_sample(request.sample1)
        second = self._gpm_live_sample(request.sample2)
        # both filled, by the same entity, the first earlier than the second
        if first.key is None or first.key != second.key or not second.time > first.time:
            raise self.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        elapsed = second.time - first.time
        percent = {
            NVML_GPM_METRIC_SM_UTIL: (second.busy[0] - first.busy[0]) / elapsed * 100.0,
            NVML_GPM_METRIC_SM_OCCUPANCY: (second.busy[1] - first.busy[1]) / elapsed * 100.0,
            NVML_GPM_METRIC_ANY_TENSOR_UTIL: (second.busy[2] - first.busy[2]) / elapsed * 100.0,
        }
        for metric in request.metrics[: request.numMetrics]:
            if metric.metricId in percent and metric.metricId not in self.gpm_unsupported_metrics:
                metric.nvmlReturn, metric.value = 0, percent[metric.metricId]
            else:
                metric.nvmlReturn, metric.value = NVML_ERROR_NOT_SUPPORTED, 0.0
        return request
