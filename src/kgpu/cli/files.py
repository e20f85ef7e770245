"""Reading users' files, and writing ours atomically. The only file I/O of the CLI layer."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from kgpu.errors import InputError
from kgpu.model.load import Objects, parse_text

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def manifest_files(paths: Iterable[str]) -> Iterator[tuple[str, Path | None]]:
    """Expand paths: files as given, directories recursively (sorted), '-' for standard input."""
    for raw in paths:
        if raw == "-":
            yield "<stdin>", None
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
            if not found:
                raise InputError("directory holds no .yaml, .yml or .json files", where=raw)
            for p in found:
                yield str(p), p
        elif path.exists():
            yield raw, path
        else:
            raise InputError("no such file or directory", where=raw)


def read_bytes(label: str, path: Path | None) -> bytes:
    if path is None:
        return sys.stdin.buffer.read()
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(exc.strerror or str(exc), where=label) from None


def load_objects(paths: Iterable[str]) -> Objects:
    out = Objects()
    for label, path in manifest_files(paths):
        out.extend(parse_text(read_bytes(label, path), label))
    return out


def read_text(raw: str) -> str:
    label, path = next(manifest_files([raw]))
    try:
        return read_bytes(label, path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason}", where=label) from None


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
