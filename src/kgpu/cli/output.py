"""Output formats and exit codes shared by every verb.

Every verb renders its result either for people (an aligned table) or for scripts (JSON/YAML); the choice
is the shared ``-o/--output`` option. Exit codes follow one rule everywhere: 0 all good, 1 a result at
error level (an unschedulable pod, a failed check), 2 bad input.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TypeVar

import click

from kgpu.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])


class ExitCode(enum.IntEnum):
    OK = 0
    FINDINGS = 1  # a result at error level: unschedulable pods, failed checks, inconsistent profile
    INPUT = 2  # bad input or usage


def output_option(*choices: str, default: str = "table") -> Callable[[F], F]:
    """The shared ``-o/--output`` option."""
    formats = choices or ("table", "json")
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(formats),
        default=default,
        show_default=True,
        help="table for people, json/yaml for scripts.",
    )


def fail_input(exc: InputError) -> NoReturn:
    click.echo(f"error: {exc.line()}", err=True)
    sys.exit(ExitCode.INPUT)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str, ensure_ascii=False))


def emit_yaml(data: Any) -> None:
    import yaml

    click.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), nl=False)


def emit(data: Any, output: str, render_table: Callable[[Any], str]) -> None:
    """Print a result in the chosen format: JSON or YAML for scripts, the verb's table for people."""
    if output == "json":
        emit_json(data)
    elif output == "yaml":
        emit_yaml(data)
    else:
        click.echo(render_table(data))


def summary_line(summary: dict[str, Any]) -> str:
    """'14 scheduled, 0 unschedulable, 16 new nodes': the integer counts of a result's summary."""
    return ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in summary.items() if isinstance(v, int) and not isinstance(v, bool))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None) -> str:
    """A plain aligned text table (no colours, stable for tests and pipes)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    if title:
        lines.append(title)
    for n, row in enumerate(cells):
        line = "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip()
        lines.append(line)
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def handle_input_errors(fn: F) -> F:
    """Turn an InputError escaping a command into one line on stderr and exit 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            fail_input(exc)

    return wrapper  # type: ignore[return-value]
