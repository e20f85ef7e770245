"""What ``kgpu queue`` shows of its result (queue.schema.json), in the terminal and in the HTML report
(kgpu.cli.report): the quota table's cells, a row per Workload, the verdicts and the levers, in words."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kgpu.cli.output import table


def _when(earliest: datetime | None, latest: datetime | None, now: datetime) -> str:
    if earliest is None:
        return "-"

    def rel(t: datetime) -> str:
        s = int((t - now).total_seconds())
        if s <= 0:
            return "now"
        if s < 3600:
            return f"+{-(-s // 60)}m"
        if s < 86400:
            return f"+{s // 3600}h{(s % 3600) // 60:02d}m"
        return f"+{s // 86400}d{(s % 86400) // 3600}h"

    a = rel(earliest)
    b = rel(latest) if latest is not None else "?"
    return a if a == b else f"{a} .. {b}"


QUOTA_HEADERS = ["CLUSTERQUEUE", "COHORT", "FLAVOR", "RESOURCE", "NOMINAL", "USED", "BORROWED"]


QUOTA_TITLE = "Quota per ClusterQueue (used includes what is borrowed)"


def quota_cells(q: dict[str, Any]) -> list[str]:
    """One row of ``cluster_queues`` as the quota table shows it (QUOTA_HEADERS)."""
    return [
        q["cluster_queue"] + ("" if q["active"] else " (inactive)"),
        q["cohort"] or "-",
        q["flavor"],
        q["resource"],
        _quantity(q["resource"], q["nominal"]),
        _quantity(q["resource"], q["used"]),
        _quantity(q["resource"], q["borrowed"]),
    ]


def quota_table(rows: list[dict[str, Any]]) -> str:
    return table(QUOTA_HEADERS, [quota_cells(q) for q in rows], title=QUOTA_TITLE)


def _quantity(resource: str, value: int) -> str:
    from kgpu.model.kueue_resources import quantity_string

    return quantity_string(resource, value)


def lines(data: dict[str, Any]) -> tuple[list[list[str]], list[str], list[str]]:
    """What the terminal and the HTML report show of the result: a row per Workload (workload,
    ClusterQueue, status, flavors, start, ahead), the verdict lines and the lever lines."""
    now = datetime.fromisoformat(data["now"].replace("Z", "+00:00")) if data["now"] else datetime.now(UTC)
    rows = []
    notes = []
    levers: list[str] = []
    for w in data["workloads"]:
        who = f"{w['namespace']}/{w['name']}"
        flavors = ",".join(sorted({f for ps in w["flavors"].values() for f in ps.values()})) or "-"
        status = "admitted" if w["admitted"] else ("evicted" if w["evicted"] else "pending")
        earliest, latest = (
            datetime.fromisoformat(t.replace("Z", "+00:00")) if t else None
            for t in (w["start"]["earliest"], w["start"]["latest"])
        )
        rows.append(
            [
                who + (" (new)" if w["submitted"] else ""),
                w["cluster_queue"] or "-",
                status,
                flavors,
                _when(earliest, latest, now),
                str(w["ahead_count"]),
            ]
        )
        if not w["admitted"] and w["message"]:
            notes.append(f"{who}: {w['message']}")
        pl = w.get("placement")
        if pl is not None:
            nodes = ", ".join(pl["new_nodes"]) if pl["new_nodes"] else ", ".join(pl["nodes"][:3])
            cost = f", ${pl['hourly_cost']:.4f}/h" if pl["hourly_cost"] is not None else ""
            if pl["status"] == "placed":
                where = f"launches {nodes}{cost}" if pl["new_nodes"] else f"runs on {nodes}"
                notes.append(f"{who}: quota admits, nodes too: {pl['scheduled']} pod(s); {where}")
            elif pl["status"] == "partly-placed":
                notes.append(
                    f"{who}: quota admits, only {pl['scheduled']} of {pl['pods']} pods "
                    f"fit (the job waits for the rest): {pl['message']}"
                )
            else:
                notes.append(f"{who}: quota admits, nodes cannot: {pl['message']}")
        if w["start"]["earliest"] is None and w["start"]["note"]:
            notes.append(f"{who}: no start time: {w['start']['note']}")
        levers += [f"{who}: {_lever_words(lv)}" for lv in w["levers"]]
    return rows, notes, levers


def _lever_words(lv: dict[str, Any]) -> str:
    got = ",".join(sorted({f for ps in lv["flavors"].values() for f in ps.values()})) or "-"
    extra = ""
    if lv["preempts"]:
        extra += f"; preempts {', '.join(lv['preempts'][:5])}" + (" ..." if len(lv["preempts"]) > 5 else "")
    if lv["also_admits"]:
        n = len(lv["also_admits"])
        extra += f"; admits {n} other Workload{'s' if n != 1 else ''} too"
    if lv["displaces"]:
        n = len(lv["displaces"])
        shown = ", ".join(lv["displaces"][:3]) + (" ..." if n > 3 else "")
        extra += f"; {n} admitted now would wait instead ({shown})"
    return f"{lv['change']} -> admitted in {got}{extra}"


VERDICTS = "Verdicts (pending: Kueue's QuotaReserved message; admitted: where kube-scheduler's model places the pods)"


LEVERS = "What would let it start now (each change re-simulated with Kueue's admission)"
