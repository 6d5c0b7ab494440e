"""The test scaffolding itself: tiny model, scripted harness models, OpenAI stub server.

Everything runs the real harness (``lm_eval.simple_evaluate``) on small
inline task configs whose data lives in a jsonl file under tmp_path.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
from pathlib import Path

import pytest

from doubles.stub_openai import StubOpenAIServer
from helpers.harness import broken

MC_DOCS = [
    {"question": "2+2=", "choices": ["3", "4", "5"], "answer": 1},
    {"question": "Capital of France:", "choices": ["Paris", "Rome"], "answer": 0},
    {"question": "Sky color:", "choices": ["blue", "green"], "answer": 0},
    {"question": "1+1=", "choices": ["2", "3"], "answer": 0},
]

GEN_DOCS = [
    {"question": "What is 2+2?", "answer": "4"},
    {"question": "Capital of France?", "answer": "Paris"},
    {"question": "Color of the sky?", "answer": "blue"},
]


def _write_jsonl(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def _task(name, data_file, **config):
    """An inline harness task config reading ``data_file`` (jsonl) as its test split."""
    return {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file)}},
        "test_split": "test",
        "metadata": {"version": 0},
        **config,
    }


def _mc_task(tmp_path):
    return _task(
        "scaffold_mc",
        _write_jsonl(tmp_path / "mc.jsonl", MC_DOCS),
        output_type="multiple_choice",
        doc_to_text="{{question}}",
        doc_to_choice="{{choices}}",
        doc_to_target="{{answer}}",
        metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
    )


def _gen_task(tmp_path):
    return _task(
        "scaffold_gen",
        _write_jsonl(tmp_path / "gen.jsonl", GEN_DOCS),
        output_type="generate_until",
        doc_to_text="Q: {{question}}\nA:",
        doc_to_target="{{answer}}",
        generation_kwargs={"until": ["\n"], "max_gen_toks": 8},
        metric_list=[{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
    )


def _evaluate(model, model_args, task, **kwargs):
    """Run the real harness without indexing its ~14,700 built-in tasks (conftest registered the doubles)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    return lm_eval.simple_evaluate(
        model=model,
        model_args=model_args,
        tasks=[task],
        task_manager=TaskManager(include_defaults=False),
        bootstrap_iters=0,
        **kwargs,
    )


# -- tiny hf model -------------------------------------------------------


def test_tiny_model_loads_and_tokenizer_roundtrips(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "llama" and model.config.num_hidden_layers == 2
    assert len(tok) == model.config.vocab_size == 1000
    assert (tok.bos_token, tok.eos_token, tok.unk_token, tok.pad_token) == ("<s>", "</s>", "<unk>", "<pad>")

    text = "Return the  naïve café's value;\n\tx = {1: 'a'}  "
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert len(ids) < len(text.encode())  # the BPE merges learnt something

    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    rendered = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered == "user: Hi\nassistant: Hello\nassistant: "

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), 1000) and torch.isfinite(logits).all()
    # Random models favour special tokens; suppress_tokens gives real text (see the module docstring).
    out = model.generate(torch.tensor([ids]), max_new_tokens=5, do_sample=False, suppress_tokens=[0, 1, 2, 3])
    assert tok.decode(out[0, len(ids):], skip_special_tokens=True) != ""


def test_tiny_model_is_deterministic(tmp_path, tiny_model_dir):
    from safetensors.torch import load_file

    from doubles.tiny_model import build_tiny_model

    again = build_tiny_model(tmp_path / "again")
    other_seed = build_tiny_model(tmp_path / "seed1", seed=1)
    ref = load_file(tiny_model_dir / "model.safetensors")
    same = load_file(again / "model.safetensors")
    assert ref.keys() == same.keys() and all((ref[k] == same[k]).all() for k in ref)
    assert (again / "tokenizer.json").read_bytes() == (tiny_model_dir / "tokenizer.json").read_bytes()
    different = load_file(other_seed / "model.safetensors")
    assert not (ref["model.embed_tokens.weight"] == different["model.embed_tokens.weight"]).all()


@pytest.mark.slow  # builds a model
def test_tiny_model_cli_builds_custom_sizes(tmp_path, capsys):
    from doubles.tiny_model import main

    # the command line of `python -m doubles.tiny_model`, in this process: it needs no interpreter of its own
    main([str(tmp_path / "m"), "--layers", "3", "--hidden", "128"])
    assert capsys.readouterr().out == f"{tmp_path / 'm'}\n"
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (3, 128, 1000)


def test_data_dir_and_run_cli_environment(data_dir, run_cli, tmp_path):
    import os
    import sys

    assert Path(os.environ["LM_EVAL_EXT_DATA_DIR"]).resolve() == data_dir
    code = (
        "import json, os, sys, lm_eval_ext; "
        "print(json.dumps({'exe': sys.executable, 'cwd': os.getcwd(), 'env': dict(os.environ)}))"
    )
    proc = run_cli(["python", "-c", code])  # "python" must resolve to this venv's interpreter
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert Path(seen["exe"]).parent == Path(sys.executable).parent
    assert Path(seen["cwd"]) == tmp_path
    assert Path(seen["env"]["LM_EVAL_EXT_DATA_DIR"]).resolve() == data_dir
    assert seen["env"]["HF_HUB_OFFLINE"] == seen["env"]["HF_DATASETS_OFFLINE"] == "1"


def test_data_layer_isolated_in_tests_and_subprocesses(run_cli, tmp_path_factory):
    import os

    cache = Path(os.environ["LM_EVAL_EXT_CACHE_DIR"])
    assert cache.parent == tmp_path_factory.getbasetemp() and os.environ["LM_EVAL_EXT_OFFLINE"] == "1"
    proc = run_cli(["python", "-c", "from lm_eval_ext.data import config; "
                    "print(config.cache_dir(), config.offline_reason())"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(cache), "LM_EVAL_EXT_OFFLINE=1"]


REQUIRES_DATA_DEMO = """
import pytest

def test_takes_the_mirror(data_dir):
    assert (data_dir / "lieder").is_dir()

@pytest.mark.requires_data
def test_marked():
    pass

def test_needs_nothing():
    pass
"""


@pytest.mark.slow  # four pytest sessions in subprocesses
def test_requires_data_skips_with_one_reason_or_runs(pytester, monkeypatch):
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text(encoding="utf-8"))
    tests = str(Path(__file__).parent)  # where the conftest imports the test doubles from
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_demo=REQUIRES_DATA_DEMO)
    monkeypatch.delenv("LM_EVAL_EXT_DATA_DIR", raising=False)
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED [[]2] *: needs the datasets: LM_EVAL_EXT_DATA_DIR is not set*"])
    assert pytester.runpytest_subprocess("-m", "not requires_data").parseoutcomes() == {"passed": 1, "deselected": 2}
    (pytester.path / "mirror" / "lieder").mkdir(parents=True)
    monkeypatch.setenv("LM_EVAL_EXT_DATA_DIR", "mirror")  # relative: made absolute for the session
    pytester.runpytest_subprocess().assert_outcomes(passed=3)
    monkeypatch.setenv("LM_EVAL_EXT_DATA_DIR", str(pytester.path / "absent"))
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is not a directory" in result.stderr.str()


GROUPED_DEMO = """
import pytest

pytestmark = pytest.mark.xdist_group("one_worker")

@pytest.mark.parametrize("n", range(6))
def test_where(n):
    pass
"""


@pytest.mark.slow  # a pytest session in a subprocess
def test_an_xdist_group_runs_on_one_worker(pytester):
    """The suite's expensive module fixtures are built once because `--dist loadgroup` keeps their module on one
    worker (docs/testing.md, Adding a test). Some pytest and pytest-xdist versions together stop grouping without a
    word (pytest-dev/pytest-xdist#1386): then every worker would build them again."""
    pytester.makepyfile(test_grouped=GROUPED_DEMO)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=6)
    workers = [line.split()[0] for line in result.stdout.lines if " PASSED " in line]  # "[gw1] [ 16%] PASSED ..."
    assert len(workers) == 6 and len(set(workers)) == 1, result.stdout.str()


# -- scripted models through the harness ---------------------------------


def _table(tmp_path, default=None, drop=()):
    """A table under which docs 1, 3, 4 are right and doc 2 is wrong: acc = 0.75."""
    logprobs = {
        "2+2=": {"3": -3.0, "4": -1.0, "5": -2.0},
        "Capital of France:": {"Paris": -2.0, "Rome": -0.5},
        "Sky color:": {"blue": -0.1, "green": -4.0},
        "1+1=": {"2": -1.0, "3": -1.5},
    }
    entries = [
        {"context": ctx, "continuation": " " + cont, "logprob": lp}
        for ctx, conts in logprobs.items()
        for cont, lp in conts.items()
        if (ctx, cont) not in drop
    ]
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"entries": entries, "default": default}))
    return path


# -- commands run in this process (helpers/commands.py) ----------------------


@pytest.mark.slow
def test_a_command_in_this_process_ends_as_in_a_fresh_interpreter(run_cli, tmp_path):
    """The same exit status, output and last line of stderr as the same command in a process of its own (the
    test doubles' ``python -m doubles``): a status, the plugin's paragraph, argparse's error, a traceback."""
    from doubles import LM_EVAL, LM_EVAL_EXT

    (tmp_path / "here").mkdir()
    commands = {  # arguments -> (program, exit status)
        ("--version",): ("lm-eval-ext", 0),
        ("report", "nowhere", "-o", "r"): ("lm-eval-ext", 2),  # the plugin's paragraph; a path relative to cwd
        ("bogus",): ("lm_eval", 2),  # argparse's error
        ("run", "--model", "hf", "--tasks", "lieder_base", "--model_args", "{bad"): ("lm_eval", 1),  # a traceback
    }
    for args, (program, status) in commands.items():
        here = run_cli([program, *args], cwd=tmp_path / "here")
        fresh = run_cli([*{"lm_eval": LM_EVAL, "lm-eval-ext": LM_EVAL_EXT}[program], *args], cwd=tmp_path / "here")
        assert here.returncode == fresh.returncode == status, (args, here.stderr[-2000:], fresh.stderr[-2000:])
        assert here.stdout == fresh.stdout, args
        assert here.stderr.splitlines()[-1:] == fresh.stderr.splitlines()[-1:], args
        assert ("Traceback" in here.stderr) == ("Traceback" in fresh.stderr), args


@pytest.mark.slow
def test_what_a_command_sets_for_its_process_is_put_back(run_cli, tmp_path):
    """``lm-eval-ext run`` takes SIGTERM and SIGINT, the harness sets up its log handler, the test gives an
    environment variable: the next test finds this process as it was, and the harness's handler writes to stderr."""
    import logging
    import signal
    import sys

    handlers, cwd, argv = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}, os.getcwd(), sys.argv[:]
    environ = dict(os.environ)
    for _ in range(2):
        proc = run_cli(["lm-eval-ext", "run", "--model", "hf", "--tasks", "lieder_base", "--limit", "0"],
                       env={"LMX_RUNNER": "1"})
        assert proc.returncode == 2 and "--limit 0" in proc.stderr, proc.stderr[-2000:]
        proc = run_cli(["lm_eval", "run", "--model", "hf", "--tasks", "lieder_base", "--model_args", "{bad"])
        assert proc.returncode == 1 and "Traceback" in proc.stderr, proc.stderr[-2000:]
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert (os.getcwd(), sys.argv, dict(os.environ)) == (cwd, argv, environ)
    pytests = logging.getLogger().handlers  # pytest's log capture, which it also gives the harness's logger
    streams = [handler.stream for handler in logging.getLogger("lm_eval").handlers if handler not in pytests]
    assert streams and all(stream is sys.stderr for stream in streams)


def test_loglik_table_gives_the_scripted_accuracy(tmp_path):
    results = _evaluate("ext-loglik-table", f"table={_table(tmp_path)}", _mc_task(tmp_path), batch_size=8)
    assert results["results"]["scaffold_mc"]["acc,none"] == pytest.approx(0.75)
    first = min(results["samples"]["scaffold_mc"], key=lambda s: s["doc_id"])
    assert [tuple(r[0]) for r in first["resps"]] == [(-3.0, False), (-1.0, False), (-2.0, False)]


def test_loglik_table_default_and_missing_pair(tmp_path):
    from doubles.scripted import ScriptedModelError

    # With a default, the missing wrong answer gets -10: doc 2 becomes right.
    table = _table(tmp_path, default=-10.0, drop={("Capital of France:", "Rome")})
    results = _evaluate("ext-loglik-table", {"table": str(table)}, _mc_task(tmp_path))
    assert results["results"]["scaffold_mc"]["acc,none"] == pytest.approx(1.0)

    table = _table(tmp_path, drop={("Capital of France:", "Rome")})
    with pytest.raises(ScriptedModelError, match=r"context='Capital of France:', continuation=' Rome'"):
        _evaluate("ext-loglik-table", f"table={table}", _mc_task(tmp_path))
    with pytest.raises(NotImplementedError, match="ext-loglik-table.*generate_until"):
        _evaluate("ext-loglik-table", f"table={table}", _gen_task(tmp_path))


def _responses(tmp_path, **extra):
    path = tmp_path / "responses.json"
    rules = [
        {"contains": "2+2", "response": "4"},
        {"contains": "France", "response": "Paris"},
    ]
    path.write_text(json.dumps({"rules": rules, "default": "purple", **extra}))
    return path


def test_canned_gen_through_the_harness(tmp_path):
    calls = tmp_path / "calls.jsonl"
    args = f"responses={_responses(tmp_path)},calls_log={calls}"
    results = _evaluate("ext-canned-gen", args, _gen_task(tmp_path), batch_size=2)
    samples = sorted(results["samples"]["scaffold_gen"], key=lambda s: s["doc_id"])
    assert [s["resps"][0][0] for s in samples] == ["4", "Paris", "purple"]
    # 2 of 3 right; on a harness that reads the target "4" as a number, 1 (tests/helpers/harness.py)
    assert results["results"]["scaffold_gen"]["exact_match,none"] == pytest.approx((1 if broken("numeric_target") else 2) / 3)
    log = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [c["n_requests"] for c in log] == [3]
    assert sorted(log[0]["prompts"]) == sorted(f"Q: {d['question']}\nA:" for d in GEN_DOCS)
    assert log[0]["gen_kwargs"][0]["until"] == ["\n"]


def test_canned_gen_with_chat_template(tmp_path):
    calls = tmp_path / "calls.jsonl"
    args = f"responses={_responses(tmp_path)},calls_log={calls}"
    results = _evaluate("ext-canned-gen", args, _gen_task(tmp_path), apply_chat_template=True)
    samples = sorted(results["samples"]["scaffold_gen"], key=lambda s: s["doc_id"])
    assert [s["resps"][0][0] for s in samples] == ["4", "Paris", "purple"]
    prompts = json.loads(calls.read_text())["prompts"]
    assert "user: Q: What is 2+2?\nA:\n" in prompts


def test_canned_gen_turns_and_errors(tmp_path):
    from doubles.scripted import CannedGenLM, ScriptedModelError
    from lm_eval_ext.boundary import new_instance

    def request(prompt):
        return new_instance("generate_until", {}, (prompt, {"until": ["\n"]}), 0, task_name="t", doc_id=0)

    path = tmp_path / "turns.json"
    path.write_text(json.dumps({"rules": [{"contains": "Q", "response": "answer-{turn}"}], "default": None, "turn_marker": "user:"}))
    lm = CannedGenLM.create_from_arg_string(f"responses={path}", {"batch_size": "auto", "device": "cpu"})
    history = [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "answer-1"}, {"role": "user", "content": "Q2"}]
    prompts = [lm.apply_chat_template(history[:1]), lm.apply_chat_template(history)]
    assert prompts[1] == "user: Q1\nassistant: answer-1\nuser: Q2\n"
    assert lm.generate_until([request(p) for p in prompts]) == ["answer-1", "answer-2"]
    with pytest.raises(ScriptedModelError, match="no rule.*matches.*'hello'"):
        lm.generate_until([request("hello")])
    with pytest.raises(NotImplementedError, match="ext-canned-gen"):
        lm.loglikelihood([request("Q")])


# -- OpenAI stub server ----------------------------------------------------


def _chat(client, content="hi"):
    return client.chat.completions.create(model="stub", messages=[{"role": "user", "content": content}])


def test_stub_with_openai_client(stub_openai):
    import openai

    def shout(request):
        return request["messages"][-1]["content"].upper()

    with StubOpenAIServer(responder=shout) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test")
        reply = _chat(client, "judge this")
        assert reply.choices[0].message.content == "JUDGE THIS"
        assert reply.usage.total_tokens > 0
        assert [m.id for m in client.models.list()] == ["stub"]
        assert srv.call_count == 2
        assert srv.requests[0]["path"] == "/v1/chat/completions"
        assert srv.requests[0]["headers"]["authorization"] == "Bearer sk-test"
        assert srv.requests[0]["body"]["messages"][0]["content"] == "judge this"

    client = openai.OpenAI(base_url=stub_openai.base_url, api_key="sk-test")
    completion = client.completions.create(model="stub", prompt=["a", "b"], n=2)
    assert [c.text for c in completion.choices] == ["stub reply"] * 4


def test_stub_429_is_retried_by_the_client():
    import openai

    with StubOpenAIServer(fault_sequence=["429", "429"], retry_after="0.05") as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test", max_retries=2)
        assert _chat(client).choices[0].message.content == "stub reply"
        assert [r["fault"] for r in srv.requests] == ["429", "429", None]
        # the client's own retries (it numbers them), after the Retry-After the stub sent
        assert [r["headers"].get("x-stainless-retry-count") for r in srv.requests] == ["0", "1", "2"]


@pytest.mark.parametrize(
    "fault, error",
    [("drop", "APIConnectionError"), ("timeout", "APITimeoutError"), ("500", "InternalServerError")],
)
def test_stub_faults_reach_the_client(fault, error):
    import openai

    with StubOpenAIServer(fault_sequence=[fault], timeout_s=2) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test", max_retries=0, timeout=0.3)
        with pytest.raises(getattr(openai, error)):
            _chat(client)
    with StubOpenAIServer(fail_status=401) as srv:
        with pytest.raises(openai.AuthenticationError):
            _chat(openai.OpenAI(base_url=srv.base_url, api_key="bad"))


def test_stub_garbage_and_seeded_faults():
    import requests

    with StubOpenAIServer(fault_sequence=["nonjson", "noscore"], noscore_text="no grade here") as srv:
        first = requests.post(srv.chat_url, json={"messages": []}, timeout=5)
        assert first.status_code == 200 and not first.text.startswith("{")
        second = requests.post(srv.chat_url, json={"messages": []}, timeout=5).json()
        assert second["choices"][0]["message"]["content"] == "no grade here"

    def drawn(seed):
        faults = {"429": 0.2, "500": 0.2, "garbage": 0.2}
        with StubOpenAIServer(faults=faults, seed=seed) as srv:
            for _ in range(30):
                requests.post(srv.completions_url, json={"prompt": "x"}, timeout=5)
            return [r["fault"] for r in srv.requests]

    assert drawn(0) == drawn(0) != drawn(1)
    assert {"429", "500", None} <= set(drawn(0)) and {"nonjson", "noscore"} & set(drawn(0))


def test_stub_serves_concurrently():
    import openai

    with StubOpenAIServer(delay_s=0.2) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test")
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(lambda i: _chat(client, str(i)), range(100)))
    assert len(replies) == 100 and srv.call_count == 100
    # each request waits 0.2 s inside the server: 16 client threads keep many of them in flight at once
    assert srv.max_in_flight >= 8, f"at most {srv.max_in_flight} requests were in flight at once"


def test_local_chat_completions_against_the_stub(tmp_path):
    def respond(request):
        question = request["messages"][-1]["content"].split("\n")[0]
        return f"stub answer to <{question}>"

    with StubOpenAIServer(responder=respond) as srv:
        args = f"model=stub,base_url={srv.chat_url},tokenizer_backend=None,max_retries=1"
        results = _evaluate("local-chat-completions", args, _gen_task(tmp_path), apply_chat_template=True)
        bodies = [r["body"] for r in srv.requests]
    samples = sorted(results["samples"]["scaffold_gen"], key=lambda s: s["doc_id"])
    assert [s["resps"][0][0] for s in samples] == [f"stub answer to <Q: {d['question']}>" for d in GEN_DOCS]
    assert len(bodies) == len(GEN_DOCS) and all(b["model"] == "stub" for b in bodies)
    assert bodies[0]["messages"][-1]["role"] == "user"


# -- the harness's hf model on the tiny model -----------------------------


@pytest.mark.slow
def test_hf_harness_model_on_tiny_model(tmp_path, tiny_model_dir):
    results = _evaluate(
        "hf", f"pretrained={tiny_model_dir},dtype=float32", _mc_task(tmp_path), batch_size=4, device="cpu"
    )
    samples = results["samples"]["scaffold_mc"]
    logliks = [resp[0][0] for s in samples for resp in s["resps"]]
    assert len(logliks) == sum(len(d["choices"]) for d in MC_DOCS)
    assert all(math.isfinite(x) and x < 0 for x in logliks)
    assert 0.0 <= results["results"]["scaffold_mc"]["acc,none"] <= 1.0
