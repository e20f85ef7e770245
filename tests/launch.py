"""Run a command with process limits and signal dispositions set in a fresh interpreter, not a ``preexec_fn``.

A ``preexec_fn`` makes ``subprocess`` fork the test process itself with ``fork()``, which runs every
``pthread_atfork`` handler of the libraries loaded there: once a test in the same worker has imported gRPC,
its event engine's handler can abort the child before it runs the command (``epoll_wait error: Bad file
descriptor``, exit -6). Without a ``preexec_fn`` CPython starts the child with ``vfork()``, which runs none;
this script then sets the limits and signals and replaces itself with the command.

    python tests/launch.py [--as BYTES] [--fsize BYTES] [--ignore-xfsz] [--default-signals] -- CMD ARG...
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from pathlib import Path

SCRIPT = str(Path(__file__).resolve())


def launched(
    cmd: list[str],
    *,
    address_space: int | None = None,
    file_size: int | None = None,
    ignore_xfsz: bool = False,
    default_signals: bool = False,
) -> list[str]:
    """The argv that runs ``cmd`` with these settings (``default_signals``: SIGINT, SIGTERM and SIGHUP at
    their default, as a terminal starts a command even when the tests run with one ignored under nohup)."""
    out = [sys.executable, SCRIPT]
    if address_space is not None:
        out += ["--as", str(address_space)]
    if file_size is not None:
        out += ["--fsize", str(file_size)]
    if ignore_xfsz:
        out.append("--ignore-xfsz")
    if default_signals:
        out.append("--default-signals")
    return [*out, "--", *cmd]


def main(argv: list[str]) -> None:
    i = 0
    while argv[i] != "--":
        flag = argv[i]
        if flag == "--as":
            n = int(argv[i + 1])
            resource.setrlimit(resource.RLIMIT_AS, (n, n))
            i += 2
        elif flag == "--fsize":
            n = int(argv[i + 1])
            resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
            i += 2
        elif flag == "--ignore-xfsz":
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes then fail with EFBIG, as on a full disk
            i += 1
        elif flag == "--default-signals":
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            i += 1
        else:
            raise SystemExit(f"launch.py: unknown flag {flag}")
    cmd = argv[i + 1 :]
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
