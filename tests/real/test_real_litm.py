"""Lost in the Middle on SmolLM2-135M-Instruct through `hf` and real vLLM, with and without the chat template.

Closed-book, oracle, a multi-document QA sweep (10 documents, the gold passage at positions 1, 5 and 10; the
distractors from the mirror's partial first-release file) and a generated key-value sweep, greedy: the two engines
give the same answer to at least 95% of the items, the same score wherever the answers are the same, and the gold
passage helps (oracle above closed-book). The runs go through `simple_evaluate` with each engine's model, each
reply cut at 24 tokens (the tasks ask for 100 and stop at nothing; the answer scored is the reply's first line).
"""
from __future__ import annotations

import pytest

from helpers import real

pytestmark = pytest.mark.xdist_group("real_engines")
PARTIAL = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/"
           "20_total_documents/gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored"
           ".jsonl.gz")
# documents per task: 10 questions; one question at the sweep's 3 positions; one key-value example at its 5
LIMITS = {"litm_qa_closedbook": 10, "litm_qa_oracle": 10, "litm_qa_10docs": 3, "litm_kv_generated": 5}
KV_PAIRS = 10
GEN_KWARGS = "max_gen_toks=24"


def run(lm, model_dir, data_dir, chat: bool) -> dict:
    """The four tasks on ``lm``, each with its own limit; the samples of every task by doc_id."""
    metadata = {"litm_qa_file": str(data_dir / PARTIAL), "litm_kv_pairs": KV_PAIRS, **real.length_metadata(model_dir)}
    samples = {}
    for task, limit in LIMITS.items():
        results = real.evaluate(lm, [task], metadata, limit=limit, apply_chat_template=chat, log_samples=True,
                                gen_kwargs=GEN_KWARGS)
        samples[task] = {s["doc_id"]: s for s in results["samples"][task]}
        assert len(samples[task]) == limit, task
    return samples


@pytest.fixture(scope="module", params=[False, True], ids=["completion", "chat"])
def both(request, hf_lm, vllm_lm, real_model_dir, data_dir) -> dict:
    return {engine: run(lm, real_model_dir, data_dir, request.param) for engine, lm in (("hf", hf_lm), ("vllm", vllm_lm))}


def answer(sample: dict) -> str:
    """The model's raw answer."""
    return sample["resps"][0][0]


def test_hf_and_vllm_give_the_same_answers(both):
    same = total = 0
    for task, hf_samples in both["hf"].items():
        for doc_id, sample in hf_samples.items():
            theirs = both["vllm"][task][doc_id]
            assert sample["arguments"] == theirs["arguments"], (task, doc_id)  # the same prompt was sent
            total += 1
            if answer(sample) == answer(theirs):
                same += 1
                assert sample["acc"] == theirs["acc"], (task, doc_id)
    assert same >= 0.95 * total, f"{same} of {total} answers are the same"


def test_the_gold_passage_helps(both):
    for engine, samples in both.items():
        oracle = sum(s["acc"] for s in samples["litm_qa_oracle"].values())
        closed_book = sum(s["acc"] for s in samples["litm_qa_closedbook"].values())
        assert oracle > closed_book, (engine, oracle, closed_book)


def test_the_sweeps_cover_every_position(both):
    for engine, samples in both.items():
        assert sorted(s["doc"]["gold_index"] for s in samples["litm_qa_10docs"].values()) == [0, 4, 9], engine
        assert len({s["doc"]["gold_index"] for s in samples["litm_kv_generated"].values()}) == 5, engine
