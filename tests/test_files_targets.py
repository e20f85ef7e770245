"""Where kgpu writes a file the user named: a regular file is replaced whole (a temporary file beside it,
renamed); a pipe or a character device is written to as it is, never replaced by a regular file; a socket
is refused."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from kgpu.cli.files import write_atomic
from kgpu.errors import InputError


def test_a_regular_file_is_replaced_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.yaml"
    target.write_text("old")
    target.chmod(0o600)
    write_atomic(target, "new: 1\n")
    assert target.read_text() == "new: 1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["out.yaml"]  # no temporary file left


def test_a_character_device_stays_a_device(tmp_path: Path) -> None:
    """As root, a rename over /dev/null would turn the device into a regular file. A node of the same
    device (1, 3) in a temporary directory where kgpu may make one (root); /dev/null itself elsewhere, where
    no rename over it could succeed anyway."""
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        device = Path("/dev/null")
    write_atomic(device, "x: 1\n")
    assert stat.S_ISCHR(os.stat(device).st_mode)


def test_a_named_pipe_gets_the_text(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, "a: 1\n")
    reader.join(10)
    assert got == [b"a: 1\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(InputError, match="is not a regular file"):
            write_atomic(path, "a: 1\n")


def test_check_target_says_before_the_work_what_the_write_would_refuse(tmp_path: Path) -> None:
    """A snapshot lists the whole cluster before it writes: a directory, a dangling link or a parent that
    is a file is said first; a new file under directories still to be made is fine, and nothing is made."""
    from kgpu.cli.files import check_target

    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    for bad, words in ((tmp_path, "is a directory"), (tmp_path / "link", "dangling"),
                       (tmp_path / "file" / "snap.json", "is not a directory")):
        with pytest.raises(InputError, match=words):
            check_target(bad)
    check_target(tmp_path / "new" / "deeper" / "snap.json")
    assert not (tmp_path / "new").exists()


def test_a_second_interrupt_during_cleanup_still_removes_the_temporary_file(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The write is interrupted (KeyboardInterrupt), and a second interrupt lands while the temporary file
    is being removed: the removal is tried again, the file is gone, the target untouched, and the interrupt
    goes on to the caller."""
    from kgpu.cli import files

    target = tmp_path / "out.json"
    target.write_text("old")
    real = os.unlink
    calls: list[str] = []

    def impatient(p: str) -> None:
        calls.append(p)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the second Ctrl-C, before the file is removed
        real(p)

    def interrupted(fh: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "unlink", impatient)
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic_with(target, interrupted, 0o644)
    assert len(calls) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left
    assert target.read_text() == "old"
