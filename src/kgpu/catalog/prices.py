"""Which prices kgpu shows, and how old they are: every price a verb prints carries this snapshot's date.

The AWS prices (``data/aws-instances.csv``) are one snapshot of SkyPilot's AWS catalog (on-demand list
prices; spot: the median over a region's zones at that moment). The source file records no date, so the
date shown is the day the snapshot was taken into kgpu, the latest the prices can be (see
``data/aws-instances.SOURCES.md``). TKE's GPU specs carry no prices.

A plan's figures may come from elsewhere too: a catalog override (``catalog:`` rows, ``--catalog FILE``), a TKE
super-node pool's own ``prices``, a static node's ``hourlyPrice``. ``kgpu.sim.cost.price_sources`` says which
pool is priced by which; :func:`source_lines` prints them.

Monthly figures use 730 hours, the month AWS's own pricing pages and calculator use (8,760 hours / 12).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

AS_OF = "2026-11-21"
SOURCE = "SkyPilot AWS catalog (skypilot-org/skypilot-catalog 001367d), on-demand and median spot, USD"
HOURS_PER_MONTH = 730


def snapshot() -> dict[str, Any]:
    """The ``prices`` object of JSON outputs: where the prices come from and their date."""
    return {"as_of": AS_OF, "source": SOURCE, "currency": "USD", "hours_per_month": HOURS_PER_MONTH}


def monthly(hourly: float) -> float:
    """An hourly price over AWS's 730-hour month, in cents."""
    return round(hourly * HOURS_PER_MONTH, 2)


def caption() -> str:
    """One line under any table or chart of prices."""
    return f"prices as of {AS_OF} (AWS, USD; month = {HOURS_PER_MONTH} h); spot prices change hourly"


SPOT_NOTE = "spot: the median over the region's zones that day, spot prices change hourly"


def aws_list(region: str) -> str:
    """The AWS list prices of ``region``, with the snapshot's date."""
    return f"AWS {region} list prices as of {AS_OF}"


def source_lines(sources: Iterable[Mapping[str, Any]]) -> list[str]:
    """One ``prices: ...`` line per price source of a plan (``cost.price_sources``), then the month's hours."""
    out = [f"prices: {s['text']}" for s in sources]
    return [*out, f"(USD per hour; month = {HOURS_PER_MONTH} h)"]
