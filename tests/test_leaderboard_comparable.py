"""Leaderboard records whose numbers are not comparable with the papers' (a data file the user gave, truncated
prompts, a system prompt, --gen_kwargs): `leaderboard validate` says why, one line per reason, and the site badges
them *not comparable* and lists them apart from the papers' models; a truncated record has a badge of its own.

Records: exports of the real SmolLM2-135M-Instruct runs of tests/fixtures/real (tests/fixtures/README.md):
litm_sweep20docs ran litm_qa_20docs on the partial first-release file of Lost in the Middle, given with
--metadata litm_qa_file (a data file the user gave); litm_plain and litm_chat ran the oracle and closed-book tasks
on the published data. The truncated record is the hand-written tests/fixtures/results/elitr (no real run
truncated a prompt). Last, the site's overview on real records whose headline is undefined (mag_description_chat,
elitr_dry_run_gguf): "n/a", not the blank of a benchmark the model did not run."""
from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

from markupsafe import escape

from helpers.files import FIXTURES

REAL = FIXTURES / "real"
MODEL = "SmolLM2-135M-Instruct"
USER_FILE = ("<mirror>/lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/"
             "20_total_documents/gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored"
             ".jsonl.gz")
USER_FILE_REASON = f"litm_qa_20docs: read a data file the user gave ({USER_FILE}), not the benchmark's published data"
TRUNCATED = "elitr_bench_qa_dev_st: 2 prompt(s) truncated to fit the model (scored, but not the published prompt)"


def _export(tmp_path: Path, *sources: str, **options) -> list[Path]:
    from lm_eval_ext.export.write import export_leaderboard

    return [path for path in export_leaderboard(list(sources), tmp_path, allow_partial=True, **options)
            if path.suffix == ".json"]


class _Tables(HTMLParser):
    """Per table of a page (by its id, else its place), the data-model of each row; per model, its badges."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, list[str]] = {}
        self.badges: dict[str, list[tuple[str, str]]] = {}
        self._table = self._row = self._badge = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs.get("id") or f"table {len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None and "data-model" in attrs:
            self._row = attrs["data-model"]
            self.tables[self._table].append(self._row)
        elif tag == "span" and "badge" in (attrs.get("class") or "").split() and self._row is not None:
            self._badge = attrs.get("title") or ""

    def handle_data(self, data):
        if self._badge is not None:
            self.badges.setdefault(self._row, []).append((data, self._badge))
            self._badge = None

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "tr":
            self._row = None


def test_validate_says_why_a_record_on_a_users_data_file_is_not_comparable(tmp_path, run_cli):
    from lm_eval_ext.leaderboard.validate import check_record, not_comparable

    (path,) = _export(tmp_path / "lb", str(REAL / "litm_sweep20docs"))
    record = json.loads(path.read_text())
    assert [(f["task"], f["path"], f["user_file"]) for f in record["data"]["files"]] == [
        ("litm_qa_20docs", USER_FILE, True)]
    assert check_record(record) == []  # a valid record: it says what it is
    assert not_comparable(record) == [USER_FILE_REASON]
    proc = run_cli(["lm-eval-ext", "leaderboard", "validate", str(path)])
    assert (proc.returncode, proc.stdout.splitlines()) == (0, [
        f"ok   {path} (community; partial, marked; not comparable with the papers)",
        f"  - not comparable with the papers: {USER_FILE_REASON}",
    ])


def test_records_on_the_papers_data_are_comparable(tmp_path):
    from lm_eval_ext.leaderboard.validate import not_comparable

    paths = _export(tmp_path / "lb", str(REAL / "litm_plain"), str(REAL / "litm_chat"))
    assert [not_comparable(json.loads(path.read_text())) for path in paths] == [[], []]


def test_a_system_prompt_or_generation_settings_make_a_record_not_comparable(tmp_path):
    """Copies of the real litm_plain run with what the harness records for --system_instruction, --gen_kwargs."""
    from lm_eval_ext.leaderboard.validate import not_comparable

    def copy(name, change):
        shutil.copytree(REAL / "litm_plain", tmp_path / name)
        (path,) = (tmp_path / name).rglob("results_*.json")
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
        return str(tmp_path / name)

    system = copy("system", lambda d: d.update(system_instruction="Be brief.", system_instruction_sha="ab" * 32))
    sampled = copy("sampled", lambda d: d["config"].update(gen_kwargs={"temperature": 0.7, "do_sample": True}))
    records = [json.loads(path.read_text()) for path in _export(tmp_path / "lb", system, sampled)]
    assert [not_comparable(record) for record in records] == [
        ["run 0: a system prompt was added (--system_instruction, sha256 abababababab...): not the papers' prompts"],
        ["run 0: --gen_kwargs do_sample=True,temperature=0.7 replaced the generation settings of litm_qa_closedbook, "
         "litm_qa_oracle: not the papers' decoding"],
    ]


def test_the_site_lists_records_that_are_not_comparable_apart_from_the_papers_models(tmp_path, data_dir, run_cli):
    """One record holds litm_qa_20docs on the user's file and the oracle and closed-book tasks on the published data
    (litm_sweep20docs and litm_plain: one model, one settings); the chat-template record is comparable."""
    _export(tmp_path / "records", str(REAL / "litm_sweep20docs"), str(REAL / "litm_plain"), str(REAL / "litm_chat"))
    proc = run_cli(["lm-eval-ext", "leaderboard", "build", str(tmp_path / "records"), "-o", str(tmp_path / "site")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (f"not comparable with the papers, shown apart: {tmp_path / 'records' / (MODEL + '.json')}: "
            f"{USER_FILE_REASON}") in proc.stdout.splitlines()
    site = tmp_path / "site"

    index = _Tables((site / "index.html").read_text())
    overview = index.tables["overview"]
    assert MODEL not in overview and f"{MODEL} (chat template)" in overview and "GPT-3.5-Turbo" in overview
    assert index.tables["not-comparable"] == [MODEL]
    assert index.badges[MODEL] == [
        ("community", "as submitted: the maintainers have not rerun it"),
        ("partial", "litm_qa_20docs: 10 of 2205 documents scored (--limit 10); litm_qa_closedbook: 20 of 2655 documents "
                    "scored (--limit 20); litm_qa_oracle: 20 of 2655 documents scored (--limit 20)"),
        ("not comparable", f"not comparable with the papers' numbers: {USER_FILE_REASON}"),
    ]
    assert [text for text, _ in index.badges[f"{MODEL} (chat template)"]] == ["community", "partial"]

    # the benchmark page: apart on the task that read the user's file, beside the papers' models on the others
    litm = _Tables((site / "lost_in_the_middle.html").read_text())
    assert litm.tables["litm_qa_20docs-2.0-not-comparable"] == [MODEL]
    first = next(iter(litm.tables.values()))  # the page's first table: litm_qa_20docs, the papers' models only
    assert MODEL not in first and f"{MODEL} (chat template)" not in first and "GPT-3.5-Turbo" in first
    # litm_qa_closedbook and litm_qa_oracle: both records beside the papers' models
    beside = [rows[:2] for rows in litm.tables.values() if MODEL in rows and "GPT-3.5-Turbo" in rows]
    assert beside == [[MODEL, f"{MODEL} (chat template)"]] * 2
    assert [name for name in litm.tables if name.endswith("not-comparable")] == ["litm_qa_20docs-2.0-not-comparable"]

    page = (site / "records" / f"{MODEL}.html").read_text()
    assert "Not comparable with the papers (shown apart from their models):" in page
    assert f"<li>{escape(USER_FILE_REASON)}</li>" in page


def test_a_truncated_record_has_its_own_badge_and_stands_apart(tmp_path, data_dir):
    """The hand-written ELITR-Bench results: partial (a judge failure on elitr_bench_qa_dev_mt) and truncated (two
    prompts of elitr_bench_qa_dev_st)."""
    from lm_eval_ext.leaderboard.build import build_site

    _export(tmp_path / "records", f"tiny-chat={FIXTURES / 'results' / 'elitr'}",
            judge_validation=[str(FIXTURES / "judge_validation.json")])
    build_site([str(tmp_path / "records")], tmp_path / "site")
    index = _Tables((tmp_path / "site" / "index.html").read_text())
    assert index.tables["not-comparable"] == ["tiny-chat"] and "tiny-chat" not in index.tables["overview"]
    assert index.badges["tiny-chat"] == [
        ("community", "as submitted: the maintainers have not rerun it"),
        ("partial", "elitr_bench_qa_dev_mt: 1 answer(s) the judge could not score"),
        ("truncated", TRUNCATED),
        ("not comparable", f"not comparable with the papers' numbers: {TRUNCATED}"),
    ]
    elitr = _Tables((tmp_path / "site" / "elitr_bench.html").read_text())
    # the truncated task apart; the multi-turn task, not truncated, beside the papers' models
    assert elitr.tables["elitr_bench_qa_dev_st-2.0-not-comparable"] == ["tiny-chat"]
    beside = [rows for name, rows in elitr.tables.items() if "tiny-chat" in rows and "GPT-4" in rows]
    assert len(beside) == 1


def test_a_headline_the_record_ran_but_has_no_value_of_is_na(tmp_path):
    """MAGNIFICo's rel_perf undefined (every interpretation left out) and ELITR-Bench's score of a judge dry run:
    the records keep no NaN, and the overview shows "n/a" (with why) where the model ran the task, a blank where
    it did not."""
    from lm_eval_ext.leaderboard.records import read_records, record_entries
    from lm_eval_ext.leaderboard.site import overview_table

    _export(tmp_path, f"mag={REAL / 'mag_description_chat'}", f"elitr={REAL / 'elitr_dry_run_gguf'}",
            f"lieder={REAL / 'samples_lieder'}")
    table = overview_table(record_entries(read_records([str(tmp_path)]), set()))
    columns = [column.split(":")[0] for column in table.columns]
    # a label names the settings that change the numbers: "mag (chat template)"
    cells = {row.model.split(" (")[0]: dict(zip(columns, row.cells)) for row in table.rows if not row.published}
    shown = {model: {column: cells[model][column].text for column in ("LIEDER", "MAGNIFICo", "ELITR-Bench")}
             for model in ("mag", "elitr", "lieder")}
    assert shown == {"mag": {"LIEDER": "", "MAGNIFICo": "n/a", "ELITR-Bench": ""},
                     "elitr": {"LIEDER": "", "MAGNIFICo": "", "ELITR-Bench": "n/a"},
                     "lieder": {"LIEDER": "0.7167", "MAGNIFICo": "", "ELITR-Bench": ""}}
    magnifico = cells["mag"]["MAGNIFICo"]
    assert magnifico.task == "magnifico_description_plausible"  # not the group: the task is named under the value
    assert magnifico.title.startswith("magnifico_description_plausible/rel_perf is undefined in this record")
    assert cells["elitr"]["ELITR-Bench"].task is None  # the headline task itself
