"""Progress on a terminal for work that takes a while (a 50,000-pod simulate, plan --compare's templates).

Only when standard error is a terminal: one line on stderr, rewritten in place (``\\r`` and erase-line), with
what is being done and the time so far, from a background thread, so that the work itself needs no hooks;
it is erased when the work ends. Nothing is written when stderr is a file or a pipe, with ``TERM=dumb``, or
with ``KGPU_NO_PROGRESS`` set, and never anything on standard output, so ``-o json`` stays clean. The line
appears only after ``KGPU_PROGRESS_DELAY`` seconds (default 1): quick commands do not flicker.

    with Progress("simulating 50,000 pods") as progress:
        ...
        progress.step("writing the result")

The CLI's printers (``output.emit``, ``output.echo``, error lines) call :func:`stop_active` first, so a
verb wrapped whole (``kgpu simulate``, see ``cli.main``) erases the line before its result is printed and
the two never share a line of the terminal.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import IO

SPINNER = "|/-\\"
ERASE = "\r\x1b[K"
_active: list[Progress] = []  # the one being drawn, if any


def enabled(stream: IO[str] | None = None) -> bool:
    """Whether progress may be drawn on ``stream`` (default: standard error)."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("KGPU_NO_PROGRESS") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A context manager drawing ``<spinner> <what> (<seconds>s)`` on a terminal's stderr until it exits."""

    def __init__(self, what: str, *, stream: IO[str] | None = None, interval: float = 0.25) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.what = what
        self.interval = interval
        try:
            self.delay = float(os.environ.get("KGPU_PROGRESS_DELAY", "1"))
        except ValueError:
            self.delay = 1.0
        self.on = enabled(self.stream)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._drawn = False
        self._frame = 0
        self._start = time.monotonic()

    def step(self, what: str) -> None:
        """Say what is being done now: drawn at once once the delay has passed, not at the next tick, so
        that every step shows however fast the steps go."""
        with self._lock:
            self.what = what
            if self._thread is not None and not self._stop.is_set() and self._since() >= self.delay:
                self._draw()

    def _since(self) -> float:
        return time.monotonic() - self._start

    def _draw(self) -> bool:
        """One frame (the caller holds the lock); False when the terminal went away."""
        line = f"{SPINNER[self._frame % len(SPINNER)]} {self.what} ({self._since():.0f}s)"
        self._frame += 1
        try:
            self.stream.write(ERASE + line[:200])
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, keep working
            self._stop.set()
            return False
        self._drawn = True
        return True

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            with self._lock:
                if self._stop.is_set() or not self._draw():
                    return
            self._stop.wait(self.interval)

    def __enter__(self) -> Progress:
        self._start = time.monotonic()
        if self.on:
            stop_active()
            self._thread = threading.Thread(target=self._run, name="kgpu-progress", daemon=True)
            self._thread.start()
            _active.append(self)
        return self

    def stop(self) -> None:
        """Stop drawing and erase the line (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            with self._lock:
                if self._drawn:
                    self._drawn = False
                    try:
                        self.stream.write(ERASE)
                        self.stream.flush()
                    except (OSError, ValueError):
                        pass
        if self in _active:
            _active.remove(self)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def stop_active() -> None:
    """Erase the progress line being drawn, before anything else is printed."""
    for progress in list(_active):
        progress.stop()
