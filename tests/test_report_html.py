"""The HTML report in a real browser: Debian's headless Chromium, driven through playwright (helpers/browser.py).

Skipped only when no Chromium is installed (CI installs it: `apt-get install -y chromium`).
Playwright's own browser downloads are never used: it drives /usr/bin/chromium.
"""
from __future__ import annotations

from helpers.browser import open_in_chromium, requires_chromium

pytestmark = requires_chromium


def test_report_opens_without_console_errors_and_screenshots(lieder_scripted, litm_scripted, magnifico_scripted,
                                                            elitr_scripted, tmp_path):
    """Every benchmark's section, four models, in one page."""
    from PIL import Image

    from lm_eval_ext.report.build import build_report

    report = build_report([f"lieder={lieder_scripted}", f"litm={litm_scripted}", f"sql={magnifico_scripted}",
                           f"elitr={elitr_scripted}"], tmp_path / "report")
    screenshot = tmp_path / "report" / "screenshot.png"
    problems, facts = open_in_chromium(report.page, screenshot, tmp_path / "chromium-profile")
    assert problems == []
    assert facts["images"] == len(report.figures) // 2 >= 12 and facts["broken"] == 0
    assert facts["sections"] == ["lieder", "lost_in_the_middle", "magnifico", "elitr_bench", "runs"]
    with Image.open(screenshot) as image:
        assert image.width == 1280 and image.height >= facts["height"] * 0.9 > 2000
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20)) > 50


def test_the_check_catches_a_broken_page(tmp_path):
    """The console check is not blind: a script error and a missing image are reported."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
                    '<img src="missing.png"><script>undefined_function()</script></body></html>')
    problems, facts = open_in_chromium(page, tmp_path / "shot.png", tmp_path / "profile")
    assert facts["broken"] == 1
    assert any("undefined_function" in p for p in problems)
    assert any("missing.png" in p for p in problems)


def test_tables_scroll_within_their_box_and_rows_stay_short(tmp_path, data_dir):
    """A wide or long table scrolls inside a box no taller than the window (its scroll bars on screen), and wrapping
    keeps every row within a few lines. Results: the hand-written files of tests/fixtures/results."""
    from helpers.browser import browser_page
    from helpers.files import FIXTURES

    from lm_eval_ext.report.build import build_report

    results = FIXTURES / "results"
    report = build_report([f"{name}={results / name}" for name in ("lieder_limit", "litm", "magnifico", "elitr")],
                          tmp_path / "report")
    problems: list[str] = []
    with browser_page(tmp_path / "profile", problems, width=1280, height=900) as page:
        page.goto(report.page.resolve().as_uri(), wait_until="load")
        page.eval_on_selector_all("details", "ds => ds.forEach(d => d.open = true)")
        boxes = page.evaluate("""() => Array.from(document.querySelectorAll('.scroll')).map(box => {
            const rect = box.getBoundingClientRect(), line = parseFloat(getComputedStyle(box.querySelector('td')).lineHeight);
            const overflow = box.scrollWidth - box.clientWidth;
            box.scrollLeft = 50;
            return {section: box.closest('section').id, right: rect.right,
                    height: rect.height, overflow: overflow, scrolled: box.scrollLeft,
                    lines: Math.max(...Array.from(box.querySelectorAll('tbody tr')).map(r => r.getBoundingClientRect().height)) / line};
        })""")
        width = page.evaluate("() => document.documentElement.clientWidth")
    assert problems == []
    assert len(boxes) == len(report.tables) == 9
    for box in boxes:
        assert box["right"] <= width and box["height"] <= 0.8 * 900 + 1, box
        assert box["lines"] < 5, box  # padding included
        assert box["scrolled"] == min(box["overflow"], 50), box  # a table wider than its box scrolls sideways
    assert any(box["overflow"] > 50 for box in boxes) and any(box["height"] > 700 for box in boxes)  # the check sees both cases
