"""The NVML facade: the only module in kgpu that touches ``pynvml``.

The NVML module is injected (the real ``pynvml`` from nvidia-ml-py, or ``tests/fakes/fake_nvml.py``), so the
code path is the same in production and in tests: the facade calls the module's functions by their real
names and catches the module's own ``NVMLError_*`` classes.

Decisions:

- Initialisation is lazy and guarded by a lock: importing the exporter, or starting the HTTP server, never
  touches the driver; the first scrape does. ``nvmlInit`` is reference-counted by NVML, so the facade keeps
  exactly one reference and drops it in :meth:`Nvml.invalidate`.
- Errors come in two kinds. A field the GPU cannot report (NotSupported, NoPermission, NotFound, ...) is
  ``None`` from :meth:`Nvml.query`: the series is simply absent, as nvidia_gpu_exporter does for
  ``[N/A]``. Errors that mean NVML itself cannot answer (GpuIsLost, Uninitialized, DriverNotLoaded, the
  library missing) raise :class:`NvmlUnavailable`; the caller reports a failed collection and calls
  :meth:`Nvml.invalidate`, so the next scrape re-initialises NVML from scratch.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

# Errors after which NVML has to be shut down and initialised again.
FATAL_ERRORS = (
    "NVMLError_GpuIsLost",
    "NVMLError_Uninitialized",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibraryNotFound",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_ResetRequired",
)


class NvmlUnavailable(Exception):
    """NVML cannot answer at all (lost GPU, driver not loaded, not initialised)."""

    def __init__(self, message: str, *, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


def strip_uuid(uuid: str) -> str:
    """nvidia_gpu_exporter's form of a GPU UUID: lower case, without the ``GPU-`` prefix."""
    text = uuid.strip()
    if text[:4].upper() == "GPU-":
        text = text[4:]
    return text.lower()


def as_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace").rstrip("\x00")
    return str(value)


class Nvml:
    """Lazy, locked access to an NVML module.

    ``lib`` is the module object (``pynvml`` or a fake); ``None`` imports ``pynvml`` on first use.
    """

    def __init__(self, lib: ModuleType | Any | None = None) -> None:
        self._lib = lib
        self._lock = threading.RLock()
        self._blocking_cv = threading.Condition()  # guards _initialised flips against _blocking
        self._blocking = 0  # blocking calls (nvmlEventSetWait) in progress in other threads
        self._initialised = False
        self._fatal: tuple[type[BaseException], ...] = ()
        self._base: type[BaseException] = Exception
        self.generation = 0  # bumps on every successful init; caches keyed on it go stale on re-init

    # -- module and lifecycle -------------------------------------------------------------------------
    @property
    def lib(self) -> Any:
        if self._lib is None:
            with self._lock:
                if self._lib is None:
                    try:
                        self._lib = importlib.import_module("pynvml")
                    except ImportError as exc:  # nvidia-ml-py is a dependency, but be clear if it is gone
                        raise NvmlUnavailable(f"cannot import pynvml: {exc}", kind="LibraryNotFound") from exc
        return self._lib

    def _error_classes(self) -> None:
        lib = self.lib
        self._base = getattr(lib, "NVMLError", Exception)
        self._fatal = tuple(cls for name in FATAL_ERRORS if (cls := getattr(lib, name, None)) is not None)

    @property
    def initialised(self) -> bool:
        return self._initialised

    def ensure_init(self) -> None:
        if self._initialised:
            return
        with self._lock:
            if self._initialised:
                return
            self._error_classes()
            try:
                self.lib.nvmlInit()
            except self._base as exc:
                raise NvmlUnavailable(
                    f"nvmlInit failed: {self._describe(exc)}", kind=self._kind(exc)
                ) from exc
            except OSError as exc:  # libnvidia-ml.so missing on a host without the driver
                raise NvmlUnavailable(f"nvmlInit failed: {exc}", kind="LibraryNotFound") from exc
            self._initialised = True
            self.generation += 1

    # How long a shutdown waits for blocking calls in other threads to return (they wait in slices of ~1 s).
    DRAIN_TIMEOUT = 3.0

    def invalidate(self) -> None:
        """Drop our NVML reference; the next call initialises again.

        A blocking call in progress in another thread (the XID watcher's ``nvmlEventSetWait``) is waited for
        first, up to :attr:`DRAIN_TIMEOUT`: NVML is not shut down under a call using one of its objects.
        """
        with self._lock:
            with self._blocking_cv:
                if not self._initialised:
                    return
                self._initialised = False
                if not self._blocking_cv.wait_for(lambda: self._blocking == 0, timeout=self.DRAIN_TIMEOUT):
                    log.warning("shutting NVML down with a blocking call still in progress")
            # shutting down a broken NVML may fail too; we re-init next time regardless
            with contextlib.suppress(Exception):
                self.lib.nvmlShutdown()

    # -- calls ----------------------------------------------------------------------------------------
    def call(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``lib.<fn>``; fatal errors become :class:`NvmlUnavailable`, others propagate."""
        self.ensure_init()
        try:
            return getattr(self.lib, fn)(*args, **kwargs)
        except self._fatal as exc:
            raise NvmlUnavailable(f"{fn}: {self._describe(exc)}", kind=self._kind(exc)) from exc

    def blocking_call(self, fn: str, *args: Any) -> Any:
        """Like :meth:`call`, for a call that may block (``nvmlEventSetWait``): :meth:`invalidate` waits for it
        to return before shutting NVML down. Raises :class:`NvmlUnavailable` (kind ``Reinitialising``) instead
        of starting one while NVML is being shut down, and never initialises NVML itself."""
        with self._blocking_cv:
            if not self._initialised:
                raise NvmlUnavailable(f"{fn}: NVML is being re-initialised", kind="Reinitialising")
            self._blocking += 1
        try:
            return getattr(self.lib, fn)(*args)
        except self._fatal as exc:
            raise NvmlUnavailable(f"{fn}: {self._describe(exc)}", kind=self._kind(exc)) from exc
        finally:
            with self._blocking_cv:
                self._blocking -= 1
                self._blocking_cv.notify_all()

    def query(self, fn: str, *args: Any, **kwargs: Any) -> Any | None:
        """Like :meth:`call`, but a field NVML cannot report (any non-fatal NVML error) is ``None``."""
        self.ensure_init()
        try:
            return getattr(self.lib, fn)(*args, **kwargs)
        except self._fatal as exc:
            raise NvmlUnavailable(f"{fn}: {self._describe(exc)}", kind=self._kind(exc)) from exc
        except self._base:
            return None
        except AttributeError:  # an older nvidia-ml-py without this function
            return None

    def const(self, name: str, default: Any = None) -> Any:
        return getattr(self.lib, name, default)

    def is_error(self, exc: BaseException, name: str) -> bool:
        cls = getattr(self.lib, name, None)
        return cls is not None and isinstance(exc, cls)

    @staticmethod
    def _kind(exc: BaseException) -> str:
        return type(exc).__name__.removeprefix("NVMLError_")

    @staticmethod
    def _describe(exc: BaseException) -> str:
        try:
            text = str(exc)
        except Exception:  # pynvml's __str__ calls into the library, which may be gone
            text = ""
        return f"{type(exc).__name__.removeprefix('NVMLError_')}" + (f" ({text})" if text else "")

    # -- helpers shared by the collector, the XID watcher and node-check ------------------------------
    def device_count(self) -> int:
        return int(self.call("nvmlDeviceGetCount"))

    def handle(self, index: int) -> Any:
        return self.call("nvmlDeviceGetHandleByIndex", index)

    def uuid(self, handle: Any) -> str:
        return as_text(self.call("nvmlDeviceGetUUID", handle))

    def driver_version(self) -> str | None:
        value = self.query("nvmlSystemGetDriverVersion")
        return None if value is None else as_text(value)

    def cuda_driver_version(self) -> str | None:
        """CUDA version the driver supports, as nvidia-smi prints it (``13010`` -> ``"13.1"``)."""
        value = self.query("nvmlSystemGetCudaDriverVersion")
        if value is None:
            return None
        return f"{int(value) // 1000}.{(int(value) % 1000) // 10}"
