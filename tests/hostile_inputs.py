"""A seeded generator of hostile inputs, and the checks every verb must pass on them.

Inputs start from valid documents (the built-in templates, the seed examples, a node, catalog rows, a
containerd config) and are mutated: a leaf replaced by a hostile value (huge or negative numbers, NUL bytes,
non-ASCII digits, megabyte strings, infinities, wrong types), a key dropped, a list turned into a scalar, the
whole text nested, aliased, truncated or re-encoded. The generator is plain ``random.Random(seed)``, so a
failing case is reproduced by its seed and index, both in the assertion message.
"""

from __future__ import annotations

import copy
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from kgpu.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "src/kgpu/model/examples"
TEMPLATES = ROOT / "src/kgpu/model/templates"

# Values that broke something once, or that a careless reader turns into a crash.
HOSTILE_SCALARS: list[Any] = [
    -1,
    -5,
    0,
    2**63,
    10**30,
    1e308,
    -1e308,
    "1e400",
    "1e-400",
    "9" * 5000,  # over Python's 4,300-digit int limit
    "abc",
    "-1",
    "-5Gi",
    "²",
    "١٢",  # Arabic-Indic digits: isdigit() is True, int() accepts them, the API does not
    "",
    " ",
    "\0",
    "a\0b",
    "x" * 200_000,
    "NaN",
    ".inf",
    float("inf"),
    float("nan"),
    True,
    None,
    [],
    {},
    [1, [2, [3]]],
    {"a": {"b": None}},
    "Foo",
    "in",
    "Gt",
    "Exists",
    "Deplyment",
    "pod",
    "List",
    70000,
    "🚀",
    "\u202e",
    "../../etc/passwd",
    "a" * 5000 + "/b",
]


def leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every node of ``doc`` (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*path, k))
            out.extend(leaves(v, (*path, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((*path, i))
            out.extend(leaves(v, (*path, i)))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


def _delete(doc: Any, path: tuple[Any, ...]) -> None:
    for p in path[:-1]:
        doc = doc[p]
    del doc[path[-1]]


def mutate_doc(rng: random.Random, doc: Any) -> Any:
    """One to three structural mutations of a copy of ``doc``."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = leaves(doc)
        if not paths:
            return rng.choice(HOSTILE_SCALARS)
        path = rng.choice(paths)
        action = rng.random()
        if action < 0.7:
            _set(doc, path, copy.deepcopy(rng.choice(HOSTILE_SCALARS)))
        elif action < 0.85:
            _delete(doc, path)
        else:
            _set(doc, path, [{"nested": 1}] * rng.randint(0, 3))
    return doc


def _dump(rng: random.Random, docs: list[Any]) -> bytes:
    try:
        if rng.random() < 0.3:
            value: Any = docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": docs}
            return json.dumps(value, allow_nan=True).encode()
        return yaml.safe_dump_all(docs, allow_unicode=rng.random() < 0.5, sort_keys=False).encode()
    except (ValueError, yaml.YAMLError):
        return b"kind: Pod\n"


def mutate_text(rng: random.Random, data: bytes) -> bytes:
    """Byte-level damage: truncation, garbage, encodings, deep nesting, alias bombs, NUL bytes."""
    choice = rng.randrange(12)
    if choice == 0 and data:
        return data[: rng.randrange(len(data))]
    if choice == 1:
        at = rng.randrange(len(data) + 1)
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[at:]
    if choice == 2:
        return "\ufeff".encode() + data  # a BOM
    if choice == 3:
        return data.decode("utf-8", "replace").encode("utf-16")
    if choice == 4:
        depth = rng.choice([150, 5000, 100_000])
        return b"[" * depth + b"]" * depth if rng.random() < 0.5 else b"a: " + b"[" * depth
    if choice == 5:
        depth = rng.choice([150, 20_000])
        return b'{"kind": "Pod", "spec": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"
    if choice == 6:
        lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
        for n in range(1, 9):
            prev = chr(ord("a") + n - 1)
            lines.append(f"{chr(ord('a') + n)}: &{chr(ord('a') + n)} [" + ",".join([f"*{prev}"] * 10) + "]")
        key = rng.choice(["provider", "kind", "metadata", "spec", "instance_types", "plugins"])
        lines.append(f"{key}: *i")
        return ("\n".join(lines) + "\n").encode()
    if choice == 7:
        at = rng.randrange(len(data) + 1)
        return data[:at] + b"\0" + data[at:]
    if choice == 8:
        return b"\xff\xfe\xfa" + data
    if choice == 9:
        return b"replicas: " + b"9" * 5000 + b"\n"
    if choice == 10:
        return b"- " * 50_000 + b"x\n"  # block sequences nested 50,000 deep
    return data + b"\n---\n" + data


@dataclass
class Case:
    name: str
    data: bytes


def documents(rng: random.Random, base: list[list[Any]]) -> Case:
    """One hostile file made from one of ``base`` (a list of documents)."""
    docs = rng.choice(base)
    if rng.random() < 0.8:
        docs = [mutate_doc(rng, d) if rng.random() < 0.8 else d for d in docs]
    data = _dump(rng, docs)
    if rng.random() < 0.3:
        data = mutate_text(rng, data)
    return Case(f"{len(data)} bytes", data)


def load_yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


# --- running the CLI -----------------------------------------------------------------------------------


def invoke(args: list[str], stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=True)


def check_result(result: Result, *, names: str | None, what: str) -> None:
    """Exit 0, 1 or 2; no traceback; an input error is one line naming the file."""
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        raise AssertionError(f"{what}: raised {type(exc).__name__}\n{tb[-3000:]}")
    assert result.exit_code in (0, 1, 2), f"{what}: exit {result.exit_code}\n{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr, f"{what}: traceback\n{result.stderr[-3000:]}"
    if result.exit_code == 2 and names is not None:
        errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
        usage = "Usage:" in result.stderr
        assert errors or usage, f"{what}: exit 2 without an error line\n{result.stderr[-2000:]}"
        for line in errors:
            assert len(line) < 2000, f"{what}: error line of {len(line)} characters"
        if errors and not usage:
            assert names in result.stderr, f"{what}: error does not name {names}\n{result.stderr[-2000:]}"


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its content (to prove a failed write changed nothing)."""
    if not path.exists():
        return {}
    out = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = Path(root) / f
            out[str(p.relative_to(path))] = p.read_bytes()
    return out


Verb = Callable[[random.Random, Path, int], None]
