"""Errors shared by every layer.

Bad input is the user's to fix, so it carries where it came from (file, object, field) and is printed as
one line with exit code 2. Findings and unschedulable pods are results, never exceptions.

Values from the input that an error quotes go through :func:`quote`, and every line is capped by
:meth:`InputError.line`: a hostile value (a megabyte string, an alias bomb, a 5,000-digit integer) must not
turn one error line into gigabytes, or take minutes to print.
"""

from __future__ import annotations

import reprlib

MAX_QUOTED = 80  # characters of an input value quoted in a message
MAX_WHERE = 300  # characters of a location (file paths can be 4,096 bytes long)
MAX_MESSAGE = 500

_repr = reprlib.Repr()
_repr.maxstring = MAX_QUOTED
_repr.maxother = MAX_QUOTED
_repr.maxlevel = 2
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4


def quote(value: object, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` for an error message: bounded work and at most about ``limit`` characters."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 200:
            return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
        return _cut(repr(value), limit)
    if isinstance(value, str):
        return _cut(repr(value[: limit + 1]), limit, len(value) > limit)
    return _cut(_repr.repr(value), limit)


def _cut(text: str, limit: int, cut: bool = False) -> str:
    if len(text) <= limit and not cut:
        return text
    return text[: max(1, limit - 1)] + "…"


def one_line(text: str, limit: int) -> str:
    """Control characters escaped (a newline or NUL from the input must not split or hide the line), then
    the middle cut out when longer than ``limit`` (the start names the file, the end the field)."""
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    if len(text) > limit:
        half = (limit - 1) // 2
        text = f"{text[:half]}…{text[-half:]}"
    return text


class KgpuError(Exception):
    """Base of kgpu's own errors."""


class InputError(KgpuError):
    """Bad user input: an unreadable file, an invalid object or field.

    ``where`` names the place as precisely as we know it, e.g.
    ``workloads.yaml: Deployment default/web: spec.template.spec.containers[0].resources.requests.cpu``.
    """

    def __init__(self, message: str, *, where: str = "", hint: str = "") -> None:
        self.message = message
        self.where = where
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        text = one_line(self.message, MAX_MESSAGE)
        if self.where:
            text = f"{one_line(self.where, MAX_WHERE)}: {text}"
        if self.hint:
            text += f" ({one_line(self.hint, MAX_MESSAGE)})"
        return text

    def within(self, outer: str) -> InputError:
        """The same error, located inside ``outer`` (a file or an object)."""
        where = f"{outer}: {self.where}" if self.where else outer
        return InputError(self.message, where=where, hint=self.hint)


def os_error(exc: OSError, where: str, doing: str = "") -> InputError:
    """An OSError as an InputError naming the path: 'out/x.yaml: cannot write: No space left on device'."""
    reason = exc.strerror or type(exc).__name__
    return InputError(f"{doing}: {reason}" if doing else reason, where=where)
