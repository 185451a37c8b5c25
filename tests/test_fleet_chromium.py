"""The fleet report in a real browser (marker `chromium`: Debian's chromium, headless; CI installs it with
.ci/provision/16-chromium.sh and sets ROCMKIT_REQUIRE_CHROMIUM=1, so there a missing browser fails instead of
skipping). The page chromium builds (its DOM, after parsing and layout) holds the same findings as the JSON.
At 800 and 1300 px wide, what a reader sees is checked twice: by chromium's own layout (the element at the
centre of each red cell, of each failing node's name and of the banner is that element, so nothing covers or
clips it), and in a screenshot's pixels (every red cell of the grid is there, whole, on the first screen). The
clusters guide keeps the same screenshots (tests/fleetgen.py writes them); they are checked the same way."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fleetgen import SHOT_HEIGHT, WIDTHS, chromium, pages
from PIL import Image
from test_fleet import json_findings, page_findings

pytestmark = [pytest.mark.chromium]
IMG = Path(__file__).resolve().parent.parent / "docs" / "guides" / "img"
FAIL_CELL = (0xF5, 0xA3, 0xA3)  # .cell.fail's background (templates/fleet/report.html.j2)
# Run in a copy of the page (the page itself has no script): what is seen where, as chromium laid it out
LAYOUT = """<script>
const seen = el => { const r = el.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2); return !!hit && el.contains(hit); };
const all = sel => [...document.querySelectorAll(sel)];
const out = {width: innerWidth, scroll_width: document.scrollingElement.scrollWidth,
  banner: seen(document.getElementById('verdict')),
  cells: all('td.cell[data-status]').map(c => [c.dataset.node, c.dataset.check, c.dataset.status, seen(c)]),
  nodes: all('td.node').map(c => [c.textContent.trim().split(' ')[0], seen(c)]),
  dots: all('circle').map(c => [c.dataset.node, c.dataset.status, seen(c)]),
  chart_right: all('svg.chart').map(s => s.getBoundingClientRect().right)};
const pre = document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
document.body.append(pre);
</script></body>"""


@pytest.fixture(scope="module")
def fleet_pages(tmp_path_factory):
    return pages(tmp_path_factory.mktemp("pages"))


def layout(page: Path, width: int, height: int) -> dict:
    probe = page.with_name(f"layout-{width}.html")
    probe.write_text(page.read_text().replace("</body>", LAYOUT))
    r = chromium("--dump-dom", f"--window-size={width},{height}", "--force-device-scale-factor=1", probe.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="layout">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:]
    return json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def red_cells(png: Path) -> list[tuple[int, int, int, int]]:
    """The boxes (left, top, right, bottom) of the grid's red cells in a screenshot: the pixels of .cell.fail's
    colour (within a margin: the guide's copies have 64 colours) joined where they touch, specks left out."""
    img = Image.open(png).convert("RGB")
    w, _ = img.size
    red = {(i % w, i // w) for i, px in enumerate(img.getdata())
           if all(abs(a - b) <= 16 for a, b in zip(px, FAIL_CELL))}
    boxes = []
    while red:
        todo = [red.pop()]
        xs, ys = [], []
        while todo:
            x, y = todo.pop()
            xs.append(x)
            ys.append(y)
            for nxt in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                if nxt in red:
                    red.remove(nxt)
                    todo.append(nxt)
        if len(xs) >= 100:  # a cell is 18 × 18 px less its mark; a speck is an anti-aliased edge
            boxes.append((min(xs), min(ys), max(xs) + 1, max(ys) + 1))
    return sorted(boxes)


def test_the_page_chromium_renders_holds_the_json_findings(fleet_pages):
    doc, page = fleet_pages["fleet-report"]
    dom = chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert page_findings(dom.stdout) == json_findings(doc)
    assert {("kernel.log.gpu_reset_failed", "fail", "gpu-03"), ("fleet.differs.packages.torch", "fail", "gpu-04"),
            ("fleet.median.hbm", "fail", "gpu-04")} <= set(page_findings(dom.stdout))
    assert dom.stdout.count("<circle") == len(doc["figures"])  # the SVG chart survived the parser


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["fleet-report", "fleet-mismatch", "fleet-slurm"])
def test_every_red_cell_and_failing_node_is_seen_without_scrolling_sideways(fleet_pages, name, width):
    doc, page = fleet_pages[name]
    seen = layout(page, width, 3000)  # tall: the whole page in the window, so only width can hide a thing
    assert seen["width"] == width and seen["scroll_width"] <= width, seen  # the page itself never scrolls sideways
    assert seen["banner"]
    fails = [c for c in seen["cells"] if c[2] == "fail"]
    assert {c[0] for c in fails} == {n for n, cells in doc["grid"].items() if "fail" in cells.values()}
    assert {c[0] for c in fails} <= set(doc["failing_nodes"])
    assert fails and all(c[3] for c in fails), [c for c in fails if not c[3]]
    assert all(visible for node, visible in seen["nodes"] if node in doc["failing_nodes"]), seen["nodes"]
    assert all(right <= width for right in seen["chart_right"]), seen["chart_right"]  # the chart fits whole
    low = [d for d in seen["dots"] if d[1] != "pass"]  # drawn last: no other dot covers one
    assert all(d[2] for d in low) and len(low) == sum(f["status"] != "pass" for f in doc["figures"]), low
    shot = page.with_name(f"shot-{width}.png")
    r = chromium(f"--screenshot={shot}", f"--window-size={width},{SHOT_HEIGHT}", "--force-device-scale-factor=1",
                 page.as_uri())
    assert r.returncode == 0 and Image.open(shot).size == (width, SHOT_HEIGHT), r.stderr[-2000:]
    boxes = red_cells(shot)
    assert len(boxes) == len(fails) and all(b[2] <= width for b in boxes), boxes


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["fleet-report", "fleet-mismatch", "fleet-slurm"])
def test_the_guides_screenshots_show_every_red_cell(fleet_pages, name, width):
    """The copies kept in docs/guides/img (python tests/fleetgen.py docs/guides/img) show what the page shows now."""
    doc, _ = fleet_pages[name]
    kept = IMG / f"{name}-{width}.png"
    assert Image.open(kept).size == (width, SHOT_HEIGHT)
    fails = sum(s == "fail" for cells in doc["grid"].values() for s in cells.values())
    assert len(red_cells(kept)) == fails


def test_a_drained_node_and_another_rocmkit_read_in_chromium_at_800_px(fleet_pages):
    """The guide's third page: gpu-04 drained in Slurm (not asked) and gpu-03 on an older rocmkit, as chromium
    lays the page out in an 800 px window: both named in red, with Slurm's reason and which rocmkit runs where."""
    doc, page = fleet_pages["fleet-slurm"]
    assert doc["failing_nodes"] == ["gpu-03", "gpu-04"] and doc["exclude"] == "--exclude=gpu-03,gpu-04"
    dom = chromium("--dump-dom", "--window-size=800,3000", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = set(page_findings(dom.stdout))
    assert {("fleet.slurm.drained", "fail", "gpu-04"), ("fleet.differs.rocmkit", "fail", "gpu-03")} <= found, found
    assert "gpu-04 is drained in Slurm (Slurm&#39;s reason: GPU 3 ECC errors" in dom.stdout or \
        "gpu-04 is drained in Slurm (Slurm's reason: GPU 3 ECC errors" in dom.stdout
    assert "0.0.9 (build 5e1d0c7a9b42)" in dom.stdout and "unavailable (drained)" in dom.stdout
    seen = layout(page, 800, 3000)
    cells = {(c[0], c[1]): c for c in seen["cells"]}
    assert cells[("gpu-04", "fleet.slurm.drained")][2:] == ["fail", True]
    assert cells[("gpu-03", "fleet.same")][2:] == ["fail", True]
