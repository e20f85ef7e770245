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
WORK = str(ROOT / "tests" / "fixtures" / "plan" / "vector-add-and-web.yaml")


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
    res = CliRunner().invoke(cli, ["plan", "-w", WORK, "--report", str(path)])
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
        "gpu-1",
        "g4dn.metal spot new, $3.3469/h",
        "15/16",
        "Cost per hour",
        "$6.7581/h ($4,933.41/mo)",
        "prices as of 2026-11-21",
        "vector-add (x15)",
        "Provisioned",
        "from 80 % used",
    ):
        assert shown in text, shown
    # one GPU bar per GPU line (pool total + two nodes), none for the CPU-only pool
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


def test_compare_report_has_a_bar_per_comparable_template_only(tmp_path: Path):
    """Templates that cannot run every pod get no bar (their $0 would read as cheapest) but say why."""
    path = tmp_path / "compare.html"
    res = CliRunner().invoke(cli, ["plan", "-w", WORK, "--compare", "--report", str(path)])
    assert res.exit_code == 0  # some templates cannot run the GPU pods; eks-karpenter, eks-eksctl and
    # kueue-two-teams (Karpenter pools too) can
    html = path.read_text()
    assert html.count('<rect class="bar cost"') == 3  # the three that run everything
    assert "no bar: cannot run 12 pod(s)" in html  # onprem: three GPUs for fifteen GPU pods
    assert html.index(">eks-karpenter<") < html.index(">eks-eksctl<") < html.index(">onprem<")
    assert "prices as of 2026-11-21" in html and "/mo)" in html


def test_plan_report_marks_unpriced_nodes(tmp_path: Path):
    """On-prem nodes have no price: the page says n/a, and that the totals leave them out."""
    prof = tmp_path / "kgpu.yaml"
    assert CliRunner().invoke(cli, ["init", "-t", "onprem", "-f", str(prof)]).exit_code == 0
    path = tmp_path / "plan.html"
    res = CliRunner().invoke(cli, ["plan", "-f", str(prof), "--report", str(path)])
    html = path.read_text()
    assert res.exit_code in (0, 1), res.output
    assert "no price (n/a)" in html and 'class="unpriced"' in html
    assert "of the profile&#x27;s own node(s) without a price in the catalog: not in the totals" in html


def test_report_into_a_directory_is_bad_input(tmp_path: Path):
    res = CliRunner().invoke(cli, ["plan", "--report", str(tmp_path)])
    assert res.exit_code == 2


def test_terminal_node_view_groups_alike_nodes_by_pool_within_80_columns():
    res = CliRunner().invoke(cli, ["plan", "-w", WORK])
    lines = res.stdout.splitlines()
    start = lines.index("Nodes by pool (requests / allocatable)")
    view = lines[start : start + 11]
    assert view[1].split()[:4] == ["POOL", "/", "NODE", "TYPE"] and view[1].split()[-2:] == ["$/H", "EACH"]
    gpu = next(ln for ln in view if ln.startswith("gpu "))
    assert "2 node(s)" in gpu and "15/16" in gpu and "$6.694" in gpu
    assert sum(1 for ln in view if ln.startswith(" +gpu-")) == 2  # new nodes marked +
    assert any("g4dn.metal spot" in ln for ln in view)
    legend = view[view.index(next(ln for ln in view if ln.startswith("Bars:"))) :]
    assert legend[0] == "Bars: requests / allocatable; green ≥ 80 %, yellow ≥ 30 %, red < 30 % used"
    assert legend[1].startswith("+ new node, (xN) N alike nodes, od on-demand; n/a")
    assert legend[2] == ""  # the prices' sources are the cost block's, just below
    cost = lines[lines.index("Cost"):]
    assert any(ln.strip().startswith("prices: AWS us-west-2 list prices as of 2026-11-21") for ln in cost)
    assert max(len(ln) for ln in view) <= 80


def test_node_view_fits_80_columns_with_long_names_and_keeps_counts():
    """Real node names (ip-10-0-1-30.us-west-2.compute.internal) are shortened, never the (xN) count."""
    groups = [
        nodeview.NodeGroup(
            "gpu-spot-ng-us-west-2a",
            "ip-10-0-1-30.us-west-2.compute.internal",
            "p4de.24xlarge",
            "on-demand",
            False,
            nodeview.Usage(8, 8),
            nodeview.Usage(95000, 95690),
            nodeview.Usage(10**9, 1135 * 10**6),
            12,
            40.9657,
            count=12,
        ),
        nodeview.NodeGroup(
            "gpu-spot-ng-us-west-2a",
            "k8s-node05",
            "",
            "",
            False,
            nodeview.Usage(16, 16),
            nodeview.Usage(1, 2),
            nodeview.Usage(1, 2),
            3,
            None,
        ),
    ]
    text = nodeview.render([nodeview.Pool("gpu-spot-ng-us-west-2a", groups)])
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80, "\n".join(lines)
    assert any(ln.startswith("  ip-10") and "… (x12)" in ln and "p4de.24xlarge od" in ln for ln in lines)
    node = next(ln for ln in lines if "k8s-node05" in ln)
    assert node.rstrip().endswith("n/a") and "16/16" in node
    pool = next(ln for ln in lines if ln.startswith("gpu-spot-ng"))
    assert "13 node(s), 1 n/a" in pool and "$491.59" in pool  # the total leaves one node out and says so
    wide = nodeview.render([nodeview.Pool("gpu-spot-ng-us-west-2a", groups)], compact=False)
    assert "ip-10-0-1-30.us-west-2.compute.internal (x12)" in wide and "$40.9657/h" in wide


def test_existing_nodes_are_priced_from_their_labels():
    """As eks-node-viewer does: instance type, capacity type and region labels over the AWS catalog."""
    labels = {
        "node.kubernetes.io/instance-type": "g4dn.xlarge",
        "topology.kubernetes.io/zone": "us-west-2b",
        "karpenter.sh/capacity-type": "spot",
    }
    spot = nodeview.catalog_price("g4dn.xlarge", "spot", labels)
    on_demand = nodeview.catalog_price("g4dn.xlarge", "on-demand", labels)
    assert on_demand == 0.526 and spot is not None and 0 < spot < on_demand
    assert nodeview.catalog_price("g4dn.xlarge", "spot", {"topology.kubernetes.io/region": "mars-1"}) is None
    assert nodeview.catalog_price("no.such-type", "spot", labels) is None
    assert nodeview.catalog_price("", "", {}) is None


def test_compare_bars_only_for_templates_that_run_everything_in_the_order_the_help_says():
    res = CliRunner().invoke(cli, ["plan", "-w", WORK, "--compare", "--color", "never"])
    out = res.stdout
    rows = [ln.split()[0] for ln in out.split("---\n")[1].split("\n\n")[0].splitlines()]
    assert rows[:3] == ["eks-karpenter", "kueue-two-teams", "eks-eksctl"]  # comparable, cheapest first
    bars = {ln.split()[0]: ln for ln in out.split("Cost per hour")[1].splitlines()[1:] if ln and ln[0] != "("}
    assert bars["eks-eksctl"].count("█") == 30 and 0 < bars["eks-karpenter"].count("█") < 30
    assert bars["eks-karpenter"].count("█") <= bars["kueue-two-teams"].count("█") < 30
    for template in ("onprem", "tke-supernode", "kuberay"):
        assert "█" not in bars[template] and "no bar: cannot run" in bars[template]
    assert "($4,933.41/mo)" in bars["eks-karpenter"]
    assert "prices as of 2026-11-21" in out
    help_text = CliRunner().invoke(cli, ["plan", "--help"]).stdout
    assert "cheapest first; then those with nodes kgpu cannot price; then those where some pod" in " ".join(
        help_text.split()
    )


def test_bar_text_and_colour_thresholds():
    assert nodeview.bar(nodeview.Usage(1, 2), width=5) == "███░░ 50%"  # half up
    assert nodeview.bar(nodeview.Usage(1, 2)) == "█████░░░░░ 50%"
    assert nodeview.bar(nodeview.Usage(3, 4), count=True) == "████████░░ 3/4"
    assert nodeview.bar(nodeview.Usage(0, 0)) == ""
    assert [nodeview.color_for(f) for f in (0.9, 0.5, 0.1)] == ["green", "yellow", "red"]


@pytest.mark.integration
def test_chromium_draws_every_cost_figure_inside_the_picture(tmp_path: Path):
    """A five-figure monthly price, a long template name and a note: Chromium's own text measurement says every
    label and figure lies inside the SVG and no label runs into its bar."""
    from kgpu.cli.report import cost_svg

    items = [
        ("p5.48xlarge", 98.32),
        ("a-template-name-that-is-longer-than-usual-for-this", 1234.5678),
        ("cpu-only", 0.0104),
        ("no-price", None),
        ("tke", 3.0),
    ]
    svg = cost_svg(
        items, notes={"tke": "TKE bills per pod, not per node; see the table below for the figure"}
    )
    page = tmp_path / "cost.html"
    page.write_text(
        "<!DOCTYPE html><html><head><style>svg text { font: 12px system-ui, sans-serif; }</style></head><body>"
        + svg
        + "<pre id=out></pre><script>"
        "const svg = document.querySelector('svg'); const w = svg.width.baseVal.value; const bad = [];"
        "const rects = [...svg.querySelectorAll('rect')];"
        "for (const t of svg.querySelectorAll('text')) { const b = t.getBBox();"
        " if (b.x < 0 || b.x + b.width > w) bad.push('outside:' + t.textContent);"
        " if (t.getAttribute('x') === '0') for (const r of rects) { if (Math.abs(r.y.baseVal.value - b.y) < 14"
        "   && b.x + b.width > r.x.baseVal.value) bad.push('overlap:' + t.textContent); } }"
        "document.getElementById('out').textContent = 'checked ' + svg.querySelectorAll('text').length + ' '"
        " + JSON.stringify(bad);</script></body></html>"
    )
    dom = run_chromium("--dump-dom", page.as_uri()).stdout
    found = re.search(r"checked (\d+) (\[.*?\])</pre>", dom)
    assert found, dom[-500:]
    assert int(found.group(1)) == 10
    assert found.group(2) == "[]", found.group(2)
    assert "$901,234.49/mo" in svg  # 1234.5678 * 730 h


def test_report_says_when_and_from_what_and_where_karpenter_takes_the_nodes(report: Path):
    html = report.read_text()
    made = re.search(r"made (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC) from ([^<]*)</p>", html)
    assert made, html[:600]
    assert made.group(2) == f"the built-in template eks-karpenter, workloads {WORK}"
    # the consolidation view the terminal prints after the node view, as a section of its own
    assert "<h2>Consolidation: Karpenter keeps the nodes above</h2>" in html
    assert "consolidationPolicy WhenEmpty removes empty nodes only" in html


@pytest.mark.integration
@pytest.mark.parametrize("width", [1280, 800, 500])  # 500: headless Chromium's narrowest window
def test_the_report_fits_the_window_at_any_width(report: Path, tmp_path: Path, width: int):
    """In Chromium at desktop, tablet and narrow widths, nothing makes the page wider than the window: the
    pictures scale down, wide tables scroll in their own box. (The check runs as a script, which the
    report's own Content-Security-Policy forbids; the copy drops that one meta tag, nothing of the layout.)"""
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", report.read_text())
    probe = (
        "<pre id=out></pre><script>const W = window.innerWidth; const bad = [];"
        "if (document.documentElement.scrollWidth > W) bad.push('page:' + document.documentElement.scrollWidth);"
        "for (const s of document.querySelectorAll('svg')) { const r = s.getBoundingClientRect();"
        " if (r.right > W + 0.5) bad.push('svg:' + r.right); }"
        "for (const t of document.querySelectorAll('.scroll')) { const r = t.getBoundingClientRect();"
        " if (r.right > W + 0.5) bad.push('table box:' + r.right); }"
        "document.getElementById('out').textContent = 'width ' + W + ' ' + JSON.stringify(bad);</script>"
    )
    page = tmp_path / "report.html"
    page.write_text(html.replace("</body>", probe + "</body>"))
    dom = run_chromium(f"--window-size={width},900", "--dump-dom", page.as_uri()).stdout
    found = re.search(r"width (\d+) (\[.*?\])</pre>", dom)
    assert found, dom[-500:]
    assert int(found.group(1)) == width
    assert found.group(2) == "[]", found.group(2)
