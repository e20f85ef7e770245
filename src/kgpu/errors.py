"""Errors shared by every layer.

Bad input is the user's to fix, so it carries where it came from (file, object, field) and is printed as
one line with exit code 2. Findings and unschedulable pods are results, never exceptions.
"""

from __future__ import annotations


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
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def within(self, outer: str) -> InputError:
        """The same error, located inside ``outer`` (a file or an object)."""
        where = f"{outer}: {self.where}" if self.where else outer
        return InputError(self.message, where=where, hint=self.hint)
