"""MAGNIFICo's chat path on the replies of a real chat model, and its completion path on real completions.

The replies are SmolLM2-135M-Instruct's (tests/fixtures/real/, README there): 18 chat replies (`hf`,
`--apply_chat_template`, three tasks, `--limit 6`), made when the chat prompt still ended with the
authors' `SELECT`, so the model mostly echoed it; and 12 completions (`vllm`, no chat template). The
table below says, reply by reply, which query a reader sees in it, or that it holds none; the tests
check the rule on them one by one, then through the harness (`local-chat-completions` replaying them)
that every sample shows the raw reply, the SQL taken from it and what executing it gave.
"""
from __future__ import annotations

import json

import pytest

from helpers.harness import filtered
from helpers.prompts import read_fixture_jsonl

pytestmark = pytest.mark.filterwarnings("ignore")

TASKS = ("magnifico_description_plausible", "magnifico_fewshot_plausible", "magnifico_phrase_direct")
INTERPRETATIONS = {"magnifico_description_plausible": "maximum", "magnifico_fewshot_plausible": "maximum",
                   "magnifico_phrase_direct": "len_less_than"}
INSTRUCTION = ("\n\nAnswer with one SQLite query and nothing else: the complete query for the last question above, "
               "starting with SELECT.")
NO_QUERY = None
# phrase_direct item 2: SELECT, then the schema's example rows echoed, up to the first blank line
ECHOED_ROWS = ("SELECT\n\tflno\torigin\tdestination\tdistance\tdeparture_date\tarrival_date\tprice\taid\n"
               "99\tLos Angeles\tWashington D.C.\t2308\t04/12/2005 09:30\t04/12/2005 09:40\t235.98\t1\n"
               "13\tLos Angeles\tDallas\t1251\t04/12/2005 11:50\t04/12/2005 07:05\t182\t2\n"
               "346\tLos Angeles\tBoeing 747-400\t8430\t04/12/2005 11:50\t04/12/2005 11:50\t220.98\t3\n*/")
OPEN_FENCE = "the content of its ```sql block, left open, to the end of the reply"
# (task, doc_id) -> the query taken from the reply, NO_QUERY, or OPEN_FENCE; and why
EXPECTED = {
    # "SELECT\n\nSELECT\n\nDESC\nFROM ...": SELECT echoed alone twice, then keywords and "--" lines
    ("magnifico_description_plausible", 0): NO_QUERY,
    ("magnifico_description_plausible", 1): NO_QUERY,  # ... then "INSERT INTO" and a run-on identifier
    ("magnifico_description_plausible", 2): NO_QUERY,  # "SELECT\n\n*/\n\nCREATE TABLE status (..."
    ("magnifico_description_plausible", 3): NO_QUERY,
    ("magnifico_description_plausible", 4): NO_QUERY,
    ("magnifico_description_plausible", 5): NO_QUERY,
    # a numbered list of prose ("1. 1. The total and coveted duration ..."), no SQL at all
    ("magnifico_fewshot_plausible", 0): NO_QUERY,
    # "1. Find the maximum and minimum population among all counties.\n\n```sql\nSELECT MAX(population) ..."
    ("magnifico_fewshot_plausible", 1): OPEN_FENCE,
    ("magnifico_fewshot_plausible", 2): NO_QUERY,
    ("magnifico_fewshot_plausible", 3): NO_QUERY,
    ("magnifico_fewshot_plausible", 4): NO_QUERY,
    ("magnifico_fewshot_plausible", 5): NO_QUERY,
    ("magnifico_phrase_direct", 0): NO_QUERY,  # "SELECT\n\n*   \"111\"\n*   \"121\" ...": a bullet list
    ("magnifico_phrase_direct", 1): NO_QUERY,  # "SELECT\n\n*\n\n*\n\n* ..."
    ("magnifico_phrase_direct", 2): ECHOED_ROWS,  # begins with SELECT and goes on: a query, a broken one
    ("magnifico_phrase_direct", 3): NO_QUERY,  # "SELECT\n\n*/\n\n-- 1. create table flight\nCREATE TABLE ..."
    ("magnifico_phrase_direct", 4): NO_QUERY,  # "SELECT\n\n*/\n\nINSERT INTO flight(...) VALUES ..."
    ("magnifico_phrase_direct", 5): NO_QUERY,  # "SELECT\n\n*/\n\nCREATE TABLE flight(... `aircraft`(\"aid` ..."
}


def _chat_replies() -> list[dict]:
    return [record for task in TASKS for record in read_fixture_jsonl(f"real/chat_replies_{task}.jsonl")]


def _expected(record: dict) -> str | None:
    expected = EXPECTED[(record["task"], record["doc_id"])]
    if expected == OPEN_FENCE:
        return record["reply"].split("```sql\n", 1)[1].strip()
    return expected


def test_the_table_covers_every_real_reply():
    assert sorted((r["task"], r["doc_id"]) for r in _chat_replies()) == sorted(EXPECTED)


@pytest.mark.parametrize("record", _chat_replies(), ids=lambda r: f"{r['task']}-{r['doc_id']}")
def test_real_chat_reply_gives_the_query_a_reader_sees(record):
    from lm_eval_ext.magnifico.replies import chat_query

    expected = _expected(record)
    query = chat_query(record["reply"])
    assert query.sql == expected
    # a query is taken out of the reply (fence, prose, what follows a blank line), never the reply itself
    assert query.normalized is (expected is not None)
    if expected is not None:
        assert expected in record["reply"]  # nothing is added: no prose glued, no SELECT supplied


def test_the_open_fenced_query_is_the_whole_block():
    from lm_eval_ext.magnifico.replies import chat_query

    (record,) = [r for r in _chat_replies() if EXPECTED[(r["task"], r["doc_id"])] == OPEN_FENCE]
    sql = chat_query(record["reply"]).sql
    assert sql.startswith("SELECT MAX(population) AS max_population, MIN(population) AS min_population\nFROM (\n")
    assert record["reply"].endswith(sql) and "```" not in sql and len(sql) > 1500


@pytest.mark.parametrize(("reply", "sql"), [
    # prose before the query, as the real model wrote it: never glued into the SQL ("SELECT The query is: ...")
    ("The query is: SELECT date FROM weather WHERE max_temperature_f > 85",
     "SELECT date FROM weather WHERE max_temperature_f > 85"),
    ("Sure! `SELECT date FROM weather WHERE max_temperature_f > 85`",
     "SELECT date FROM weather WHERE max_temperature_f > 85"),
    # an echoed SELECT alone, then the query after a blank line
    ("SELECT\n\nSELECT city, max(lat) FROM station GROUP BY city", "SELECT city, max(lat) FROM station GROUP BY city"),
    # inside a line: after a colon, or with a FROM after it; capitals only
    ("The query is: SELECT 'x'", "SELECT 'x'"),
    ("You get them with SELECT name FROM singer", "SELECT name FROM singer"),
    ("The SELECT above lists the names.", None),
    ("you can select name from singer", None),
    # sentence-case prose at a line's start is not a query; the query after it is
    ("Select the singers older than 30:\nSELECT name FROM singer WHERE age > 30",
     "SELECT name FROM singer WHERE age > 30"),
    # code comes first: a fence, then inline code, then the text
    ("SELECT 1\n\n```sql\nSELECT 2\n```", "SELECT 2"),
    ("Use `singer`, then `select name from singer`.", "select name from singer"),
    ("```\n-- the names\nSelect name From singer\n```", "Select name From singer"),  # any case in code
    ("```text\nno query here\n```\nSELECT name FROM singer", "SELECT name FROM singer"),
    # no query: prose, a fragment that continues a query, SELECT alone
    ("1. 1. The total and coveted duration for all trips with the bike id 636.", None),
    ("name FROM singer", None),
    ("SELECT;", None),
])
def test_chat_reply_rules(reply, sql):
    from lm_eval_ext.magnifico.replies import chat_query

    assert chat_query(reply).sql == sql


def test_real_completions_are_executed_as_the_paper_does():
    """The completion path is unchanged: the SQL executed for each real completion is the one the run recorded,
    "SELECT " + the stripped reply."""
    from lm_eval_ext.magnifico.replies import Query, completion_query, reply_query

    records = read_fixture_jsonl("real/completion_replies.jsonl")
    assert len(records) == 12
    for record in records:
        assert completion_query(record["reply"]).sql == record["executed_sql"] == "SELECT " + record["reply"].strip()
        assert reply_query(record["reply"], chat=False) == completion_query(record["reply"])
    # as chat replies the same texts hold no query: they continue a SELECT the chat prompt no longer has
    assert all(reply_query(r["reply"], chat=True) == Query(None) for r in records)


# -- through the harness ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_real_chat_replies_through_the_harness(task, data_dir):
    """`local-chat-completions` against the stub server replaying the real replies, item by item: the chat
    prompt ends with the question and the instruction (no SELECT), and each sample shows the raw reply, the
    SQL taken from it (or none) and what executing it gave."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from doubles.stub_openai import StubOpenAIServer
    from lm_eval_ext.paths import tasks_dir

    records = [r for r in _chat_replies() if r["task"] == task]
    prompts = []

    def reply(body: dict) -> str:
        content = body["messages"][-1]["content"]
        prompts.append(content)
        (found,) = [r["reply"] for r in records if f"-- {r['text']}\n\n" in content]
        return found

    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"interpretations": INTERPRETATIONS[task]})
    with StubOpenAIServer(responder=reply) as srv:
        out = lm_eval.simple_evaluate(model="local-chat-completions", model_args=f"base_url={srv.chat_url},model=stub",
                                      tasks=[task], task_manager=manager, limit=len(records), log_samples=True,
                                      confirm_run_unsafe_code=True, apply_chat_template=True)
    # one request per item, whose prompt ends with the item's question and the instruction: no SELECT
    assert len(prompts) == len(records)
    assert all(sum(p.endswith(f"-- {r['text']}{INSTRUCTION}") for p in prompts) == 1 for r in records)

    samples = out["samples"][task]
    assert len(samples) == len(records)
    for sample in samples:
        (record,) = [r for r in records if r["text"] == sample["doc"]["text"]]
        assert sample["resps"][0][0] == record["reply"]  # the raw reply
        executed = json.loads(filtered(sample))
        expected = _expected(record)
        assert executed["prediction"] == expected  # the SQL taken from it
        if expected is None:  # no query: not executed, and the record says so
            assert executed == {"prediction": None, "executed": False, "ex": 0, "em": 0, "normalized": False,
                                "error": "no query: the reply holds no SQL query (no code block, inline code or "
                                         "statement that starts with SELECT or WITH); nothing was executed"}
        else:  # what executing it gave: both real queries are broken
            assert executed["executed"] is False and executed["error"].startswith("OperationalError: ")
            assert (executed["ex"], executed["normalized"]) == (0, True)
    metrics = {key.split(",")[0]: value for key, value in out["results"][task].items() if key.endswith(",sandbox")}
    assert metrics["ex"] == metrics["ex_base"] == 0.0
    assert metrics["replies_normalized"] == sum(_expected(r) is not None for r in records)
