"""The HTML report rendered by headless Chromium: a non-blank page with the chart.

Skipped when ``chromium`` is absent, unless ``CI`` is set (CI installs it): then absent
is a failure.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from .conftest import Ledger, invoke

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1200,900",
)  # fmt: skip


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail("chromium is not installed, and CI is set (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium); set CI=true to require it")


def _png_distinct_bytes(path: Path) -> int:
    """How many distinct byte values the decoded image data holds (1 for a blank page)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


def _run(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def test_html_report_renders_with_chart(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    browser = _chromium()
    page = tmp_path / "report.html"
    assert (
        invoke("report", "--db", sqlite_ledger.url, "--format", "html", "-o", str(page)).exit_code
        == 0
    )
    shot = tmp_path / "shot.png"
    result = _run(browser, tmp_path / "profile", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 5000, result.stderr[-2000:]
    assert _png_distinct_bytes(shot) > 16, "the screenshot is blank"
    dom = _run(browser, tmp_path / "profile2", "--dump-dom", page.as_uri()).stdout
    assert '<svg id="timeline-chart"' in dom
    assert 'class="actions"' in dom and 'class="denials"' in dom
    assert "zero non-safe actions ran without a committed intent" in dom


def test_html_report_never_overflows_a_1280px_page(tmp_path: Path) -> None:
    """Long run ids, tool names, reasons and cited hashes wrap inside their tables."""
    from ledger.model import Approval, Event, Ref
    from ledger.report import build_report
    from ledger.sinks import MemoryReader

    browser = _chromium()
    run = "run-" + "x" * 180
    digest = "sha256:" + "ab" * 32
    refs = [Ref(source="memory", id="m" * 120, hash=digest)] * 3
    events = [
        Event(kind="request", run_id=run, args='"go"'),
        Event(kind="action", run_id=run, call_id="call-" + "7" * 90, tool="t" * 150, args={},
              verdict="allowed", reason="because " * 40, refs=refs,
              approval=Approval(approver="approver-" + "q" * 100)),
        Event(kind="action", run_id=run, call_id="c2", tool="rm", args={}, verdict="denied",
              reason="no-" * 120),
        Event(kind="tool_result", run_id=run, call_id="orphan-" + "9" * 100, result='"x"'),
    ]  # fmt: skip
    html = build_report(MemoryReader(events), ledger="sqlite:///" + "d" * 150 + ".db").to_html()
    probe = (  # the page, and every table's box, is as wide as it may be: nothing scrolls
        "<script>var o = document.documentElement.scrollWidth > window.innerWidth;"
        "document.querySelectorAll('.wrap').forEach(function (w) {"
        " if (w.scrollWidth > w.clientWidth + 1) { o = true; } });"
        "document.body.setAttribute('data-overflow', String(o));</script>"
    )
    page = tmp_path / "wide.html"
    page.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [browser, *FLAGS[:-1], "--window-size=1280,900", f"--user-data-dir={tmp_path / 'p'}",
         "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=90, check=False,
    ).stdout  # fmt: skip
    assert 'data-overflow="false"' in dom, dom[-500:]
    assert "Approved actions" in dom and "approver-" in dom
