"""Make the README's and the docs' pictures from real runs: the top of a report and the leaderboard's overview.

    python docs/images/make_images.py RUNS_DIR

RUNS_DIR holds the --output_path folders of the real SmolLM2-135M-Instruct runs docs/real_model.md lists (each
folder one run, with --log_samples). The script runs the commands a user runs (`lm-eval-ext report`, `lm-eval-ext
export --allow-partial`, `lm-eval-ext leaderboard build`) into a temporary folder, opens the two pages from disk in
headless Chromium (Debian's `chromium`, driven by playwright) and saves docs/images/report_screenshot.png and
docs/images/leaderboard_screenshot.png.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABEL = "SmolLM2-135M-Instruct"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _run(*args: str) -> None:
    subprocess.run([str(Path(sys.executable).parent / args[0]), *args[1:]], check=True)


def _screenshot(page_file: Path, out: Path, height: int) -> None:
    """The top ``height`` pixels of a page, 1280 pixels wide."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": height})
        page.goto(page_file.resolve().as_uri(), wait_until="load")
        page.screenshot(path=str(out))
        browser.close()
    print("wrote", out)


def main(runs_dir: str) -> None:
    """Write both pictures (module docstring)."""
    os.chdir(runs_dir)  # the pages name each results file by its path: relative to RUNS_DIR
    runs = [f"{LABEL}={folder.name}" for folder in sorted(Path().iterdir()) if folder.is_dir()]
    with tempfile.TemporaryDirectory() as tmp:
        report, records, site = Path(tmp, "report"), Path(tmp, "records"), Path(tmp, "site")
        _run("lm-eval-ext", "report", *runs, "--output", str(report), "--title", f"{LABEL}, real runs")
        _run("lm-eval-ext", "export", *runs, "--allow-partial", "--output", str(records))
        _run("lm-eval-ext", "leaderboard", "build", str(records), "--output", str(site))
        _screenshot(report / "report.html", HERE / "report_screenshot.png", 1500)
        _screenshot(site / "index.html", HERE / "leaderboard_screenshot.png", 900)


if __name__ == "__main__":
    main(*sys.argv[1:])
