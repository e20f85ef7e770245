"""`kgpu plan --report plan.html`, the terminal node view and cost bars; the page is opened in headless
Chromium (Debian's package, installed by `make test`), its DOM read back and a screenshot checked for the
bars' colours. The screenshot is kept in build/test-artifacts/."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from kgpu.cli import nodeview
from kgpu.cli.main import cli
from kgpu.cli.report import COLORS

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "build" / "test-artifacts"


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "chromium is not installed: `make test` installs Debian's chromium package (make chromium)"
        )
    return path


def run_chromium(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    pixels: list[tuple[int, int, int]] = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        pixels.extend(tuple(line[i : i + 3]) for i in range(0, stride, bpp))  # type: ignore[misc]
        prev = line
    return width, height, pixels


def rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "plan.html"
    res = CliRunner().invoke(cli, ["plan", "--report", str(path)])
    assert res.exit_code == 0, res.output
    assert f"wrote {path}" in res.stderr
    return path


def test_report_is_self_contained(report: Path):
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>")
    for outside in ("http:", "https:", "<script", "<link", "<img", "src=", "@import", "url("):
        assert outside not in html, outside
    assert html.count("<svg") == 2 and "<table" in html


@pytest.mark.integration
def test_chromium_shows_the_node_view_cost_and_placements(report: Path):
    dom = run_chromium("--dump-dom", report.as_uri()).stdout
    assert "Plan for profile eks-karpenter" in dom
    text = re.sub(r"<[^>]+>", " ", dom)
    for shown in (
        "Nodes by pool",
        "gpu-2 (x14)",
        "g4dn.xlarge spot new",
        "15/15",
        "Cost per hour",
        "$2.7513/h",
        "cuda-vector-add (x10)",
        "Provisioned",
    ):
        assert shown in text, shown
    # one GPU bar per GPU line (pool total + two groups), none for the CPU-only pool
    assert len(re.findall(r'<rect class="bar gpu', dom)) == 3
    assert len(re.findall(r'<rect class="bar cpu', dom)) == 5

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "plan-report.png"
    shot.unlink(missing_ok=True)
    run_chromium(f"--screenshot={shot}", "--window-size=1280,900", report.as_uri())
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 900)
    counts = {name: pixels.count(rgb(COLORS[name])) for name in ("green", "yellow", "red", "cyan")}
    # full GPU bars are green, the CPU-only pool half used is yellow, idle CPU on GPU nodes red, cost cyan
    assert all(n > 100 for n in counts.values()), counts
    assert counts["green"] > counts["red"]


def test_compare_report_has_a_bar_per_priced_template(tmp_path: Path):
    path = tmp_path / "compare.html"
    res = CliRunner().invoke(cli, ["plan", "--compare", "--report", str(path)])
    assert res.exit_code == 1  # some template cannot run the examples
    html = path.read_text()
    assert html.count('<rect class="bar cost"') == 3  # templates with a cost above zero
    assert "eks-eksctl" in html and "tke-supernode" in html


def test_report_into_a_directory_is_bad_input(tmp_path: Path):
    res = CliRunner().invoke(cli, ["plan", "--report", str(tmp_path)])
    assert res.exit_code == 2


def test_terminal_node_view_groups_alike_nodes_by_pool():
    res = CliRunner().invoke(cli, ["plan"])
    lines = res.stdout.splitlines()
    start = lines.index("Nodes by pool (requests / allocatable)")
    view = lines[start : start + 8]
    assert view[1].split()[:4] == ["POOL", "/", "NODE", "TYPE"]
    assert view[3].startswith("gpu ") and "15 node(s)" in view[3] and "15/15" in view[3]
    assert any(ln.strip().startswith("gpu-2 (x14)") for ln in view)
    assert sum(1 for ln in lines if "g4dn.xlarge" in ln and "new" in ln) == 2  # not 15 identical lines


def test_compare_prints_cost_bars_longest_for_the_most_expensive():
    out = CliRunner().invoke(cli, ["plan", "--compare"]).stdout
    bars = {ln.split()[0]: ln.count("█") for ln in out.split("Cost per hour")[1].splitlines() if "$" in ln}
    assert bars["eks-eksctl"] == max(bars.values()) == 30
    assert bars["onprem"] == 0 and 0 < bars["eks-karpenter"] < 30


def test_bar_text_and_colour_thresholds():
    assert nodeview.bar(nodeview.Usage(1, 2)) == "█████░░░░░ 50%"
    assert nodeview.bar(nodeview.Usage(3, 4), count=True) == "████████░░ 3/4"
    assert nodeview.bar(nodeview.Usage(0, 0)) == ""
    assert [nodeview.color_for(f) for f in (0.9, 0.5, 0.1)] == ["green", "yellow", "red"]
