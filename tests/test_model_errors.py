"""A failure of the run's model inside the harness's request methods is one paragraph under `lm-eval-ext run`.

The models are the harness's own API adapters against the local stub server: `local-chat-completions`, which
refuses log-likelihood requests, and a server that stops while the run is under way (the stub stops serving when
the first request arrives; `max_retries=1` makes the adapter give up at once). Plain `lm_eval` shows the harness's
own traceback for both: the plugin does not hold the top of its stack.
"""
from __future__ import annotations

import threading

from doubles.stub_openai import StubOpenAIServer


def _last_line(proc) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.rstrip().splitlines()[-1]


def test_a_chat_completions_model_asked_for_log_likelihoods(run_cli, data_dir):
    with StubOpenAIServer(text="x") as srv:
        proc = run_cli(["lm-eval-ext", "run", "--model", "local-chat-completions", "--model_args",
                        f"model=stub,base_url={srv.chat_url}", "--tasks", "lieder_base", "--limit", "4"])
        assert [r for r in srv.requests if r["method"] == "POST"] == []
    assert _last_line(proc) == (
        "lm-eval-ext: error: The model (LocalChatCompletion) does not answer the harness's loglikelihood requests, "
        "which a task of this run needs; it says: \"Loglikelihood is not supported for chat completions. Consider "
        "using the completions API instead.\" LIEDER's tasks and the harness's multiple-choice tasks send these "
        "requests: run them with a model that gives log-likelihoods, i.e. `hf`, `vllm`, or `local-completions` "
        "against a server that returns the prompt's log-probabilities (docs/lieder.md).")


def test_a_server_that_stops_during_the_run(run_cli, data_dir):
    stopping = []

    def stop_at_the_first_request(request: dict) -> str:
        if not stopping:
            stopping.append(threading.Thread(target=srv.stop))
            stopping[0].start()
        return "Paris"

    with StubOpenAIServer(responder=stop_at_the_first_request) as srv:
        port = srv.port
        proc = run_cli(["lm-eval-ext", "run", "--model", "local-chat-completions", "--model_args",
                        f"model=stub,base_url={srv.chat_url},max_retries=1", "--tasks", "litm_qa_closedbook",
                        "--limit", "4", "--apply_chat_template"])
        stopping[0].join()
    line = _last_line(proc)
    assert line.startswith(f"lm-eval-ext: error: The model's server at http://127.0.0.1:{port} (--model_args "
                           "base_url) stopped answering during the run: its generate_until requests failed ("), line
    assert line.endswith(
        "), and it now cannot be reached (GET /v1/models: ConnectionError). Nothing was scored or written. Start the "
        "server again and rerun the command; with --use_cache PATH the harness keeps every answer it receives, so a "
        "rerun asks the server only for the rest."), line


def test_a_failure_while_the_server_answers_keeps_the_harness_traceback(run_cli, data_dir):
    # every request gets HTTP 500 but the server is up: not a lost server, and not the plugin's to explain
    with StubOpenAIServer(text="x", faults={"500": 1.0}) as srv:
        proc = run_cli(["lm-eval-ext", "run", "--model", "local-chat-completions", "--model_args",
                        f"model=stub,base_url={srv.chat_url},max_retries=1", "--tasks", "litm_qa_closedbook",
                        "--limit", "2", "--apply_chat_template"])
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    assert "stopped answering during the run" not in proc.stderr
