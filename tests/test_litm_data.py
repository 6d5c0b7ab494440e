"""Lost in the Middle data: reading the files, building contexts, the published-file check, the KV generator, options."""
from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest

from lm_eval_ext.errors import UserError
from lm_eval_ext.litm import contexts, kv_generator, options, published
from lm_eval_ext.litm.records import RecordError, iter_records

PARTIAL = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/"
           "gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


pytestmark = pytest.mark.xdist_group("litm_data")  # one worker builds `partial_examples`

@pytest.fixture(scope="module")
def partial_examples(data_dir):
    path = Path(data_dir) / PARTIAL
    return [contexts.qa_example(r, path, i) for i, r in enumerate(iter_records(path))]


def test_partial_file_reads_441_questions_and_skips_the_cut_line(data_dir, partial_examples, caplog):
    assert len(partial_examples) == 441
    first = partial_examples[0]
    assert first.question == "who got the first nobel prize in physics"
    assert first.gold["title"] == "List of Nobel laureates in Physics" and first.gold["isgold"] is True
    # first release: first distractor is "Asian Americans in science and technology" (FORMAT.md)
    assert first.distractors[0]["id"] == "20769157" and len(first.distractors) == 19
    list(iter_records(Path(data_dir) / PARTIAL))
    assert "skipped 1 line(s)" in caplog.text and "line 442" in caplog.text


def test_contexts_for_any_position_and_k(partial_examples):
    example = partial_examples[0]
    ids = lambda ctxs: [c.get("id", "GOLD") for c in ctxs]  # noqa: E731
    d = [c["id"] for c in example.distractors]
    assert ids(contexts.qa_context(example, 20, 0)) == ["GOLD"] + d
    assert ids(contexts.qa_context(example, 20, 19)) == d + ["GOLD"]
    assert ids(contexts.qa_context(example, 20, 7)) == d[:7] + ["GOLD"] + d[7:]
    # k = 10: the first 9 distractors of the 20-document list
    assert ids(contexts.qa_context(example, 10, 4)) == d[:4] + ["GOLD"] + d[4:9]
    with pytest.raises(RecordError, match="30 documents need 29"):
        contexts.qa_context(example, 30, 0)


def test_authors_random_order_matches_a_global_seed_0_shuffle(partial_examples):
    # The authors: random.seed(0) once, then random.shuffle(distractors) per question in file order.
    random.seed(0)
    expected = []
    for example in partial_examples[:5]:
        distractors = list(example.distractors)
        random.shuffle(distractors)
        expected.append([c["id"] for c in distractors])
    orders = contexts.authors_random_orders(5, 19)
    for example, order, want in zip(partial_examples, orders, expected):
        built = contexts.qa_context(example, 20, 9, order)
        assert built[9] is example.gold
        assert [c["id"] for c in built[:9] + built[10:]] == want


def test_published_check_passes_on_equal_and_names_differences(partial_examples, tmp_path):
    examples = partial_examples[:3]
    # A "published gold_at_4" file written with plain list operations, independently of qa_context.
    records = []
    for e in examples:
        ctxs = list(e.distractors[:19])
        ctxs.insert(4, e.gold)
        records.append({"question": e.question, "answers": list(e.answers), "ctxs": ctxs})
    assert published.mismatches(examples, 20, 4, records) == []
    records[1]["ctxs"][5], records[1]["ctxs"][6] = records[1]["ctxs"][6], records[1]["ctxs"][5]
    assert published.mismatches(examples, 20, 4, records) == [f"record 2 ({examples[1].question!r}): passages differ"]
    with pytest.raises(UserError, match="differ from the published file"):
        published.check_published(examples, 20, 4, records, tmp_path / "nq.jsonl.gz")
    assert published.mismatches(examples, 20, 9, records[:1])  # a different position does not match


def test_published_paths_and_absence(data_dir):
    assert published.published_relpath(30, 24) == "qa_data/30_total_documents/nq-open-30_total_documents_gold_at_24.jsonl.gz"
    assert published.local_published_file(20, 4) is None  # not in the mirror: nothing is downloaded
    assert published.local_published_file(20, 7) is None  # not a published position


def test_qa_record_without_exactly_one_gold_is_an_error(tmp_path):
    with pytest.raises(RecordError, match="has 0 passages marked isgold=true"):
        contexts.qa_example({"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "x"}]}, tmp_path, 0)
    with pytest.raises(RecordError, match="has no 'answers'"):
        contexts.qa_example({"question": "q", "ctxs": []}, tmp_path / "f.jsonl", 0)


def test_kv_move_keeps_the_other_pairs_in_order(data_dir):
    path = Path(data_dir) / "lost_in_the_middle/kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz"
    example = contexts.kv_example(next(iter_records(path)), path, 0)
    assert example.query_index == 18  # FORMAT.md: the first record's queried pair is at index 18
    others = [p for p in example.pairs if p[0] != example.key]
    for position in (0, 24, 49, 74):
        moved = contexts.kv_context(example, position)
        assert moved[position] == (example.key, example.value)
        assert moved[:position] + moved[position + 1:] == others


def test_generator_is_seeded_and_in_the_published_format(tmp_path):
    records = kv_generator.generate_kv_records(7, 3, seed=11)
    assert records == kv_generator.generate_kv_records(7, 3, seed=11)
    assert records != kv_generator.generate_kv_records(7, 3, seed=12)
    for index, record in enumerate(records):
        assert list(record) == ["ordered_kv_records", "key", "value"]
        assert len(record["ordered_kv_records"]) == 7 and len({k for k, _ in record["ordered_kv_records"]}) == 7
        assert all(UUID4.match(x) for pair in record["ordered_kv_records"] for x in pair)
        assert [record["key"], record["value"]] in record["ordered_kv_records"]
        contexts.kv_example(record, "generated", index)  # reads like a published record
    path = kv_generator.write_kv_records(tmp_path / "kv.jsonl.gz", records)
    assert [json.loads(line) for line in gzip.open(path, "rt")] == records
    kv_generator.main(["--pairs", "7", "--examples", "3", "--seed", "11", "--out", str(tmp_path / "cli.jsonl")])
    assert list(iter_records(tmp_path / "cli.jsonl")) == records
    with pytest.raises(UserError, match="at least 2"):
        kv_generator.generate_kv_records(1, 3)


def test_positions_options():
    assert options.parse_positions("all", 4, "t") == (0, 1, 2, 3)
    assert options.parse_positions([19, 0, 9, 9], 20, "t") == (0, 9, 19)
    assert options.parse_positions("0 9;19", 20, "t") == (0, 9, 19)
    assert options.parse_positions(5, 20, "t") == (5,)
    with pytest.raises(UserError, match=r"gold positions \[20\] are outside 0..19"):
        options.parse_positions([0, 20], 20, "t")
    with pytest.raises(UserError, match="not understood"):
        options.parse_positions("middle", 20, "t")
    assert options.quarter_positions(140) == (0, 34, 69, 104, 139)  # the paper's 140-pair positions
    assert options.quarter_positions(2) == (0, 1)


def test_setup_from_yaml_and_metadata():
    setup = options.setup_from("litm_qa_20docs", {"setting": "qa", "k": 20, "positions": [0, 4, 9, 14, 19]}, {})
    assert (setup.k, setup.positions, setup.too_long, setup.swept) == (20, (0, 4, 9, 14, 19), "skip", True)
    setup = options.setup_from("x", {"setting": "qa", "k": 20, "positions": [0]}, {"litm_positions": "all", "litm_too_long": "truncate"})
    assert setup.positions == tuple(range(20)) and setup.too_long == "truncate"
    assert options.setup_from("o", {"setting": "oracle"}, {}).positions == ()
    generated = options.setup_from("g", {"setting": "kv", "generated": True}, {"litm_kv_pairs": 12, "litm_kv_seed": 3})
    assert (generated.k, generated.positions, generated.kv_examples, generated.kv_seed) == (12, (0, 2, 5, 8, 11), 500, 3)
    with pytest.raises(UserError, match=re.escape("""--metadata '{"litm_kv_pairs": 1000}'""")):
        options.setup_from("g", {"setting": "kv", "generated": True}, {})
    with pytest.raises(UserError, match="litm_too_long='cut'"):
        options.setup_from("x", {"setting": "qa", "k": 20}, {"litm_too_long": "cut"})
    # true or false in any spelling the other options take; anything else is an error, not "true"
    assert options.setup_from("o", {"setting": "oracle"}, {}).verify_published is True
    assert options.setup_from("o", {"setting": "oracle"}, {"litm_verify_published": "false"}).verify_published is False
    assert options.setup_from("o", {"setting": "oracle"}, {"litm_verify_published": False}).verify_published is False
    with pytest.raises(UserError, match=re.escape("""o: litm_verify_published='nope' must be true or false (e.g. """
                                                  """--metadata '{"litm_verify_published": false}')""")):
        options.setup_from("o", {"setting": "oracle"}, {"litm_verify_published": "nope"})


@pytest.mark.parametrize("metadata,message", [
    # the litm_ name space is the options': any other key in it is one misspelled
    ({"litm_postions": "all"}, "--metadata 'litm_postions' is no Lost in the Middle option; did you mean "
                               "'litm_positions'? The options are litm_positions, litm_too_long, "),
    ({"litm_shuffle": True}, "--metadata 'litm_shuffle' is no Lost in the Middle option. The options are "),
    # and a slip in the prefix
    ({"ltim_positions": "all"}, "--metadata 'ltim_positions' is no Lost in the Middle option; did you mean "
                                "'litm_positions'? The options are litm_positions, litm_too_long, "),
])
def test_a_misspelled_option_is_caught_when_the_task_is_built(data_dir, metadata, message):
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    with pytest.raises(UserError, match=re.escape(f"litm_qa_oracle: {message}")):
        manager.load(["litm_qa_oracle"])


def test_other_keys_are_not_the_options_business():
    """The harness puts the model's arguments in the same dictionary, and a user's own keys may be there too."""
    from lm_eval_ext.errors import misspelled_key
    from lm_eval_ext.litm.task import LitmTask

    assert misspelled_key({"pretrained": "m", "litm": 1, "judge_model": "j", "my_litm_note": "x"}, LitmTask.OPTIONS,
                          LitmTask.PREFIX) is None
