"""Progress on a terminal: drawn on stderr only when stderr is a terminal, erased at the end, never in
standard output (so `-o json` stays parseable), and silent in pipes, with TERM=dumb or KGPU_NO_PROGRESS."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from kgpu.cli.progress import ERASE, Progress, enabled

ROOT = Path(__file__).resolve().parent.parent
WORK = str(ROOT / "tests" / "fixtures" / "plan" / "vector-add-and-web.yaml")


def run_with_tty_stderr(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run kgpu with stderr on a pseudo-terminal and stdout on a pipe, as `kgpu plan -o json > f` in a shell."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgpu.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env},
        cwd=ROOT,
    )
    os.close(slave)
    err = b""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            err += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read() if proc.stdout else b""
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out.decode(), err.decode(errors="replace")


def test_compare_on_a_terminal_shows_each_template_and_keeps_json_clean():
    code, out, err = run_with_tty_stderr(
        ["plan", "-w", WORK, "--compare", "-o", "json"], {"KGPU_PROGRESS_DELAY": "0", "TERM": "xterm"}
    )
    assert code == 0  # some templates cannot run the GPU pods, others can
    data = json.loads(out)  # nothing but the JSON on stdout
    assert [r["template"] for r in data["compare"]][:3] == ["eks-karpenter", "kueue-two-teams", "eks-eksctl"]
    assert "planning the workloads on template" in err and "/6) (" in err
    assert err.endswith(ERASE), repr(err[-40:])  # the line is erased at the end


def test_no_progress_when_stderr_is_not_a_terminal():
    res = subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main", "plan", "-w", WORK, "--compare", "-o", "json"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "KGPU_PROGRESS_DELAY": "0"},
        cwd=ROOT, timeout=180,
    )
    assert "planning" not in res.stderr and "\x1b" not in res.stderr
    json.loads(res.stdout)


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_switches_and_delay(monkeypatch):
    monkeypatch.delenv("KGPU_NO_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert enabled(FakeTTY()) and not enabled(io.StringIO())
    monkeypatch.setenv("TERM", "dumb")
    assert not enabled(FakeTTY())
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("KGPU_NO_PROGRESS", "1")
    assert not enabled(FakeTTY())
    monkeypatch.delenv("KGPU_NO_PROGRESS")
    quick = FakeTTY()
    monkeypatch.setenv("KGPU_PROGRESS_DELAY", "5")
    with Progress("quick", stream=quick):
        pass
    assert quick.getvalue() == ""  # done before the delay: nothing drawn, nothing to erase
    slow = FakeTTY()
    monkeypatch.setenv("KGPU_PROGRESS_DELAY", "0")
    with Progress("first", stream=slow, interval=0.01) as progress:
        time.sleep(0.1)
        progress.step("second")
        time.sleep(0.1)
    text = slow.getvalue()
    assert "first (0s)" in text and "second (0s)" in text and text.endswith(ERASE)


def test_simulate_on_a_terminal_erases_the_line_before_its_table():
    """stdout and stderr on one terminal, as in an interactive shell: the progress line is drawn while
    pods are placed and erased before the table, so no table line carries progress text."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgpu.cli.main", "simulate", "-c", "examples/cluster", "-w", "examples/workloads",
         "--color", "never"],
        stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "KGPU_PROGRESS_DELAY": "0", "TERM": "xterm"},
    )
    os.close(slave)
    screen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    assert proc.wait(timeout=60) == 0
    os.close(master)
    text = screen.decode(errors="replace").replace("\r\n", "\n")
    assert "simulating: reading the cluster and the workloads, placing pods" in text
    drawn, _, table = text.rpartition(ERASE)
    assert "simulating" in drawn and "simulating" not in table
    assert table.lstrip().startswith("NAMESPACE") and "14 scheduled, 0 unschedulable" in table
