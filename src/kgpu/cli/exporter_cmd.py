"""``kgpu exporter``: serve NVML GPU metrics under nvidia_gpu_exporter's names."""

from __future__ import annotations

import logging

import click

from kgpu.cli.output import examples, require_extra

try:
    from kgpu.exporter.server import DEFAULT_MAX_AGE
except ImportError:  # without the exporter extra; the command then says which extra to install
    DEFAULT_MAX_AGE = 1.0


def _finite(value: float, param: click.Parameter) -> float:
    """click's FloatRange lets nan through (every comparison with it is false)."""
    if value != value:
        raise click.BadParameter("must be a number of seconds, not nan", param=param)
    return value


@click.command(
    "exporter",
    epilog=examples(
        ("nvidia_gpu_exporter's port and names", "kgpu exporter"),
        ("DCGM exporter's names too, on another port", "kgpu exporter --listen :9400 --metrics all"),
    ),
)
@click.option(
    "--listen", default=":9835", show_default=True, help="HOST:PORT to serve /metrics and /healthz on."
)
@click.option(
    "--timeout",
    "timeout",
    type=click.FloatRange(min=0.01, max=3600),
    callback=lambda ctx, param, value: _finite(value, param),
    default=5.0,
    show_default=True,
    help="Per-scrape timeout in seconds; a slower collection answers 503.",
)
@click.option(
    "--max-age",
    type=click.FloatRange(min=0, max=3600),
    callback=lambda ctx, param, value: _finite(value, param),
    default=DEFAULT_MAX_AGE,
    show_default=True,
    help="Serve a successful collection to further scrapes for up to this many seconds, refreshing it in the "
    "background under load (0: collect on every scrape).",
)
@click.option(
    "--metrics",
    type=click.Choice(["nvidia-smi", "dcgm", "all"]),
    default="nvidia-smi",
    show_default=True,
    help="Metric names: nvidia_gpu_exporter's (dashboard 14574), DCGM exporter's (dashboard 12239), or both.",
)
@click.option("--processes/--no-processes", default=False, show_default=True, help="Per-process GPU memory.")
@click.option("--mig/--no-mig", default=True, show_default=True, help="MIG device metrics.")
@click.option(
    "--gpm/--no-gpm",
    default=True,
    show_default=True,
    help="SM and tensor activity from NVML's GPU Performance Monitoring (Hopper and newer, MIG included).",
)
@click.option("--xid/--no-xid", default=True, show_default=True, help="Count XID errors from NVML events.")
@click.option(
    "--pods/--no-pods",
    default=True,
    show_default=True,
    help="Pod labels from the kubelet's pod-resources socket, when present.",
)
@click.option(
    "--pod-resources-socket",
    default="/var/lib/kubelet/pod-resources/kubelet.sock",
    show_default=True,
    help="The kubelet pod-resources socket.",
)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
def command(
    listen: str,
    timeout: float,
    max_age: float,
    metrics: str,
    processes: bool,
    mig: bool,
    gpm: bool,
    xid: bool,
    pods: bool,
    pod_resources_socket: str,
    log_level: str,
) -> None:
    """Serve NVML GPU metrics for Prometheus.

    Metric names, labels and units match nvidia_gpu_exporter, so existing alert rules and Grafana dashboard
    14574 keep working; NVML is read in-process instead of forking nvidia-smi on every scrape.
    """
    require_extra("exporter", "kgpu exporter")
    from kgpu.cli.output import ExitCode
    from kgpu.exporter.app import ExporterConfig, run
    from kgpu.exporter.collector import CollectorOptions
    from kgpu.exporter.server import parse_listen

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        parse_listen(listen)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--listen") from exc
    config = ExporterConfig(
        listen=listen,
        timeout=timeout,
        max_age=max_age,
        options=CollectorOptions(metrics=metrics, processes=processes, mig=mig, gpm=gpm, pods=pods),
        xid=xid,
        pod_resources_socket=pod_resources_socket,
    )
    try:
        run(config)
    except OSError as exc:  # address in use, permission denied
        click.echo(f"error: cannot listen on {listen}: {exc}", err=True)
        raise SystemExit(ExitCode.INPUT) from exc
