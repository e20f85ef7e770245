"""What a check returns, and the report that collects them.

A finding names one object (``Kind/namespace/name``; cluster-scoped objects as ``Kind/name``), says what is
wrong in one or two sentences and gives a concrete fix: the YAML to add or the command to run. Severity is
``error`` when something is broken now or will break (a pod that cannot run, a GPU that is not advertised),
``warning`` when it works but wastes money or will surprise someone, ``info`` for facts worth knowing.

A big cluster repeats one root cause on hundreds of objects; :func:`group_findings` folds them into one
:class:`Group` each (see :func:`group_key`), and :meth:`Report.select` keeps the findings a reader asked for
(checks, a minimum severity, a namespace, a set of nodes).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def obj_ref(kind: str, name: str, namespace: str | None = None) -> str:
    return f"{kind}/{namespace}/{name}" if namespace is not None else f"{kind}/{name}"


def split_ref(ref: str) -> tuple[str, str | None, str]:
    """``Kind/ns/name`` -> ``(kind, ns, name)``; ``Kind/name`` (cluster-scoped) -> ``(kind, None, name)``."""
    kind, _, rest = ref.partition("/")
    ns, sep, name = rest.partition("/")
    return (kind, ns, name) if sep else (kind, None, rest)


def at_least(severity: str, minimum: str) -> bool:
    """``error`` is at least ``warning``; ``info`` is not."""
    return _RANK[severity] <= _RANK[minimum]


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


NAME_SLOT = "<name>"
NUMBER_SLOT = "<n>"
_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def _without_name(text: str, ref: str) -> str:
    """``text`` with the object's own name (and its ``ns/name``) replaced by ``<name>``.

    The bare name is replaced only as a whole token: not inside a longer name (``gpu-1`` in ``gpu-10``),
    a path (``nvidia.com/gpu``) or a dotted host name; a sentence's full stop after it is fine.
    """
    _, ns, name = split_ref(ref)
    if not name or not text:
        return text
    text = text.replace(ref, NAME_SLOT)
    if ns is not None:
        text = text.replace(f"{ns}/{name}", NAME_SLOT)
    if name not in text:
        return text
    return re.sub(rf"(?<![\w./-]){re.escape(name)}(?![\w/-]|\.\w)", NAME_SLOT, text)


def group_key(f: Finding) -> tuple[str, str, str, str]:
    """What makes two findings one root cause: the same check and severity, the same message once the
    object's own name and every number (counts, prices, versions) are abstracted, and the same fix once the
    object's name is abstracted. The fix is compared without abstracting numbers, so that the one fix a
    group shows (its first object's) is, with each object's name in place, the fix of every member."""
    message = _NUMBER.sub(NUMBER_SLOT, _without_name(f.message, f.object))
    return (f.check, f.severity, message, _without_name(f.fix, f.object))


@dataclass(slots=True)
class Group:
    """Findings of one root cause (:func:`group_key`), in report order; the first stands for them all."""

    findings: list[Finding]

    @property
    def first(self) -> Finding:
        return self.findings[0]

    @property
    def check(self) -> str:
        return self.first.check

    @property
    def severity(self) -> str:
        return self.first.severity

    @property
    def objects(self) -> list[str]:
        return [f.object for f in self.findings]

    @property
    def count(self) -> int:
        return len(self.findings)

    @property
    def same_fix(self) -> bool:
        """Every member's fix is the first's, word for word (no object name in it)."""
        fix = self.first.fix
        return all(f.fix == fix for f in self.findings)

    @property
    def same_message(self) -> bool:
        message = self.first.message
        return all(f.message == message for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "count": self.count,
            "objects": self.objects,
            "message": self.first.message,
            "fix": self.first.fix,
        }


def group_findings(findings: Iterable[Finding]) -> list[Group]:
    """Findings of one root cause together; groups in the order their first finding comes."""
    groups: dict[tuple[str, str, str, str], Group] = {}
    for f in findings:
        key = group_key(f)
        group = groups.get(key)
        if group is None:
            groups[key] = Group([f])
        else:
            group.findings.append(f)
    return list(groups.values())


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

    def groups(self) -> list[Group]:
        return group_findings(self.findings)

    def select(
        self,
        *,
        checks: Collection[str] = (),
        severity: str | None = None,
        namespace: str | None = None,
        nodes: Collection[str] | None = None,
    ) -> Report:
        """The findings of ``checks`` (all when empty), at ``severity`` or above, about objects in
        ``namespace`` (cluster-scoped objects left out) and, with ``nodes``, about those nodes only. The
        counts of what was looked at stay the cluster's."""

        def keep(f: Finding) -> bool:
            if checks and f.check not in checks:
                return False
            if severity is not None and not at_least(f.severity, severity):
                return False
            if namespace is not None or nodes is not None:
                kind, ns, name = split_ref(f.object)
                if namespace is not None and ns != namespace:
                    return False
                if nodes is not None and (kind != "Node" or name not in nodes):
                    return False
            return True

        return Report([f for f in self.findings if keep(f)], dict(self.counts), self.source, dict(self.extra))

    def as_dict(self, groups: list[Group] | None = None) -> dict[str, Any]:
        """Every finding, the groups (``groups``: this report's, when already made), the summary."""
        return {
            "findings": [f.as_dict() for f in self.findings],
            "groups": [g.as_dict() for g in (self.groups() if groups is None else groups)],
            "summary": self.summary(),
        }
