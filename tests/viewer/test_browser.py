"""The viewer in a real headless Chromium, driven by Selenium: from the runs list to a
run, to a call's why, to the report; screenshots checked for the elements a user needs.

Skipped when chromium, chromedriver or selenium is absent, unless ``CI`` is set: then
absent is a failure. ``LEDGER_UI_SHOTS=DIR`` keeps the screenshots in DIR.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.viewer import Viewer, serve

from .ledgers import HOSTILE_RUN, Filled, fill

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1280,1000",
)  # fmt: skip


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _missing(what: str) -> None:
    if _in_ci():
        pytest.fail(
            f"{what} is not installed, and CI is set (apt-get install chromium "
            "chromium-driver; pip install selenium)"
        )
    pytest.skip(
        f"{what} is not installed (apt-get install chromium chromium-driver); "
        "set CI=true to require it"
    )


def _tools() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser:
        _missing("chromium")
    if not driver:
        _missing("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        _missing("selenium")
    assert browser and driver
    return browser, driver


def png_size_and_colours(data: bytes) -> tuple[int, int, int]:
    """``(width, height, distinct pixel values in a sample)`` of an 8-bit RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 4
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, chunk = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8, "expected 8-bit samples"
            channels = {2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + width * channels
    pixels: set[bytes] = set()
    for row in range(0, height, max(1, height // 60)):
        line = raw[row * stride + 1 : (row + 1) * stride]  # filtered bytes: enough to tell blank
        pixels.update(line[i : i + channels] for i in range(0, len(line), channels * 7))
    return width, height, len(pixels)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    root = tmp_path_factory.mktemp("browser")
    return fill("sqlite:///" + str(root / "ledger.db"), root / "work", paged=60)


@pytest.fixture(scope="module")
def viewer(filled: Filled) -> Iterator[Viewer]:
    with serve(filled.url) as v:
        yield v


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    browser, chromedriver = _tools()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('profile')}")
    d = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    d.set_page_load_timeout(60)
    try:
        yield d
    finally:
        d.quit()


def _shot(driver: object, name: str, tmp_path: Path) -> bytes:
    """A full-page screenshot (the window grown to the page's height), checked to be a
    real, non-blank image 1280 px wide; kept in ``LEDGER_UI_SHOTS`` when set."""
    height = driver.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
    driver.set_window_size(1280, min(max(int(height) + 140, 800), 6000))  # type: ignore[attr-defined]
    png: bytes = driver.get_screenshot_as_png()  # type: ignore[attr-defined]
    (tmp_path / f"{name}.png").write_bytes(png)
    keep = os.environ.get("LEDGER_UI_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{name}.png").write_bytes(png)
    width, _, colours = png_size_and_colours(png)
    assert width >= 1200, f"{name}: screenshot is {width} px wide"
    assert colours > 20, f"{name}: the screenshot looks blank ({colours} colours)"
    driver.set_window_size(1280, 1000)  # type: ignore[attr-defined]
    return png


def _follow(driver: object, element: object) -> None:
    """Click ``element`` and wait for the next page to replace this one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")  # type: ignore[attr-defined]
    element.click()  # type: ignore[attr-defined]
    wait: Any = WebDriverWait(driver, 30)  # type: ignore[type-var]
    wait.until(expected_conditions.staleness_of(old))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
    errors = driver.find_elements(By.ID, "error")  # type: ignore[attr-defined]
    assert not errors, f"the page is an error page: {errors[0].text}"


def _no_overflow(driver: object, name: str) -> None:
    wide = driver.execute_script(  # type: ignore[attr-defined]
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert wide[0] <= wide[1], f"{name}: the page is {wide[0]} px wide in a {wide[1]} px window"


def test_runs_list_to_run_to_why_to_report(
    driver: object, viewer: Viewer, filled: Filled, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    d = driver
    d.get(viewer.url)  # type: ignore[attr-defined]
    find = d.find_element  # type: ignore[attr-defined]
    find_all = d.find_elements  # type: ignore[attr-defined]
    assert find(By.ID, "title").text == "Runs"
    assert find(By.ID, "filters").is_displayed()
    rows = find_all(By.CSS_SELECTOR, "#runs tbody tr")
    assert len(rows) == 50, "the first page holds 50 runs"
    assert find(By.ID, "next").is_displayed()
    assert find_all(By.CSS_SELECTOR, "#runs tr.denied"), "runs with denials are highlighted"
    # the hostile run id shows as text; no script ran (an alert would block the driver)
    assert d.execute_script("return document.scripts.length") == 0  # type: ignore[attr-defined]
    _no_overflow(d, "runs")
    widths = "const t = document.getElementById('runs'); return [t.scrollWidth,"
    fits = d.execute_script(widths + " t.parentNode.clientWidth]")  # type: ignore[attr-defined]
    assert fits[0] <= fits[1], f"the runs table is {fits[0]} px wide in {fits[1]} px"
    _shot(d, "1-runs", tmp_path)

    # filter: the demo's shell tool, then open the demo run
    find(By.ID, "f-tool").send_keys("run_shell")
    _follow(d, find(By.ID, "apply"))
    rows = find_all(By.CSS_SELECTOR, "#runs tbody tr")
    assert len(rows) == 1
    _follow(d, rows[0].find_element(By.CSS_SELECTOR, "a"))
    assert filled.demo_run in find(By.ID, "title").text
    assert find(By.ID, "timeline").is_displayed()
    denied = find_all(By.CSS_SELECTOR, "#timeline li.denied")
    assert len(denied) == 1 and "run_shell" in denied[0].text
    assert "intact" in find(By.ID, "timeline").text, "the write's evidence shows its drift state"
    assert find(By.ID, "request").is_displayed()
    _no_overflow(d, "run")
    _shot(d, "2-run", tmp_path)

    # the write's why
    write = next(
        li for li in find_all(By.CSS_SELECTOR, "#timeline li.action")
        if li.get_attribute("data-call") == filled.demo_write_call
    )  # fmt: skip
    _follow(d, write.find_element(By.CSS_SELECTOR, "a.why-link"))
    assert "write_file" in find(By.ID, "title").text
    assert "allowed" in find(By.ID, "verdict").text
    assert find(By.ID, "explanation").is_displayed()
    assert "write_file (call" in find(By.ID, "why-text").text
    _no_overflow(d, "why")
    _shot(d, "3-why", tmp_path)

    # the report, from the navigation
    _follow(d, find(By.ID, "nav-report"))
    assert find(By.ID, "title").text == "Compliance report"
    assert find(By.ID, "compliance").is_displayed()
    assert find(By.CSS_SELECTOR, "#report-chart svg").is_displayed()
    assert find(By.ID, "report-denials").is_displayed()
    _no_overflow(d, "report")
    _shot(d, "4-report", tmp_path)


def test_hostile_run_renders_inert_and_within_the_page(
    driver: object, viewer: Viewer, filled: Filled, tmp_path: Path
) -> None:
    from urllib.parse import urlencode

    from selenium.webdriver.common.by import By

    d = driver
    d.get(viewer.url + "run?" + urlencode({"id": HOSTILE_RUN}))  # type: ignore[attr-defined]
    find = d.find_element  # type: ignore[attr-defined]
    title = find(By.ID, "title").text
    assert '<script>alert("run")</script>' in title and "U+202E" in title
    assert d.execute_script("return document.scripts.length") == 0  # type: ignore[attr-defined]
    assert d.execute_script("return document.images.length") == 0  # type: ignore[attr-defined]
    timeline = find(By.ID, "timeline").text
    assert "ran without intent" in timeline and "PermissionError" in timeline
    assert len(d.find_elements(By.CSS_SELECTOR, "#timeline li.denied")) == 1  # type: ignore[attr-defined]
    _no_overflow(d, "hostile")
    _shot(d, "5-hostile", tmp_path)
    # the huge result opens in place without widening the page
    for summary in d.find_elements(By.CSS_SELECTOR, "details.clip > summary")[:3]:  # type: ignore[attr-defined]
        summary.click()
    _no_overflow(d, "hostile, values opened")
    d.get(viewer.url + "integrity")  # type: ignore[attr-defined]
    assert find(By.ID, "integrity-status").is_displayed()
    _shot(d, "6-integrity", tmp_path)
