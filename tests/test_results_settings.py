"""A run's identity includes the settings that change its numbers (chat template, system prompt, few-shot,
--gen_kwargs): runs with different settings are different models in the report and the export, each labelled with
its settings, never merged into one row that shows only the newest.

Runs: the real SmolLM2-135M-Instruct runs of tests/fixtures/real (tests/fixtures/README.md): litm_plain and
litm_chat are the same model and tasks (litm_qa_oracle, litm_qa_closedbook, --limit 20) without and with
--apply_chat_template. The other settings are copies of litm_plain with only what the harness records for that
setting changed."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from helpers.files import FIXTURES, read_csv

REAL = FIXTURES / "real"
PLAIN, CHAT = REAL / "litm_plain", REAL / "litm_chat"
MODEL = "SmolLM2-135M-Instruct"
# the sha256 of SmolLM2-135M-Instruct's chat template, as the harness recorded it in litm_chat
TEMPLATE_SHA = "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788"


def _copy(source: Path, to: Path, change) -> Path:
    """A copy of the run in ``source`` (its layout kept) with ``change(data)`` applied to its results."""
    shutil.copytree(source, to)
    (path,) = to.rglob("results_*.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return to


def test_runs_with_and_without_the_chat_template_are_two_models():
    from lm_eval_ext.results.load import load_models

    plain, chat = load_models([str(PLAIN), str(CHAT)])
    assert (plain.label, chat.label) == (MODEL, f"{MODEL} (chat template)")
    assert (plain.settings, chat.settings) == ({}, {"chat_template": TEMPLATE_SHA})
    # each model's own numbers: the chat run (0.45, 0.15) no longer hides the plain one (0.35, 0.05)
    assert [m.metrics("litm_qa_oracle")["acc"] for m in (plain, chat)] == [0.35, 0.45]
    assert [m.metrics("litm_qa_closedbook")["acc"] for m in (plain, chat)] == [0.05, 0.15]
    assert [len(m.runs) for m in (plain, chat)] == [1, 1]
    assert [m.label for m in load_models([str(CHAT), str(PLAIN)])] == [f"{MODEL} (chat template)", MODEL]
    # a label the user gives names the model; the settings are named after it
    assert [m.label for m in load_models([f"smol={PLAIN}", f"smol={CHAT}"])] == ["smol", "smol (chat template)"]


def test_the_report_shows_each_settings_as_its_own_row(tmp_path):
    from lm_eval_ext.report.build import build_report

    build_report([str(PLAIN), str(CHAT)], tmp_path / "report", published=False)
    tables = tmp_path / "report" / "tables"
    assert [(r["model"], r["task"], r["acc"]) for r in read_csv(tables / "litm_summary.csv")] == [
        (MODEL, "litm_qa_closedbook", "0.05"), (MODEL, "litm_qa_oracle", "0.35"),
        (f"{MODEL} (chat template)", "litm_qa_closedbook", "0.15"), (f"{MODEL} (chat template)", "litm_qa_oracle", "0.45")]
    runs = read_csv(tables / "runs.csv")
    assert [(r["model"], json.loads(r["settings"])) for r in runs] == [
        (MODEL, {}), (f"{MODEL} (chat template)", {"chat_template": TEMPLATE_SHA})]
    assert not (tables / "task_runs.csv").exists()  # no model ran a task twice: nothing was hidden
    assert f"{MODEL} (chat template)" in (tmp_path / "report" / "report.html").read_text()


def test_the_export_writes_one_record_per_settings(tmp_path):
    from lm_eval_ext.export.write import export_leaderboard

    export_leaderboard([str(PLAIN), str(CHAT)], tmp_path / "lb", allow_partial=True)
    plain = json.loads((tmp_path / "lb" / f"{MODEL}.json").read_text())
    chat = json.loads((tmp_path / "lb" / f"{MODEL}__chat__template.json").read_text())
    assert (plain["model"]["label"], chat["model"]["label"]) == (MODEL, f"{MODEL} (chat template)")
    assert [(r["runs"][0]["apply_chat_template"], r["runs"][0]["chat_template_sha"]) for r in (plain, chat)] == [
        (False, None), (True, TEMPLATE_SHA)]
    assert [r["benchmarks"]["lost_in_the_middle"]["headline"]["litm_qa_oracle/acc"] for r in (plain, chat)] == [0.35, 0.45]
    assert [(row["model"], row["litm_qa_oracle/acc"]) for row in read_csv(tmp_path / "lb" / "leaderboard.csv")] == [
        (MODEL, "0.35"), (f"{MODEL} (chat template)", "0.45")]


def test_every_setting_that_changes_the_numbers_makes_a_model_named_by_it(tmp_path):
    from lm_eval_ext.results.load import load_models

    prompt = "You answer in one word."
    prompt_sha = hashlib.sha256(prompt.encode()).hexdigest()
    other_template = hashlib.sha256(b"{{ messages }}").hexdigest()
    runs = {
        # --system_instruction: the harness records the text and its sha256
        "system": lambda d: d.update(system_instruction=prompt, system_instruction_sha=prompt_sha),
        # --gen_kwargs as lm-eval 0.4.13 records it (a dict), and as text: one setting, one model
        "gen_dict": lambda d: d["config"].update(gen_kwargs={"temperature": 0.7, "do_sample": True}),
        "gen_text": lambda d: d["config"].update(gen_kwargs="temperature=0.7,do_sample=True"),
        # --num_fewshot 3 (n-shot)
        "shots": lambda d: d["n-shot"].update(litm_qa_oracle=3),
        # a resumed run (config.resumed_from): the same run as before
        "resumed": lambda d: d["config"].update(resumed_from="answers/20261128-214109-7117"),
    }
    sources = [str(PLAIN)] + [str(_copy(PLAIN, tmp_path / name, change)) for name, change in runs.items()]
    # the chat run again, with another template and with one the harness could not record (an API's)
    sources.append(str(CHAT))
    sources.append(str(_copy(CHAT, tmp_path / "template", lambda d: d.update(
        chat_template="{{ messages }}", chat_template_sha=other_template))))
    sources.append(str(_copy(CHAT, tmp_path / "api", lambda d: d.update(chat_template="", chat_template_sha=None))))
    models = load_models(sources)
    assert [(m.label, len(m.runs)) for m in models] == [
        (MODEL, 2),  # the plain run and its resumed run
        (f"{MODEL} (system prompt {prompt_sha[:8]})", 1),
        (f"{MODEL} (gen_kwargs do_sample=True,temperature=0.7)", 2),
        (f"{MODEL} (litm_qa_oracle 3-shot)", 1),
        (f"{MODEL} (chat template {TEMPLATE_SHA[:8]})", 1),
        (f"{MODEL} (chat template {other_template[:8]})", 1),
        (f"{MODEL} (chat template)", 1),
    ]
    assert [m.settings for m in models] == [
        {}, {"system_instruction": prompt_sha}, {"gen_kwargs": {"do_sample": "True", "temperature": "0.7"}},
        {"num_fewshot": {"litm_qa_oracle": 3}}, {"chat_template": TEMPLATE_SHA}, {"chat_template": other_template},
        {"chat_template": "applied"}]


def test_a_chat_template_the_harness_could_not_record_is_exported_as_applied(tmp_path):
    """A chat-completions API applies the template itself: the harness records an empty one."""
    from lm_eval_ext.export.write import export_leaderboard

    api = _copy(CHAT, tmp_path / "api", lambda d: d.update(chat_template="", chat_template_sha=None))
    (path, _) = export_leaderboard([str(api)], tmp_path / "lb", allow_partial=True)
    record = json.loads(path.read_text())
    assert record["model"]["label"] == f"{MODEL} (chat template)"
    assert (record["runs"][0]["apply_chat_template"], record["runs"][0]["chat_template_sha"]) == (True, None)


def test_a_rerun_with_other_settings_does_not_verify_a_record(tmp_path):
    """The chat-template run's numbers agree with the plain record's within two standard errors (0.45 vs 0.35,
    0.15 vs 0.05 on 20 questions), but it is another measurement: verify refuses it, naming the setting."""
    import pytest

    from lm_eval_ext.export.write import export_leaderboard
    from lm_eval_ext.leaderboard.records import LeaderboardError
    from lm_eval_ext.leaderboard.verify import verify_record

    (path, _) = export_leaderboard([str(PLAIN)], tmp_path / "lb", allow_partial=True)
    before = path.read_text()
    with pytest.raises(LeaderboardError) as caught:
        verify_record(str(path), str(CHAT))
    (chat_file,) = CHAT.rglob("results_*.json")
    assert f"(1 disagreement(s): run 0: chat template None in the record, '{TEMPLATE_SHA}' in the rerun ({chat_file}))" \
        in str(caught.value)
    assert path.read_text() == before
    assert verify_record(str(path), str(PLAIN)).metrics > 0  # the same settings verify


def test_gen_kwargs_as_a_dict_or_as_text_is_one_setting_in_the_report_and_the_export(tmp_path):
    """--gen_kwargs as the harness records it (the dict it parsed the flag into) and as k=v text: one model, labelled
    with the setting; the report's runs table and the export (the schema's type) hold it as an object."""
    from lm_eval_ext.export.write import export_leaderboard
    from lm_eval_ext.report.build import build_report
    from lm_eval_ext.results.load import load_models

    as_dict = _copy(PLAIN, tmp_path / "dict", lambda d: d["config"].update(gen_kwargs={"temperature": 0.7,
                                                                                       "do_sample": True}))
    as_text = _copy(PLAIN, tmp_path / "text", lambda d: d["config"].update(gen_kwargs="temperature=0.7,do_sample=True"))
    (model,) = load_models([str(as_dict), str(as_text)])
    assert (model.label, len(model.runs)) == (f"{MODEL} (gen_kwargs do_sample=True,temperature=0.7)", 2)
    build_report([str(as_dict), str(as_text)], tmp_path / "report", published=False)
    assert [json.loads(row["gen_kwargs"]) for row in read_csv(tmp_path / "report" / "tables" / "runs.csv")] == [
        {"do_sample": True, "temperature": 0.7}, {"do_sample": "True", "temperature": "0.7"}]
    for source, expected in ((as_dict, {"temperature": 0.7, "do_sample": True}),
                             (as_text, {"temperature": "0.7", "do_sample": "True"})):
        (path, _) = export_leaderboard([str(source)], tmp_path / f"lb_{source.name}", allow_partial=True)
        assert json.loads(path.read_text())["runs"][0]["gen_kwargs"] == expected


def test_the_gen_kwargs_the_installed_harness_records_are_read(run_cli, data_dir, tmp_path):
    """A run of the installed harness (`lm-eval-ext run` runs it) with --gen_kwargs: the report's settings and the
    export read what it recorded."""
    from lm_eval_ext.export.write import export_leaderboard
    from lm_eval_ext.results.load import load_models

    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "no idea"}))
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen", "--model_args", f"responses={responses}",
                    "--tasks", "litm_qa_closedbook", "--limit", "2", "--gen_kwargs", "max_gen_toks=64,temperature=0",
                    "--output_path", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (model,) = load_models([str(tmp_path / "out")])
    assert model.settings == {"gen_kwargs": {"max_gen_toks": "64", "temperature": "0"}}
    (path, _) = export_leaderboard([str(tmp_path / "out")], tmp_path / "lb", allow_partial=True)
    assert json.loads(path.read_text())["runs"][0]["gen_kwargs"] == {"max_gen_toks": 64, "temperature": 0}
