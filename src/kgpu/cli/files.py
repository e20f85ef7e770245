"""Reading users' files, and writing ours atomically. The only file I/O of the CLI layer.

Every failure of the file system (a path longer than NAME_MAX, a symlink loop, a read-only directory, a full
disk) becomes one :class:`InputError` line naming the path, and nothing is left half-written: a file goes to a
temporary sibling and is renamed into place; a directory of files is staged whole, checked against what is
there, and swapped in file by file with the old files kept aside until every rename succeeded.

Files kgpu writes get the usual permissions, not those of the temporary files they start as (``mkstemp`` and
``mkdtemp`` make 0600 and 0700): 0666 minus the umask (0644 under the common 022), 0777 minus the umask for
directories and for scripts (text starting with ``#!``); a file that is replaced keeps its own mode.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from kgpu.errors import InputError, os_error
from kgpu.model.inputs import Objects
from kgpu.model.load import parse_text
from kgpu.model.safeyaml import MAX_BYTES, read_limited

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def is_dir(path: Path, label: str) -> bool:
    """Path.is_dir(), with a file-system error (ENAMETOOLONG, ELOOP, EACCES) as an InputError on ``label``."""
    try:
        return path.is_dir()
    except OSError as exc:  # ENAMETOOLONG, ELOOP, EACCES on a parent
        raise os_error(exc, label) from None


def exists(path: Path, label: str) -> bool:
    """Whether ``path`` exists (following symlinks), with other file-system errors as an InputError."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    except OSError as exc:
        raise os_error(exc, label) from None
    return True


def manifest_files(paths: Iterable[str]) -> Iterator[tuple[str, Path | None]]:
    """Expand paths: files as given, directories recursively (sorted), '-' for standard input."""
    for raw in paths:
        if raw == "-":
            yield "<stdin>", None
            continue
        if "\0" in raw:
            raise InputError("a path cannot contain a NUL byte", where=raw)
        if not raw.strip():  # Path("") is the current directory: never what an empty argument meant
            raise InputError(f"empty path {raw!r}", hint="give a file, a directory or '-' for standard input")
        path = Path(raw)
        if is_dir(path, raw):
            try:
                found = sorted(p for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file())
            except OSError as exc:
                raise os_error(exc, raw, "cannot list") from None
            if not found:
                raise InputError("directory holds no .yaml, .yml or .json files", where=raw)
            for p in found:
                yield str(p), p
        elif exists(path, raw):
            yield raw, path
        else:
            raise InputError("no such file or directory", where=raw)


def read_bytes(label: str, path: Path | None) -> bytes:
    """A file's bytes (standard input for None), refusing more than the reader's size limit."""
    try:
        if path is None:
            data = read_limited(sys.stdin.buffer)
        else:
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size > MAX_BYTES:  # a regular file: refused before it is read
                    raise InputError(f"larger than {MAX_BYTES // 2**20} MiB (size limit)", where=label)
                data = read_limited(fh)
    except OSError as exc:
        raise os_error(exc, label) from None
    if len(data) > MAX_BYTES:
        raise InputError(f"larger than {MAX_BYTES // 2**20} MiB (size limit)", where=label)
    return data


def load_objects(paths: Iterable[str]) -> Objects:
    out = Objects()
    for label, path in manifest_files(paths):
        out.extend(parse_text(read_bytes(label, path), label))
    return out


def read_text(raw: str) -> str:
    """One file (or '-') as UTF-8 text."""
    label, path = next(manifest_files([raw]))
    if path is not None and is_dir(path, label):
        raise InputError("is a directory, not a file", where=label)
    try:
        return read_bytes(label, path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", where=label) from None


# --- writing -------------------------------------------------------------------------------------------


def _prepare_dir(directory: Path, label: str) -> None:
    """``directory`` exists (created with its parents if need be) and is a directory."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(
            "exists and is not a directory (or is a dangling symbolic link)", where=label
        ) from None
    except OSError as exc:
        raise os_error(exc, label, "cannot create directory") from None


def umask() -> int:
    """The process's umask: read by setting it and putting it back (there is no getter; /proc is Linux only)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode(text: str) -> int:
    """0644-style for data, 0755-style for a script (a ``#!`` line), both under the umask."""
    return (0o777 if text.startswith("#!") else 0o666) & ~umask()


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename: readers never see half a file.

    The new file gets :func:`file_mode`; a file it replaces passes on its own mode."""
    write_atomic_with(path, lambda fh: fh.write(text.encode("utf-8")), file_mode(text))


def _target(path: Path) -> tuple[Path, os.stat_result | None]:
    """The file a write to ``path`` goes to (through a symbolic link) and its status (None: not there yet);
    an InputError for what cannot be written as a file."""
    label = str(path)
    if is_dir(path, label):
        raise InputError("is a directory", where=label)
    if path.is_symlink():  # write through a link to its file, as editors do; a dangling one is a mistake
        if not exists(path, label):
            raise InputError("is a dangling symbolic link", where=label)
        path = Path(os.path.realpath(path))
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise InputError("is not a regular file (a socket or a block device): give a file path", where=label)
    return path, st


def check_target(path: Path) -> None:
    """What :func:`write_atomic_with` would refuse, said before long work that ends in writing ``path`` (a
    snapshot lists the whole cluster first): a directory, a dangling link, a socket, a parent that is a file.
    Nothing is created."""
    path, st = _target(path)
    if st is not None:
        return
    parent = path.parent
    while not exists(parent, str(parent)):
        parent = parent.parent
    if not is_dir(parent, str(parent)):
        raise InputError("exists and is not a directory", where=str(parent))


def write_atomic_with(path: Path, write: Callable[[BinaryIO], object], new_mode: int) -> None:
    """:func:`write_atomic` of what ``write`` writes to the temporary file (opened binary); a new file gets
    ``new_mode``. The temporary file is removed whatever stops ``write`` (an error, an interrupt)."""
    label = str(path)
    path, st = _target(path)
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        # a pipe or a character device (/dev/null, /dev/stdout): written to as it is, never replaced by a
        # regular file (as root, a rename would swap the device node for one)
        try:
            with open(path, "wb") as fh:
                write(fh)
        except OSError as exc:
            raise os_error(exc, label, "cannot write") from None
        return
    _prepare_dir(path.parent, str(path.parent))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", dir=path.parent)
    except OSError as exc:
        raise os_error(exc, label, "cannot write") from None
    try:
        os.fchmod(fd, st.st_mode & 0o7777 if st is not None else new_mode)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())  # the data on disk before the name points at it
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise os_error(exc, label, "cannot write") from None
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: str) -> None:
    """Remove the temporary file, even when a second signal's exception (an impatient Ctrl-C, SIGTERM after
    SIGINT) arrives during the removal: the removal is tried again, then that exception goes on."""
    pending: BaseException | None = None
    for _ in range(3):
        try:
            os.unlink(tmp)
            break
        except OSError:
            break  # gone already, or not ours to remove
        except BaseException as exc:  # re-raised below, once the file is gone
            pending = exc
    if pending is not None:
        raise pending


def spool_beside(target: str) -> BinaryIO:
    """An unnamed temporary file (gone when closed or when the process ends, however) in the directory
    ``target`` will be written in, for what is staged before it is written: on the same file system, not
    in memory. The system's temporary directory for standard output ('-') or a directory not created yet."""
    directory = None
    if target != "-":
        parent = os.path.dirname(os.path.realpath(target))
        with contextlib.suppress(OSError):
            directory = parent if os.path.isdir(parent) else None
    try:
        return tempfile.TemporaryFile(dir=directory)
    except OSError as exc:
        raise os_error(exc, target if directory else tempfile.gettempdir(), "cannot write") from None


def _safe_name(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts


def write_tree(out_dir: Path, files: dict[str, str]) -> None:
    """Write ``files`` (relative path -> text) into ``out_dir``: all of them, or none.

    Every file is written to a temporary sibling directory first. A new ``out_dir`` is then one rename. An
    existing one is checked first (no target may be a directory, no parent a file), and the files are swapped
    in one by one with the replaced ones moved aside; if a rename still fails, everything is moved back.
    """
    label = str(out_dir)
    for name in files:
        if not _safe_name(name):  # pragma: no cover - renderers name their own files
            raise InputError(f"refusing to write outside the directory: {name}", where=label)
    if out_dir.is_symlink() and not exists(out_dir, label):
        raise InputError("is a dangling symbolic link", where=label)
    try:
        real = Path(os.path.realpath(out_dir))
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise InputError(f"cannot resolve: {exc}", where=label) from None
    if exists(real, label) and not is_dir(real, label):
        raise InputError("exists and is not a directory", where=label)
    _prepare_dir(real.parent, str(out_dir.parent))
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{real.name[:100]}.kgpu-", dir=real.parent))
    except OSError as exc:
        raise os_error(exc, label, "cannot write") from None
    try:
        try:
            stage.chmod(0o777 & ~umask())  # the directory itself when it is new (one rename)
            for name, text in files.items():
                dest = stage / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text, encoding="utf-8")
                dest.chmod(file_mode(text))
        except OSError as exc:
            raise os_error(exc, label, "cannot write") from None
        if not exists(real, label):
            try:
                os.rename(stage, real)
            except OSError as exc:
                raise os_error(exc, label, "cannot write") from None
            return
        _check_targets(real, label, files)
        _swap_in(stage, real, label, files)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _check_targets(real: Path, label: str, files: dict[str, str]) -> None:
    for name in files:
        dest = real / name
        parent = dest.parent
        while parent != real:
            if parent.is_symlink() or (exists(parent, label) and not is_dir(parent, label)):
                raise InputError(
                    "is in the way: not a directory", where=f"{label}/{parent.relative_to(real)}"
                )
            parent = parent.parent
        if is_dir(dest, label):
            raise InputError("is in the way: a directory where a file goes", where=f"{label}/{name}")


def _swap_in(stage: Path, real: Path, label: str, files: dict[str, str]) -> None:
    backup = Path(tempfile.mkdtemp(prefix=f".{real.name[:100]}.old-", dir=real.parent))
    done: list[tuple[str, bool]] = []  # (name, had an old file)
    created: list[Path] = []
    try:
        for name in files:
            dest = real / name
            missing = [
                p for p in reversed(dest.parents) if p.is_relative_to(real) and p != real and not p.exists()
            ]
            for p in missing:
                p.mkdir()
                created.append(p)
            had_old = os.path.lexists(dest)
            if had_old:
                (backup / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(dest, backup / name)
            done.append((name, had_old))
            os.replace(stage / name, dest)
    except OSError as exc:
        for name, had_old in reversed(done):
            with contextlib.suppress(OSError):
                if had_old:
                    os.replace(backup / name, real / name)
                else:
                    (real / name).unlink(missing_ok=True)
        for p in reversed(created):
            with contextlib.suppress(OSError):
                p.rmdir()
        raise os_error(exc, label, "cannot write (nothing changed)") from None
    finally:
        shutil.rmtree(backup, ignore_errors=True)
