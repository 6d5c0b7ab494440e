"""ELITR-Bench data: question sets read from the zips in place, transcripts from the corpus layout, task options.

Counts are those of the released question sets (dev: 10 meetings, 141 questions, 16 differentiating; test2: 8, 130, 17).
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from doubles.stub_openai import StubOpenAIServer
from helpers.judge import judge_calls

CORPUS = "elitr_bench/ELITR-minuting-corpus/elitr-minuting-corpus-en"


@pytest.mark.parametrize("split,meetings,questions,differing", [("dev", 10, 141, 16), ("test2", 8, 130, 17)])
@pytest.mark.parametrize("language", ["en", "cs"])
def test_question_sets(data_dir, split, meetings, questions, differing, language):
    from lm_eval_ext.elitr.data import build_documents, differentiating_questions

    assert len(differentiating_questions(split, language)) == differing
    for set_name in ("qa", "conv"):
        docs, transcripts = build_documents(set_name, split, language)
        assert len(transcripts) == meetings and len(docs) == questions
        assert sum(d["differentiating"] for d in docs) == differing
        assert {d["language"] for d in docs} == {language}
        first = docs[0]
        assert (first["meeting"], first["question_id"], first["turn"]) == (f"meeting_en_{split}_001", "1", 1)
        # turns count up within a meeting
        for doc in docs:
            assert doc["turn"] == int(doc["question_id"]) and doc["n_turns"] >= doc["turn"]


def test_transcripts_come_from_the_registry_as_is(data_dir):
    from lm_eval_ext.elitr.data import read_transcript

    transcript = read_transcript("dev", "meeting_en_dev_003")
    path = data_dir / CORPUS / "dev/meeting_en_dev_003/transcript_MAN2_annot18.txt"
    assert transcript.text == path.read_text(encoding="utf-8") and transcript.source == str(path)


def test_question_files_stay_zipped(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_EXT_CACHE_DIR", str(tmp_path / "cache"))
    from lm_eval_ext.elitr.data import build_documents

    build_documents("qa", "test2", "cs")
    assert not any(p.suffix == ".json" for p in tmp_path.rglob("*"))


def user_corpus(root: Path, data_dir: Path, split: str, extra: dict[str, str] | None = None) -> None:
    """Copy a split's transcripts into the official layout under ``root`` (plus ``extra`` files per meeting)."""
    for source in sorted((data_dir / CORPUS / split).iterdir()):
        folder = root / "elitr-minuting-corpus-en" / split / source.name
        folder.mkdir(parents=True)
        (transcript,) = source.glob("transcript_MAN*")
        (folder / transcript.name).write_text(f"[user copy of {source.name}]\n" + transcript.read_text())
        for name, text in (extra or {}).items():
            (folder / name).write_text(text)


def test_user_corpus_directory_first_transcript_by_name(data_dir, tmp_path, monkeypatch, caplog):
    from lm_eval_ext.elitr.data import build_documents

    # "transcript_MAN2..." sorts before "transcript_MAN_..." and before every registered name here
    user_corpus(tmp_path / "corpus", data_dir, "test2", extra={"transcript_MAN0_first.txt": "(PERSON1) First by name.\n"})
    with caplog.at_level(logging.INFO, logger="lm_eval_ext.elitr.data"):
        _, transcripts = build_documents("qa", "test2", corpus=tmp_path / "corpus")
    assert {t.text for t in transcripts} == {"(PERSON1) First by name.\n"}
    assert "using the first by name, transcript_MAN0_first.txt" in caplog.text
    # the folder itself, or the environment variable, work as well
    monkeypatch.setenv("LM_EVAL_EXT_ELITR_CORPUS", str(tmp_path / "corpus" / "elitr-minuting-corpus-en"))
    _, transcripts = build_documents("qa", "test2")
    assert transcripts[0].source.endswith("meeting_en_test2_001/transcript_MAN0_first.txt")


def test_user_corpus_without_a_meeting_is_a_clear_error(data_dir, tmp_path):
    from lm_eval_ext.elitr.data import ElitrDataError, build_documents

    user_corpus(tmp_path / "corpus", data_dir, "test2")
    with pytest.raises(ElitrDataError, match=r"No transcript_MAN\* file in .*/dev/meeting_en_dev_001"):
        build_documents("qa", "dev", corpus=tmp_path / "corpus")
    with pytest.raises(ElitrDataError, match="has neither"):
        build_documents("qa", "dev", corpus=tmp_path)


def evaluate(task, metadata, **kwargs):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return lm_eval.simple_evaluate(tasks=[task], task_manager=manager, **kwargs)


@pytest.mark.parametrize("metadata,message", [
    ({"overflow": "shrink"}, "overflow='shrink'"),
    ({"qa_markers": "maybe"}, "qa_markers='maybe' must be true or false"),
])
def test_bad_task_options(data_dir, tmp_path, metadata, message):
    from lm_eval_ext.elitr.task import ElitrOptionError

    responses = tmp_path / "r.json"
    responses.write_text(json.dumps({"default": "x"}))
    with pytest.raises(ElitrOptionError, match=message):
        evaluate("elitr_bench_qa_dev_st", metadata, model="ext-canned-gen", model_args={"responses": str(responses)})


def test_a_misspelled_option_is_an_error(data_dir):
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.errors import UserError
    from lm_eval_ext.paths import tasks_dir
    # "qa_marker" ignored would build the prompts without the markers
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={"qa_marker": True})
    with pytest.raises(UserError, match=re.escape(
            "elitr_bench_qa_dev_st: --metadata 'qa_marker' is no ELITR-Bench option; did you mean 'qa_markers'? The "
            "options are qa_markers, overflow, elitr_corpus.")):
        manager.load(["elitr_bench_qa_dev_st"])


def test_czech_task_uses_czech_prompt_and_judge(data_dir, tmp_path, monkeypatch):
    from lm_eval_ext.data import read_zip_member
    from lm_eval_ext.paths import templates_dir

    monkeypatch.setenv("LMX_CS_KEY", "sk-czech-test-key-0123456789abcdef")
    czech = json.loads(read_zip_member("elitr_bench", "czech.zip", "czech/elitr-bench-czech-qa_dev.json", password=b"utter"))
    question = czech["meetings"][0]["questions"][0]
    responses, calls = tmp_path / "r.json", tmp_path / "calls.jsonl"
    responses.write_text(json.dumps({"default": "Účastníci byli tři."}))
    with StubOpenAIServer(text="\\boxed{0}", models=()) as srv:
        out = evaluate("elitr_bench_qa_cs_dev_st", {"judge_base_url": srv.base_url, "judge_api_key_env": "LMX_CS_KEY",
                                                   "judge_cache": "none"},
                       model="ext-canned-gen", model_args={"responses": str(responses), "calls_log": str(calls)}, limit=1)
        judge_prompt = judge_calls(srv)[0]["messages"][-1]["content"]
    prompt = json.loads(calls.read_text())["prompts"][0]
    czech_template = (templates_dir() / "elitr_answer_cs.txt").read_text(encoding="utf-8")
    assert prompt.startswith(czech_template.split("{transcript}")[0])
    assert prompt.endswith(czech_template.split("{transcript}")[1] + "\n\n" + question["question"].strip())
    assert "Score 0: The response to evaluate is not in Czech language." in judge_prompt
    assert question["groundtruth-answer"] in judge_prompt
    assert out["results"]["elitr_bench_qa_cs_dev_st"]["score,judge"] == 0.0  # 0 is a valid Czech-rubric score


@pytest.mark.slow
def test_plain_harness_lists_every_task_and_group(plain_task_listing):
    proc = plain_task_listing  # lm_eval ls tasks
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.replace(" ", "")
    names = [f"elitr_bench_{s}{lang}_{split}_{mode}" for lang in ("", "_cs") for split in ("dev", "test2")
             for s, mode in (("qa", "st"), ("qa", "mt"), ("conv", "mt"))]
    for name in names + ["elitr_bench", "elitr_bench_cs"]:
        assert f"|{name}|" in listed, name
