"""``kgpu exporter``: serve NVML GPU metrics under nvidia_gpu_exporter's names.

Flags follow nvidia_gpu_exporter and the Prometheus exporters it is deployed beside: ``--web.listen-address``,
``--web.telemetry-path``, ``--web.config.file`` (exporter-toolkit's TLS / basic-auth file),
``--web.max-requests``, ``--log.level`` and ``--log.format``; the earlier spellings (``--listen``,
``--log-level``, ``--log-format``) are kept. Every flag can also come from the environment as
``KGPU_EXPORTER_<FLAG>`` (``--web.listen-address`` is ``KGPU_EXPORTER_WEB_LISTEN_ADDRESS``), which is how a
DaemonSet sets them; a flag on the command line wins.

Drop-in: the DaemonSets of nvidia_gpu_exporter (its Helm chart) and dcgm-exporter run unchanged with kgpu's
image. Their other flags are read before click parses (:func:`translate`): those with a kgpu meaning are
mapped (``--collect.interval 15s`` is ``--max-age 15``, dcgm-exporter's ``-a :9400`` is the listen address,
``-c 30000`` milliseconds the reuse window, ``-k`` pod labels), those without one (``--nvidia-smi-command``,
``--query-field-names``, dcgm-exporter's ``-f`` counters file, ...) are accepted and named in one log line;
an unknown flag is still a usage error. dcgm-exporter's flags or ``DCGM_EXPORTER_*`` variables switch the
defaults to dcgm-exporter's: DCGM names on ``:9400``. Flag lists: nvidia_gpu_exporter's docs/CONFIGURE.md,
dcgm-exporter's pkg/cmd/app.go.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


class LogfmtFormatter(logging.Formatter):
    """promlog's default ``logfmt``: ``ts=... level=info caller=... msg="..."`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        fields = [("ts", ts), ("level", record.levelname.lower()), ("caller", record.name)]
        fields.append(("msg", record.getMessage()))
        if record.exc_info:
            fields.append(("error", self.formatException(record.exc_info)))
        return " ".join(f"{k}={_logfmt_value(v)}" for k, v in fields)


def _logfmt_value(value: str) -> str:
    if value and not re.search(r'[\s="\\]', value):
        return value
    return json.dumps(value, ensure_ascii=False)


LOG_LEVELS = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "warning": "WARNING", "error": "ERROR"}


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif fmt == "logfmt":
        handler.setFormatter(LogfmtFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LOG_LEVELS.get(level, level.upper()))


def _finite(value: float, param: click.Parameter) -> float:
    """click's FloatRange lets nan through (every comparison with it is false)."""
    if value != value:
        raise click.BadParameter("must be a number of seconds, not nan", param=param)
    return value


# --- other exporters' flags -------------------------------------------------------------------------


def go_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds: ``15s``, ``500ms``, ``1m30s``, ``0``."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return 0.0
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", value)
    if not parts or "".join(n + u for n, u in parts) != value.lstrip("+"):
        raise ValueError(f"{text!r} is not a duration such as 15s, 500ms or 1m30s")
    scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _seconds(value: float, zero_means: float | None = None) -> str:
    if value == 0 and zero_means is not None:
        value = zero_means
    return f"{min(value, 3600.0):g}"


@dataclass(frozen=True)
class Foreign:
    """Another exporter's flag: what it becomes in kgpu (``to``), or None when kgpu has nothing like it."""

    source: str  # nvidia_gpu_exporter | dcgm-exporter
    to: str | None = None
    value: bool = True  # takes a value
    convert: Callable[[str], str] | None = None
    why: str = ""  # for flags without effect: why, in the log line


NGE, DCGM = "nvidia_gpu_exporter", "dcgm-exporter"
_NVML = "kgpu reads NVML in-process"
_DCGM_ONLY = "a DCGM setting; kgpu reads NVML"


def _collect_interval(v: str) -> str:
    return _seconds(go_duration(v))


def _collect_timeout(v: str) -> str:
    return _seconds(go_duration(v), zero_means=3600.0)  # 0: no bound upstream; kgpu's longest


def _millis(v: str) -> str:
    if not v.strip().isdigit():
        raise ValueError(f"{v!r} is not a number of milliseconds")
    return _seconds(int(v) / 1000.0)


def _backend(v: str) -> str:
    if v not in ("exec", "nvml"):
        raise ValueError(f"{v!r}: kgpu reads NVML (exec and nvml are both accepted)")
    return v


FOREIGN: dict[str, Foreign] = {
    # nvidia_gpu_exporter (kingpin): docs/CONFIGURE.md there
    "--web.network": Foreign(NGE, why="kgpu listens on the address's own family"),
    "--web.read-timeout": Foreign(NGE, why="kgpu bounds the request by --web.read-header-timeout"),
    "--web.write-timeout": Foreign(NGE, why="every socket operation is bounded by the header timeout"),
    "--web.idle-timeout": Foreign(NGE, why="idle connections are shut after the header timeout"),
    "--web.timeout-offset": Foreign(NGE, why="each scrape is bounded by --timeout"),
    "--web.systemd-socket": Foreign(NGE, value=False, why="kgpu binds --web.listen-address itself"),
    "--web.enable-pprof": Foreign(NGE, value=False, why="no Go runtime to profile"),
    "--nvidia-smi-command": Foreign(NGE, why=_NVML),
    "--query-field-names": Foreign(NGE, why="kgpu serves its own field set"),
    "--query-field-names-exclude": Foreign(NGE, why="kgpu serves its own field set"),
    "--collect.backend": Foreign(NGE, convert=_backend, why=_NVML),
    "--collect.interval": Foreign(NGE, "--max-age", convert=_collect_interval),
    "--collect.timeout": Foreign(NGE, "--timeout", convert=_collect_timeout),
    "--collect.compute-apps": Foreign(NGE, "--processes", value=False),
    "--no-collect.compute-apps": Foreign(NGE, "--no-processes", value=False),
    "--collect.compute-apps-mig": Foreign(NGE, value=False, why="MIG devices have their own series"),
    "--collect.pcie-throughput": Foreign(NGE, value=False, why="PCIe throughput is always served"),
    "--shutdown-on-error": Foreign(NGE, value=False, why="collection errors are served as metrics"),
    "--demo-config": Foreign(NGE, why="no demo backend"),
    # dcgm-exporter (urfave/cli): pkg/cmd/app.go there
    "--collectors": Foreign(DCGM, why="kgpu serves dcgm-exporter's default counters"),
    "--config-file": Foreign(DCGM, why="kgpu takes flags and KGPU_EXPORTER_* variables"),
    "--address": Foreign(DCGM, "--web.listen-address"),
    "--collect-interval": Foreign(DCGM, "--max-age", convert=_millis),
    "--kubernetes": Foreign(DCGM, "--pods", value=False),
    "--kubernetes-enable-pod-labels": Foreign(DCGM, value=False, why="pods come from pod-resources"),
    "--kubernetes-enable-pod-uid": Foreign(DCGM, value=False, why="pods come from pod-resources"),
    "--kubernetes-gpu-id-type": Foreign(DCGM, why="GPUs are matched by UUID"),
    "--kubernetes-pod-label-allowlist-regex": Foreign(DCGM, why="pods come from pod-resources"),
    "--kubernetes-virtual-gpus": Foreign(DCGM, value=False, why="pods come from pod-resources"),
    "--kubernetes-enable-dra": Foreign(DCGM, value=False, why="pods come from pod-resources"),
    "--use-old-namespace": Foreign(DCGM, value=False, why="DCGM 1.x names are not served"),
    "--remote-hostengine-info": Foreign(DCGM, why=_DCGM_ONLY),
    "--devices": Foreign(DCGM, why="every GPU NVML shows is served"),
    "--switch-devices": Foreign(DCGM, why=_DCGM_ONLY),
    "--cpu-devices": Foreign(DCGM, why=_DCGM_ONLY),
    "--no-hostname": Foreign(DCGM, value=False, why="Hostname is always set"),
    "--fake-gpus": Foreign(DCGM, value=False, why=_DCGM_ONLY),
    "--configmap-data": Foreign(DCGM, why="kgpu serves dcgm-exporter's default counters"),
    "--web-systemd-socket": Foreign(DCGM, value=False, why="kgpu binds its address itself"),
    "--web-config-file": Foreign(DCGM, "--web.config.file"),
    "--web-read-timeout": Foreign(DCGM, why="kgpu bounds the request by --web.read-header-timeout"),
    "--web-write-timeout": Foreign(DCGM, why="every socket operation is bounded by the header timeout"),
    "--xid-count-window-size": Foreign(DCGM, why="XIDs are counted since start, with a last timestamp"),
    "--replace-blanks-in-model-name": Foreign(DCGM, value=False, why="modelName is NVML's name"),
    "--debug": Foreign(DCGM, "--log.level=debug", value=False),
    "--clock-events-count-window-size": Foreign(DCGM, why=_DCGM_ONLY),
    "--enable-dcgm-log": Foreign(DCGM, value=False, why=_DCGM_ONLY),
    "--dcgm-log-level": Foreign(DCGM, why=_DCGM_ONLY),
    "--pod-resources-kubelet-socket": Foreign(DCGM, "--pod-resources-socket"),
    "--hpc-job-mapping-dir": Foreign(DCGM, why="no HPC job mapping"),
    "--container-labels": Foreign(DCGM, value=False, why="pods come from pod-resources"),
    "--container-runtime-socket": Foreign(DCGM, why="pods come from pod-resources"),
    "--nvidia-resource-names": Foreign(DCGM, why="every nvidia.com resource is matched"),
    "--dump-enabled": Foreign(DCGM, value=False, why="no debug dumps"),
    "--dump-directory": Foreign(DCGM, why="no debug dumps"),
    "--dump-retention": Foreign(DCGM, why="no debug dumps"),
    "--dump-compression": Foreign(DCGM, value=False, why="no debug dumps"),
    "--disable-startup-validate": Foreign(DCGM, value=False, why=_DCGM_ONLY),
    "--enable-gpu-bind-unbind-watch": Foreign(DCGM, value=False, why=_DCGM_ONLY),
    "--gpu-bind-unbind-poll-interval": Foreign(DCGM, why=_DCGM_ONLY),
    "--enable-pprof": Foreign(DCGM, value=False, why="no Go runtime to profile"),
}
# dcgm-exporter's one-letter aliases
DCGM_SHORT = {
    "-f": "--collectors", "-a": "--address", "-c": "--collect-interval", "-k": "--kubernetes",
    "-o": "--use-old-namespace", "-p": "--cpu-devices", "-m": "--configmap-data",
    "-r": "--remote-hostengine-info", "-d": "--devices", "-n": "--no-hostname", "-s": "--switch-devices",
    "-x": "--xid-count-window-size", "-rbmn": "--replace-blanks-in-model-name",
}  # fmt: skip
# dcgm-exporter's environment variables (EnvVars in its app.go), as the flag each stands for
DCGM_ENV = {
    "DCGM_EXPORTER_COLLECTORS": "--collectors", "DCGM_EXPORTER_LISTEN": "--address",
    "DCGM_EXPORTER_INTERVAL": "--collect-interval", "DCGM_EXPORTER_KUBERNETES": "--kubernetes",
    "DCGM_EXPORTER_WEB_CONFIG_FILE": "--web-config-file", "DCGM_EXPORTER_DEBUG": "--debug",
    "DCGM_POD_RESOURCES_KUBELET_SOCKET": "--pod-resources-kubelet-socket",
    "DCGM_EXPORTER_LOG_FORMAT": "--log-format",
}  # fmt: skip
_TRUE, _FALSE = {"true", "1", "t", "yes"}, {"false", "0", "f", "no"}


class ForeignFlagError(click.UsageError):
    pass


def translate(args: list[str], environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """nvidia_gpu_exporter's and dcgm-exporter's flags (and dcgm-exporter's variables) in kgpu's terms:
    (the arguments for click, one note per flag accepted without effect). Arguments kgpu knows, and
    everything after ``--``, pass through."""
    out: list[str] = []
    notes: list[str] = []
    dcgm = False
    env_args: list[str] = []
    for var, flag in DCGM_ENV.items():
        if var in environ:
            dcgm = True
            env_args += (
                [f"{flag}={environ[var]}"]
                if FOREIGN.get(flag, Foreign(DCGM)).value
                else ([flag] if environ[var].strip().lower() in _TRUE else [])
            )
    i = 0
    given: set[str] = set()
    items = env_args + list(args)
    while i < len(items):
        arg = items[i]
        i += 1
        if arg == "--":
            out += items[i - 1 :]
            break
        name, eq, inline = arg.partition("=")
        name = DCGM_SHORT.get(name, name)
        if name.startswith("-") and not name.startswith("--") and len(name) > 2:
            name = "-" + name  # urfave/cli also reads -collectors as --collectors
        spec = FOREIGN.get(name)
        if spec is None:
            out.append(arg)
            given.add(name)
            continue
        dcgm = dcgm or spec.source == DCGM
        if spec.value:
            if eq:
                value = inline
            elif i < len(items):
                value, i = items[i], i + 1
            else:
                raise ForeignFlagError(f"{name} ({spec.source}) needs a value")
        else:
            if eq and inline.strip().lower() not in _TRUE | _FALSE:
                raise ForeignFlagError(f"{name}={inline}: true or false")
            if eq and inline.strip().lower() in _FALSE:
                continue
            value = ""
        if spec.convert is not None:
            try:
                value = spec.convert(value)
            except ValueError as exc:
                raise ForeignFlagError(f"{name} ({spec.source}): {exc}") from None
        if spec.to is None:
            notes.append(f"{name}{' ' + value if value else ''} ({spec.source}): {spec.why}")
            continue
        given.add(spec.to.partition("=")[0])
        out += [spec.to, value] if spec.value else [spec.to]
    if dcgm:  # dcgm-exporter's DaemonSet: its names on its port, unless kgpu's own settings say otherwise
        if not given & {"--metrics"} and env("METRICS") not in environ:
            out = ["--metrics", "dcgm", *out]
        if not given & {"--web.listen-address", "--listen"} and env("WEB_LISTEN_ADDRESS") not in environ:
            out = ["--web.listen-address", ":9400", *out]
    return out, notes


def dropin_argv(argv: list[str]) -> list[str]:
    """``kgpu <exporter flags>`` as ``kgpu exporter <exporter flags>``: what a DaemonSet written for
    nvidia_gpu_exporter or dcgm-exporter passes to kgpu's image (whose entrypoint is ``kgpu``). Any other
    command line is returned as it is."""
    if not argv or not argv[0].startswith("-") or argv[0] in ("-h", "--help", "--version"):
        return argv
    name = DCGM_SHORT.get(argv[0].partition("=")[0], argv[0].partition("=")[0])
    own = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    return ["exporter", *argv] if name in FOREIGN or name in own else argv


class DropInCommand(click.Command):
    """Reads other exporters' flags (:func:`translate`) before click parses the command line."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        translated, notes = translate(args, os.environ)
        ctx.meta["kgpu.exporter.ignored"] = notes
        return super().parse_args(ctx, translated)


@click.command(
    "exporter",
    cls=DropInCommand,
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
    "--web.max-requests",
    "max_requests",
    type=click.IntRange(min=0),
    default=40,
    show_default=True,
    envvar=env("WEB_MAX_REQUESTS"),
    show_envvar=True,
    help="Scrapes of the metrics path served at once; more are answered 503 at once (0: no limit).",
)
@click.option(
    "--web.read-header-timeout",
    "header_timeout",
    default="10s",
    show_default=True,
    envvar=env("WEB_READ_HEADER_TIMEOUT"),
    show_envvar=True,
    help="How long a connection may take to send its request line and headers (a Go duration).",
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
    type=click.Choice(["debug", "info", "warn", "warning", "error"]),
    default="info",
    show_default=True,
    envvar=env("LOG_LEVEL"),
    show_envvar=True,
)
@click.option(
    "--log.format",
    "--log-format",
    "log_format",
    type=click.Choice(["text", "logfmt", "json"]),
    default="text",
    show_default=True,
    envvar=env("LOG_FORMAT"),
    show_envvar=True,
    help="json: one object per line (ts, level, caller, msg), for log pipelines; logfmt: the same as "
    "key=value pairs (nvidia_gpu_exporter's default).",
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
    max_requests: int,
    header_timeout: str,
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
    for note in click.get_current_context().meta.get("kgpu.exporter.ignored", []):
        logging.getLogger("kgpu.exporter").info("accepted without effect: %s", note)
    try:
        header_seconds = go_duration(header_timeout)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--web.read-header-timeout") from None
    if not 0 < header_seconds <= 3600:
        raise click.BadParameter(
            f"{header_timeout!r}: between 1ms and 1h", param_hint="--web.read-header-timeout"
        )
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
        max_requests=max_requests,
        header_timeout=header_seconds,
    )
    try:
        run(config)
    except OSError as exc:  # address in use, permission denied
        click.echo(f"error: cannot listen on {listen}: {exc}", err=True)
        raise SystemExit(ExitCode.INPUT) from exc
