"""Opening a page in a real browser: Debian's headless Chromium, driven through the playwright package.

Playwright's own browser downloads are never used: it drives /usr/bin/chromium (``apt-get install -y
chromium``). Tests that need it (``@requires_chromium``) are skipped, with that command as the reason, only
when it is missing.
"""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

NO_CHROMIUM = ("Chromium is not installed, so the page cannot be opened in a browser; install Debian's package "
               "with `apt-get update && apt-get install -y chromium` (as root) to run this test")
# The mark of a test that opens a page: tests/conftest.py skips it with NO_CHROMIUM when Chromium is missing, and
# counts it slow (a browser is a process), outside the quick selection.
requires_chromium = pytest.mark.browser


@contextmanager
def browser_page(profile: Path, problems: list[str], width: int = 1280, height: int = 900):
    """A fresh page (its own profile directory: nothing from an earlier session can hide an error) that appends
    every console error or warning, page error and failed request to ``problems``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS, viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
            yield page
        finally:
            context.close()


def open_in_chromium(page_path: Path, screenshot: Path, profile: Path) -> tuple[list[str], dict]:
    """Load the page, return (every console error, page error and failed request; page facts), save a screenshot."""
    problems: list[str] = []
    with browser_page(profile, problems) as page:
        page.goto(page_path.resolve().as_uri(), wait_until="load")
        facts = page.evaluate(
            """() => ({
                images: document.images.length,
                broken: Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).length,
                sections: Array.from(document.querySelectorAll('section')).map(s => s.id),
                height: document.body.scrollHeight,
            })"""
        )
        page.screenshot(path=str(screenshot), full_page=True)
    return problems, facts
