"""ELITR-Bench on SmolLM2-135M-Instruct: single-turn and dependent multi-turn on `hf` and real vLLM, the transcripts
fitted to the context, judged three ways.

- plain `lm_eval run --model hf` (the authors' raw format), judged by the stub judge: every answer gets the stub's
  score for it, none is lost;
- `simple_evaluate` with the harness's `vllm` model and the chat template, judged by the same model served by
  `vllm serve`: every verdict is a score its reply holds, or a failure counted as unparseable, never a score the
  reply does not hold;
- the hf run's single-turn answers judged through vLLM's offline batch runner on the plugin's batch request file
  (`lm-eval-ext elitr score --judge-batch --dry-run`), collected with `lm-eval-ext judge collect`: the final score
  command calls no judge (its endpoint does not exist) and takes every verdict from the collected replies.

The meetings' transcripts are far longer than the context given here (`max_length`), so every prompt is fitted
(`overflow=truncate`): lines from the transcript's middle are left out and counted.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import real
from helpers.harness import filtered
from helpers.judge import KEY_ENV, answering_the_probe, response_of

pytestmark = pytest.mark.xdist_group("real_server")
ST, MT = "elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt"
LIMIT = 2  # the first two questions of the first meeting (multi-turn: turns 1 and 2)
CONTEXT = 1024  # tokens: each prompt is fitted to it
GEN_KWARGS = "max_gen_toks=64"
JUDGE_OPTIONS = {"judge_api_key_env": KEY_ENV, "judge_max_tokens": 128, "overflow": "truncate"}


def stub_score(request: dict) -> str:
    """The stub judge's reply: a score that depends on the answer judged."""
    return f"Feedback: read.\n\\boxed{{{1 + len(response_of(request)) % 10}}}"


def command(name: str, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    """An installed command of this venv (a process of its own), which must succeed."""
    proc = subprocess.run([str(Path(sys.executable).parent / name), *args], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{name} {' '.join(args)}:\n{proc.stderr[-4000:]}"
    return proc


def judge_records(samples: list[dict]) -> list[dict]:
    """The judge's record of each sample (the judge filter's output)."""
    return [json.loads(filtered(s)) for s in samples]


@pytest.fixture(scope="module")
def judge_key():
    """The judges' API key variable (the local servers take any key)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, "EMPTY")
        yield


@pytest.fixture(scope="module")
def runs(request, real_model_dir, data_dir, tmp_path_factory, judge_key) -> tuple[Path, dict]:
    """The hf run's results folder (in a process of its own, computing while this one starts vLLM and its server and
    drives them) and the vLLM run's results."""
    from doubles.stub_openai import StubOpenAIServer

    out = tmp_path_factory.mktemp("elitr_hf")
    with StubOpenAIServer(responder=answering_the_probe(stub_score), models=["stub-judge"]) as judge:
        stubbed = {**JUDGE_OPTIONS, "judge_base_url": judge.base_url, "judge_model": "stub-judge",
                   "judge_cache": str(out / "judge.sqlite")}
        with real.LmEvalRun(["--model", "hf", "--model_args", real.model_args(
                                {"pretrained": real_model_dir, "dtype": "float32", "max_length": CONTEXT}),
                             "--device", "cpu", "--batch_size", real.HF_BATCH, "--tasks", f"{ST},{MT}", "--limit",
                             LIMIT, "--gen_kwargs", GEN_KWARGS, "--metadata", json.dumps(stubbed)], out) as hf:
            server = request.getfixturevalue("vllm_server")  # starts in the background
            vllm_lm = request.getfixturevalue("vllm_lm")
            # the small model's reply to the judge's probe holds no score (it does not follow the rubric's format):
            # the probe would stop the run, so it is turned off, as its message says to for a judge one means to use
            served = {**JUDGE_OPTIONS, **real.length_metadata(real_model_dir, CONTEXT),
                      "judge_base_url": server.url(), "judge_model": real.SERVED_NAME, "judge_check": False,
                      "judge_cache": str(tmp_path_factory.mktemp("elitr_vllm") / "judge.sqlite")}
            vllm = real.evaluate(vllm_lm, [ST, MT], served, limit=LIMIT, gen_kwargs=GEN_KWARGS,
                                 apply_chat_template=True, log_samples=True)
            hf.results()
    return out, vllm


@pytest.fixture(scope="module")
def hf_run(runs) -> Path:
    return runs[0]


@pytest.fixture(scope="module")
def vllm_run(runs) -> dict:
    return runs[1]


def hf_samples(out: Path, task: str) -> list[dict]:
    return list(real.samples(out, task).values())


def test_every_prompt_is_fitted_to_the_context(hf_run, vllm_run):
    for engine, samples in (("hf", {t: hf_samples(hf_run, t) for t in (ST, MT)}), ("vllm", vllm_run["samples"])):
        for task in (ST, MT):
            assert len(samples[task]) == LIMIT, (engine, task)
            assert all(sample["prompts_truncated"] == 1 for sample in samples[task]), (engine, task)
        for sample in samples[MT]:  # each turn records the transcript lines it left out
            assert json.loads(sample["resps"][0][0])["truncated_lines"] > 0, (engine, sample["doc_id"])


def test_later_turns_hold_the_models_own_earlier_answers(hf_run, vllm_run):
    for engine, samples in (("hf", hf_samples(hf_run, MT)), ("vllm", vllm_run["samples"][MT])):
        turns = sorted((json.loads(s["resps"][0][0]) for s in samples), key=lambda turn: turn["turn"])
        assert [turn["turn"] for turn in turns] == list(range(1, LIMIT + 1)), engine
        for later in turns[1:]:
            answers = [m["content"] for m in later["messages"] if m["role"] == "assistant"]
            assert answers == [turn["text"].strip() for turn in turns[: later["turn"] - 1]], (engine, later["turn"])


def answer(sample: dict, task: str) -> str:
    """The model's answer in a sample (a multi-turn sample's response is its turn's record)."""
    reply = sample["resps"][0][0]
    return json.loads(reply)["text"] if task == MT else reply


def test_the_stub_judge_scores_every_answer_with_its_own_score(hf_run):
    results = json.loads(next(hf_run.rglob("results_*.json")).read_text())["results"]
    for task in (ST, MT):
        for sample in hf_samples(hf_run, task):
            record = json.loads(filtered(sample))
            # the judge template holds the answer stripped; the stub scored that
            assert record["status"] == "scored" and record["raw_score"] == 1 + len(answer(sample, task).strip()) % 10
        assert results[task]["judge_failures,judge"] == 0


def test_a_real_judge_scores_what_its_replies_hold_and_counts_the_rest(vllm_run):
    from lm_eval_ext.judge.parser import PARSERS

    for task in (ST, MT):
        records = judge_records(vllm_run["samples"][task])
        for record in records:
            assert record["judge_outputs"], record  # every verdict keeps what the judge said
            parsed = PARSERS["boxed"].parse(record["judge_outputs"][-1], 1, 10).raw_score  # the rubric judge's
            if record["status"] == "scored":
                assert record["raw_score"] == parsed, record
            else:
                assert record["failure"] == "unparseable" and parsed is None, record
        failed = sum(record["status"] != "scored" for record in records)
        assert vllm_run["results"][task]["judge_failures,judge"] == failed, task


def test_vllms_batch_runner_judges_the_plugins_request_file(hf_run, real_model_dir, tmp_path, judge_key):
    """The documented path for a local judge without a server: a dry run writes the request file, vLLM's
    `run_batch` answers it, `judge collect` puts the replies in the judge's cache, and the scoring command then
    takes every verdict from there (one ask each: a re-ask would need a live call)."""
    from lm_eval_ext.judge.parser import PARSERS

    (samples,) = hf_run.rglob(f"samples_{ST}_*.jsonl")
    nowhere = f"http://127.0.0.1:{real.free_port()}/v1"  # nothing listens here: a judge call would fail the command
    judge = ["--judge-base-url", nowhere, "--judge-model", real.SERVED_NAME, "--judge-api-key-env", KEY_ENV,
             "--judge-cache", str(tmp_path / "judge.sqlite"), "--judge-max-tokens", "128", "--judge-reasks", "0",
             "--no-judge-check"]
    dry = command("lm-eval-ext", "elitr", "score", str(samples), "--judge-batch", "--dry-run", *judge)
    (requests,) = {Path(p) for p in re.findall(r"(\S+\.jsonl)", dry.stdout + dry.stderr) if Path(p).is_file()}
    replies = tmp_path / "replies.jsonl"
    command("python", "-m", "vllm.entrypoints.openai.run_batch", "-i", str(requests), "-o", str(replies), "--model",
            str(real_model_dir), "--served-model-name", real.SERVED_NAME, "--dtype", "float32", "--max-model-len",
            str(real.MAX_MODEL_LEN), "--enforce-eager")
    command("lm-eval-ext", "judge", "collect", str(replies), "--judge-cache", str(tmp_path / "judge.sqlite"))
    report = json.loads(command("lm-eval-ext", "elitr", "score", str(samples), "--json", *judge).stdout)

    texts = [json.loads(line)["response"]["body"]["choices"][0]["message"]["content"]
             for line in replies.read_text().splitlines()]
    assert len(texts) == LIMIT  # one request per answer, each answered
    scores = [PARSERS["boxed"].parse(text, 1, 10).raw_score for text in texts]
    assert report["judge"]["run"]["calls"] == 0 and report["judge"]["run"]["from_cache"] == LIMIT
    (model,) = report["models"].values()
    assert model["n_scored"] == sum(score is not None for score in scores)
    assert model.get("judge_failures", 0) == scores.count(None)
    if model["n_scored"]:
        assert model["score"] == pytest.approx(sum(s for s in scores if s is not None) / model["n_scored"])
