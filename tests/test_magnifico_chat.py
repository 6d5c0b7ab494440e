"""MAGNIFICo's chat path: the prompt and settings a chat model gets, the query taken from its replies,
and, end to end through the harness's `local-chat-completions` and the stub server, that a chat reply
scores exactly what the same query scores as a plain completion.

The completion run is `ext-canned-gen` giving each item a bare continuation of the prompt's `SELECT`; the
chat runs get, for the same items, the same query written as chat models write it (whole, in a code fence,
in inline code, after a colon, with prose before or after). Which item gets which query and wrapping is
decided here, from the TSV files. The replies of a real chat model: test_magnifico_real_replies.py.
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from helpers.harness import filtered


pytestmark = pytest.mark.filterwarnings("ignore")

TASK = "magnifico_direct_plausible"
INTERPRETATION = "yellow_card"
LIMIT = 10  # documents alternate novel and base items: novel rows 0-4 and base rows 0-4
COMPLETION_STOPS = [";", "\n\n", "--", "#"]
# The chat instruction (templates/magnifico_chat.txt), written out here: the test owns its expectation.
INSTRUCTION = ("\n\nAnswer with one SQLite query and nothing else: the complete query for the last question above, "
               "starting with SELECT.")
WRONG = "'not the answer'"        # executes, wrong result
BROKEN = "name FROM no_such_table"  # does not execute


# -- the query taken from a reply, rule by rule ---------------------------------------------------

@pytest.mark.parametrize(("reply", "sql", "normalized"), [
    # bare queries: executed as the completion path would execute the same query
    ("SELECT a FROM t", "SELECT a FROM t", False),
    ("select a from t;", "select a from t", False),          # one final semicolon
    # no query: the chat prompt ends with the question, so a continuation of a SELECT is not one
    ("  a FROM t  ", None, False),
    ("\n\na FROM t", None, False),
    ("", None, False),
    # code fences: the first block's content
    ("```sql\nSELECT a FROM t;\n```", "SELECT a FROM t", True),
    ("```\na FROM t\n```", None, False),                      # a fenced fragment is no query either
    ("```SELECT a FROM t```", "SELECT a FROM t", True),
    ("Here is the query:\n\n```sqlite\nSELECT a\nFROM t\n```\n\nIt lists a.", "SELECT a\nFROM t", True),
    ("```sql\nSELECT a FROM t", "SELECT a FROM t", True),     # a block left open runs to the end
    ("```sql\nSELECT a\n\nFROM t\n```", "SELECT a\n\nFROM t", True),  # no blank-line cut inside a fence
    ("```sql\nSELECT 1;\n```\n```sql\nSELECT 2;\n```", "SELECT 1", True),
    # prose before the query
    ("To answer it we count rows:\nSELECT count(*) FROM t", "SELECT count(*) FROM t", True),
    ("The query:\nWITH x AS (SELECT 1) SELECT * FROM x;", "WITH x AS (SELECT 1) SELECT * FROM x", True),
    ("With this query you get it:\nSELECT 1", "SELECT 1", True),  # prose "With" is not a CTE
    # a SELECT line inside an open parenthesis is a subquery of a fragment, not the start of a query
    ("count(*) FROM t WHERE a IN (\nSELECT a FROM u)", None, False),
    # the first statement only: a semicolon in a string does not end it; prose after a blank line goes
    ("SELECT 'a;b' FROM t; SELECT 2", "SELECT 'a;b' FROM t", True),
    ("SELECT a FROM t -- the a's; all of them\n;", "SELECT a FROM t -- the a's; all of them", False),
    ("SELECT a FROM t;\n\nThis query lists a.", "SELECT a FROM t", True),
    ("SELECT a\nFROM t\n\nThis query lists a.", "SELECT a\nFROM t", True),
    ("a FROM t\n\nThe SELECT above lists a.", None, False),  # prose is never taken for SQL
])
def test_chat_replies_are_normalised_once(reply, sql, normalized):
    from lm_eval_ext.magnifico.replies import chat_query, completion_query

    got = chat_query(reply)
    assert (got.sql, got.normalized) == (sql, normalized)
    # the completion path never normalises: "SELECT " + the stripped reply
    assert completion_query(reply).sql == "SELECT " + reply.strip() and not completion_query(reply).normalized


@pytest.mark.parametrize(("scope", "prompt_type", "form", "position", "interpretation", "cue"), [
    ("single", "direct", "plausible", None, "maximum", "\nSELECT"),
    ("single", "description", "foreign", "mid", "maximum", "\nSELECT"),
    ("single", "fewshot", "adversarial", None, "maximum", "\nSELECT"),
    ("phrase", "direct", "plausible", None, "hire_date", "\nSELECT"),
    ("dialogue", "dialogue", "plausible", "end", "average", "\n\nUser2: SELECT"),
])
def test_chat_prompt_is_the_authors_prompt_without_its_final_select(data_dir, scope, prompt_type, form, position,
                                                                    interpretation, cue):
    """The chat prompt leaves out the completion cue (the line a completion model continues), nothing else."""
    from lm_eval_ext.magnifico.chat import chat_messages
    from lm_eval_ext.magnifico.documents import Setting, build_documents
    from lm_eval_ext.magnifico.prompts import PromptBuilder

    builder = PromptBuilder()
    docs = build_documents(Setting(scope, prompt_type, form, position), selected={interpretation})
    for doc in (docs[0], docs[1]):  # a novel and a base item
        authors = builder.build(doc)
        assert authors.endswith(cue) and builder.build(doc, cue=False) == authors[: -len(cue)]
        assert chat_messages(builder.build(doc, cue=False), "Be brief.") == [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": authors[: -len(cue)] + INSTRUCTION}]


def test_chat_generation_settings_keep_what_the_command_line_gave():
    from lm_eval_ext.magnifico.chat import chat_generation_kwargs

    yaml = {"until": COMPLETION_STOPS, "max_gen_toks": 128, "do_sample": False, "temperature": 0.0}
    assert chat_generation_kwargs(dict(yaml), yaml) == {"until": [], "max_gen_toks": 512, "do_sample": False,
                                                        "temperature": 0.0}
    given = {**yaml, "max_gen_toks": 1024, "top_p": 0.9}  # e.g. --gen_kwargs max_gen_toks=1024,top_p=0.9
    assert chat_generation_kwargs(given, yaml) == {"until": [], "max_gen_toks": 1024, "do_sample": False,
                                                   "temperature": 0.0, "top_p": 0.9}
    chat = chat_generation_kwargs(dict(yaml), yaml)
    assert chat_generation_kwargs(chat, yaml) == chat  # building the requests again changes nothing


# -- end to end --------------------------------------------------------------------------------------

def _rows(data_dir: Path, form: str) -> list[dict]:
    path = data_dir / "magnifico" / "magnifico_data" / INTERPRETATION / form / "test.tsv"
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _text(question: str) -> str:
    # the question text lies between "<db_id>:" and the first " | "
    return question.split(" | ")[0].split(":", 1)[1].strip()


def _continuation(gold: str) -> str:
    assert gold.startswith("select ")
    return gold[len("select "):]


# How chat models wrap a query Q ("SELECT " + the completion run's continuation), and whether the reply
# then had to be normalised.
STYLES = {
    "whole": (lambda q: q, False),
    "inline": (lambda q: f"Sure! `{q}`", True),
    "colon": (lambda q: f"The query is: {q}", True),
    "fenced": (lambda q: f"Here is the query:\n\n```sql\n{q};\n```\n\nIt answers the question.", True),
    "explained": (lambda q: f"{q};\n\nThis query reads the player table.", True),
    "preamble": (lambda q: f"The SQLite query is:\n{q}", True),
}


def _script(data_dir: Path) -> dict[str, tuple[str, str]]:
    """Prompt key -> (continuation for the completion run, wrapping style for the chat runs)."""
    script = {}
    for role, form in (("novel", "plausible"), ("base", "baseline")):
        for i, row in enumerate(_rows(data_dir, form)):
            answer = (_continuation(row["Parse"]), WRONG, _continuation(row["Parse"]), BROKEN)[i % 4]
            style = list(STYLES)[(i + (0 if role == "novel" else 2)) % len(STYLES)]
            script[f"\n-- {_text(row['Question'])}\nSELECT"] = (answer, style)
    assert len(script) == 50
    return script


def _lookup(script: dict, prompt: str) -> tuple[str, str]:
    (found,) = [value for key, value in script.items() if key in prompt]
    return found


def _evaluate(model: str, model_args: str, **kwargs) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"interpretations": INTERPRETATION})
    return lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=[TASK], task_manager=manager,
                                   limit=LIMIT, log_samples=True, confirm_run_unsafe_code=True, **kwargs)


def _metrics(results: dict) -> dict:
    return {key: value for key, value in results[TASK].items() if key.endswith(",sandbox")}


def _records(samples: list[dict]) -> dict[tuple, dict]:
    return {(s["doc"]["role"], s["doc"]["item_id"]): json.loads(filtered(s)) for s in samples}


def _chat_reply(script: dict):
    # the chat prompt ends with the question and the instruction: looked up without the completion cue
    chat_script = {key.removesuffix("SELECT"): value for key, value in script.items()}

    def reply(body: dict) -> str:
        answer, style = _lookup(chat_script, body["messages"][-1]["content"])
        return STYLES[style][0]("SELECT " + answer)
    return reply


@pytest.mark.slow
def test_chat_replies_score_what_the_same_query_scores_as_a_completion(data_dir, tmp_path, run_cli):
    from doubles.stub_openai import StubOpenAIServer

    script = _script(data_dir)
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [{"contains": key, "response": answer}
                                               for key, (answer, _) in script.items()], "default": None}))
    calls = tmp_path / "calls.jsonl"
    completion = _evaluate("ext-canned-gen", f"responses={responses},calls_log={calls}")

    # the completion path is the paper's: the authors' prompt ending with SELECT, its stops and length
    (call,) = [json.loads(line) for line in calls.read_text().splitlines()]
    assert all(p.endswith("\nSELECT") for p in call["prompts"]) and len(call["prompts"]) == LIMIT
    assert all(kw["until"] == COMPLETION_STOPS and kw["max_gen_toks"] == 128 for kw in call["gen_kwargs"])
    assert completion["configs"][TASK]["metadata"]["reply_format"] == "completion"

    with StubOpenAIServer(responder=_chat_reply(script)) as srv:
        chat = _evaluate("local-chat-completions", f"base_url={srv.chat_url},model=stub", apply_chat_template=True)
        bodies = [r["body"] for r in srv.requests if r["method"] == "POST"]
    # what the chat model got: the same prompt without its final SELECT, the instruction, no stops, 512 tokens,
    # one user message
    prompts = sorted(call["prompts"])
    assert sorted(b["messages"][0]["content"] for b in bodies) == sorted(p.removesuffix("\nSELECT") + INSTRUCTION
                                                                        for p in prompts)
    assert all(len(b["messages"]) == 1 and b["messages"][0]["role"] == "user" for b in bodies)
    assert all(b["stop"] == [] and b["max_tokens"] == 512 and b["temperature"] == 0.0 for b in bodies)
    assert chat["configs"][TASK]["metadata"]["reply_format"] == "chat"
    assert chat["configs"][TASK]["generation_kwargs"]["until"] == []

    # a server that honours stop sequences changes nothing (none is sent), through the plain harness command
    out = tmp_path / "out"
    with StubOpenAIServer(responder=_chat_reply(script), honour_stop=True) as srv:
        proc = run_cli(["lm_eval", "run", "--model", "local-chat-completions", "--model_args",
                        f"base_url={srv.chat_url},model=stub", "--apply_chat_template", "--tasks", TASK,
                        "--limit", str(LIMIT), "--metadata", json.dumps({"interpretations": INTERPRETATION}),
                        "--confirm_run_unsafe_code", "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = out.rglob("results_*.json")
    (samples_file,) = out.rglob(f"samples_{TASK}_*.jsonl")
    honoured = json.loads(results_file.read_text())["results"]
    honoured_samples = [json.loads(line) for line in samples_file.read_text().splitlines()]

    # document by document: the same executed query, the same verdict; only the normalisation flag differs
    plain, chatted, cut = (_records(completion["samples"][TASK]), _records(chat["samples"][TASK]),
                           _records(honoured_samples))
    assert plain.keys() == chatted.keys() == cut.keys() and len(plain) == LIMIT
    styles = {}
    for sample in chat["samples"][TASK]:
        answer, style = script[f"\n-- {sample['doc']['text']}\nSELECT"]
        styles[(sample["doc"]["role"], sample["doc"]["item_id"])] = style
        assert sample["resps"][0][0] == STYLES[style][0]("SELECT " + answer)  # the raw reply is kept
    assert set(styles.values()) == set(STYLES)
    for key, record in plain.items():
        assert record["normalized"] is False
        for other in (chatted[key], cut[key]):
            assert {k: v for k, v in other.items() if k != "normalized"} == {k: v for k, v in record.items()
                                                                               if k != "normalized"}, key
            assert other["normalized"] is STYLES[styles[key]][1], key
    assert {r["ex"] for r in plain.values()} == {0, 1} and {r["executed"] for r in plain.values()} == {True, False}

    expected_normalized = sum(STYLES[style][1] for style in styles.values())
    # novel rows 0-4 get styles 0-4 (whole, inline, colon, fenced, explained), base rows 0-4 styles 2-5 and 0
    # (colon, fenced, explained, preamble, whole): every style but "whole" is normalised
    assert expected_normalized == 8
    for metrics in (_metrics(chat["results"]), _metrics(honoured)):
        assert metrics.pop("replies_normalized,sandbox") == expected_normalized
        baseline = _metrics(completion["results"])
        assert baseline.pop("replies_normalized,sandbox") == 0
        assert metrics == baseline


def test_reply_format_is_not_an_option(data_dir):
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.magnifico.task import MagnificoOptionError
    from lm_eval_ext.paths import tasks_dir
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"interpretations": INTERPRETATION, "reply_format": "chat"})
    with pytest.raises(MagnificoOptionError, match="reply_format is not an option"):
        manager.load([TASK])


def test_a_misspelled_option_is_an_error(data_dir):
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.errors import UserError
    from lm_eval_ext.paths import tasks_dir
    # "interpretation" ignored would run every interpretation; a key far from every option is the user's own
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"interpretation": INTERPRETATION, "my_note": "x"})
    with pytest.raises(UserError, match=re.escape(
            f"{TASK}: --metadata 'interpretation' is no MAGNIFICo option; did you mean 'interpretations'? The "
            "options are budget, timeout, max_rows, workers, comparison, schema_source, interpretations, form_word.")):
        manager.load([TASK])
