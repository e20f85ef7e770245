"""Output formats, colour, help examples and exit codes shared by every verb.

``-o/--output`` means one thing everywhere, as in kubectl: the output format. ``table`` (the default) and
``wide`` are for people, ``json`` and ``yaml`` for scripts, ``name`` prints ``kind/name`` one per line.
``--no-headers`` drops table headers and titles; ``--color=auto|always|never`` (auto: only on a terminal,
and never when ``NO_COLOR`` is set) decides whether tables and charts are coloured. Files and directories
have their own flags (``--output-dir``, ``--file``), never ``-o``.

Exit codes follow one rule everywhere: 0 all good, 1 a result at error level (an unschedulable pod, a failed
check), 2 bad input.

JSON goes through msgspec and YAML through libyaml's emitter (``CSafeDumper``), with long lists of flat
rows written by a memoising fast path; the YAML is byte for byte what PyYAML's pure-Python ``safe_dump``
writes (where libyaml would differ, the pure-Python dumper writes it). A 50,000-pod result prints in a
fraction of the time ``json.dumps`` and the pure-Python dumper take (``benchmarks/output_bench.py``).
"""

from __future__ import annotations

import enum
import functools
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TypeVar

import click

from kgpu.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])

FORMATS: tuple[str, ...] = ("table", "wide", "json", "yaml", "name")
COLOR_MODES = ("auto", "always", "never")
# Type of every option naming a file or directory: shells complete paths for it; '-' is standard input.
PATH = click.Path(allow_dash=True)

#: ``--catalog FILE``, the same on render, plan and simulate
catalog_option = click.option(
    "--catalog",
    "catalog",
    metavar="FILE",
    type=PATH,
    default=None,
    help="Instance types outside kgpu's catalog (CSV or YAML rows, as kgpu catalog --file): vCPUs, memory, GPUs, prices.",
)
_META_NO_HEADERS = "kgpu.no_headers"
_META_COLOR = "kgpu.color"


class ExitCode(enum.IntEnum):
    OK = 0
    FINDINGS = 1  # a result at error level: unschedulable pods, failed checks, inconsistent profile
    INPUT = 2  # bad input or usage


# --- options ----------------------------------------------------------------------------------------------


def _store_meta(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[key] = value

    return callback


def color_option(fn: F) -> F:
    """``--color=auto|always|never`` (stored for :func:`color_enabled`, not passed to the command)."""
    return click.option(
        "--color",
        type=click.Choice(COLOR_MODES),
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_store_meta(_META_COLOR),
        help="Colour tables and charts: auto (on a terminal, unless NO_COLOR is set), always, never.",
    )(fn)


def no_headers_option(fn: F) -> F:
    """``--no-headers`` (stored for :func:`table`, not passed to the command)."""
    return click.option(
        "--no-headers",
        is_flag=True,
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_store_meta(_META_NO_HEADERS),
        help="Print tables without headers or titles (for grep, awk, wc).",
    )(fn)


def output_option(*choices: str, default: str = "table") -> Callable[[F], F]:
    """The shared ``-o/--output FORMAT`` option, plus ``--no-headers`` and ``--color`` for table formats.

    The command receives ``output`` (one of ``choices``); headers and colour are read back through
    :func:`table`, :func:`color_enabled` and :func:`echo`.
    """
    formats = choices or ("table", "json", "yaml")
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown output formats {sorted(unknown)}")
    listed = ", ".join(f"{f} (default)" if f == default else f for f in formats)

    def decorate(fn: F) -> F:
        if "table" in formats or "wide" in formats:
            fn = color_option(no_headers_option(fn))
        return click.option(
            "-o",
            "--output",
            "output",
            type=click.Choice(formats, case_sensitive=False),
            default=default,
            metavar="FORMAT",
            help=f"Output format: {listed}.",
        )(fn)

    return decorate


def _meta(key: str) -> Any:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(key)


def headers_wanted() -> bool:
    return not _meta(_META_NO_HEADERS)


def color_enabled(err: bool = False) -> bool:
    """--color always/never wins; auto (the default) colours a terminal unless NO_COLOR is set."""
    mode = _meta(_META_COLOR) or "auto"
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    stream = sys.stderr if err else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def style(text: str, fg: str | None = None, bold: bool = False, dim: bool = False) -> str:
    """``text`` in colour when colour is on for stdout, else unchanged."""
    if not color_enabled():
        return text
    return click.style(text, fg=fg, bold=bold, dim=dim)


PHASE_COLORS = {"Scheduled": "green", "Provisioned": "cyan", "Unschedulable": "red", "Preempted": "yellow"}


def phase(text: str) -> str:
    """A pod phase, coloured by outcome."""
    return style(text, fg=PHASE_COLORS.get(text))


def _quiet_progress() -> None:
    """Erase a progress line before printing (kgpu.cli.progress), so the two never share a line."""
    from kgpu.cli.progress import stop_active

    stop_active()


def echo(text: str = "", err: bool = False, nl: bool = True) -> None:
    """click.echo that keeps colour when --color=always sends it into a pipe."""
    _quiet_progress()
    click.echo(text, err=err, nl=nl, color=color_enabled(err))


def warn(message: str) -> None:
    _quiet_progress()
    click.echo(f"warning: {message}", err=True)


def deprecated(old: str, new: str) -> None:
    """One line on stderr for a spelling kept for one more release."""
    click.echo(f"warning: {old} is deprecated and will be removed in the next release; use {new}", err=True)


# kubectl's -o values: a word among these is a format asked for, never a file name.
KUBECTL_FORMATS = (*FORMATS, "jsonpath", "go-template", "custom-columns", "jsonpath-file", "go-template-file")


def format_or_old_path(
    value: str, formats: Sequence[str], *, verb: str, new_flag: str, suffixes: Sequence[str] = ()
) -> tuple[str | None, str | None]:
    """``-o VALUE`` of a verb that once took a file or directory there: ``(format, None)`` for one of
    ``formats``; ``(None, path)`` for the old spelling, which must look like a path (a ``/``, a leading
    ``.`` or ``~``, or one of ``suffixes``), with a deprecation line; any other word is an error (exit 2),
    so ``kgpu init -o wide`` no longer writes a file named ``wide``."""
    word = value.lower()
    if word in formats:
        return word, None
    listed = ", ".join(formats)
    if word in KUBECTL_FORMATS:
        raise InputError(
            f"{verb} has no {value} output", where=f"-o {value}", hint=f"-o is the output format: {listed}"
        )
    if "/" in value or os.sep in value or value.startswith((".", "~")) or value.lower().endswith(tuple(suffixes)):
        deprecated(f"-o {value} (a {'directory' if new_flag.endswith('dir') else 'file'})", f"{new_flag} {value}")
        return None, value
    raise InputError(
        "not an output format", where=f"-o {value}", hint=f"-o is one of {listed}; to write there: {new_flag} {value}"
    )


# --- failures ---------------------------------------------------------------------------------------------


def fail_input(exc: InputError) -> NoReturn:
    _quiet_progress()
    click.echo(f"error: {exc.line()}", err=True)
    sys.exit(ExitCode.INPUT)


def handle_input_errors(fn: F) -> F:
    """Turn an InputError escaping a command into one line on stderr and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            fail_input(exc)

    return wrapper  # type: ignore[return-value]


# The extras of pyproject.toml and the modules each brings.
EXTRAS: dict[str, tuple[str, ...]] = {
    "exporter": ("prometheus_client", "pynvml", "grpc", "google.protobuf"),
    "validate": ("kubernetes_validate",),
}


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_extra(extra: str, what: str, modules: Sequence[str] | None = None) -> None:
    """Exit 2 with the pip line to run when an optional dependency (a ``kgpu[extra]``) is missing."""
    missing = [m for m in (modules if modules is not None else EXTRAS[extra]) if not _importable(m)]
    if missing:
        reqs = " ".join(f"'{r}'" for r in extra_requirements(extra)) or f"'kgpu[{extra}]'"
        click.echo(
            f"error: {what} needs the '{extra}' extra, kgpu[{extra}] ({', '.join(missing)} not installed): "
            f"pip install {reqs}  (pipx: pipx inject kgpu {reqs})",
            err=True,
        )
        sys.exit(ExitCode.INPUT)


def extra_requirements(extra: str) -> list[str]:
    """The requirements an extra adds, from the installed kgpu's own metadata: what to pip install into
    the environment kgpu runs in, since kgpu itself is installed from a wheel, not from PyPI (an install
    without metadata, such as a bare source tree, gets an empty list)."""
    import importlib.metadata
    import re

    try:
        requires = importlib.metadata.requires("kgpu") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = re.compile(r"""^\s*extra\s*==\s*['"]([^'"]+)['"]\s*$""")
    out = []
    for req in requires:
        spec, _, env = req.partition(";")
        found = marker.match(env)
        if found and found.group(1) == extra:
            out.append(spec.strip())
    return out


# --- emitters ---------------------------------------------------------------------------------------------


def to_json(data: Any) -> str:
    """Indented JSON, non-ASCII kept readable; anything msgspec cannot encode becomes its str()."""
    import msgspec

    return msgspec.json.format(msgspec.json.encode(data, enc_hook=str), indent=2).decode("utf-8")


def _dump_yaml(data: Any, *, pure: bool = False) -> str:
    import yaml

    dumper = yaml.SafeDumper if pure else getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return text


def _libyaml_differs(data: Any) -> bool:
    """libyaml writes four things unlike PyYAML's own emitter: characters beyond U+FFFF (escaped), empty
    mapping keys (``'': v`` instead of ``? ''``), keys with a line break (``? "\\r"``) and scalars holding
    NEL. Found in the UTF-8 JSON encoding at msgspec's speed (keys checked one by one only when some string has a line break)."""
    import re

    import msgspec

    try:
        raw = msgspec.json.encode(data)
    except (TypeError, msgspec.EncodeError):
        return True
    # NEL (U+0085) anywhere: libyaml quotes a scalar holding it unlike PyYAML ('...' against "\N")
    if re.search(rb'[\xf0-\xf4]|"":|\xc2\x85', raw) is not None:
        return True
    # a mapping key with a line break: libyaml writes it as a complex key (``? "\r"``), PyYAML does not
    return re.search(rb"\\[rn]|\xc2\x85|\xe2\x80[\xa8\xa9]", raw) is not None and _line_break_key(data)


_LINE_BREAKS = ("\r", "\n", "\x85", "\u2028", "\u2029")


def _line_break_key(data: Any) -> bool:
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if any(isinstance(k, str) and any(b in k for b in _LINE_BREAKS) for k in item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


_SCALARS = (str, int, float, bool, type(None))
_FAST_ROWS = 256  # below this, one dump call is as quick


def _is_rows(value: Any) -> bool:
    """A long list of non-empty flat mappings (pods, nodes, catalog rows): the shape worth a fast path.
    A value may also be a list (a pod's warnings), mostly empty."""
    return (
        isinstance(value, list)
        and len(value) >= _FAST_ROWS
        and all(
            type(row) is dict
            and row
            and all(type(k) is str and (type(v) in _SCALARS or type(v) is list) for k, v in row.items())
            for row in value
        )
    )


class _RowWriter:
    """Writes ``- k: v`` block rows exactly as PyYAML would, memoising each distinct ``k: v`` line.

    Every key of a row sits at the same column, so a ``key: value`` pair is written the same way wherever
    it occurs; the first key of a row takes ``- `` where the others take two spaces. Plain identifiers
    (names, node names) that the resolver reads back as strings are written directly; anything else is
    dumped once by PyYAML and reused.
    """

    _PLAIN = None

    def __init__(self) -> None:
        import re

        import yaml

        self._resolver = yaml.resolver.Resolver()
        self._node = yaml.ScalarNode
        self._lines: dict[tuple[str, type, Any], str] = {}
        if _RowWriter._PLAIN is None:
            _RowWriter._PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")

    def _pair(self, key: str, value: Any) -> str:
        """``key: value`` followed by a newline, as the non-first entry of a row (two-space indent)."""
        memo = (key, type(value), value if type(value) is not list else ())
        line = self._lines.get(memo)
        if line is None:
            plain = _RowWriter._PLAIN
            assert plain is not None
            if (
                type(value) is str
                and plain.fullmatch(value)
                and plain.fullmatch(key)
                and self._resolver.resolve(self._node, value, (True, False)) == "tag:yaml.org,2002:str"  # type: ignore[no-untyped-call]
                and self._resolver.resolve(self._node, key, (True, False)) == "tag:yaml.org,2002:str"  # type: ignore[no-untyped-call]
            ):
                line = f"  {key}: {value}\n"
            else:
                line = "  " + _dump_yaml([{key: value}])[2:]
            if len(self._lines) < 200_000:
                self._lines[memo] = line
        return line

    def rows(self, rows: list[dict[str, Any]]) -> str:
        out: list[str] = []
        pair = self._pair
        for row in rows:
            first = True
            start = len(out)
            for k, v in row.items():
                if type(v) is list and v:  # a non-empty list: this row is PyYAML's
                    del out[start:]
                    out.append(_dump_yaml([row]))
                    break
                line = pair(k, v)
                out.append("- " + line[2:] if first else line)
                first = False
        return "".join(out)


def _unshared(data: Any) -> bool:
    """No dict or list appears twice (PyYAML anchors those: ``&id001`` ... ``*id001``)."""
    seen: set[int] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            if id(item) in seen:
                return False
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
    return True


def to_yaml(data: Any) -> str:
    """Block-style YAML in the data's key order, byte for byte what PyYAML's ``safe_dump`` writes.

    libyaml's emitter does the writing; long lists of flat rows (50,000 pods) skip PyYAML's per-scalar
    representer through :class:`_RowWriter`. A test compares both against the pure-Python dumper.
    """
    if _libyaml_differs(data):
        return _dump_yaml(data, pure=True)
    if not (isinstance(data, dict) and data and any(_is_rows(v) for v in data.values())):
        return _dump_yaml(data)
    if not _unshared(data):  # PyYAML would write anchors and aliases: leave it to PyYAML
        return _dump_yaml(data)
    writer = _RowWriter()
    parts = []
    for key, value in data.items():
        if type(key) is str and _is_rows(value):
            parts.append(_dump_yaml({key: []})[: -len(" []\n")] + "\n" + writer.rows(value))
        else:
            parts.append(_dump_yaml({key: value}))
    return "".join(parts)


def emit_json(data: Any) -> None:
    click.echo(to_json(data))


def emit_yaml(data: Any) -> None:
    click.echo(to_yaml(data), nl=False)


def emit(
    data: Any,
    output: str,
    render_table: Callable[[Any], str],
    *,
    wide: Callable[[Any], str] | None = None,
    names: Callable[[Any], Iterable[str]] | None = None,
) -> None:
    """Print a result in the chosen format: JSON or YAML for scripts, the verb's table for people."""
    _quiet_progress()
    output = output.lower()
    if output == "json":
        emit_json(data)
    elif output == "yaml":
        emit_yaml(data)
    elif output == "name":
        if names is None:
            raise click.UsageError("-o name is not available here")
        for name in names(data):
            click.echo(name)
    elif output == "wide" and wide is not None:
        echo(wide(data))
    else:
        echo(render_table(data))


def summary_line(summary: dict[str, Any]) -> str:
    """'14 scheduled, 0 unschedulable, 16 new nodes': the integer counts of a result's summary (a zero
    count of pods with warnings is left out)."""
    return ", ".join(
        f"{v} {k.replace('_', ' ')}"
        for k, v in summary.items()
        if isinstance(v, int) and not isinstance(v, bool) and (v or k != "with_warnings")
    )


def warning_codes(pod: dict[str, Any]) -> str:
    """A pod's warning codes for the WARNINGS column: 'volumes,preemption'."""
    return ",".join(w["code"] for w in pod.get("warnings") or ())


def warnings_footer(pods: Iterable[dict[str, Any]]) -> list[str]:
    """What the WARNINGS column's codes mean, with how many pods carry each; nothing when none does."""
    from kgpu.sim.unmodelled import TEXT

    counts: dict[str, int] = {}
    for pod in pods:
        for w in pod.get("warnings") or ():
            counts[w["code"]] = counts.get(w["code"], 0) + 1
    if not counts:
        return []
    width = max(len(c) for c in counts)
    out = ["", "Not modelled (WARNINGS): these pods may be placed differently in the cluster"]
    out += [f"  {code:<{width}}  {n} pod(s): {TEXT.get(code, '')}" for code, n in counts.items()]
    out.append("  (each pod's details: -o json, pods[].warnings)")
    return out


def _visible_len(text: str) -> int:
    return len(click.unstyle(text)) if "\x1b" in text else len(text)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None) -> str:
    """An aligned text table; ``--no-headers`` drops the title, the header and its rule.

    Cells may carry colour (from :func:`style`): widths are measured without the escape codes.
    """
    body = [["" if c is None else str(c) for c in row] for row in rows]
    head = [str(h) for h in headers]
    cells = [head, *body]
    widths = [max(_visible_len(r[i]) for r in cells) for i in range(len(head))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c + " " * (widths[i] - _visible_len(c)) for i, c in enumerate(row)).rstrip()

    if not headers_wanted():
        return "\n".join(line(r) for r in body)
    lines = [title] if title else []
    lines.append(line(head))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(line(r) for r in body)
    return "\n".join(lines)


# --- help -------------------------------------------------------------------------------------------------


def examples(*pairs: tuple[str, str]) -> str:
    """A help epilog of (what it does, command line) pairs, printed verbatim after the options.

    Command lines start with ``kgpu``; invoked as ``kubectl gpu`` the CLI rewrites them (see main).
    """
    lines = ["Examples:", ""]
    for n, (what, cmd) in enumerate(pairs):
        if n:
            lines.append("")
        lines.append("\b")
        lines.append(f"  # {what}")
        lines.append(f"  {cmd}")
    return "\n".join(lines)
