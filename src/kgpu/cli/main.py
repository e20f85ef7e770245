"""The ``kgpu`` (and ``kubectl-gpu``) entry point: the root command (``kgpu.cli.root``) run the way a
terminal, kubectl or an exporter DaemonSet starts it.

A command line that starts with a flag is one of three things: the root's own (``--help``, ``--version``),
kubectl's cluster flags before a verb (``kgpu -n ml doctor``), or the flags of another GPU exporter, which a
DaemonSet written for it passes to kgpu's image (``kgpu --web.listen-address :9400`` runs the exporter).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from kgpu.cli.cluster_flags import GLOBAL_FLAGS
from kgpu.cli.output import ExitCode, fail_input
from kgpu.cli.root import PROCESS, VERBS, as_prog, cli, interrupted_exit, prog_name
from kgpu.errors import InputError

__all__ = ["VERBS", "cli", "main"]


def _global_prefix(args: list[str]) -> bool:
    """Whether ``args`` are cluster flags (with their values) and then a verb: kubectl's global flags
    before the verb, not an exporter DaemonSet's flags (dcgm-exporter's ``-n`` takes no value)."""
    flags = {"-n", *(f.split("/")[-1] for f in GLOBAL_FLAGS.values())}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag, eq, _ = args[i].partition("=")
        if flag not in flags:
            return False
        i += 1 if eq else 2
    return i < len(args) and args[i] in VERBS


def main(argv: list[str] | None = None) -> Any:
    if os.environ.get("_KGPU_KUBECTL_COMPLETE"):  # krew's kubectl_complete-gpu shim
        from kgpu.cli.completion_cmd import kubectl_complete

        return kubectl_complete()
    PROCESS["entry"] = argv is None
    try:
        prog = prog_name()
        as_prog(cli, prog)
        args = sys.argv[1:] if argv is None else argv
        own = ("-h", "--help", "--version")
        if args and args[0].startswith("-") and args[0] not in own and not _global_prefix(args):
            # an exporter DaemonSet's flags reach the image's entrypoint
            from kgpu.cli.exporter_cmd import dropin_argv

            args = dropin_argv(args)
        return cli.main(args=args, prog_name=prog, standalone_mode=True)
    except InputError as exc:  # raised outside a command's own handling
        fail_input(exc)
    except BrokenPipeError:
        sys.exit(ExitCode.OK)
    except KeyboardInterrupt as exc:  # before or after a verb ran (argument parsing, start-up)
        interrupted_exit(exc)


if __name__ == "__main__":
    main()
