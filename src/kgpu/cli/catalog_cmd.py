"""``kgpu catalog``: GPU instance types (AWS) and GPU specs (TKE), filterable, cheapest first."""

from __future__ import annotations

import csv
import io
from typing import Any

import click

from kgpu.cli.name_completion import complete_gpu
from kgpu.cli.output import PATH, emit, examples, handle_input_errors, headers_wanted, output_option, table
from kgpu.errors import InputError, quote

DEFAULT_REGION = "us-east-1"


@click.command(
    name="catalog",
    epilog=examples(
        ("every AWS GPU instance type in us-west-2, cheapest first", "kgpu catalog --region us-west-2"),
        (
            "8-GPU A100 machines, with architecture and every zone",
            "kgpu catalog --gpu A100 --min-gpus 8 -o wide",
        ),
        ("TKE super-node T4 specs as YAML", "kgpu catalog --provider tke --gpu T4 -o yaml"),
    ),
)
@click.option(
    "--gpu",
    "gpu",
    shell_complete=complete_gpu,
    metavar="NAME",
    default=None,
    help="Only this GPU, any case: T4, a10g, A100-80GB (AWS); T4, A10, L20 (TKE).",
)
@click.option(
    "--min-gpus",
    "min_gpus",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="At least this many GPUs; 0 lists CPU-only types too.",
)
@click.option(
    "--region",
    "region",
    metavar="REGION",
    default=None,
    help=f"AWS region for prices and availability [default: {DEFAULT_REGION}].",
)
@click.option("--provider", "provider", type=click.Choice(["aws", "tke"]), default="aws", show_default=True)
@click.option(
    "--file",
    "-f",
    "file",
    metavar="PATH",
    type=PATH,
    default=None,
    help="Overrides: YAML list (or CSV) with the catalog's columns; changes prices or adds types.",
)
@output_option("table", "wide", "json", "yaml", "name")
@handle_input_errors
def command(
    gpu: str | None, min_gpus: int, region: str | None, provider: str, file: str | None, output: str
) -> None:
    """List GPU instance types with prices, cheapest first.

    AWS prices are a point-in-time snapshot (on-demand, and the median spot price over the region's zones):
    good for comparing, not a quote. TKE rows are the super-node GPU specs; the TKE guide gives no prices.

    Exit status: 0, or 2 for bad input (an unknown GPU or region names the closest valid ones).
    """
    if provider == "tke":
        if region or file:
            raise InputError("--region and --file apply to --provider aws only")
        _tke(gpu, min_gpus, output)
        return
    _aws(gpu, min_gpus, region or DEFAULT_REGION, file, output)


def load_overrides(path: str) -> list[Any]:
    from kgpu.cli.files import read_text
    from kgpu.model.safeyaml import load_document

    text = read_text(path)
    if path.lower().endswith(".csv"):
        reader = csv.DictReader(io.StringIO(text))
        try:
            return [dict(row) for row in reader]
        except csv.Error as exc:  # a field over csv's 131,072-byte limit, a NUL byte
            raise InputError(f"invalid CSV at line {reader.line_num}: {exc}", where=path) from None
    data = load_document(text, path)
    if isinstance(data, dict) and "instance_types" in data:
        data = data["instance_types"]
    if data is None:
        return []
    if not isinstance(data, list):
        raise InputError("expected a list of rows (or a mapping with instance_types: [...])", where=path)
    return data


def _gib(mib: int) -> str:
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib / 1024:.1f}Gi"


def _price(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _dollars(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _month(value: float | None) -> float | None:
    from kgpu.catalog.prices import monthly

    return None if value is None else monthly(value)


def _interruption(instance_type: str, region: str) -> str | None:
    """The Spot Instance Advisor's interruption-frequency band (<5% ... >20%); None where it has none."""
    from kgpu.catalog.spot_advisor import spot_advice

    advice = spot_advice(instance_type, region)
    return advice.interruption if advice is not None else None


def _interruption_caption() -> str:
    from kgpu.catalog.spot_advisor import SNAPSHOT_DATE, SOURCE

    return f"interruption: spot interruption frequency, {SOURCE} as of {SNAPSHOT_DATE}; GPU types only"


def _aws(gpu: str | None, min_gpus: int, region: str, file: str | None, output: str) -> None:
    from kgpu.catalog import aws_catalog
    from kgpu.catalog.prices import AS_OF, caption

    overrides = None
    if file:
        overrides = load_overrides(file)
    try:
        catalog = aws_catalog(region, overrides)
    except InputError as exc:
        raise (exc.within(file) if file and exc.where.startswith("row ") else exc) from None
    types = catalog.types_with_gpu(gpu) if gpu else catalog.types()
    rows: list[dict[str, Any]] = []
    for t in types:
        if t.gpu_count < min_gpus:
            continue
        pricing = catalog.pricing(t.name, region)
        assert pricing is not None  # types() lists only types sold in the region
        rows.append(
            {
                "instance_type": t.name,
                "region": region,
                "gpu_name": t.gpu_name,
                "gpu_display_name": t.gpu_display_name,
                "gpu_manufacturer": t.gpu_manufacturer,
                "gpu_count": t.gpu_count,
                "gpu_memory_mib": t.gpu_memory_mib,
                "vcpus": t.vcpus,
                "memory_mib": t.memory_mib,
                "arch": t.arch,
                "on_demand_usd_per_hour": pricing.on_demand,
                "spot_usd_per_hour": pricing.spot,
                "spot_min_usd_per_hour": pricing.spot_min,
                "spot_interruption": _interruption(t.name, region),
                "cheapest_usd_per_hour": pricing.cheapest,
                "on_demand_usd_per_month": _month(pricing.on_demand),
                "spot_usd_per_month": _month(pricing.spot),
                "prices_as_of": AS_OF,
                "zones": list(pricing.zones),
            }
        )
    rows.sort(
        key=lambda r: (
            r["cheapest_usd_per_hour"] is None,
            r["cheapest_usd_per_hour"] or 0.0,
            r["instance_type"],
        )
    )
    title = f"AWS {region}: {len(rows)} instance type(s), cheapest first (spot = median over zones)"

    def render(rows: list[dict[str, Any]], wide: bool = False) -> str:
        headers = ["TYPE", "GPU", "GPUS", "GPU MEM", "VCPU", "MEMORY", "SPOT $/H", "ON-DEMAND $/H", "ZONES"]
        if wide:
            headers[7:7] = ["SPOT MIN $/H"]
            headers[9:9] = ["SPOT $/MO", "ON-DEMAND $/MO"]
            headers += ["ARCH"]
        headers.insert(headers.index("SPOT $/H") + 1, "INTERRUPTION")
        body = []
        for r in rows:
            cells: list[Any] = [
                r["instance_type"],
                r["gpu_display_name"] or "-",
                r["gpu_count"],
                _gib(r["gpu_memory_mib"]) if r["gpu_count"] else "-",
                r["vcpus"],
                _gib(r["memory_mib"]),
                _price(r["spot_usd_per_hour"]),
                _price(r["on_demand_usd_per_hour"]),
                ",".join(r["zones"]) if wide else len(r["zones"]),
            ]
            if wide:
                cells[7:7] = [_price(r["spot_min_usd_per_hour"])]
                cells[9:9] = [_dollars(r["spot_usd_per_month"]), _dollars(r["on_demand_usd_per_month"])]
                cells.append(r["arch"])
            cells.insert(headers.index("INTERRUPTION"), r["spot_interruption"] or "-")
            body.append(cells)
        text = table(headers, body, title=title)
        if not headers_wanted():
            return text
        changed = f"; prices from {file} where it gives them" if file else ""
        return f"{text}\n({_interruption_caption()})\n({caption()}{changed}; -o wide: per month)"

    emit(
        rows,
        output,
        render,
        wide=lambda rows: render(rows, wide=True),
        names=lambda rows: [f"instancetype/{r['instance_type']}" for r in rows],
    )


def _tke_gpu_base(name: str) -> str:
    """The GPU of a TKE type name: '1/4*T4' -> 't4', 'A10*GNV4v' -> 'a10'."""
    parts = name.split("*")
    return (parts[1] if "/" in parts[0] and len(parts) > 1 else parts[0]).lower()


def _tke(gpu: str | None, min_gpus: int, output: str) -> None:
    import difflib

    from kgpu.catalog.tke import tke_gpu_types

    types = list(tke_gpu_types().values())
    if gpu:
        wanted = gpu.strip().lower()
        types = [t for t in types if wanted in (t.name.lower(), _tke_gpu_base(t.name))]
        if not types:
            lowered = {_tke_gpu_base(n): n for n in tke_gpu_types()}
            lowered.update({n.lower(): n for n in tke_gpu_types()})
            close = [lowered[c] for c in difflib.get_close_matches(wanted, list(lowered), n=3, cutoff=0.5)]
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(tke_gpu_types())}"
            raise InputError(f"unknown TKE GPU type {quote(gpu)}", hint=hint)
    rows: list[dict[str, Any]] = []
    for t in types:
        for spec in t.specs:
            if spec.gpus < min_gpus:
                continue
            rows.append(
                {
                    "gpu_type": t.name,
                    "model": t.model,
                    "gpu_count": spec.gpus,
                    "gpu_memory_gib": t.gpu_memory_gib,
                    "cuda": t.cuda,
                    "cpu_options": list(spec.cpu_options),
                    "memory_gib_min": spec.memory_min_gib,
                    "memory_gib_max": spec.memory_max_gib,
                    "usd_per_hour": None,
                }
            )
    emit(
        rows,
        output,
        lambda rows: table(
            ["GPU TYPE", "MODEL", "GPUS", "GPU MEM", "CUDA", "CPU CORES", "MEMORY GiB"],
            [
                (
                    r["gpu_type"],
                    r["model"],
                    r["gpu_count"],
                    f"{r['gpu_memory_gib']}GB",
                    r["cuda"],
                    ",".join(str(c) for c in r["cpu_options"]),
                    f"{r['memory_gib_min']}-{r['memory_gib_max']}",
                )
                for r in rows
            ],
            title=f"TKE super-node GPU specs: {len(rows)} row(s) (no prices: the TKE guide gives none)",
        ),
        names=lambda rows: list(dict.fromkeys(f"gputype/{r['gpu_type']}" for r in rows)),
    )
