"""The stub OpenAI server's options that other tests rely on: jitter, in-flight count, malformed JSON,
prompt log-probs in the legacy completions format (and two broken servers), end to end through the
harness's ``local-completions`` model; and a client's reset, which is no error of the stub."""
from __future__ import annotations

import concurrent.futures
import json
import math

import pytest
import requests

from doubles.stub_openai import TRUNCATED_COMPLETION, StubOpenAIServer, scripted_logprob


def _post(url: str, body: dict) -> requests.Response:
    return requests.post(url, json=body, timeout=10)


def test_badjson_is_a_200_json_reply_whose_body_is_not_json():
    with StubOpenAIServer(fault_sequence=["badjson", "badjson", None], badjson_body=b"[]") as srv:
        first = _post(srv.chat_url, {"messages": []})
        assert first.status_code == 200 and first.headers["content-type"] == "application/json"
        assert first.content == b"[]"
    with StubOpenAIServer(fault_sequence=["badjson"]) as srv:
        cut = _post(srv.chat_url, {"messages": []})
        assert cut.content == TRUNCATED_COMPLETION and cut.headers["content-type"] == "application/json"
        with pytest.raises(ValueError):
            cut.json()
        assert _post(srv.chat_url, {"messages": []}).json()["choices"][0]["message"]["content"] == "stub reply"


def test_jitter_is_seeded_bounded_and_leaves_the_fault_draws_alone():
    def run(jitter, seed=5):
        with StubOpenAIServer(delay_s=0.01, jitter_s=jitter, faults={"500": 0.5}, seed=seed) as srv:
            for _ in range(12):
                _post(srv.completions_url, {"prompt": "x"})
            return [r["delay"] for r in srv.requests], [r["fault"] for r in srv.requests]

    delays, faults = run(0.02)
    assert all(0.01 <= d <= 0.03 for d in delays) and len(set(delays)) == 12
    assert run(0.02) == (delays, faults)  # the same seed gives the same delays
    assert run(0.0)[1] == faults and set(run(0.0)[0]) == {0.01}  # jitter changes no fault
    assert run(0.02, seed=6)[0] != delays


def test_summary_counts_faults_and_requests_answered_twice(monkeypatch):
    """What the judge throughput bench reads: faults drawn, request bodies answered (paid) more than once, and
    when the completions were sent."""
    from doubles import stub_openai

    ticks = iter(range(1, 100))  # a clock that moves one second at each reading
    monkeypatch.setattr(stub_openai, "_clock", lambda: next(ticks))
    with StubOpenAIServer(fault_sequence=["500", None, "429", None, None, "drop"]) as srv:
        _post(srv.chat_url, {"messages": [{"role": "user", "content": "a"}]})  # 500: nothing answered
        _post(srv.chat_url, {"messages": [{"role": "user", "content": "a"}]})  # answered once
        _post(srv.chat_url, {"messages": [{"role": "user", "content": "b"}]})  # 429
        _post(srv.chat_url, {"messages": [{"role": "user", "content": "b"}]})  # answered once
        _post(srv.chat_url, {"messages": [{"role": "user", "content": "b"}]})  # answered twice
        with pytest.raises(requests.ConnectionError):
            _post(srv.chat_url, {"messages": [{"role": "user", "content": "a"}]})  # dropped: not answered
        # received at 1 (500), 2 (answered at 3), 4 (429), 5 (answered at 6), 7 (answered at 8), 9 (dropped)
        assert srv.summary() == {"calls": 6, "max_in_flight": 1, "faults": {"500": 1, "429": 1, "drop": 1},
                                 "paid_twice": 1, "answered_by": {"50%": 5, "99%": 7, "100%": 7}}


def test_max_in_flight_counts_requests_handled_at_once():
    with StubOpenAIServer(delay_s=1.0) as srv:  # long enough for the 6 requests to overlap on a busy machine
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda _: _post(srv.completions_url, {"prompt": "x"}), range(6)))
        assert srv.max_in_flight == 6 and srv.call_count == 6
    with StubOpenAIServer(delay_s=0.01) as srv:
        for _ in range(4):
            _post(srv.completions_url, {"prompt": "x"})
        assert srv.max_in_flight == 1


def test_echo_logprobs_of_token_ids_in_the_legacy_format():
    body = {"model": "m", "prompt": [[5, 7, 9], [4]], "max_tokens": 1, "logprobs": 1, "echo": True, "temperature": 0}
    with StubOpenAIServer(text="yes no") as srv:
        reply = _post(srv.completions_url, body).json()
    first, second = reply["choices"]
    assert (first["index"], second["index"]) == (0, 1)
    # <7> after <5>: -(1 + (15 + 7) % 10) / 10 = -0.3; <9> after <7>: (21 + 9) % 10 = 0 -> -0.1;
    # the generated "yes" (one token: max_tokens=1) after <9>: its CRC-32 stands for the id
    yes = -(1 + (27 + 1978086825) % 10) / 10  # zlib.crc32(b"yes") == 1978086825
    assert yes == scripted_logprob([5, 7, 9], "yes") == -0.3
    assert first["text"] == "<5><7><9>yes"
    assert first["logprobs"] == {
        "tokens": ["<5>", "<7>", "<9>", "yes"],
        "token_logprobs": [None, -0.3, -0.1, -0.3],
        "top_logprobs": [None, {"<7>": -0.3}, {"<9>": -0.1}, {"yes": -0.3}],  # each p >= 1/2: greedy
        "text_offset": [0, 3, 6, 9],
    }
    assert second["logprobs"]["tokens"] == ["<4>", "yes"] and second["logprobs"]["token_logprobs"][0] is None


def test_text_prompt_without_echo_and_the_two_broken_servers():
    body = {"prompt": "the dog", "max_tokens": 5, "logprobs": 2}
    with StubOpenAIServer(text="runs far") as srv:
        plain = _post(srv.completions_url, body).json()["choices"][0]
        echoed = _post(srv.completions_url, {**body, "echo": True}).json()["choices"][0]
    assert plain["text"] == "runs far" and plain["logprobs"]["tokens"] == ["runs", " far"]
    assert plain["logprobs"]["token_logprobs"] == [scripted_logprob([], "runs"), scripted_logprob(["runs"], " far")]
    assert echoed["text"] == "the dogruns far"
    assert echoed["logprobs"]["tokens"] == ["the", " dog", "runs", " far"]
    assert echoed["logprobs"]["text_offset"] == [0, 3, 7, 11]
    # " dog" after "the": -0.8, p < 1/2, so "<other>" (the remaining probability) ranks first
    assert scripted_logprob(["the"], " dog") == -0.8
    assert echoed["logprobs"]["top_logprobs"][1] == {"<other>": math.log1p(-math.exp(-0.8)), " dog": -0.8}
    assert all(len(top) == 2 for top in echoed["logprobs"]["top_logprobs"][1:])
    with StubOpenAIServer(text="runs far", logprobs_fault="no_echo") as srv:
        assert _post(srv.completions_url, {**body, "echo": True}).json()["choices"][0] == plain
    with StubOpenAIServer(text="runs far", logprobs_fault="no_generated") as srv:
        broken = _post(srv.completions_url, {**body, "echo": True}).json()["choices"][0]
    assert broken["text"] == "the dog" and broken["logprobs"]["tokens"] == ["the", " dog"]
    with pytest.raises(ValueError, match="unknown logprobs_fault"):
        StubOpenAIServer(logprobs_fault="wrong")


def _harness_loglikelihood(srv: StubOpenAIServer, tokenizer_dir, pairs):
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    from lm_eval_ext.boundary import new_instance

    lm = LocalCompletionsAPI(base_url=srv.completions_url, model="stub", tokenizer_backend="huggingface",
                             tokenizer=str(tokenizer_dir), max_retries=1, batch_size=2)
    requests_ = [new_instance("loglikelihood", {}, pair, i, task_name="t", doc_id=i) for i, pair in enumerate(pairs)]
    return lm, lm.loglikelihood(requests_, disable_tqdm=True)


def test_local_completions_loglikelihood_end_to_end(tiny_model_dir):
    """The harness's `local-completions` model reads the stub's prompt log-probs: the sum over the
    continuation's tokens, each conditioned on every token before it; the two broken servers give
    numbers that are silently wrong (which is what a client must detect)."""
    pairs = [("The dog saw the cat.", " It ran away."), ("The dogs saw the cat.", " They ran away.")]
    with StubOpenAIServer(text="x") as srv:
        lm, results = _harness_loglikelihood(srv, tiny_model_dir, pairs)
        bodies = [r["body"] for r in srv.requests]
    assert all(b["echo"] is True and b["logprobs"] == 1 and b["max_tokens"] == 1 for b in bodies)
    expected = []
    for context, continuation in pairs:
        ctx, cont = lm.tok_encode(context), lm.tok_encode(continuation)
        tokens = ctx + cont
        logprobs = [scripted_logprob(tokens[:i], tokens[i]) for i in range(len(ctx), len(tokens))]
        expected.append((pytest.approx(sum(logprobs), abs=1e-12), all(lp >= math.log(0.5) for lp in logprobs)))
    assert [(ll, greedy) for ll, greedy in results] == expected
    assert expected[0][0] != expected[1][0]

    with StubOpenAIServer(text="x", logprobs_fault="no_echo") as srv:
        _, no_echo = _harness_loglikelihood(srv, tiny_model_dir, pairs)
    assert [ll for ll, _ in no_echo] == [0, 0]  # the harness sums an empty slice
    with StubOpenAIServer(text="x", logprobs_fault="no_generated") as srv:
        _, short = _harness_loglikelihood(srv, tiny_model_dir, pairs)
    for (context, continuation), (ll, _) in zip(pairs, short):
        ctx, cont = lm.tok_encode(context), lm.tok_encode(continuation)
        tokens = ctx + cont
        # the continuation's last token is dropped (the harness cuts the "generated" one)
        assert ll == pytest.approx(sum(scripted_logprob(tokens[:i], tokens[i])
                                       for i in range(len(ctx), len(tokens) - 1)), abs=1e-12)


def test_vllm_guise_answers_as_the_captured_server():
    """``max_model_len`` and ``tokenize``: the stub's /v1/models, /tokenize and too-long refusal reproduce the
    replies of a real ``vllm serve`` (tests/fixtures/real/served/)."""
    from doubles.stub_openai import CAPTURED

    def captured(name: str):
        return json.loads((CAPTURED / name).read_text())

    with StubOpenAIServer(model="smollm2", max_model_len=4096, tokenize=True) as srv:
        root = srv.base_url.removesuffix("/v1")
        hello = [{"role": "user", "content": "Hello"}]
        assert _post(f"{root}/tokenize", {"model": "smollm2", "prompt": "Hello world"}).json() == captured(
            "tokenize_prompt.json")
        assert _post(f"{root}/tokenize", {"model": "smollm2", "messages": hello}).json() == captured(
            "tokenize_messages.json")
        assert _post(f"{root}/tokenize", {"model": "smollm2", "messages": hello, "add_generation_prompt": False}
                     ).json() == captured("tokenize_messages_nogen.json")
        assert requests.get(f"{root}/tokenize", timeout=10).status_code == 405
        (entry,) = requests.get(f"{srv.base_url}/models", timeout=10).json()["data"]
        (real,) = captured("models.json")["data"]
        assert entry.keys() == real.keys() and entry["permission"][0].keys() == real["permission"][0].keys()
        assert (entry["id"], entry["max_model_len"], entry["owned_by"]) == ("smollm2", 4096, "vllm")
        too_long = _post(srv.completions_url, {"model": "smollm2", "prompt": "word " * 5000, "max_tokens": 4})
        assert too_long.status_code == 400 and too_long.json() == captured("too_long_completion.json")
        fits = _post(srv.completions_url, {"model": "smollm2", "prompt": " ".join(["word"] * 4096), "max_tokens": 4})
        assert fits.status_code == 200
        # /tokenize takes no part in the fault sequence
        assert [r["fault"] for r in srv.requests] == [None] * 7
    with StubOpenAIServer(model="smollm2") as srv:  # the plain stub: neither
        assert _post(srv.base_url.removesuffix("/v1") + "/tokenize", {"prompt": "x"}).status_code == 404
        assert "max_model_len" not in requests.get(f"{srv.base_url}/models", timeout=10).json()["data"][0]


def test_tokenize_takes_no_fault_of_the_sequence():
    with StubOpenAIServer(tokenize=True, fault_sequence=["500", None]) as srv:
        assert _post(srv.base_url.removesuffix("/v1") + "/tokenize", {"prompt": "a b"}).json()["count"] == 2
        assert _post(srv.chat_url, {"messages": []}).status_code == 500  # the first fault, still first
        assert _post(srv.chat_url, {"messages": []}).status_code == 200


def test_a_client_that_resets_its_connection_is_no_error_of_the_stub(capsys):
    """A reset (a client closing a kept-alive connection, or a reply it stopped reading) prints nothing, as a served
    API takes it; any other error of a request's handling is shown with its traceback."""
    with StubOpenAIServer() as srv:
        for error in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe"),
                      ValueError("a defect of the stub")):
            try:
                raise error
            except (OSError, ValueError):  # handle_error runs inside the server's except block
                srv._server.handle_error(None, ("127.0.0.1", 1))
    err = capsys.readouterr().err
    assert err.count("Exception occurred during processing of request") == 1
    assert "ValueError: a defect of the stub" in err
    assert "ConnectionResetError" not in err and "BrokenPipeError" not in err
