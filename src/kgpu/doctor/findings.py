"""What a check returns, and the report that collects them.

A finding names one object (``Kind/namespace/name``; cluster-scoped objects as ``Kind/name``), says what is
wrong in one or two sentences and gives a concrete fix: the YAML to add or the command to run. Severity is
``error`` when something is broken now or will break (a pod that cannot run, a GPU that is not advertised),
``warning`` when it works but wastes money or will surprise someone, ``info`` for facts worth knowing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def obj_ref(kind: str, name: str, namespace: str | None = None) -> str:
    return f"{kind}/{namespace}/{name}" if namespace is not None else f"{kind}/{name}"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    severity: str
    object: str
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "check": self.check,
            "severity": self.severity,
            "object": self.object,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class Report:
    """Findings, errors first, then by check and object; plus counts of what was looked at."""

    findings: list[Finding]
    counts: dict[str, int] = field(default_factory=dict)
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # summary values that are not counts (cost)

    def __post_init__(self) -> None:
        self.findings.sort(key=lambda f: (_RANK[f.severity], f.check, f.object))

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    def by_check(self, check: str) -> list[Finding]:
        return [f for f in self.findings if f.check == check]

    def summary(self) -> dict[str, Any]:
        sev = Counter(f.severity for f in self.findings)
        out: dict[str, Any] = {"errors": sev[ERROR], "warnings": sev[WARNING], "info": sev[INFO]}
        out.update(self.counts)
        out.update(self.extra)
        out["checks"] = dict(sorted(Counter(f.check for f in self.findings).items()))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"findings": [f.as_dict() for f in self.findings], "summary": self.summary()}
