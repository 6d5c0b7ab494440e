"""The report's and the site's HTML come from the Jinja2 templates in templates/html/, with autoescaping: no HTML
tag is built in a Python string of lm_eval_ext/report/ or lm_eval_ext/leaderboard/, and text a user controls
(a model's label) shows as text in a real browser, never as markup (helpers/browser.py)."""
from __future__ import annotations

import ast
import re

import pytest

from helpers.browser import browser_page, requires_chromium
from helpers.files import FIXTURES, PROJECT_ROOT

PACKAGES = [PROJECT_ROOT / "lm_eval_ext" / "report", PROJECT_ROOT / "lm_eval_ext" / "leaderboard"]
# every element of HTML (WHATWG's list), so that "<name>.png" in a caption or docstring is not taken for a tag; nor is
# a name's placeholder, whose "<" follows a letter, digit or "_" ("magnifico_description_<form>")
ELEMENTS = (
    "a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption cite code col "
    "colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure footer form h1 h2 "
    "h3 h4 h5 h6 head header hgroup hr html i iframe img input ins kbd label legend li link main map mark menu meta "
    "meter nav noscript object ol optgroup option output p param picture pre progress q rp rt ruby s samp script "
    "search section select slot small source span strong style sub summary sup table tbody td template textarea tfoot "
    "th thead time title tr track u ul var video wbr svg math"
).split()
TAG = re.compile(r"(?<!\w)<\s*/?\s*(?:!doctype\b|(?:%s)(?=[\s/>]))" % "|".join(ELEMENTS), re.IGNORECASE)
HOSTILE = "\"'><script>alert(1)</script><b>bold</b>&amp; tiny"


def tags_in_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal (f-string parts included) of ``source`` that holds an HTML tag."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TAG.search(node.value):
            found.append((node.lineno, node.value))
    return found


def test_no_html_tag_is_built_in_python():
    files = sorted(path for package in PACKAGES for path in package.rglob("*.py"))
    assert len(files) > 15
    found = [f"{path.relative_to(PROJECT_ROOT)}:{line}: {text!r}" for path in files
             for line, text in tags_in_strings(path.read_text(encoding="utf-8"))]
    assert found == []


@pytest.mark.parametrize("source, tags", [
    ('x = f\'<td class="num">{value}</td>\'', True),
    ('PAGE = "<!DOCTYPE html>\\n"', True),
    ('x = "<P>" + y', True),
    ('x = "</section>"', True),
    ('CAPTION = "acc_<property> of <name>.png, p < 0.05, a<b and magnifico_dialogue_start_<form>"', False),
    ('"""A docstring about ``<benchmark>.html``."""', False),
])
def test_the_scan_sees_tags_and_only_tags(source, tags):
    assert bool(tags_in_strings(source)) is tags


def test_templates_escape_what_they_are_given():
    from lm_eval_ext.report.html import render_page

    page = render_page(HOSTILE, HOSTILE, [{"key": "x\"y", "title": HOSTILE, "intro": HOSTILE, "blocks": [
        {"kind": "note", "text": HOSTILE}]}], [("partial", HOSTILE)])
    assert "<script>" not in page and "<b>" not in page and "&amp;amp;" in page and 'id="x&#34;y"' in page


@requires_chromium
def test_a_hostile_label_is_text_in_the_report_and_the_site(tmp_path, data_dir):
    """A model labelled with markup and quotes: the report and every page of the site show it as text."""
    from lm_eval_ext.export.write import export_leaderboard
    from lm_eval_ext.leaderboard.build import build_site
    from lm_eval_ext.report.build import build_report

    results = FIXTURES / "results" / "lieder_limit"
    report = build_report([f"{HOSTILE}={results}"], tmp_path / "report", title=HOSTILE, published=False)
    export_leaderboard([f"{HOSTILE}={results}"], tmp_path / "records", allow_partial=True)
    site = build_site([str(tmp_path / "records")], tmp_path / "site", published=False, title=HOSTILE)
    pages = [report.page, *site.pages]
    assert len(pages) == 8  # the report; the overview, 4 benchmark pages, published results, the record
    problems: list[str] = []
    dialogs: list[str] = []
    with browser_page(tmp_path / "profile", problems) as page:
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        for path in pages:
            page.goto(path.resolve().as_uri(), wait_until="load")
            facts = page.evaluate("""() => ({title: document.title, h1: document.querySelector('h1').textContent,
                bold: document.querySelectorAll('b').length,
                scripts: Array.from(document.scripts).map(s => s.getAttribute('src')),
                text: document.body.textContent})""")
            assert facts["title"] == facts["h1"] and facts["title"].startswith(HOSTILE) and HOSTILE in facts["text"], path
            assert facts["bold"] == 0 and facts["scripts"] in ([], ["assets/sort.js"], ["../assets/sort.js"]), path
    assert dialogs == [] and problems == []
    overview = (tmp_path / "site" / "index.html").read_text()
    assert f'data-model="{HOSTILE.replace("&", "&amp;").replace(chr(34), "&#34;").replace(chr(39), "&#39;").replace("<", "&lt;").replace(">", "&gt;")}"' in overview
