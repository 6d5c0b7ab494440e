"""A served model's context length and tokenizer: the prompt-length check asks the server (vLLM's ``GET /v1/models``
``max_model_len`` and ``POST /tokenize``) when the model arguments leave them out.

The server is the stub in vLLM's guise (``max_model_len=``, ``tokenize=True``), whose replies are those of a real
``vllm serve`` of SmolLM2-135M-Instruct (tests/fixtures/real/served/): a prompt's tokens are its words, and a chat's
are those words plus what SmolLM2's template adds, which the captured replies give: one user message "Hello" is 31
tokens, "Hello" alone one (``CHAT_TOKENS``). So each prompt's count, and whether it fits, is known here without
asking the code under test.
"""
from __future__ import annotations

import json
import logging
import re

import pytest

from helpers.harness import skip_where_broken

from doubles.stub_openai import CAPTURED, StubOpenAIServer
from lm_eval_ext.prompt_length import LengthCheckError, PromptTooLongError, not_checked_reason, resolve_budget

MODEL = "smollm2"
# what SmolLM2's chat template adds around one user message, from the captured /tokenize replies
CHAT_TOKENS = (json.loads((CAPTURED / "tokenize_messages.json").read_text())["count"]
               - len(json.loads((CAPTURED / "tokenize_prompt.json").read_text())["tokens"]) + 1)
SERVED = "tokens counted by the server's /tokenize"
CHAT, COMPLETIONS = "local-chat-completions", "local-completions"


def words(text: str) -> int:
    """A prompt's tokens on the stub: its words, each with the blanks before it."""
    return len(re.findall(r"\s*\S+|\s+$", text))


@pytest.fixture(autouse=True)
def fresh_budgets():
    forget_servers()


def forget_servers() -> None:
    """Forget the budgets resolved so far: the process keeps what a server said (it is asked once), and a new stub
    may get the port of one before it."""
    from lm_eval_ext import prompt_length

    prompt_length._resolved.cache_clear()


def vllm(**options) -> StubOpenAIServer:
    forget_servers()
    return StubOpenAIServer(model=MODEL, max_model_len=options.pop("max_model_len", 4096), tokenize=True, **options)


def url(srv: StubOpenAIServer, model: str) -> str:
    return srv.chat_url if model == CHAT else srv.completions_url


def test_chat_overhead_from_the_captured_replies():
    assert CHAT_TOKENS == 31 - 2 + 1 == 30


# -- where the length and the tokens come from ----------------------------------------------------------------


def test_length_and_tokens_from_the_server():
    with vllm() as srv:
        budget = resolve_budget({"base_url": srv.chat_url, "model": MODEL})
        assert budget.describe() == f"context length 4096 (the server's max_model_len), {SERVED}"
        counts = budget.count_tokens(["Hello world", [{"role": "user", "content": "Hello"}]])
        paths = [r["path"] for r in srv.requests]
    assert counts == [2, 31]  # the captured replies' counts
    assert paths == ["/v1/models", "/tokenize", "/tokenize", "/tokenize"]  # the list, a probe, the two counts
    # max_length in the model arguments wins over the server's; the server still counts
    with vllm() as srv:
        budget = resolve_budget({"base_url": srv.chat_url, "model": MODEL, "max_length": 3000})
        assert budget.describe() == f"context length 3000 (max_length=3000), {SERVED}"
        assert [r["path"] for r in srv.requests] == ["/tokenize"]


def test_a_local_tokenizer_counts_when_one_loads(tiny_model_dir):
    with vllm() as srv:
        named = resolve_budget({"base_url": srv.chat_url, "model": MODEL, "tokenizer": str(tiny_model_dir)})
        assert [r["path"] for r in srv.requests] == ["/v1/models"]  # the server's length; no /tokenize
    assert named.describe() == f"context length 4096 (the server's max_model_len), tokens counted with {tiny_model_dir}"
    forget_servers()
    with StubOpenAIServer(model=str(tiny_model_dir), max_model_len=4096, tokenize=True) as srv:
        model_is_one = resolve_budget({"base_url": srv.chat_url, "model": str(tiny_model_dir)})
        assert [r["path"] for r in srv.requests] == ["/v1/models"]
    assert model_is_one.tokenizer_name == str(tiny_model_dir)


def test_a_named_tokenizer_must_load(tmp_path):
    missing = str(tmp_path / "no-such-tokenizer")
    with vllm() as srv, pytest.raises(LengthCheckError, match="cannot load a tokenizer for .*no-such-tokenizer"):
        resolve_budget({"base_url": srv.chat_url, "model": MODEL, "tokenizer": missing})


def test_an_adapter_that_tokenizes_cuts_at_its_own_max_length():
    """local-completions with a tokenizer (the harness's default) cuts prompts at its max_length, 2048 unless given."""
    with vllm() as srv:
        tokenized = resolve_budget({"base_url": srv.completions_url, "model": MODEL})
        text = resolve_budget({"base_url": srv.completions_url, "model": MODEL, "tokenizer_backend": "none"})
        untokenized = resolve_budget({"base_url": srv.completions_url, "model": MODEL, "tokenized_requests": False})
        small = resolve_budget({"base_url": srv.completions_url, "model": MODEL, "tokenizer_backend": "huggingface"})
    assert tokenized.max_length == 2048 and tokenized.describe() == (
        "context length 2048 (the API adapter's default max_length, where it cuts the prompts it tokenizes; the "
        f"server's max_model_len is 4096: give max_length=4096 to use it), {SERVED}")
    assert text.max_length == untokenized.max_length == 4096 and small.max_length == 2048
    with vllm(max_model_len=1024) as srv:  # a server shorter than the adapter's default: the server's
        assert resolve_budget({"base_url": srv.completions_url, "model": MODEL}).max_length == 1024


def test_servers_that_offer_neither_leave_todays_behaviour_with_the_reason():
    # a server without max_model_len (OpenAI's, the plain stub): not checked, and the log says why
    with StubOpenAIServer(model=MODEL) as srv:
        port, metadata = srv.port, {"base_url": srv.chat_url, "model": MODEL}
        assert resolve_budget(metadata) is None
        assert not_checked_reason(metadata) == (
            f"no context length in --model_args/--metadata, and the server at http://127.0.0.1:{port} lists no "
            f"max_model_len for '{MODEL}' (GET /v1/models)")
        # with max_length: today's paragraph, with what the server answered
        with pytest.raises(LengthCheckError) as err:
            resolve_budget({**metadata, "max_length": 4096})
    assert str(err.value) == (
        f"Prompt-length check: cannot load a tokenizer for '{MODEL}' (neither a Hugging Face tokenizer available here "
        f"nor an OpenAI model known to tiktoken, and the server at http://127.0.0.1:{port} answered POST /tokenize "
        """with HTTP 404), so prompt lengths cannot be checked against the context length. Give one with --metadata """
        """'{"tokenizer": "NAME"}' (a local directory or a cached Hugging Face name), or drop max_length to run """
        "without the check.")
    # a model the server does not serve; a length but no tokens: not checked either
    with vllm(models=["other"]) as srv:
        assert not_checked_reason({"base_url": srv.chat_url, "model": MODEL}).endswith(
            f"serves no model '{MODEL}' (GET /v1/models lists 'other')")
    forget_servers()
    with StubOpenAIServer(model=MODEL, max_model_len=4096) as srv:
        metadata = {"base_url": srv.chat_url, "model": MODEL}
        assert resolve_budget(metadata) is None
        assert not_checked_reason(metadata) == (
            f"the context length is 4096 (the server's max_model_len), but no tokenizer for '{MODEL}' loads here and "
            f"the server at http://127.0.0.1:{srv.port} answered POST /tokenize with HTTP 404; give one with "
            "tokenizer=NAME to check them")
    # a server that cannot be reached
    forget_servers()
    with StubOpenAIServer() as srv:
        port = srv.port
    gone = {"base_url": f"http://127.0.0.1:{port}/v1/chat/completions", "model": MODEL}
    assert resolve_budget(gone) is None
    assert not_checked_reason(gone) == (f"no context length in --model_args/--metadata, and the server at "
                                        f"http://127.0.0.1:{port} cannot be reached (GET /v1/models: ConnectionError)")


def test_the_api_key_is_sent_when_set(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-served-length-0123456789")
    with vllm() as srv:
        resolve_budget({"base_url": srv.chat_url, "model": MODEL}).count_tokens(["a", "b"])
        headers = [r["headers"].get("authorization") for r in srv.requests]
    assert headers == ["Bearer sk-served-length-0123456789"] * 4
    monkeypatch.delenv("OPENAI_API_KEY")
    with vllm() as srv:
        resolve_budget({"base_url": srv.chat_url, "model": MODEL}).count_tokens(["a"])
        assert [r["headers"].get("authorization") for r in srv.requests] == [None] * 3


def test_many_prompts_are_counted_concurrently_and_the_log_says_so(caplog, capsys):
    from lm_eval_ext.served_model import WORKERS

    prompts = [" ".join(["word"] * n) for n in range(1, 13)]
    with vllm(delay_s=0.5) as srv:  # long enough for the requests to overlap on a busy machine
        budget = resolve_budget({"base_url": srv.completions_url, "model": MODEL, "tokenizer_backend": "none"})
        with caplog.at_level(logging.INFO, logger="lm_eval_ext.served_model"):
            counts = budget.count_tokens(prompts)
        assert srv.max_in_flight == WORKERS == 4
        where = f"the server's /tokenize at http://127.0.0.1:{srv.port}"
    assert counts == list(range(1, 13))  # in order
    assert f"Counting the tokens of 12 prompts with {where} (4 requests at a time)" in caplog.text
    assert f"Prompt tokens counted by {where}: 100%" in capsys.readouterr().err  # the bar a plain `lm_eval` shows


def test_a_server_that_stops_counting_is_one_paragraph():
    srv = vllm().start()
    port, budget = srv.port, resolve_budget({"base_url": srv.chat_url, "model": MODEL})
    srv.stop()
    with pytest.raises(LengthCheckError) as err:
        budget.count_tokens(["one", "two"])
    assert str(err.value) == (
        f"Prompt-length check: the server at http://127.0.0.1:{port} cannot be reached (POST /tokenize: "
        "ConnectionError) while the prompts' tokens were being counted. Check that the server is up, or give a "
        """tokenizer that loads here with --metadata '{"tokenizer": "NAME"}' (a local directory or a cached Hugging """
        "Face name).")


# -- whole runs through the harness's API adapters ------------------------------------------------------------


def evaluate(model: str, model_args: dict, task: str, chat: bool, metadata: dict | None = None, **kwargs) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    # the CLI passes the model arguments to the tasks as metadata; an in-process TaskManager needs them given
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={**model_args, **(metadata or {})})
    return lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=[task], task_manager=manager,
                                   apply_chat_template=chat, log_samples=True, **kwargs)


def sent(srv: StubOpenAIServer) -> list[str]:
    """The prompt of every completion request (a chat's one user message)."""
    bodies = [r["body"] for r in srv.requests if r["path"].endswith("completions")]
    return [b["messages"][-1]["content"] if "messages" in b else b["prompt"] for b in bodies]


def prompt_tokens(prompt: str, model: str) -> int:
    return words(prompt) + (CHAT_TOKENS if model == CHAT else 0)


@pytest.mark.parametrize("model", [CHAT, COMPLETIONS])
def test_lost_in_the_middle_skips_what_the_server_cannot_take(data_dir, model, caplog):
    """litm_qa_oracle, 8 questions, 100 tokens to generate, a server with a 250-token context: a prompt is
    skipped exactly when its words (plus the chat template's 30 tokens) and the 100 exceed 250."""
    task, limit, window, gen = "litm_qa_oracle", 8, 250, 100
    with vllm(max_model_len=100_000) as srv:  # every prompt, as sent when all fit
        args = {"base_url": url(srv, model), "model": MODEL, "tokenizer_backend": "none"}
        evaluate(model, args, task, model == CHAT, limit=limit)
        prompts = sent(srv)
    fits = {p for p in prompts if prompt_tokens(p, model) + gen <= window}
    assert len(prompts) == limit and 0 < len(fits) < limit  # both decisions occur
    if model == CHAT:  # and the template's tokens decide some: these would fit as completions
        assert any(words(p) + gen <= window for p in set(prompts) - fits)
    with vllm(max_model_len=window) as srv:
        args = {"base_url": url(srv, model), "model": MODEL, "tokenizer_backend": "none"}
        with caplog.at_level(logging.INFO):
            out = evaluate(model, args, task, model == CHAT, limit=limit)
        assert sorted(sent(srv)) == sorted(fits)  # the others never reached the server
        port = srv.port
        tokenized = [r["body"] for r in srv.requests if r["path"] == "/tokenize"]
    assert len(tokenized) == 1 + limit  # the probe, then each prompt once
    if model == CHAT:  # the server counted the messages, through its own template
        assert all(len(b["messages"]) == 1 and b["add_generation_prompt"] is True for b in tokenized[1:])
    (skipped_key,) = [key for key in out["results"][task] if key.startswith("prompts_skipped,")]
    assert out["results"][task][skipped_key] == limit - len(fits)
    skipped = {json.dumps(s["doc"]["question"]) for s in out["samples"][task] if s["prompts_skipped"]}
    assert len(skipped) == limit - len(fits) and not any(json.loads(q) in p for q in skipped for p in fits)
    described = f"context length {window} (the server's max_model_len), {SERVED}"
    assert out["configs"][task]["metadata"]["prompt_length"] == f"{described}; too long: skip"
    assert f"{task}: {len(fits)} of {limit} prompts fit the {described}" in caplog.text
    assert f"Counting the tokens of {limit} prompts with the server's /tokenize at http://127.0.0.1:{port}" in caplog.text


MEETINGS = ("meeting_en_dev_001", "meeting_en_dev_002", "meeting_en_dev_003")


def by_meeting(data_dir, prompts: list[str]) -> dict[str, str]:
    """The prompts by the meeting whose transcript they hold (its first line, which a shortened prompt keeps)."""
    first = {}
    for meeting in MEETINGS:
        folder = data_dir / "elitr_bench/ELITR-minuting-corpus/elitr-minuting-corpus-en/dev" / meeting
        (path,) = sorted(folder.glob("transcript_MAN*"))
        first[meeting] = path.read_text(encoding="utf-8").splitlines()[0]
    found = {next(m for m in MEETINGS if first[m] in prompt): prompt for prompt in prompts}
    assert len(found) == len(prompts)
    return found


@skip_where_broken("samples")
@pytest.mark.parametrize("model", [CHAT, COMPLETIONS])
def test_elitr_single_turn_against_the_servers_context(data_dir, model, monkeypatch):
    """A question of each of three meetings (transcripts of 9,547, 6,932 and 5,845 words) on a server with a
    7,460-token context and 512 tokens to generate: as completions the two shorter prompts fit; as chats
    (30 tokens more) only the shortest. ``overflow=error`` stops before anything is generated, naming the
    prompt that does not fit; ``truncate`` shortens exactly those, to prompts that fit."""
    task, samples, window, gen = "elitr_bench_qa_dev_st", [0, 17, 40], 7460, 512
    judge_key = "LMX_SERVED_JUDGE_KEY"
    monkeypatch.setenv(judge_key, "sk-served-judge-0123456789abcdef")
    with vllm(max_model_len=1_000_000) as srv:
        args = {"base_url": url(srv, model), "model": MODEL, "tokenizer_backend": "none"}
        evaluate(model, args, task, model == CHAT, samples={task: samples}, predict_only=True)
        full = by_meeting(data_dir, sent(srv))
    fits = {m: prompt_tokens(p, model) + gen <= window for m, p in full.items()}
    assert fits == dict(zip(MEETINGS, [False, True, True] if model == COMPLETIONS else [False, False, True]))

    with vllm(max_model_len=window) as srv:
        args = {"base_url": url(srv, model), "model": MODEL, "tokenizer_backend": "none"}
        with pytest.raises(PromptTooLongError) as err:
            evaluate(model, args, task, model == CHAT, samples={task: samples}, predict_only=True)
        assert sent(srv) == []
    assert str(err.value).startswith(
        f"{task}: the prompt of meeting_en_dev_001 question 1 has {prompt_tokens(full[MEETINGS[0]], model)} tokens; "
        f"with max_gen_toks={gen} it does not fit the context length {window} (the server's max_model_len), {SERVED}.")

    with vllm(max_model_len=window) as srv, StubOpenAIServer(text="\\boxed{5}", models=()) as judge:
        args = {"base_url": url(srv, model), "model": MODEL, "tokenizer_backend": "none"}
        out = evaluate(model, args, task, model == CHAT, samples={task: samples},
                       metadata={"overflow": "truncate", "judge_base_url": judge.base_url,
                                 "judge_api_key_env": judge_key, "judge_cache": "none"})
        shortened = by_meeting(data_dir, sent(srv))
    assert {s["doc"]["meeting"]: s["prompts_truncated"] for s in out["samples"][task]} == {
        m: int(not fit) for m, fit in fits.items()}
    assert out["results"][task]["prompts_truncated,judge"] == list(fits.values()).count(False)
    for meeting, fit in fits.items():
        before, after = full[meeting], shortened[meeting]
        assert (after == before) if fit else (words(after) < words(before))
        assert prompt_tokens(after, model) + gen <= window
        assert after.startswith("The following is the transcript of a meeting") and after[-40:] == before[-40:]
    assert out["configs"][task]["metadata"]["prompt_length"] == (
        f"context length {window} (the server's max_model_len), {SERVED}; too long: truncate")


@pytest.mark.slow
def test_the_captured_failing_run_now_checks_with_the_server(run_cli, data_dir, tmp_path):
    """The run that stopped with "cannot load a tokenizer for 'smollm2'" on vLLM's server
    (tests/fixtures/real/served/litm_chat_max_length.log), against the stub as that server: it runs, and the
    server counts the prompts."""
    captured = (CAPTURED / "litm_chat_max_length.log").read_text()
    assert "cannot load a tokenizer for 'smollm2'" in captured
    with vllm() as srv:
        proc = run_cli(["lm_eval", "run", "--model", CHAT, "--model_args",
                        f"model={MODEL},base_url={srv.chat_url},num_concurrent=2,max_length=4096",
                        "--apply_chat_template", "--tasks", "litm_qa_oracle", "--limit", "3",
                        "--output_path", str(tmp_path / "out")])
        prompts, port = sent(srv), srv.port
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(prompts) == 3
    assert f"Prompt tokens counted by the server's /tokenize at http://127.0.0.1:{port}: 100%" in proc.stderr
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    assert results["configs"]["litm_qa_oracle"]["metadata"]["prompt_length"] == (
        f"context length 4096 (max_length=4096), {SERVED}; too long: skip")
