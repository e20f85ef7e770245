"""kubectl's cluster flags, shared by every verb that talks to a live cluster.

``--kubeconfig``, ``--context``, ``-n/--namespace``, ``-A/--all-namespaces`` and ``--request-timeout``
mean what they mean to kubectl (resolution: ``kgpu.live.kubeconfig``).

As kubectl's global flags, ``--kubeconfig``, ``--context``, ``-n/--namespace`` and ``--request-timeout``
may come before the verb too (``kubectl gpu -n ml doctor``, ``kgpu --context prod top``): the root command
keeps them (:func:`global_options`) and a verb that takes the flag gets the value unless it is given after
the verb as well (the later one wins, as in kubectl); a verb that does not take it refuses it (exit 2).

Completion: ``--context`` offers the contexts of the kubeconfig files kubectl would read (``--kubeconfig``
when typed before it, else ``KUBECONFIG``, else ``~/.kube/config``), ``-n`` the namespaces those contexts
name. Both read local files only. The cluster's own namespaces and nodes are not offered: listing them is an
API call, which a TAB press must not wait on (or hang on, with the cluster unreachable).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from click.shell_completion import CompletionItem

F = TypeVar("F", bound=Callable[..., Any])

GLOBAL = "kgpu.cluster_flags"  # root context meta: the global cluster flags given before the verb
GLOBAL_FLAGS = {  # parameter name -> how it is written (for messages)
    "kubeconfig": "--kubeconfig",
    "context": "--context",
    "namespace": "-n/--namespace",
    "request_timeout": "--request-timeout",
}
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024  # kgpu.live.kubeconfig's limit


def kubeconfig_files(kubeconfig: str | None = None, environ: Any = None) -> list[Path]:
    """The kubeconfig files kubectl reads (``kgpu.live.kubeconfig.resolve``'s order), those that exist."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        files = [Path(kubeconfig).expanduser()]
    elif env.get("KUBECONFIG"):
        files = [Path(p).expanduser() for p in env["KUBECONFIG"].split(os.pathsep) if p]
    else:
        files = [Path(env.get("HOME", "~")).expanduser() / ".kube" / "config"]
    return [f for f in files if f.is_file()]


def kubeconfig_contexts(kubeconfig: str | None = None, environ: Any = None) -> dict[str, str]:
    """Context name -> its namespace ("" for none), merged as client-go merges (first file wins); files that
    cannot be read, are too large or are not kubeconfigs are skipped (completion never fails)."""
    from kgpu.errors import InputError
    from kgpu.model.safeyaml import load_document

    out: dict[str, str] = {}
    for path in kubeconfig_files(kubeconfig, environ):
        try:
            if path.stat().st_size > MAX_KUBECONFIG_BYTES:
                continue
            data = load_document(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError, InputError, RecursionError):
            continue
        entries = data.get("contexts") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str) or not name or name in out:
                continue
            body = entry.get("context")
            ns = body.get("namespace") if isinstance(body, dict) else None
            out[name] = ns if isinstance(ns, str) else ""
    return out


def _typed_kubeconfig(ctx: click.Context) -> str | None:
    """--kubeconfig as typed so far, after the verb or before it."""
    value = ctx.params.get("kubeconfig")
    if not value:
        value = ctx.find_root().params.get("kubeconfig")
    return str(value) if value else None


def complete_context(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    contexts = kubeconfig_contexts(_typed_kubeconfig(ctx))
    return [CompletionItem(name, help=f"namespace {ns}" if ns else None)
            for name, ns in sorted(contexts.items()) if name.startswith(incomplete)]


def complete_namespace(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    names = {ns for ns in kubeconfig_contexts(_typed_kubeconfig(ctx)).values() if ns} | {"default"}
    return [CompletionItem(ns) for ns in sorted(names) if ns.startswith(incomplete)]


def _flag_options(*, request_timeout_default: float | None) -> list[Callable[[F], F]]:
    return [
        click.option("--kubeconfig", metavar="FILE", type=click.Path(dir_okay=False),
                     help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)."),
        click.option("--context", metavar="NAME", shell_complete=complete_context,
                     help="kubeconfig context (default: its current-context)."),
        click.option("-n", "--namespace", metavar="NS", shell_complete=complete_namespace,
                     help="Namespace (default: the context's, else default)."),
        click.option("--request-timeout", type=click.FloatRange(min=0.1, max=3600), default=request_timeout_default,
                     show_default=request_timeout_default is not None, metavar="SECONDS",
                     help="Give up on one API request after this long (from connecting to the last byte "
                     "of the answer)." + ("" if request_timeout_default is not None else " Default: 30.")),
    ]


def global_options(fn: F) -> F:
    """The cluster flags on the root command, for the verb that follows (module docstring)."""
    for opt in reversed(_flag_options(request_timeout_default=None)):
        fn = opt(fn)
    return fn


def given_globals(ctx: click.Context) -> dict[str, Any]:
    """The global cluster flags given on the command line (or their environment), by parameter name."""
    return {name: ctx.params[name] for name in GLOBAL_FLAGS
            if ctx.params.get(name) is not None and ctx.get_parameter_source(name) != ParameterSource.DEFAULT}


def check_globals(ctx: click.Context, verb: str, command: click.Command | None) -> None:
    """Keep the global flags for ``verb``; a flag the verb (or every subcommand of a group) does not take is
    a usage error."""
    given = given_globals(ctx)
    ctx.meta[GLOBAL] = given
    if not given or command is None:
        return
    commands = list(command.commands.values()) if isinstance(command, click.Group) else [command]
    takes = {p.name for c in commands for p in c.params}
    refused = [GLOBAL_FLAGS[name] for name in given if name not in takes]
    if refused:
        why = "" if "context" in takes else (
            ": it does not read a cluster (the cluster flags go to doctor, snapshot, top and run)")
        raise click.UsageError(f"`{ctx.command_path} {verb}` takes no {', '.join(refused)}{why}", ctx)


def _with_globals(fn: F) -> F:
    """Fill the verb's cluster flags that were not given after the verb from those given before it."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            given = ctx.find_root().meta.get(GLOBAL) or {}
            for name, value in given.items():
                if name in kwargs and ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, None):
                    kwargs[name] = value
        return fn(*args, **kwargs)

    return run  # type: ignore[return-value]


def cluster_options(*, all_namespaces: bool = True, namespace: bool = True) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        fn = _with_globals(fn)
        opts = _flag_options(request_timeout_default=30.0)
        if not namespace:  # a cluster-wide view (top): no -n
            del opts[2]
        if all_namespaces:
            opts.insert(3, click.option("-A", "--all-namespaces", is_flag=True,
                                        help="Every namespace (the default for snapshot and doctor unless -n is given)."))
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


def access_from(kubeconfig: str | None, context: str | None, namespace: str | None,
                all_namespaces: bool = False, request_timeout: float = 30.0) -> Any:
    from kgpu.live.kubeconfig import Access

    return Access(kubeconfig, context, namespace, all_namespaces, request_timeout)


def progress_printer(prefix: str) -> Callable[[str, int], None] | None:
    """A one-line progress counter on stderr, only on a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(label: str, n: int) -> None:
        with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
            sys.stderr.write(f"\r\033[K{prefix}: {label} {n:,}")
            sys.stderr.flush()

    return show


def end_progress() -> None:
    """Clear the progress line; a terminal that hung up (the interrupt in flight says so) is no error."""
    with contextlib.suppress(OSError, ValueError):
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
