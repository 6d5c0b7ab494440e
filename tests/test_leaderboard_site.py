"""`lm-eval-ext leaderboard build`: the static site, opened from disk (file://) in a real browser (Debian's headless
Chromium through playwright, helpers/browser.py): no console error on any page, sorting by clicking a header,
published models and partial/truncated/unvalidated records marked, records not comparable with the papers and
records at another task version shown apart, each model linking to its record.

Records: exports of the hand-written results of tests/fixtures/results and of a real scripted LIEDER run, with
a fixed export time so that the pages are the same from one run to the next.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.browser import browser_page, requires_chromium
from helpers.files import FIXTURES

pytestmark = [requires_chromium, pytest.mark.xdist_group("leaderboard_site")]  # one worker builds `site`
RESULTS = FIXTURES / "results"
EXPORTED_AT = "2030-01-01T00:00:00+00:00"


@pytest.fixture(scope="module")
def records(tmp_path_factory, lieder_scripted) -> Path:
    """Six records: a complete LIEDER run (verified against its own results), the same at another lieder_base
    version, and four partial ones. Records changed here are sealed again (an edited record fails validate)."""
    from lm_eval_ext.export.provenance import seal
    from lm_eval_ext.export.write import export_leaderboard
    from lm_eval_ext.leaderboard.verify import verify_record

    out = tmp_path_factory.mktemp("records")
    export_leaderboard([f"scripted-lieder={lieder_scripted}", f"tiny-lieder-limit={RESULTS / 'lieder_limit'}",
                        f"tiny-litm={RESULTS / 'litm'}", f"tiny-sql={RESULTS / 'magnifico'}",
                        f"tiny-chat={RESULTS / 'elitr'}"], out, allow_partial=True,
                       judge_validation=[str(FIXTURES / "judge_validation.json")])
    (out / "leaderboard.csv").unlink()
    for path in out.glob("*.json"):
        record = json.loads(path.read_text())
        record["exported_at"] = EXPORTED_AT
        path.write_text(json.dumps(seal(record)))
    other = json.loads((out / "scripted-lieder.json").read_text())
    other["model"]["label"] = "scripted-lieder-v2"
    other["versions"]["tasks"]["lieder_base"] = other["tasks"]["lieder_base"]["version"] = "2.0"
    other["benchmarks"]["lieder"]["headline"]["lieder_base/acc"] = 0.5
    (out / "scripted-lieder-v2.json").write_text(json.dumps(seal(other)))
    verify_record(str(out / "scripted-lieder.json"), str(lieder_scripted))
    return out


@pytest.fixture(scope="module")
def site(records, tmp_path_factory, data_dir):
    from lm_eval_ext.leaderboard.build import build_site

    return build_site([str(records)], tmp_path_factory.mktemp("site") / "site")


def _column(page, table: str, index: int) -> list[str]:
    return page.eval_on_selector(table, f"t => Array.from(t.tBodies[0].rows).map(r => r.cells[{index}].getAttribute('data-value'))")


def test_site_files_need_no_server_and_no_network(site):
    out = site.index.parent
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert pages == ["elitr_bench.html", "index.html", "lieder.html", "lost_in_the_middle.html", "magnifico.html",
                     "published.html", "records/scripted-lieder-v2.html", "records/scripted-lieder.html",
                     "records/tiny-chat.html", "records/tiny-lieder-limit.html", "records/tiny-litm.html",
                     "records/tiny-sql.html"]
    for page in out.rglob("*.html"):
        text = page.read_text()
        # every script, stylesheet and link is a relative path beside the page
        assert not re.search(r'(src|href)="(https?:)?//', text), page
    assert (out / "assets/sort.js").is_file() and (out / "assets/site.css").is_file()
    assert json.loads((out / "records/tiny-chat.json").read_text())["model"]["label"] == "tiny-chat"


def test_overview_in_a_browser(site, tmp_path):
    out = site.index.parent
    problems: list[str] = []
    with browser_page(tmp_path / "profile", problems, height=1000) as page:
        page.goto(site.index.resolve().as_uri(), wait_until="load")
        headers = page.eval_on_selector_all("#overview thead th", "hs => hs.map(h => h.textContent)")
        # records at two versions of lieder_base: two columns, never averaged
        assert headers == ["model", "from", "LIEDER: lieder_base/acc (v1.0)", "LIEDER: lieder_base/acc (v2.0)",
                           "Lost in the Middle: litm_qa_20docs/acc", "MAGNIFICo: rel_perf",
                           "ELITR-Bench: elitr_bench_qa_dev_st/score"]
        models = _column(page, "#overview", 0)
        assert models[:5] == ["scripted-lieder-v2", "scripted-lieder", "tiny-lieder-limit", "tiny-litm", "tiny-sql"]
        # tiny-chat's prompts were truncated: not the papers' prompts, so not beside the papers' models
        assert _column(page, "#not-comparable", 0) == ["tiny-chat"]
        published = page.eval_on_selector_all("tr.published", "rows => rows.map(r => r.getAttribute('data-model'))")
        assert len(published) == len(models) - 5 and "gpt2" in published and "GPT-4" in published
        assert page.eval_on_selector('tr[data-model="gpt2"] .badge', "b => b.textContent") == "published"
        badges = {m: page.eval_on_selector_all(f'tr[data-model="{m}"] .badge', "bs => bs.map(b => b.textContent)")
                  for m in [*models[:5], "tiny-chat"]}
        assert badges == {"scripted-lieder": ["verified"], "scripted-lieder-v2": ["community", "unvalidated"],
                          "tiny-chat": ["community", "partial", "truncated", "not comparable"],
                          "tiny-lieder-limit": ["community", "partial"], "tiny-litm": ["community", "partial"],
                          "tiny-sql": ["community", "partial"]}
        assert page.get_attribute('tr[data-model="tiny-chat"] .badge.truncated', "title") == (
            "elitr_bench_qa_dev_st: 2 prompt(s) truncated to fit the model (scored, but not the published prompt)")
        assert page.get_attribute('tr[data-model="tiny-chat"] .badge.not_comparable', "title") == (
            "not comparable with the papers' numbers: elitr_bench_qa_dev_st: 2 prompt(s) truncated to fit the model "
            "(scored, but not the published prompt)")
        assert "lieder_base is at version 2.0" in page.get_attribute('tr[data-model="scripted-lieder-v2"] .badge.unvalidated',
                                                                     "title")
        assert page.get_attribute('tr[data-model="scripted-lieder"] .badge', "title").startswith(
            "the maintainers reran it: ")

        # sorting by clicking: highest first, then lowest first; rows without a value stay last
        column = headers.index("LIEDER: lieder_base/acc (v1.0)")
        values = [float(v) for v in _column(page, "#overview", column) if v]
        page.click(f"#overview thead th:nth-child({column + 1}) button")
        after = _column(page, "#overview", column)
        assert [float(v) for v in after[:len(values)]] == sorted(values, reverse=True) and not any(after[len(values):])
        assert page.get_attribute(f"#overview thead th:nth-child({column + 1})", "aria-sort") == "descending"
        assert _column(page, "#overview", 0)[0] == "human participants"  # humans beat every model on acc
        page.click(f"#overview thead th:nth-child({column + 1}) button")
        after = _column(page, "#overview", column)
        assert [float(v) for v in after[:len(values)]] == sorted(values) and not any(after[len(values):])
        page.click("#overview thead th:nth-child(1) button")  # text columns sort too
        names = _column(page, "#overview", 0)
        assert names == sorted(names, reverse=True)

        # each model links to its record
        page.click('tr[data-model="scripted-lieder"] td a')
        page.wait_for_load_state("load")
        assert page.url.endswith("/records/scripted-lieder.html")
        text = page.inner_text("main")
        assert "Versions" in text and "lieder_base" in text and '"random": 0' in text and EXPORTED_AT in page.inner_text("header")
        # its provenance: verified against the rerun, the record's sha256, every source file with its sha256
        record = json.loads(out.joinpath("records/scripted-lieder.json").read_text())
        assert "Provenance" in text and record["provenance"]["content_sha256"] in text
        assert f"{record['provenance']['verification']['metrics_compared']} metrics of 4 task(s)" in text
        for source in record["provenance"]["files"]:
            assert source["sha256"] in text and source["path"] in text
    assert problems == []
    assert out.joinpath("records/scripted-lieder.html").is_file()


def test_magnifico_column_shows_rel_perf_of_every_model_that_has_it(site, tmp_path):
    """No model ran the magnifico group: each shows the first setting it has, named under the value."""
    problems: list[str] = []
    with browser_page(tmp_path / "profile", problems) as page:
        page.goto(site.index.resolve().as_uri(), wait_until="load")
        headers = page.eval_on_selector_all("#overview thead th", "hs => hs.map(h => h.textContent)")
        column = headers.index("MAGNIFICo: rel_perf")
        shown = page.eval_on_selector(
            "#overview", f"""t => Array.from(t.tBodies[0].rows).filter(r => r.cells[{column}].dataset.value)
                .map(r => [r.dataset.model, r.cells[1].dataset.value, Number(r.cells[{column}].dataset.value),
                           r.cells[{column}].querySelector('.task').textContent])""")
    assert problems == []
    # tiny-sql ran magnifico_direct_{plausible,foreign} and magnifico_dialogue_start_plausible (fixtures/results)
    assert shown == [
        ["tiny-sql", "record, exported 2030-01-01", 70.0, "magnifico_dialogue_start_plausible"],
        ["StarCoder", "Patel et al. (EMNLP 2023)", 79.4, "magnifico_description_plausible"],
        ["GPT-3.5-Turbo", "Patel et al. (EMNLP 2023)", 91.46, "magnifico_description_plausible"],
    ]


def test_every_column_sorts_by_a_click_anywhere_in_its_header_and_by_keyboard(site, tmp_path):
    problems: list[str] = []
    with browser_page(tmp_path / "profile", problems) as page:
        page.goto(site.index.resolve().as_uri(), wait_until="load")
        count = page.eval_on_selector_all("#overview thead th", "hs => hs.length")
        for index in range(count):
            header = f"#overview thead th:nth-child({index + 1})"
            box = page.locator(header).bounding_box()
            # the cell's bottom-right corner, away from its text (the ELITR-Bench header wraps: every cell is tall)
            page.mouse.click(box["x"] + box["width"] - 3, box["y"] + box["height"] - 3)
            assert page.get_attribute(header, "aria-sort") == "descending", index
            values = [v for v in _column(page, "#overview", index) if v]
            numbers = [float(v) for v in values] if index >= 2 else [v.lower() for v in values]
            assert numbers == sorted(numbers, reverse=True), index

        # from the keyboard: Tab reaches a header, Enter and Space sort by it
        page.reload(wait_until="load")
        for _ in range(40):
            page.keyboard.press("Tab")
            if page.evaluate("() => document.activeElement.closest('th') !== null"):
                break
        assert page.evaluate("() => document.activeElement.closest('th').textContent") == "model"
        page.keyboard.press("Enter")
        assert page.get_attribute("#overview thead th:nth-child(1)", "aria-sort") == "descending"
        page.keyboard.press("Space")
        assert page.get_attribute("#overview thead th:nth-child(1)", "aria-sort") == "ascending"
        names = _column(page, "#overview", 0)
        assert names == sorted(names)
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        assert page.get_attribute("#overview thead th:nth-child(2)", "aria-sort") == "descending"
        assert page.get_attribute("#overview thead th:nth-child(1)", "aria-sort") is None
    assert problems == []


def test_every_page_opens_cleanly_and_says_what_it_should(site, tmp_path):
    out = site.index.parent
    problems: list[str] = []
    with browser_page(tmp_path / "profile", problems) as page:
        for path in sorted(out.rglob("*.html")):
            page.goto(path.resolve().as_uri(), wait_until="load")
        page.goto((out / "lieder.html").resolve().as_uri(), wait_until="load")
        headings = page.eval_on_selector_all("main h2", "hs => hs.map(h => h.textContent)")
        assert headings[:2] == ["lieder_base (version 1.0)", "lieder_base (version 2.0)"]
        assert "Beyond the paper: human baseline and novelty test" in headings
        first = page.eval_on_selector_all("main table.sortable", "ts => ts[0].tBodies[0].rows.length")
        assert first == 2 + 10 + 1  # two lieder_base 1.0 records, ten published models, the humans
        second = page.eval_on_selector_all("main table.sortable", "ts => Array.from(ts[1].tBodies[0].rows).map(r => r.getAttribute('data-model'))")
        assert second == ["scripted-lieder-v2"]
        page.goto((out / "elitr_bench.html").resolve().as_uri(), wait_until="load")
        judges = page.inner_text("#judges + p + .scroll")
        assert "stub-judge" in judges and "0.7100" in judges
        page.goto((out / "published.html").resolve().as_uri(), wait_until="load")
        assert "Patel et al. (EMNLP 2023), Table 3" in page.inner_text("main")
        page.goto((out / "records/tiny-lieder-limit.html").resolve().as_uri(), wait_until="load")
        assert "Partial: lieder_base: 4 of 48 documents scored (--limit 4)." in page.inner_text("main")
    assert problems == []


def test_schema_invalid_records_stop_the_build(records, tmp_path, run_cli):
    broken = tmp_path / "broken.json"
    record = json.loads((records / "tiny-sql.json").read_text())
    del record["status"]
    broken.write_text(json.dumps(record))
    proc = run_cli(["lm-eval-ext", "leaderboard", "build", str(broken), "--no-published", "-o", str(tmp_path / "site")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "is not a valid leaderboard record" in proc.stderr and "'status' is a required property" in proc.stderr
    assert not (tmp_path / "site").exists()


def test_build_command(records, tmp_path, run_cli):
    proc = run_cli(["lm-eval-ext", "leaderboard", "build", str(records), "--no-published", "-o", str(tmp_path / "site")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == f"wrote {tmp_path / 'site' / 'index.html'} (12 pages; 6 record(s), 0 published model(s))"
    assert "unvalidated: " in proc.stdout and "scripted-lieder-v2.json" in proc.stdout
    assert 'class="published"' not in (tmp_path / "site" / "index.html").read_text()
