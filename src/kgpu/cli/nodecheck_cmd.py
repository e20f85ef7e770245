"""``kgpu node-check``: is this host ready to be a Kubernetes GPU node?"""

from __future__ import annotations

import re
import sys

import click

from kgpu.cli.output import ExitCode, emit, examples, headers_wanted, output_option, require_extra, table


def _containerd_version(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if not re.fullmatch(r"v?[12](\.[0-9]+){0,2}", value):
        raise click.BadParameter(f"{value!r} is not a containerd version: 1.x or 2.x, e.g. 1.7 or 2.1.4")
    return value


@click.command(
    "node-check",
    epilog=examples(
        ("on the GPU host itself", "kgpu node-check"),
        ("a host's root mounted into a debug pod, as JSON", "kgpu node-check --root /host -o json"),
        ("say which containerd the host runs", "kgpu node-check --root /host --containerd-version 1.7"),
    ),
)
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False),
    default="/",
    show_default=True,
    help="Filesystem root to inspect (a mounted host root, or a fixture tree).",
)
@click.option(
    "--containerd-version",
    metavar="VERSION",
    callback=_containerd_version,
    help="The host's containerd version (1.x replaces a plugin's whole section on import, 2.x merges). "
    "Default: found from `containerd --version` on /, else dpkg's status file or the containerd binary.",
)
@output_option("table", "json", "yaml")
def command(root: str, output: str, containerd_version: str | None) -> None:
    """Check the NVIDIA driver, GPUs, CUDA, container toolkit, containerd/docker runtime, kubelet and
    persistence mode; print the fix for every failing check. Exit 1 if any check fails."""
    require_extra("exporter", "kgpu node-check", ["pynvml"])
    from kgpu.exporter.nodecheck import FAIL, failed, run_checks

    checks = run_checks(root, containerd_version=containerd_version)
    if output != "table":
        emit({"root": root, "ok": not failed(checks), "checks": [c.as_dict() for c in checks]}, output, str)
    else:
        click.echo(
            table(["CHECK", "STATUS", "DETAIL"], [(c.name, c.status.upper(), c.detail) for c in checks])
        )
        for c in checks if headers_wanted() else ():
            if c.fix:
                click.echo(
                    f"\n{c.status.upper()} {c.name}: how to fix\n"
                    + "\n".join("  " + ln for ln in c.fix.splitlines())
                )
        bad = [c.name for c in checks if c.status == FAIL]
        if headers_wanted():
            click.echo(
                "\n" + (f"{len(bad)} check(s) failed: {', '.join(bad)}" if bad else "all checks passed")
            )
    sys.exit(ExitCode.FINDINGS if failed(checks) else ExitCode.OK)
