"""The fleet report in a real browser (marker `chromium`: Debian's chromium, headless; CI installs it with
.ci/provision/16-chromium.sh and sets ROCMKIT_REQUIRE_CHROMIUM=1, so there a missing browser fails instead of
skipping). The page chromium builds (its DOM, after parsing and layout) holds the same findings as the JSON,
and it renders to a screenshot of the window's size."""

from __future__ import annotations

import struct

import pytest
from fleetgen import chromium, demo_fleet
from test_fleet import json_findings, page_findings

from rocmkit.fleet.report import assess, write_outputs

pytestmark = [pytest.mark.chromium]


def test_the_page_chromium_renders_holds_the_json_findings(tmp_path):
    doc = assess(demo_fleet(tmp_path), level=2, strict=False, tolerance=0.05, deadline_s=900)
    write_outputs(doc, tmp_path / "out")
    url = (tmp_path / "out" / "fleet.html").as_uri()
    dom = chromium("--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert page_findings(dom.stdout) == json_findings(doc)
    assert {("kernel.log.gpu_reset_failed", "fail", "gpu-03"), ("fleet.differs.packages.torch", "fail", "gpu-04"),
            ("fleet.median.hbm", "fail", "gpu-04")} <= set(page_findings(dom.stdout))
    assert dom.stdout.count("<circle") == len(doc["figures"])  # the SVG chart survived the parser
    shot = tmp_path / "fleet.png"
    r = chromium(f"--screenshot={shot}", "--window-size=1400,1000", url)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (1400, 1000)
