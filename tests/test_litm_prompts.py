"""Lost in the Middle prompts, byte for byte.

Two kinds of expectation, neither produced by the code under test: strings written out by
hand below from the paper's prompt formats (Liu et al., TACL 2024), and the prompts the
authors' own code produced on the published data (tests/fixtures/litm_prompts.jsonl).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from helpers.prompts import prompt_mismatch, read_fixture_jsonl

from lm_eval_ext.litm import prompts

pytestmark = pytest.mark.xdist_group("litm_prompts")  # one worker builds `litm_tasks`

PARTIAL = ("partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/gpt_reordered/"
           "nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")
INSTRUCTION = ("Write a high-quality answer for the given question using only the provided search results "
               "(some of which might be irrelevant).")
PASSAGES = [{"title": "T one", "text": "first text."}, {"title": "T two", "text": "second {braces} text"}]


def qa_prompt(question: str, passages: list, variant: str = "plain") -> str:
    return "".join(prompts.qa_prompt_pieces(question, passages, variant))


def kv_prompt(pairs: list, key: str, query_aware: bool = False) -> str:
    return "".join(prompts.kv_prompt_pieces(pairs, key, query_aware))


def test_qa_prompt_by_hand():
    expected = (INSTRUCTION + "\n\n"
                "Document [1](Title: T one) first text.\n"
                "Document [2](Title: T two) second {braces} text\n\n"
                "Question: who am i\nAnswer:")
    assert qa_prompt("who am i", PASSAGES) == expected


def test_query_aware_and_random_order_prompts_by_hand():
    docs = "Document [1](Title: T one) first text.\nDocument [2](Title: T two) second {braces} text"
    assert qa_prompt("q", PASSAGES, "query_aware") == (
        INSTRUCTION + "\n\nQuestion: q\n\n" + docs + "\n\nQuestion: q\nAnswer:")
    assert qa_prompt("q", PASSAGES, "random_order") == (
        INSTRUCTION[:-1] + ". The search results are ordered randomly.\n\n" + docs + "\n\nQuestion: q\nAnswer:")


def test_closedbook_prompt_by_hand():
    assert prompts.closedbook_prompt("who am i") == "Question: who am i\nAnswer:"


def test_kv_layout_by_hand():
    pairs = [("k1", "v1"), ("k2", "v2"), ("k3", "v3")]
    data = '{"k1": "v1",\n "k2": "v2",\n "k3": "v3"}'
    assert "".join(prompts.kv_record_pieces(pairs)) == data
    head = "Extract the value corresponding to the specified key in the JSON object below.\n\n"
    assert kv_prompt(pairs, "k2") == head + "JSON data:\n" + data + '\n\nKey: "k2"\nCorresponding value:'
    assert kv_prompt(pairs, "k2", query_aware=True) == (
        head + 'Key: "k2"\n\nJSON data:\n' + data + '\n\nKey: "k2"\nCorresponding value:')
    assert "".join(prompts.kv_record_pieces([("a", "b")])) == '{"a": "b"}'


# The prompt texts Liu et al. (TACL 2024) define, pinned by sha256: the shipped templates must not
# drift from them (the fixture prompts below check what they produce against the authors' code).
PUBLISHED_TEMPLATES = {
    "litm_closedbook_qa.txt": "4ec52b8bd55238a9434fafe6c404fdf7bb86783396c74a30f57bacf57e09dec0",
    "litm_kv_retrieval.txt": "c6e34e29e19dbed9ac4d1a51c31c64cdad5b9f68a87f4348fc0f3d320541db45",
    "litm_kv_retrieval_with_query_aware_contextualization.txt": "13e0bc3b51dc470a8ba1195a6acf701fa6579363d7bbae123c7737d1b0e0d601",
    "litm_qa.txt": "368a84fe24373cc0a3a789ce5e62e6854994ece138747c93c76f25aafea25411",
    "litm_qa_ordered_randomly.txt": "e3fb49897502903ff46db87f770d253f93e0d11c5bd4e1b48451c5cf4d4c4f67",
    "litm_qa_with_query_aware_contextualization.txt": "a8fc324045a6eb3fb1ad52264dcf9bbadd4cd93ed025e27da93e2d5e0d8dabf3",
}


def test_templates_are_byte_copies_of_the_published_prompts():
    from lm_eval_ext.paths import templates_dir

    assert sorted(p.name for p in templates_dir().glob("litm_*.txt")) == sorted(PUBLISHED_TEMPLATES)
    for name, sha256 in PUBLISHED_TEMPLATES.items():
        assert hashlib.sha256((templates_dir() / name).read_bytes()).hexdigest() == sha256, name


def _examples() -> list[dict]:
    return read_fixture_jsonl("litm_prompts.jsonl")


@pytest.fixture(scope="module")
def litm_tasks(data_dir):
    """The tasks of the example file, built by the harness from the plugin's YAMLs (20-doc data: the partial file)."""
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir

    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"litm_qa_file": str(Path(data_dir) / "lost_in_the_middle" / PARTIAL)})
    names = ["litm_qa_oracle", "litm_qa_closedbook", "litm_qa_20docs", "litm_qa_20docs_qac", "litm_kv_75keys", "litm_kv_75keys_qac"]
    tasks = manager.load(names)["tasks"]
    oracle = TaskManager(include_path=str(tasks_dir()), include_defaults=False).load(["litm_qa_oracle", "litm_qa_closedbook"])
    return {**tasks, **oracle["tasks"]}  # oracle and closed-book from the published oracle file


def _find_doc(task, example: dict) -> dict:
    """The task's one doc of the example's question or key and gold position. Read by column: a row holds its
    documents, and reading every row for each example took seconds."""
    field, value = ("key", example["key"]) if "key" in example else ("question", example["question"])
    docs = task.eval_docs
    positions = docs["gold_index"] if "gold_index" in docs.column_names else [None] * len(docs)
    matches = [i for i, (v, p) in enumerate(zip(docs[field], positions)) if v == value and p == example.get("position")]
    assert len(matches) == 1, (example["task"], value)
    return docs[matches[0]]


def test_task_prompts_equal_the_authors_code_output(data_dir, litm_tasks):
    examples = _examples()
    assert len(examples) == 30
    for example in examples:
        task = litm_tasks[example["task"]]
        problem = prompt_mismatch(task.doc_to_text(_find_doc(task, example)), example)
        assert problem is None, (example["task"], example.get("position"), problem)


def test_harness_requests_carry_the_prompt_unchanged(data_dir, litm_tasks):
    """What the harness sends to the model (fewshot_context + construct_requests) is the prompt, nothing added."""
    by_task = {}
    for example in _examples():
        by_task.setdefault(example["task"], example)
    for name, example in by_task.items():
        task = litm_tasks[name]
        task.build_all_requests(limit=len(task.eval_docs))
        doc = _find_doc(task, example)
        (instance,) = [i for i in task.instances if i.doc["doc_key"] == doc["doc_key"]]
        assert prompt_mismatch(instance.args[0], example) is None, name
        assert instance.args[1] == {"until": [], "max_gen_toks": 100, "do_sample": False, "temperature": 0.0}
