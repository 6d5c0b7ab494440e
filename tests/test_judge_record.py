"""The judge's record (lm_eval_ext.judge.records.JudgeRecord): written by judged tasks, `judge validate` and
`elitr score`, read once by report, export and leaderboard."""
from __future__ import annotations

import json
import shutil

import pytest

from helpers.files import FIXTURES
from lm_eval_ext.judge.records import JudgeRecord, JudgeRecordError

ELITR = FIXTURES / "results" / "elitr" / "results_2030-01-01T00-00-00.000001.json"
TASK = "elitr_bench_qa_dev_st"


def _recorded() -> dict:
    return json.loads(ELITR.read_text())["configs"][TASK]["metadata"]["judge"]


def test_a_recorded_judge_reads_back_unchanged():
    record = JudgeRecord.from_dict(_recorded())
    assert record.model == "stub-judge" and record.run == {"answers": 141, "scored": 141, "from_cache": 0, "calls": 141}
    assert json.dumps(record.to_dict()) == json.dumps(_recorded())  # same keys, same order, same values


def test_the_record_a_judge_writes(monkeypatch):
    from lm_eval_ext.judge import resolve_config
    from lm_eval_ext.judge.templates import config_record, judge_setup

    monkeypatch.delenv("LM_EVAL_EXT_JUDGE_BASE_URL", raising=False)
    config = resolve_config(explicit={"judge": "rubric10", "model": "stub-judge", "base_url": "http://127.0.0.1/v1",
                                      "seed": 2023})
    written = config_record(config, judge_setup(config)).to_dict()
    assert list(written) == [key for key in _recorded() if key != "run"]
    assert JudgeRecord.from_dict(written).same_judge(JudgeRecord.from_dict(_recorded()))


def test_which_judge_it_was():
    ours = JudgeRecord.from_dict(_recorded())
    same = {"model": "stub-judge", "template_sha256": ours.template_sha256, "base_url_host": ours.base_url_host}
    assert ours.base_url_host and ours.same_judge(JudgeRecord.from_dict(same))
    assert not ours.same_judge(JudgeRecord.from_dict({**same, "template_sha256": "0" * 64}))
    assert not ours.same_judge(JudgeRecord.from_dict({**same, "model": "gpt-4"}))
    assert not ours.same_judge(JudgeRecord.from_dict({**same, "base_url_host": "api.example.org"}))


@pytest.mark.parametrize(("data", "message"), [
    ({"model": "m"}, "the judge record has no template_sha256"),
    ({"template_sha256": "0" * 64, "model": None}, "the judge record has no model"),
    (["m"], "a judge record is a mapping, not list"),
])
def test_a_record_that_does_not_say_which_judge(data, message):
    with pytest.raises(JudgeRecordError, match=f"^{message}$"):
        JudgeRecord.from_dict(data)


@pytest.mark.parametrize("command", [["report", "--no-published"], ["export", "--allow-partial"]])
def test_a_damaged_judge_record_is_one_paragraph(command, tmp_path, capsys):
    from lm_eval_ext.cli import main

    results = tmp_path / "results" / ELITR.name
    results.parent.mkdir()
    shutil.copy(ELITR, results)
    data = json.loads(results.read_text())
    del data["configs"][TASK]["metadata"]["judge"]["template_sha256"]
    results.write_text(json.dumps(data))
    with pytest.raises(SystemExit) as exit_info:
        main([*command, str(results.parent), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert err == (f"lm-eval-ext: error: {results}: the judge record of {TASK} (configs.{TASK}.metadata.judge) cannot "
                   "be read: the judge record has no template_sha256. The file was changed after the run or is "
                   "damaged; run the task again.\n")
    assert not (tmp_path / "out").exists()
