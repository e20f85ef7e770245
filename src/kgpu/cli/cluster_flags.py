"""kubectl's cluster flags, shared by every verb that talks to a live cluster.

``--kubeconfig``, ``--context``, ``-n/--namespace``, ``-A/--all-namespaces`` and ``--request-timeout``
mean what they mean to kubectl (resolution: ``kgpu.live.kubeconfig``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(*, all_namespaces: bool = True, namespace: bool = True) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        opts = [
            click.option("--kubeconfig", metavar="FILE", type=click.Path(dir_okay=False),
                         help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)."),
            click.option("--context", metavar="NAME", help="kubeconfig context (default: its current-context)."),
            click.option("-n", "--namespace", metavar="NS", help="Namespace (default: the context's, else default)."),
            click.option("--request-timeout", type=click.FloatRange(min=0.1, max=3600), default=30.0,
                         show_default=True, metavar="SECONDS",
                         help="Give up on one API request after this long (from connecting to the last byte "
                         "of the answer)."),
        ]
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
