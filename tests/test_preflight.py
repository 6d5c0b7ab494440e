"""A run that cannot succeed stops before the model is loaded: one paragraph per problem, exit 2.

``lm-eval-ext check`` and ``lm-eval-ext run`` check names, flags, the output path, the data and the
judge first. The scripted model's calls log shows that nothing was generated; no test waits for a
model to load, so every failure here comes within seconds of the command's start.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from doubles.stub_openai import StubOpenAIServer
from helpers.judge import answering_the_probe, judge_calls
from helpers.real import free_port
from lm_eval_ext import boundary

KEY_ENV = "LMX_PREFLIGHT_KEY"
KEY = "sk-preflight-test-key-0123456789abcdef"


def _paragraphs(stderr: str) -> list[str]:
    """The failure paragraphs of a preflight error (after its first line)."""
    assert "check(s) failed before the model was loaded" in stderr, stderr[-3000:]
    return [p for p in stderr.split("check(s) failed before the model was loaded:", 1)[1].strip().split("\n\n") if p]


def _canned(tmp_path: Path) -> list[str]:
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "an answer"}))
    return ["--model", "ext-canned-gen", "--model_args", f"responses={responses},calls_log={tmp_path / 'calls.jsonl'}"]


TASK_YAML = "task: {name}\n{tag}dataset_path: json\noutput_type: loglikelihood\ndoc_to_text: x\ndoc_to_target: y\n"


@pytest.mark.parametrize("names,alone", [
    (["mine"], True),  # a task of --include_path
    (["lieder_base", "mine"], True),  # and one of the plugin's
    (["outer"], True),  # a group of a group, every task in the two folders
    (["mixed"], False),  # a group with a built-in task
    (["my_tag"], False),  # a tag: built-in tasks may carry it too
    (["tagged"], False),  # a group of a tag
    (["min*"], False),  # a pattern may match built-in tasks
    (["arc_easy"], False),  # not in the two folders
])
def test_the_built_in_tasks_are_indexed_unless_the_named_tasks_are_all_in_the_plugin_or_include_path(
        tmp_path, names, alone):
    """`lm-eval-ext run --include_path DIR` leaves the harness's ~14,700 built-in configs unread only when the
    plugin's folder and DIR hold every task the names stand for."""
    from lm_eval_ext.commands import preflight

    (tmp_path / "mine.yaml").write_text(TASK_YAML.format(name="mine", tag="tag: [my_tag]\n"))
    for group, members in (("inner", "[mine, lieder_base]"), ("outer", "[inner]"), ("mixed", "[mine, arc_easy]"),
                           ("tagged", "[my_tag]")):
        (tmp_path / f"{group}.yaml").write_text(f"group: {group}\ntask: {members}\n")
    report = preflight.Preflight()
    if alone:
        index, selected = preflight._resolve_names(names, str(tmp_path), report)
        assert (report.needs_builtin_tasks, report.failures, selected) == (False, [], names)
        assert "arc_easy" not in index
    else:  # (what _resolve_names decides from, without the built-in index it would then build)
        index = boundary.task_index(include_path=str(tmp_path), include_defaults=False)
        assert not preflight._self_contained(names, index)


def test_misspelled_task_names(run_cli, tmp_path):
    """Each name the harness and the plugin do not know is a paragraph of its own, with the names it is close to in
    any case (names are case-sensitive: `LIEDER_TWO` is not `lieder_two`). A space after a comma makes a name of its
    own on lm-eval 0.4, which keeps it; 0.5 drops it."""
    proc = run_cli(["lm-eval-ext", "run", *_canned(tmp_path), "--tasks",
                    "lieder_bse,elitr_bench_qa_dev_stt,LIEDER_TWO, lieder_diff"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lieder, elitr, upper, *spaced = _paragraphs(proc.stderr)
    if boundary.harness_version().startswith("0.4"):
        assert spaced == ["Unknown task or group ' lieder_diff' in --tasks. The harness keeps the spaces around a name: "
                          "write 'lieder_diff' without them. `lm_eval ls tasks` lists every task and group the harness "
                          "and the plugin provide."]
    else:
        assert spaced == []
    assert lieder.startswith("Unknown task or group 'lieder_bse' in --tasks. Did you mean: lieder_base")
    assert elitr.startswith("Unknown task or group 'elitr_bench_qa_dev_stt' in --tasks. Did you mean: "
                            "elitr_bench_qa_dev_st")
    assert upper.startswith("Unknown task or group 'LIEDER_TWO' in --tasks. Did you mean: lieder_two")
    assert not (tmp_path / "calls.jsonl").exists()


@pytest.mark.parametrize("tasks,names", [
    ("lieder_base", ["lieder_base"]),
    ("lieder_base,lieder_two", ["lieder_base", "lieder_two"]),  # --tasks a,b, or `tasks: a,b` in a --config file
    (["lieder_base", "lieder_two,lieder_diff"], ["lieder_base", "lieder_two", "lieder_diff"]),  # a --config list
    ("lieder_base,", ["lieder_base", ""]),  # an empty name, which the harness rejects too
    ("lieder_base, lieder_two", ["lieder_base", "lieder_two"] if boundary.harness_version().startswith("0.5")
     else ["lieder_base", " lieder_two"]),  # lm-eval 0.5 drops the spaces around a name, 0.4 keeps them
])
def test_task_names_are_read_as_the_harness_reads_them(tasks, names):
    assert boundary.task_names(tasks) == names


def test_a_config_file_may_name_its_tasks_in_one_string(run_cli, data_dir, tmp_path):
    """`tasks: lieder_base,lieder_two` in a --config file (the harness reads it as two names): `lm-eval-ext run`
    checks and runs both."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -3.0}))
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({"model": "ext-loglik-table", "model_args": {"table": str(table)},
                                  "tasks": "lieder_base,lieder_two", "limit": 2, "output_path": str(tmp_path / "out")}))
    proc = run_cli(["lm-eval-ext", "run", "--config", config])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results,) = (tmp_path / "out").rglob("results_*.json")
    assert sorted(json.loads(results.read_text())["results"]) == ["lieder_base", "lieder_two"]


def test_a_misspelled_task_of_a_config_file_is_named_there(run_cli, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({"tasks": "lieder_bse", "model": "dummy", "limit": 2}))
    proc = run_cli(["lm-eval-ext", "run", "--config", config])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph.startswith(f"Unknown task or group 'lieder_bse' in the tasks of the --config file {config}. Did "
                                "you mean: lieder_base")


def test_every_problem_is_reported_at_once(run_cli, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = run_cli(["lm-eval-ext", "check", "--model", "hff", "--tasks", "magnifico_direct_base",
                    "--output_path", str(blocker / "out")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    model, unsafe, output = _paragraphs(proc.stderr)
    assert model.startswith("Unknown model 'hff' in --model. Did you mean: hf?")
    assert "--confirm_run_unsafe_code" in unsafe and unsafe.startswith("magnifico_direct_base")
    assert output.startswith(f"The output path {blocker / 'out'} cannot be written")


def test_a_model_name_with_spaces_around_it_is_told_to_drop_them(run_cli):
    proc = run_cli(["lm-eval-ext", "check", "--model", " hf", "--tasks", "lieder_base"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (model,) = _paragraphs(proc.stderr)
    assert model.startswith("Unknown model ' hf' in --model. The harness keeps the spaces around a name: write 'hf' "
                            "without them. Known models: "), model


@pytest.mark.parametrize("limit", ["0", "-1", "2.5"])
def test_bad_limits(run_cli, tmp_path, limit):
    proc = run_cli(["lm-eval-ext", "run", *_canned(tmp_path), "--tasks", "lieder_base", "--limit", limit])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph.startswith(f"--limit {float(limit):g}")


def test_samples_that_pick_nothing_or_documents_a_task_lacks_are_named(run_cli, data_dir, tmp_path):
    """The harness reads --samples task by task: a group's name or a misspelled task's picks nothing, and a task it
    does not name runs on all its documents; an index beyond a task's documents is its AssertionError traceback."""
    samples = {"lieder": [0, 1], "lieder_dif": [2]}
    proc = run_cli(["lm-eval-ext", "run", *_canned(tmp_path), "--tasks", "lieder", "--samples", json.dumps(samples)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert _paragraphs(proc.stderr) == [
        "--samples names 'lieder', a group: the harness picks documents task by task, so it would run every document "
        "of lieder_base, lieder_diff. Give the indices of each task instead, e.g. --samples "
        """'{"lieder_base": [0, 1], "lieder_diff": [0, 1]}'.""",
        "--samples names 'lieder_dif', which is not a task of this run (lieder_base, lieder_diff), so its indices "
        "would pick nothing. Did you mean 'lieder_diff'?"]
    proc = run_cli(["lm-eval-ext", "check", "--tasks", "lieder", "--samples",
                    json.dumps({"lieder_base": [0, 48, -1, "3", 48], "lieder_diff": 47})])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert _paragraphs(proc.stderr) == [
        """--samples names document(s) 48, -1, "3" of lieder_base, which has 48 (0 to 47). Give whole numbers from 0 """
        "to 47.",
        """--samples gives lieder_diff 47, which is not a list of document indices. Give a list, e.g. --samples """
        """'{"lieder_diff": [0, 1]}'."""]
    proc = run_cli(["lm-eval-ext", "check", "--tasks", "lieder", "--samples", json.dumps({"lieder_base": [47]})])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("lm-eval-ext: note: --samples names no document of lieder_diff: the harness runs it on all its documents\n"
            in proc.stdout + proc.stderr)
    assert not (tmp_path / "calls.jsonl").exists()


def test_a_run_without_the_model_it_loads_stops_before_loading_it(run_cli):
    # no --model: the harness loads its default, hf, which needs pretrained (without this check, hf's TypeError)
    proc = run_cli(["lm-eval-ext", "run", "--tasks", "lieder_base"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph == ("The model 'hf' (--model) needs pretrained in --model_args, which does not give it. Add "
                         "--model_args pretrained=... (pretrained=gpt2 for a hub model, pretrained=/path/to/folder for "
                         "one on this machine).")


def test_model_files_that_are_not_there_are_named(run_cli, tmp_path):
    # without this check transformers reads a missing folder as a hub name ("Repo id must use alphanumeric chars")
    missing = tmp_path / "models" / "SmolLM2"
    proc = run_cli(["lm-eval-ext", "run", "--model", "hf", "--model_args",
                    f"pretrained={missing},tokenizer=~/no-such-tokenizer-folder", "--tasks", "lieder_base"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    folder, tokenizer = _paragraphs(proc.stderr)
    assert folder.startswith(f"--model_args pretrained={missing}: there is no such file or folder. Give the folder")
    assert tokenizer.startswith("--model_args tokenizer=~/no-such-tokenizer-folder: there is no such file or folder "
                                "(the harness does not expand ~: give the whole path).")
    gguf = tmp_path / "gguf"
    gguf.mkdir()
    (gguf / "model.Q4_1.gguf").write_bytes(b"")
    proc = run_cli(["lm-eval-ext", "check", "--model", "hf", "--model_args",
                    f"pretrained={gguf},gguf_file=model.Q4_0.gguf", "--tasks", "lieder_base"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph.startswith(f"--model_args gguf_file=model.Q4_0.gguf: {gguf} holds no such file.")
    # without gguf_file, transformers finds no config.json: "Unrecognized model in ... Should have a `model_type` key"
    proc = run_cli(["lm-eval-ext", "check", "--model", "hf", "--model_args", f"pretrained={gguf}", "--tasks",
                    "lieder_base"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph == (f"--model_args pretrained={gguf}: the folder holds no config.json, only the GGUF file(s) "
                         "model.Q4_1.gguf. Name the one to load with --model_args gguf_file=model.Q4_1.gguf (the model "
                         "is loaded from pretrained's folder joined with gguf_file).")


def test_model_files_that_are_there_pass(run_cli, data_dir, tmp_path):
    gguf = tmp_path / "gguf"
    gguf.mkdir()
    (gguf / "model.Q4_1.gguf").write_bytes(b"")
    proc = run_cli(["lm-eval-ext", "check", "--model", "hf", "--model_args",
                    f"pretrained={gguf},gguf_file=model.Q4_1.gguf,tokenizer={gguf}", "--tasks", "lieder_base"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == ("lm-eval-ext: every check passed: task and model names, the model's "
                                            "arguments, flags, output path, data, judge")


def test_a_model_server_that_does_not_answer_is_named(run_cli, tmp_path):
    # without this check the harness's requests fail after the run started: its ConnectionError traceback
    port = free_port()  # nothing listens on it
    url = f"http://user:secret@127.0.0.1:{port}/v1/completions"
    proc = run_cli(["lm-eval-ext", "run", "--model", "local-completions", "--model_args",
                    f"model=smol,base_url={url},tokenizer_backend=none", "--tasks", "litm_qa_closedbook"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph == (f"The model's server at http://127.0.0.1:{port} (--model_args base_url) cannot be reached "
                         "(GET /v1/models: ConnectionError). Start it, or wait until it answers (`vllm serve` logs "
                         "\"Application startup complete\"), or correct base_url.")
    assert "secret" not in proc.stderr + proc.stdout


def test_missing_data_is_found_before_the_model(run_cli, tmp_path):
    empty = tmp_path / "mirror"
    empty.mkdir()
    proc = run_cli(["lm-eval-ext", "run", *_canned(tmp_path), "--tasks", "lieder_base"],
                   env={"LM_EVAL_EXT_DATA_DIR": str(empty), "LM_EVAL_EXT_OFFLINE": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert "Dataset 'lieder': file 'stimuli/base/base_stimuli.jsonl' was not found" in paragraph
    assert not (tmp_path / "calls.jsonl").exists()


def test_items_without_a_database_are_counted_before_the_run(run_cli, data_dir, tmp_path):
    proc = run_cli(["lm-eval-ext", "check", "--tasks", "magnifico_direct_base", "--confirm_run_unsafe_code",
                    "--metadata", json.dumps({"interpretations": "maximum"})])
    assert proc.returncode == 0, proc.stderr[-3000:]
    missing = sum(1 for line in (data_dir / "magnifico/magnifico_data/maximum/baseline/test.tsv").read_text()
                  .splitlines()[1:] if line.split("\t")[1].startswith("baseball_1:"))
    assert missing > 0
    assert (f"note: magnifico_direct_base: {missing} of 113 items will be left out ({missing} whose Spider database "
            f"is missing: baseball_1 ({missing} items); 0 whose gold query fails; 0 whose gold query does not finish "
            "within its budget)") in proc.stdout


def _judged_run(run_cli, tmp_path, judge_options: dict, env: dict, command=("lm-eval-ext", "run")):
    return run_cli([*command, *_canned(tmp_path), "--tasks", "elitr_bench_qa_dev_st", "--limit", "2",
                    "--metadata", json.dumps({**judge_options, "judge_cache": "none"})], env=env)


def test_judge_without_a_key(run_cli, data_dir, tmp_path):
    proc = _judged_run(run_cli, tmp_path, {"judge_base_url": "http://127.0.0.1:9/v1", "judge_api_key_env": KEY_ENV}, {})
    assert proc.returncode == 2
    (paragraph,) = _paragraphs(proc.stderr)
    assert f"The judge needs an API key in the environment variable {KEY_ENV}, which is not set" in paragraph
    assert not (tmp_path / "calls.jsonl").exists()


def test_misspelled_judge_option(run_cli, data_dir, tmp_path):
    proc = _judged_run(run_cli, tmp_path, {"judge_base_url": "http://127.0.0.1:9/v1", "judge_api_key_env": KEY_ENV,
                                           "judge_modle": "gpt-4o"}, {KEY_ENV: KEY})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph.startswith("elitr_bench_qa_dev_st: Unknown judge option 'judge_modle' in --metadata. Did you mean "
                                "'judge_model'? Known judge options: judge, judge_api_key_env, ")
    assert not (tmp_path / "calls.jsonl").exists()


def test_judge_template_without_a_field(run_cli, data_dir, tmp_path):
    template = tmp_path / "template.txt"
    template.write_text("Question: {question}\nAnswer: {response}\nScore it.\n")
    proc = _judged_run(run_cli, tmp_path, {"judge_base_url": "http://127.0.0.1:9/v1", "judge_api_key_env": KEY_ENV,
                                           "judge_template": str(template)}, {KEY_ENV: KEY})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (paragraph,) = _paragraphs(proc.stderr)
    assert paragraph == (f"elitr_bench_qa_dev_st: The judge template {template} lacks the field(s) {{reference}}; a "
                         "judge template must contain {question}, {response} and {reference}.")
    assert not (tmp_path / "calls.jsonl").exists()


@pytest.mark.parametrize("case,stub,expected", [
    ("wrong key", {"fail_status": 401, "models": ()}, "refused a one-line probe"),
    ("model not served", {"models": ["another-model"]}, "does not serve the model 'gpt-4-0613'"),
    ("no score in the reply", {"text": "I would rather not grade.", "models": ()}, "holds no score the boxed parser reads"),
])
def test_judge_that_cannot_judge(run_cli, data_dir, tmp_path, case, stub, expected):
    with StubOpenAIServer(**stub) as srv:
        proc = _judged_run(run_cli, tmp_path, {"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV},
                           {KEY_ENV: KEY})
        assert len([r for r in srv.requests if r["method"] == "POST"]) <= 1  # one probe at most
    assert proc.returncode == 2, case
    (paragraph,) = _paragraphs(proc.stderr)
    assert expected in paragraph and KEY not in proc.stderr
    assert not (tmp_path / "calls.jsonl").exists()


def test_unreachable_judge_with_the_plain_harness_stops_before_generating(run_cli, data_dir, tmp_path):
    """Plain lm_eval: the task checks its judge when the harness builds its requests, before any generation."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _judged_run(run_cli, tmp_path, {"judge_base_url": f"http://127.0.0.1:{port}/v1", "judge_api_key_env": KEY_ENV},
                       {KEY_ENV: KEY}, command=("lm_eval", "run"))
    assert proc.returncode != 0
    assert f"The judge at 127.0.0.1:{port}" in proc.stderr and "cannot be reached" in proc.stderr
    assert not (tmp_path / "calls.jsonl").exists()


def test_predict_only_needs_no_judge(run_cli, data_dir, tmp_path):
    proc = run_cli(["lm-eval-ext", "check", "--tasks", "elitr_bench_qa_dev_st", "--predict_only", "--output_path",
                    str(tmp_path / "out")], env={"OPENAI_API_KEY": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == (
        "lm-eval-ext: every check passed: task and model names, the model's arguments, flags, output path, data, judge"
        " (not checked: the model's arguments (no --model or --model_args); the judge (--predict_only))")


def test_check_with_judge_flags_probes_the_judge_once(run_cli, data_dir, tmp_path):
    with StubOpenAIServer(responder=answering_the_probe(lambda request: "\\boxed{5}"), models=["gpt-4o"]) as srv:
        proc = run_cli(["lm-eval-ext", "check", "--tasks", "elitr_bench_qa_dev_st,elitr_bench_qa_dev_mt",
                        "--judge-base-url", srv.base_url, "--judge-model", "gpt-4o", "--judge-api-key-env", KEY_ENV],
                       env={KEY_ENV: KEY})
        posts = [r for r in srv.requests if r["method"] == "POST"]
        assert not judge_calls(srv) and len(posts) == 1  # the same judge for both tasks: probed once
        assert posts[0]["body"]["model"] == "gpt-4o"
        host = f"127.0.0.1:{srv.port}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count(f"judge check: asking gpt-4o at {host} for its model list and one probe reply (up to "
                             "120 s)\n") == 1


def test_a_judge_check_that_fails_names_this_commands_switch_to_skip_it(run_cli, data_dir):
    """--judge-check is a switch: the advice is --no-judge-check, not a value after the flag."""
    with StubOpenAIServer(text="The answer looks correct to me.", models=["gpt-4o"]) as srv:
        proc = run_cli(["lm-eval-ext", "check", "--tasks", "elitr_bench_qa_dev_st", "--judge-base-url", srv.base_url,
                        "--judge-model", "gpt-4o", "--judge-api-key-env", KEY_ENV], env={KEY_ENV: KEY})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "If it is the judge you mean to use, --no-judge-check skips this check: " in proc.stderr


def test_check_help_lists_the_judge_flags(run_cli):
    proc = run_cli(["lm-eval-ext", "check", "--help"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: lm-eval-ext check [flags of `lm_eval run`] [judge flags]")
    assert "--judge-model" in proc.stdout and "--judge-check" in proc.stdout


def test_an_api_model_s_timeout_cannot_become_the_sql_sandbox_s_clock(run_cli, data_dir):
    """The harness passes --model_args to the tasks with --metadata: an API model's timeout=10 would become MAGNIFICo's
    wall-clock bound on a query, letting the machine's speed decide. An error, until --metadata gives the bound."""
    with StubOpenAIServer() as srv:
        flags = ["--model", "local-completions", "--model_args",
                 f"model=m,base_url={srv.base_url}/completions,tokenizer_backend=none,timeout=10",
                 "--tasks", "magnifico_direct_base", "--confirm_run_unsafe_code"]
        proc = run_cli(["lm-eval-ext", "check", *flags, "--metadata", json.dumps({"interpretations": "maximum"})])
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        (paragraph,) = _paragraphs(proc.stderr)
        assert paragraph == (
            "The MAGNIFICo option timeout=10 is below 60 seconds. It is a wall-clock backstop far above what the "
            "instruction budget takes; a lower one would let the machine's speed decide which queries fail. The "
            "harness passes --model_args to the tasks too, so a model's timeout= sets it when --metadata does not: "
            """give --metadata '{"timeout": 60}' (--metadata wins over --model_args), or a larger value.""")
        proc = run_cli(["lm-eval-ext", "check", *flags, "--metadata",
                        json.dumps({"interpretations": "maximum", "timeout": 60})])
        assert proc.returncode == 0, proc.stderr[-3000:]


def test_prompts_that_would_stop_the_run_are_found_before_the_model(run_cli, tiny_model_dir, data_dir, tmp_path):
    """With the model's context known (2,048 tokens, counted with the tiny model's tokenizer), the prompts the run
    would stop on are found before the model is loaded: Lost in the Middle's when none fits, ELITR-Bench's when one
    does not (alone, and the first turn of a conversation), with the run's --gen_kwargs. The policies that let a run
    go on (truncate) pass."""
    window = {"max_length": 2048, "tokenizer": str(tiny_model_dir)}
    tasks = "litm_kv_75keys,litm_qa_closedbook,elitr_bench_qa_dev_st,elitr_bench_qa_dev_mt"
    flags = ["--tasks", tasks, "--limit", "3", "--predict_only", "--output_path", str(tmp_path / "out"),
             "--gen_kwargs", "max_gen_toks=64"]
    proc = run_cli(["lm-eval-ext", "run", *_canned(tmp_path), *flags, "--metadata", json.dumps(window)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    litm, single, conversation = _paragraphs(proc.stderr)
    context = f"context length 2048 (max_length=2048), tokens counted with {tiny_model_dir}"
    assert litm.startswith(f"Task litm_kv_75keys: none of its 3 prompts fits the model's {context} (with the tokens "
                           "reserved for the answer), so none of its documents could be scored; nothing was generated. "
                           "What would help:")
    measured = (f"the {context}, with max_gen_toks=64 reserved for the answer; measured without a chat template or a "
                "system instruction, which only lengthen them. The longest, ")
    assert single.startswith(f"elitr_bench_qa_dev_st: 3 of 3 prompts do not fit {measured}meeting_en_dev_001 question ")
    assert conversation.startswith("elitr_bench_qa_dev_mt: the first turn of 1 of 1 conversations (the transcript and "
                                   "the first question, which every later turn holds) does not fit "
                                   f"{measured}the conversation on meeting_en_dev_001, has ")
    for paragraph in (single, conversation):
        assert int(re.search(r"has (\d+) tokens", paragraph)[1]) > 2048 - 64
        assert paragraph.endswith("""or pass --metadata '{"overflow": "truncate"}' to cut the middle of the transcript """
                                  "of the prompts that do not fit (they are counted in `prompts_truncated`).")
    assert not (tmp_path / "calls.jsonl").exists()

    truncate = {**window, "litm_too_long": "truncate", "overflow": "truncate"}
    proc = run_cli(["lm-eval-ext", "check", *_canned(tmp_path), *flags, "--metadata", json.dumps(truncate)])
    assert proc.returncode == 0, proc.stderr[-3000:]
