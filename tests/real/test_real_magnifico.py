"""MAGNIFICo on SmolLM2-135M-Instruct through real vLLM: one task of each prompt setting (description, few-shot,
dialogue, phrase), with and without the chat template.

What a researcher reads in the samples must be there and agree: each raw reply (``resps``), the SQL taken from
it (the execution record's ``prediction``, which is the documented rule applied to that reply: the paper's
``SELECT`` + completion, or the chat path's query), and what executing it gave (``executed``, ``error``, ``ex``),
with the path in the results' metadata. The model is too small to write much correct SQL: its replies are the
test, whatever they say; each is cut at 64 tokens (the tasks allow 128).
"""
from __future__ import annotations

import json

import pytest

from helpers import real
from helpers.harness import filtered
from lm_eval_ext.magnifico.replies import reply_query

pytestmark = pytest.mark.xdist_group("real_engines")
# documents alternate novel and base items: one of each, but one novel item of the dialogue task, whose prompts
# (4,400 tokens) cost as much as the other three tasks' together
SAMPLES = {"magnifico_description_plausible": [0, 1], "magnifico_fewshot_plausible": [0, 1],
           "magnifico_dialogue_start_plausible": [0], "magnifico_phrase_direct": [0, 1]}
GEN_KWARGS = "max_gen_toks=64"


@pytest.fixture(scope="module", params=[False, True], ids=["completion", "chat"])
def runs(request, vllm_lm, real_model_dir, data_dir) -> tuple[bool, dict]:
    results = real.evaluate(vllm_lm, list(SAMPLES), real.length_metadata(real_model_dir), samples=SAMPLES,
                            apply_chat_template=request.param, log_samples=True, gen_kwargs=GEN_KWARGS,
                            confirm_run_unsafe_code=True)
    return request.param, results


def test_each_sample_shows_the_reply_the_sql_taken_from_it_and_what_it_gave(runs):
    chat, results = runs
    for task, docs in SAMPLES.items():
        assert results["configs"][task]["metadata"]["reply_format"] == ("chat" if chat else "completion"), task
        samples = results["samples"][task]
        assert sorted(sample["doc_id"] for sample in samples) == docs, task
        for sample in samples:
            reply = sample["resps"][0][0]
            assert isinstance(reply, str), (task, sample["doc_id"])
            record = json.loads(filtered(sample))
            assert record["prediction"] == reply_query(reply, chat).sql, (task, sample["doc_id"], reply)
            assert record["executed"] == (record["error"] is None), record
            assert record["ex"] in (0, 1) and (record["executed"] or record["ex"] == 0), record
            if not chat:  # the paper's stops end a completion before its first ; or blank line
                assert not any(stop in reply for stop in (";", "\n\n")), (task, reply)

