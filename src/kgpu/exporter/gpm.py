"""GPU Performance Monitoring (GPM, Hopper and newer): SM and tensor activity between two collections.

NVML's GPM metrics are not readings but differences: NVML fills an allocated sample buffer with the GPU's
(or one MIG GPU instance's) performance counters, and ``nvmlGpmMetricsGet`` turns two such samples into
averages over the time between them. :class:`GpmSampler` keeps, for every sampled entity, the previous
sample, and on each collection reads a new one and returns the activity since the previous collection.

Decisions:

- **First collection.** The first collection after start-up, after NVML is re-initialised, or after a MIG
  GPU instance appears only takes the baseline sample: there is no series yet. Blocking a scrape to take two
  samples would cost every scrape that much latency on every re-init, for one data point.
- **Minimum interval.** NVML refreshes the counters about every 100 ms, so two samples closer than
  :data:`MIN_INTERVAL` give noisy or undefined numbers. A collection that comes sooner than that after the
  previous sample does not sample again; it serves the values computed last time, and the next sample is
  compared with the older one.
- **Units.** NVML reports percentages (0..100); the sampler returns ratios (0..1), clamped to that range.
- **Support.** ``nvmlGpmQueryDeviceSupport`` is asked once per GPU and NVML generation; a GPU without GPM
  (before Hopper, or a driver without the functions) has no series and costs no further calls until NVML
  is re-initialised. The same holds for an entity whose sample call answers NotSupported (e.g. a whole GPU
  while MIG is on, on drivers that only sample GPU instances); for a whole GPU it is asked again when its
  MIG mode changes. Any other non-fatal error gives no series for that collection only.
- **Buffers.** Each entity holds two NVML sample buffers (previous and next), allocated on first use and
  freed when a GPU instance goes away, in :meth:`GpmSampler.close` (which the collector calls before it
  shuts NVML down to re-initialise it) and at exporter shutdown. Buffers of an NVML session that has ended
  some other way are forgotten, not freed: NVML's handles die with the session.
- **Errors.** Every call goes through the facade: fatal NVML errors raise
  :class:`~kgpu.exporter.nvml.NvmlUnavailable`, as for any other reading, and the collection fails.

Not thread-safe: the collector calls it under its collection lock, one collection at a time, which is also
what keeps each entity's sample pair consistent.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kgpu.exporter.nvml import Nvml, NvmlUnavailable

# Metric key (also the nvidia_smi_* family suffix) -> (NVML metric id constant, pynvml's value for it).
GPM_METRICS: dict[str, tuple[str, int]] = {
    "sm_activity_ratio": ("NVML_GPM_METRIC_SM_UTIL", 2),
    "sm_occupancy_ratio": ("NVML_GPM_METRIC_SM_OCCUPANCY", 3),
    "tensor_activity_ratio": ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5),
}

MIN_INTERVAL = 0.1  # seconds; NVML's GPM counters refresh about every 100 ms

# Errors after which an entity is not sampled again until NVML is re-initialised.
_NEVER = frozenset({"NotSupported", "FunctionNotFound"})

Key = tuple[str, int | None]  # (GPU uuid, MIG GPU instance id or None for the whole GPU)


@dataclass
class GpmValues:
    """Activity over the last interval, metric key -> ratio: the whole GPU's and each GPU instance's."""

    gpu: dict[str, float] = field(default_factory=dict)
    instances: dict[int, dict[str, float]] = field(default_factory=dict)


@dataclass
class _Entity:
    previous: Any  # buffer holding the last good sample
    spare: Any  # buffer the next sample is read into
    taken: float | None = None  # clock() when ``previous`` was read; None: no sample yet
    values: dict[str, float] = field(default_factory=dict)


class GpmSampler:
    """Per-GPU and per-GPU-instance GPM samples, kept between collections."""

    def __init__(
        self,
        nvml: Nvml,
        *,
        min_interval: float = MIN_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nvml = nvml
        self.min_interval = min_interval
        self.clock = clock
        self._generation = -1
        self._entities: dict[Key, _Entity] = {}
        self._supported: dict[str, bool] = {}  # uuid -> nvmlGpmQueryDeviceSupport's answer
        self._off: dict[Key, bool] = {}  # entities that answered NotSupported -> MIG mode at the time
        self._request: Any = None  # the nvmlGpmMetricsGet_t, built once per generation

    # -- one GPU per collection ----------------------------------------------------------------------
    def read(
        self, handle: Any, uuid: str, gpu_instance_ids: Iterable[int] = (), *, mig: bool = False
    ) -> GpmValues:
        """Sample the GPU (and its MIG GPU instances) and return the activity since the previous call.

        ``handle`` is the GPU's NVML handle (GPU instances are sampled through their parent's handle),
        ``uuid`` its key here, ``gpu_instance_ids`` the GPU instances that exist now (the others' samples are
        freed), ``mig`` whether MIG mode is on.
        """
        self._sync_generation()
        out = GpmValues()
        if not self._device_supported(handle, uuid):
            return out
        wanted = set(gpu_instance_ids)
        for key in [k for k in (*self._entities, *self._off) if k[0] == uuid and k[1] is not None]:
            if key[1] not in wanted:
                self._drop(key)
                self._off.pop(key, None)
        out.gpu = self._sample((uuid, None), handle, mig)
        for gi in sorted(wanted):
            values = self._sample((uuid, gi), handle, True)
            if values:
                out.instances[gi] = values
        return out

    def close(self, *, free: bool = True) -> None:
        """Free every sample buffer (``free=False``: forget them, for buffers of an NVML session that has
        ended). Does not initialise NVML to do so: without it the buffers are dropped."""
        for key in list(self._entities):
            self._drop(key, free=free)
        self._supported.clear()
        self._off.clear()
        self._request = None
        self._generation = -1

    # -- internals ------------------------------------------------------------------------------------
    def _sync_generation(self) -> None:
        nv = self.nvml
        nv.ensure_init()
        if nv.generation != self._generation:
            self.close(free=False)  # buffers of a session that has ended died with it
            self._generation = nv.generation

    def _device_supported(self, handle: Any, uuid: str) -> bool:
        if uuid not in self._supported:
            if self._metrics_request() is None:  # an nvidia-ml-py without GPM
                self._supported[uuid] = False
                return False
            support, error = self._attempt("nvmlGpmQueryDeviceSupport", handle)
            if error is None:
                self._supported[uuid] = bool(getattr(support, "isSupportedDevice", 0))
            elif error in _NEVER:
                self._supported[uuid] = False
            else:
                return False  # a passing error: ask again next time
        return self._supported[uuid]

    def _sample(self, key: Key, handle: Any, mig: bool) -> dict[str, float]:
        if self._off.get(key) == mig:
            return {}
        entity = self._entities.get(key)
        if entity is None:
            entity = self._allocate()
            if entity is None:
                return {}
            self._entities[key] = entity
        now = self.clock()
        if entity.taken is not None and now - entity.taken < self.min_interval:
            return dict(entity.values)
        if key[1] is None:
            _, error = self._attempt("nvmlGpmSampleGet", handle, entity.spare)
        else:
            _, error = self._attempt("nvmlGpmMigSampleGet", handle, key[1], entity.spare)
        if error is not None:
            if error in _NEVER:
                self._off[key] = mig
                self._drop(key)
            return {}  # the previous sample stays; the next interval spans the gap
        older, had_sample = entity.previous, entity.taken is not None
        entity.previous, entity.spare, entity.taken = entity.spare, older, now
        entity.values = self._metrics(older, entity.previous) if had_sample else {}
        return dict(entity.values)

    def _metrics(self, sample1: Any, sample2: Any) -> dict[str, float]:
        request = self._metrics_request()
        if request is None:
            return {}
        request.sample1 = sample1
        request.sample2 = sample2
        result, error = self._attempt("nvmlGpmMetricsGet", request)
        if error is not None:
            return {}
        out: dict[str, float] = {}
        for i, key in enumerate(GPM_METRICS):
            metric = result.metrics[i]
            if int(metric.nvmlReturn) != 0:  # this metric is not available on this GPU
                continue
            value = float(metric.value)
            if math.isfinite(value):
                out[key] = min(max(value / 100.0, 0.0), 1.0)
        return out

    def _metrics_request(self) -> Any:
        if self._request is None:
            nv = self.nvml
            struct = nv.const("c_nvmlGpmMetricsGet_t")
            if struct is None:
                return None
            request = struct()
            request.version = int(nv.const("NVML_GPM_METRICS_GET_VERSION", 1))
            request.numMetrics = len(GPM_METRICS)
            for i, (const, default) in enumerate(GPM_METRICS.values()):
                request.metrics[i].metricId = int(nv.const(const, default))
            self._request = request
        return self._request

    def _allocate(self) -> _Entity | None:
        first, error = self._attempt("nvmlGpmSampleAlloc")
        if error is not None:
            return None
        second, error = self._attempt("nvmlGpmSampleAlloc")
        if error is not None:
            self._free(first)
            return None
        return _Entity(first, second)

    def _drop(self, key: Key, *, free: bool = True) -> None:
        entity = self._entities.pop(key, None)
        if entity is not None and free:
            self._free(entity.previous)
            self._free(entity.spare)

    def _free(self, sample: Any) -> None:
        # A buffer that cannot be freed is dropped all the same: that is no reason to fail a collection.
        if self.nvml.initialised:
            with contextlib.suppress(NvmlUnavailable, *self._nvml_errors()):
                self.nvml.call("nvmlGpmSampleFree", sample)

    def _attempt(self, fn: str, *args: Any) -> tuple[Any, str | None]:
        """``(result, None)``, or ``(None, error kind)`` for a non-fatal NVML error; fatal ones raise."""
        if self.nvml.const(fn) is None:  # an nvidia-ml-py without this function
            return None, "FunctionNotFound"
        try:
            return self.nvml.call(fn, *args), None
        except self._nvml_errors() as exc:
            return None, type(exc).__name__.removeprefix("NVMLError_")

    def _nvml_errors(self) -> tuple[type[BaseException], ...]:
        base = self.nvml.const("NVMLError")
        return (base,) if isinstance(base, type) and issubclass(base, BaseException) else ()
