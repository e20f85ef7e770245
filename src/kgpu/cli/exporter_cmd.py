"""``kgpu exporter``: serve NVML GPU metrics under nvidia_gpu_exporter's names.

Flags follow nvidia_gpu_exporter and the Prometheus exporters it is deployed beside: ``--web.listen-address``,
``--web.telemetry-path``, ``--web.config.file`` (exporter-toolkit's TLS / basic-auth file), ``--log.level``
and ``--log.format``; the earlier spellings (``--listen``, ``--log-level``, ``--log-format``) are kept. Every
flag can also come from the environment as ``KGPU_EXPORTER_<FLAG>`` (``--web.listen-address`` is
``KGPU_EXPORTER_WEB_LISTEN_ADDRESS``), which is how a DaemonSet sets them; a flag on the command line wins.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import click

from kgpu.cli.output import PATH, examples, require_extra

try:
    from kgpu.exporter.server import DEFAULT_MAX_AGE
except ImportError:  # without the exporter extra; the command then says which extra to install
    DEFAULT_MAX_AGE = 1.0

ENV_PREFIX = "KGPU_EXPORTER"


def env(name: str) -> str:
    return f"{ENV_PREFIX}_{name}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with promlog's keys (``ts``, ``level``, ``caller``, ``msg``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "caller": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _finite(value: float, param: click.Parameter) -> float:
    """click's FloatRange lets nan through (every comparison with it is false)."""
    if value != value:
        raise click.BadParameter("must be a number of seconds, not nan", param=param)
    return value


@click.command(
    "exporter",
    epilog=examples(
        ("nvidia_gpu_exporter's port, path and names", "kgpu exporter"),
        (
            "DCGM exporter's names too, on its port, logging JSON",
            "kgpu exporter --web.listen-address :9400 --metrics all --log.format json",
        ),
        (
            "TLS and basic auth from an exporter-toolkit file, set from the environment",
            "KGPU_EXPORTER_WEB_CONFIG_FILE=/etc/kgpu/web.yml kgpu exporter",
        ),
    ),
)
@click.option(
    "--web.listen-address",
    "--listen",
    "listen",
    default=":9835",
    show_default=True,
    envvar=env("WEB_LISTEN_ADDRESS"),
    show_envvar=True,
    help="[HOST]:PORT to serve metrics and /healthz on.",
)
@click.option(
    "--web.telemetry-path",
    "telemetry_path",
    default="/metrics",
    show_default=True,
    envvar=env("WEB_TELEMETRY_PATH"),
    show_envvar=True,
    help="Path of the metrics.",
)
@click.option(
    "--web.config.file",
    "web_config_file",
    type=PATH,
    default=None,
    envvar=env("WEB_CONFIG_FILE"),
    show_envvar=True,
    help="exporter-toolkit web configuration: TLS, client certificates, basic auth, response headers.",
)
@click.option(
    "--timeout",
    "timeout",
    type=click.FloatRange(min=0.01, max=3600),
    callback=lambda ctx, param, value: _finite(value, param),
    default=5.0,
    show_default=True,
    envvar=env("TIMEOUT"),
    show_envvar=True,
    help="Per-scrape timeout in seconds; a slower collection answers 503.",
)
@click.option(
    "--max-age",
    type=click.FloatRange(min=0, max=3600),
    callback=lambda ctx, param, value: _finite(value, param),
    default=DEFAULT_MAX_AGE,
    show_default=True,
    envvar=env("MAX_AGE"),
    show_envvar=True,
    help="Serve a successful collection to further scrapes for up to this many seconds, refreshing it in the "
    "background under load (0: collect on every scrape).",
)
@click.option(
    "--metrics",
    type=click.Choice(["nvidia-smi", "dcgm", "all"]),
    default="nvidia-smi",
    show_default=True,
    envvar=env("METRICS"),
    show_envvar=True,
    help="Metric names: nvidia_gpu_exporter's (dashboard 14574), DCGM exporter's (dashboard 12239), or both.",
)
@click.option(
    "--processes/--no-processes",
    default=False,
    show_default=True,
    envvar=env("PROCESSES"),
    show_envvar=True,
    help="Per-process GPU memory.",
)
@click.option(
    "--mig/--no-mig",
    default=True,
    show_default=True,
    envvar=env("MIG"),
    show_envvar=True,
    help="MIG device metrics.",
)
@click.option(
    "--gpm/--no-gpm",
    default=True,
    show_default=True,
    envvar=env("GPM"),
    show_envvar=True,
    help="SM and tensor activity from NVML's GPU Performance Monitoring (Hopper and newer, MIG included).",
)
@click.option(
    "--xid/--no-xid",
    default=True,
    show_default=True,
    envvar=env("XID"),
    show_envvar=True,
    help="Count XID errors from NVML events.",
)
@click.option(
    "--pods/--no-pods",
    default=True,
    show_default=True,
    envvar=env("PODS"),
    show_envvar=True,
    help="Pod labels from the kubelet's pod-resources socket, when present.",
)
@click.option(
    "--pod-resources-socket",
    default="/var/lib/kubelet/pod-resources/kubelet.sock",
    show_default=True,
    envvar=env("POD_RESOURCES_SOCKET"),
    show_envvar=True,
    help="The kubelet pod-resources socket.",
)
@click.option(
    "--log.level",
    "--log-level",
    "log_level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    envvar=env("LOG_LEVEL"),
    show_envvar=True,
)
@click.option(
    "--log.format",
    "--log-format",
    "log_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar=env("LOG_FORMAT"),
    show_envvar=True,
    help="json: one object per line (ts, level, caller, msg), for log pipelines.",
)
def command(
    listen: str,
    telemetry_path: str,
    web_config_file: str | None,
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
    log_format: str,
) -> None:
    """Serve NVML GPU metrics for Prometheus.

    Metric names, labels and units match nvidia_gpu_exporter, so existing alert rules and Grafana dashboard
    14574 keep working; NVML is read in-process instead of forking nvidia-smi on every scrape. Scrapers
    that accept gzip get it. Every flag can also be set as KGPU_EXPORTER_<FLAG>.
    """
    require_extra("exporter", "kgpu exporter")
    from kgpu.cli.output import ExitCode
    from kgpu.exporter.app import ExporterConfig, run
    from kgpu.exporter.collector import CollectorOptions
    from kgpu.exporter.server import parse_listen
    from kgpu.exporter.webconfig import WebConfigError, load_web_config

    configure_logging(log_level, log_format)
    try:
        parse_listen(listen)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--web.listen-address") from exc
    if not telemetry_path.startswith("/") or telemetry_path in ("/", "/healthz", "/-/healthy"):
        raise click.BadParameter(
            f"{telemetry_path!r}: a path such as /metrics, not / or /healthz",
            param_hint="--web.telemetry-path",
        )
    web = None
    if web_config_file:
        try:
            web = load_web_config(web_config_file)
        except WebConfigError as exc:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(ExitCode.INPUT) from None
    config = ExporterConfig(
        listen=listen,
        timeout=timeout,
        max_age=max_age,
        options=CollectorOptions(metrics=metrics, processes=processes, mig=mig, gpm=gpm, pods=pods),
        xid=xid,
        pod_resources_socket=pod_resources_socket,
        telemetry_path=telemetry_path,
        web=web,
    )
    try:
        run(config)
    except OSError as exc:  # address in use, permission denied
        click.echo(f"error: cannot listen on {listen}: {exc}", err=True)
        raise SystemExit(ExitCode.INPUT) from exc
