"""The root command of ``kgpu`` (and ``kubectl-gpu``); the entry point is ``kgpu.cli.main``.

Verbs are loaded lazily from ``kgpu.cli.<module>``: each module exposes a click command named
``command``. ``kgpu --help`` lists them without importing any, so start-up stays fast.

kubectl's conventions hold before the verb too: the cluster flags (``-n``, ``--context``, ``--kubeconfig``,
``--request-timeout``) may precede it and reach it (``kgpu.cli.cluster_flags``), and a mistyped verb gets
"No such command 'rendr'. Did you mean 'render'?" (exit 2), as kubectl and git answer.
"""

from __future__ import annotations

import difflib
import errno
import functools
import importlib
import importlib.util
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, NoReturn

import click

from kgpu import __version__
from kgpu.cli.cluster_flags import check_globals, global_options
from kgpu.cli.output import ExitCode, fail_input
from kgpu.errors import InputError

# verb -> (module, one-line help). Order is the order of --help.
VERBS: dict[str, tuple[str, str]] = {
    "init": ("kgpu.cli.init_cmd", "Write a commented cluster profile (kgpu.yaml) from a template."),
    "render": ("kgpu.cli.render_cmd", "Render every manifest of the GPU stack from a profile."),
    "plan": ("kgpu.cli.plan_cmd", "Render + simulate the profile's workloads + cost; no cluster needed."),
    "simulate": ("kgpu.cli.simulate_cmd", "Place pods on a cluster: where each lands, or exactly why not."),
    "doctor": ("kgpu.cli.doctor_cmd", "Check a cluster snapshot for GPU failure modes; explain pending GPU pods."),
    "profile": ("kgpu.cli.profile_cmd", "Inspect cluster profiles (JSON Schema, validation)."),
    "catalog": ("kgpu.cli.catalog_cmd", "GPU instance types and TKE GPU specs with prices."),
    "tke": ("kgpu.cli.tke_cmd", "Tencent TKE super-node helpers (GPU spec matching)."),
    "node-check": ("kgpu.cli.nodecheck_cmd", "Check a GPU host's driver, CUDA, toolkit and runtime set-up."),
    "exporter": (
        "kgpu.cli.exporter_cmd",
        "Serve NVML GPU metrics for Prometheus (nvidia_gpu_exporter names).",
    ),
    "snapshot": ("kgpu.cli.snapshot_cmd", "Save a live cluster's nodes, pods, DaemonSets and node pools as one JSON file."),
    "queue": ("kgpu.cli.queue_cmd", "Kueue: is a queued GPU job admitted, with which flavor, and when does it start."),
    "top": ("kgpu.cli.top_cmd", "GPUs per node and pool of a live cluster or a snapshot: use, price, idle and broken nodes."),
    "run": ("kgpu.cli.run_cmd", "Run a GPU smoke test (vector-add, nvidia-smi, torch) on the cluster; pass or fail."),
    "completion": ("kgpu.cli.completion_cmd", "Shell completion script for bash, zsh or fish."),
}

# Verbs drawn with one progress line on a terminal's stderr while they run, whole (kgpu.cli.progress): a
# 50,000-pod simulate takes a while and has no steps of its own to report; its printers erase the line first.
PROGRESS = {"simulate": "simulating: reading the cluster and the workloads, placing pods"}


def _with_progress(name: str, command: click.Command) -> None:
    if name not in PROGRESS or command.callback is None or getattr(command, "_kgpu_progress", False):
        return
    original = command.callback

    def run(*args: Any, **kwargs: Any) -> Any:
        from kgpu.cli.progress import Progress

        with Progress(PROGRESS[name]):
            return original(*args, **kwargs)

    command.callback = functools.update_wrapper(run, original)
    setattr(command, "_kgpu_progress", True)  # noqa: B010 - click.Command has no such attribute to type


# Verbs that read, build and check a cluster's worth of objects: millions of small dicts and lists that all
# live to the end of the verb. Python's cyclic collector would walk them again at every full collection
# (most of `snapshot`'s CPU, half of a live `doctor`'s); nothing they hold makes cycles worth collecting
# early. Long-running verbs (the exporter, `run` waiting on its pods) keep the collector.
GC_PAUSED = {"plan", "simulate", "doctor", "snapshot", "top", "render", "profile", "tke"}


PROCESS = {"entry": False}  # set by main(): the process ends with the verb


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside; the collector is as it was afterwards. When the process ends
    with the verb, what is left is frozen first, so that the collection the next allocation triggers does
    not walk it all once more on the way out (a caller that goes on, a test runner, keeps collecting it)."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if PROCESS["entry"]:
            gc.freeze()
        if enabled:
            gc.enable()


def _without_gc(name: str, command: click.Command) -> None:
    if name not in GC_PAUSED or command.callback is None or getattr(command, "_kgpu_gc", False):
        return
    original = command.callback

    def run(*args: Any, **kwargs: Any) -> Any:
        with paused_gc():
            return original(*args, **kwargs)

    command.callback = functools.update_wrapper(run, original)
    setattr(command, "_kgpu_gc", True)  # noqa: B010 - click.Command has no such attribute to type


# How kubectl runs a plugin: argv[0] is the path of `kubectl-gpu`; usage and examples then say `kubectl gpu`.
PLUGIN_NAMES = ("kubectl-gpu", "kubectl_gpu", "kubectl_complete-gpu")


def prog_name(argv0: str | None = None) -> str:
    """`kubectl gpu` when run as the plugin: by its name, or through krew's shim (which sets the variable)."""
    base = os.path.basename(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "kgpu"))
    if base in PLUGIN_NAMES or os.environ.get("KGPU_AS_KUBECTL_PLUGIN"):
        return "kubectl gpu"
    return "kgpu"


def as_prog(command: click.Command, prog: str) -> None:
    """Help texts are written as `kgpu ...`; say `kubectl gpu ...` when run as the kubectl plugin."""
    for attr in ("help", "epilog"):
        original = command.__dict__.setdefault(f"_kgpu_{attr}", getattr(command, attr))
        if original:
            setattr(
                command,
                attr,
                original.replace("kgpu ", "kubectl gpu ") if prog == "kubectl gpu" else original,
            )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            as_prog(sub, prog)


_STDOUT_ERRNOS = (errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT)


def _silence_stdout() -> None:
    """After a failed write to standard output: point the descriptor at /dev/null, so that the interpreter's
    final flush of what is still buffered does not fail (and print) a second time."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # not a real file (tests): nothing is flushed at exit
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the main thread is, as Ctrl-C raises KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# Signals that interrupt a verb: Ctrl-C, and what `timeout`, CI cancellation and a closed terminal send.
RAISED_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


@contextmanager
def interrupts() -> Iterator[None]:
    """While a verb runs, SIGTERM and SIGHUP raise :class:`Interrupted` (a KeyboardInterrupt), so ``finally``
    blocks run for them as for Ctrl-C (`kgpu run` deletes its pods). Signals set to be ignored (``nohup``)
    stay ignored; a verb may set its own handlers (the exporter does); the previous ones come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old: dict[int, Any] = {}
    for sig in RAISED_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, _raise_interrupted)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def interrupted_exit(exc: KeyboardInterrupt) -> NoReturn:
    """One line and the shell's code for death by that signal: 130 for Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    with suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
        click.echo(f"interrupted ({signal.Signals(signum).name})", err=True)
    sys.exit(128 + int(signum))


def did_you_mean(name: str, verbs: list[str]) -> str:
    """" Did you mean 'render'?" for a mistyped verb (a close spelling, else the one verb it begins); ""
    when nothing is close."""
    close = difflib.get_close_matches(name, verbs, n=1, cutoff=0.6)
    if not close:
        close = [v for v in verbs if v.startswith(name)][:1] if len(name) >= 2 else []
    return f" Did you mean {close[0]!r}?" if close else ""


class LazyGroup(click.Group):
    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if name and not name.startswith("-") and name not in VERBS and not ctx.resilient_parsing:
            hint = did_you_mean(name, self.list_commands(ctx))
            raise click.UsageError(f"No such command {name!r}.{hint}", ctx)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (module, _) in VERBS.items() if importlib.util.find_spec(module) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = VERBS.get(cmd_name)
        if entry is None:
            return None
        try:
            module = importlib.import_module(entry[0])
        except ModuleNotFoundError as exc:
            if exc.name == entry[0]:
                return None
            raise
        command: click.Command = module.command
        as_prog(command, ctx.find_root().info_name or "kgpu")
        _with_progress(cmd_name, command)
        _without_gc(cmd_name, command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """Every verb's input errors as one line with exit 2, a failing standard output (a closed pipe,
        /dev/full) as one line too instead of a traceback, and an interrupt (Ctrl-C, SIGTERM, SIGHUP) as
        one line with exit 128 + the signal's number, after the verb's clean-up ran."""
        try:
            with interrupts():
                return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            interrupted_exit(exc)
        except InputError as exc:
            fail_input(exc)
        except OSError as exc:
            # Files kgpu opens fail with their name (and become InputErrors in cli.files); a stream
            # write failing without one is standard output.
            if exc.errno not in _STDOUT_ERRNOS or exc.filename is not None:
                raise
            _silence_stdout()
            if exc.errno == errno.EPIPE:  # the reader went away (`kgpu catalog | head`): not an error
                sys.exit(ExitCode.OK)
            click.echo(f"error: cannot write to standard output: {exc.strerror}", err=True)
            sys.exit(ExitCode.INPUT)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, VERBS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
@click.version_option(__version__, "--version", prog_name="kgpu")
@global_options
@click.pass_context
def cli(ctx: click.Context, /, **_flags: Any) -> None:
    """kgpu: run GPU workloads on Kubernetes correctly, cheaply and observably.

    Start with `kgpu plan`: it renders the built-in EKS + Karpenter profile, places the example GPU
    workloads on it and prices the nodes, with no cluster or cloud account needed.

    The cluster flags may come before the verb, as kubectl's do: `kgpu -n ml doctor`.
    """
    verb = ctx.invoked_subcommand
    check_globals(ctx, verb or "", ctx.command.get_command(ctx, verb) if isinstance(ctx.command, click.Group)
                  and verb else None)
