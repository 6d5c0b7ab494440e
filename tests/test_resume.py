"""Nothing generated is lost: answers are saved before judging, and `lm-eval-ext resume` finishes the judging.

The answering model is scripted (ext-canned-gen, with a calls log: resuming must not call it); the
judge is the stub server, which scores an answer "A<n>" with n. Every judge verdict is cached in a
SQLite file (keyed by endpoint: one stub serves the run and its resumption), so resuming must send the
judge only what was not judged before. A run with a chat template is resumed with the prompts and the chat
template its model gave, which its saved answers record.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from doubles import LM_EVAL_EXT
from doubles.stub_openai import StubOpenAIServer
from helpers.judge import answering_the_probe, is_probe, judge_calls
from helpers.files import subprocess_env

pytestmark = pytest.mark.slow

KEY_ENV = "LMX_RESUME_KEY"
KEY = "sk-resume-test-key-0123456789abcdef"
TASK = "elitr_bench_qa_dev_st"
N = 6  # questions: the first six of the dev set


def _answer_of(request: dict) -> str:
    return re.search(r"### Response to evaluate:\n(.*?)\n\n###", request["messages"][-1]["content"], re.S).group(1)


def scores(request: dict) -> str:
    """A judge that scores "A<n>" with n (and a probe with 10)."""
    return f"Fine. \\boxed{{{_answer_of(request)[1:]}}}"


def _setup(tmp_path: Path, pretrained: Path | None = None) -> tuple[list[str], Path]:
    """The run's flags (without the judge URL) and its answers directory; ``pretrained``: the name the scripted
    model's run gets (the harness names the results folder after it; the length check counts with its tokenizer)."""
    questions = tmp_path / "responses.json"
    # question k (1-based, in document order) is answered "A<k+2>": scores 3..8, mean 5.5
    from lm_eval_ext.elitr.data import build_documents

    docs, _ = build_documents("qa", "dev", "en")
    rules = [{"contains": doc["question"].strip(), "response": f"A{k + 3}"} for k, doc in enumerate(docs[:N])]
    questions.write_text(json.dumps({"rules": rules[::-1], "default": None}))
    answers = tmp_path / "answers"
    named = f",pretrained={pretrained}" if pretrained else ""
    flags = ["--model", "ext-canned-gen", "--model_args",
             f"responses={questions},calls_log={tmp_path / 'calls.jsonl'}{named}",
             "--tasks", TASK, "--limit", str(N), "--output_path", str(tmp_path / "out"), "--log_samples"]
    return flags, answers


def _metadata(srv, tmp_path: Path, answers: Path, **extra) -> list[str]:
    return ["--metadata", json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                                      "judge_cache": str(tmp_path / "verdicts.sqlite"), "answers_dir": str(answers),
                                      "judge_concurrency": 1, **extra})]


def _results(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.rglob("results_*.json"))]


def _generations(tmp_path: Path) -> int:
    log = tmp_path / "calls.jsonl"
    return sum(call["n_requests"] for call in map(json.loads, log.read_text().splitlines())) if log.exists() else 0


def test_judging_killed_midway_is_finished_by_resume(run_cli, data_dir, tmp_path):
    flags, answers = _setup(tmp_path)
    env = subprocess_env({KEY_ENV: KEY})
    with StubOpenAIServer(responder=answering_the_probe(scores), models=(), delay_s=0.5) as srv:
        # a process of its own: it is killed (SIGKILL)
        proc = subprocess.Popen([*LM_EVAL_EXT, "run", *flags, *_metadata(srv, tmp_path, answers)], env=env, cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while len(judge_calls(srv)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)  # kill -9 while the judge works
        proc.wait()
        before = len(judge_calls(srv))
        assert 3 <= before < N and _generations(tmp_path) == N
        assert not _results(tmp_path / "out")  # the run died before writing anything
        (run,) = answers.iterdir()
        import sqlite3

        cached = sqlite3.connect(tmp_path / "verdicts.sqlite").execute("SELECT COUNT(*) FROM judge_replies").fetchone()[0]
        assert cached >= 2  # what the judge answered before the kill was kept

        srv.delay_s = 0
        proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        after = judge_calls(srv)[before:]
    assert len(after) == N - cached  # 0 repeated judge calls for the items judged before the kill
    assert _generations(tmp_path) == N  # nothing generated again
    (results,) = _results(tmp_path / "out")
    metrics = results["results"][TASK]
    assert metrics["score,judge"] == 5.5 and metrics["judge_failures,judge"] == 0
    assert results["config"]["model"] == "ext-canned-gen"  # the original model, as a full run records it
    assert results["config"]["resumed_from"] == str(run)
    assert not run.exists()  # removed once the results were written


def test_lm_eval_ext_run_keeps_the_answers_the_judge_failed_on(run_cli, data_dir, tmp_path):
    """`lm-eval-ext run` removes a run's saved answers once its results are written, but not while the judge failed
    on some of them: the note names the resume command, and resume judges only those."""
    flags, answers = _setup(tmp_path)
    sequence = [None, None, None, "500"]  # the probe, A3, A4, then a server error for A5
    with StubOpenAIServer(responder=answering_the_probe(scores), models=(), fault_sequence=sequence) as srv:
        proc = run_cli(["lm-eval-ext", "run", *flags, *_metadata(srv, tmp_path, answers, judge_retries=0)],
                       env={KEY_ENV: KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        (run,) = answers.iterdir()
        assert (f"lm-eval-ext: note: the judge failed on 1 answer(s), so the run's answers are kept in {run}: "
                f"`lm-eval-ext resume {run}` judges them again") in proc.stderr
        before = len(judge_calls(srv))
        proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert [_answer_of(body) for body in judge_calls(srv)[before:]] == ["A5"]
    assert not run.exists()  # judged in full: the answers are removed
    assert _results(tmp_path / "out")[-1]["results"][TASK]["judge_failures,judge"] == 0


def test_a_resumed_run_is_the_same_run_in_results_report_and_export(run_cli, data_dir, tiny_model_dir, tmp_path):
    """A judge fails on one answer under plain `lm_eval`; `lm-eval-ext resume` judges it: the resumed results carry the
    original model's name, arguments and results folder, say where they were resumed from and how many verdicts came
    from the cache, and `report` and `export` see one model (one record, the resumed run marked)."""
    flags, answers = _setup(tmp_path, pretrained=tiny_model_dir)
    # one at a time, in order: the probe, then A3, A4, A5 (a server error), A6, A7, A8
    sequence = [None, None, None, "500"]
    with StubOpenAIServer(responder=answering_the_probe(scores), models=(), fault_sequence=sequence) as srv:
        proc = run_cli(["lm_eval", "run", *flags, *_metadata(srv, tmp_path, answers, judge_retries=0,
                                                           max_length=10**6)],
                       env={KEY_ENV: KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        (first,) = _results(tmp_path / "out")
        assert math.isnan(first["results"][TASK]["score,judge"])  # never the mean of the five others
        assert first["results"][TASK]["judge_failures,judge"] == 1
        (run,) = answers.iterdir()
        assert f"could not score 1 of {N} answers (1 transport)" in proc.stderr
        assert f"`lm-eval-ext resume {run}` judges them again" in proc.stderr

        before = len(judge_calls(srv))
        proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert [_answer_of(body) for body in judge_calls(srv)[before:]] == ["A5"]  # only the failed answer
    assert _generations(tmp_path) == N
    folders = {path.parent for path in (tmp_path / "out").rglob("results_*.json")}
    assert folders == {tmp_path / "out" / str(tiny_model_dir).replace("/", "__")}  # one folder: the model's
    first_again, resumed = _results(tmp_path / "out")
    assert first_again == first
    assert resumed["results"][TASK]["score,judge"] == 5.5 and resumed["results"][TASK]["judge_failures,judge"] == 0
    assert resumed["model_name"] == first["model_name"] == str(tiny_model_dir)
    assert resumed["config"]["model"] == first["config"]["model"] == "ext-canned-gen"
    assert resumed["config"]["model_args"] == first["config"]["model_args"]
    assert "resumed_from" not in first["config"] and resumed["config"]["resumed_from"] == str(run)
    # one call per answer, the failed one's included; resumed: one call, for the answer the judge failed on
    assert first["configs"][TASK]["metadata"]["judge"]["run"] == {"answers": N, "scored": N - 1, "from_cache": 0,
                                                                  "calls": N}
    assert resumed["configs"][TASK]["metadata"]["judge"]["run"] == {"answers": N, "scored": N, "from_cache": N - 1,
                                                                    "calls": 1}

    report = run_cli(["lm-eval-ext", "report", str(tmp_path / "out"), "-o", str(tmp_path / "report")])
    assert report.returncode == 0, report.stderr[-3000:]
    import csv

    with open(tmp_path / "report" / "tables" / "runs.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["model"], row["model_source"], row["resumed_from"]) for row in rows] == [
        (tiny_model_dir.name, "ext-canned-gen", ""),
        (tiny_model_dir.name, "ext-canned-gen", f"{run}; {TASK}: {N - 1} verdicts from the judge's cache")]

    export = run_cli(["lm-eval-ext", "export", str(tmp_path / "out"), "--allow-partial", "-o", str(tmp_path / "lb")])
    assert export.returncode == 0, export.stderr[-3000:]
    (record_file,) = (tmp_path / "lb").glob("*.json")
    record = json.loads(record_file.read_text())
    assert record["model"]["label"] == tiny_model_dir.name and record["model"]["name"] == str(tiny_model_dir)
    assert record["model"]["source"] == "ext-canned-gen"
    (exported_run,) = record["runs"]  # the newest run of the task: the resumed one
    assert exported_run["resumed"] == {"from": str(run), "verdicts_from_cache": {TASK: N - 1}}
    assert record["benchmarks"]["elitr_bench"]["headline"][f"{TASK}/score"] == 5.5


def test_a_judge_lost_during_the_run_names_the_command_that_finishes(run_cli, data_dir, tmp_path):
    flags, answers = _setup(tmp_path)
    # the probe and two verdicts come through; then the judge drops every connection
    sequence = [None, None, None] + ["drop"] * 40
    with StubOpenAIServer(responder=answering_the_probe(scores), models=(), fault_sequence=sequence) as srv:
        proc = run_cli(["lm-eval-ext", "run", *flags, *_metadata(srv, tmp_path, answers, judge_retries=1)],
                       env={KEY_ENV: KEY})
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        (run,) = answers.iterdir()
        error = proc.stderr[proc.stderr.index("lm-eval-ext: error:"):]
        assert "The answers were saved before judging" in error and f"`lm-eval-ext resume {run}`" in error
        srv.fault_sequence.clear()
        before = len([r for r in srv.requests if r["method"] == "POST" and r["fault"] is None and not is_probe(r["body"])])
        proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        answered = [r for r in srv.requests if r["method"] == "POST" and r["fault"] is None and not is_probe(r["body"])]
        assert before == 2 and len(answered) - before == N - 2  # the two verdicts given before came from the cache
    assert _results(tmp_path / "out")[-1]["results"][TASK]["score,judge"] == 5.5


def test_results_that_cannot_be_written_fail_the_run_and_resume_writes_them(run_cli, data_dir, tmp_path):
    """A full disk while the harness writes the results: exit 2, the cut file set aside, resume writes them whole."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -3.0}))
    answers = tmp_path / "answers"
    flags = ["--model", "ext-loglik-table", "--model_args", f"table={table}", "--tasks", "lieder_base", "--limit", "4",
             "--metadata", json.dumps({"answers_dir": str(answers)})]
    # 16 kB: the answers fit, the results file (larger) is cut short. A full disk: every file of the run stops growing
    # there (RLIMIT_FSIZE, in a process of its own: the limit is the process's; Python ignores SIGXFSZ, so a write
    # past the limit fails with EFBIG)
    proc = run_cli([*LM_EVAL_EXT, "run", *flags, "--output_path", tmp_path / "out"], file_size_limit=16384)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (cut,) = (tmp_path / "out").rglob("results_*.json.incomplete")
    assert cut.stat().st_size == 16384 and not list((tmp_path / "out").rglob("results_*.json"))
    (saved,) = answers.iterdir()
    assert (f"lm-eval-ext: error: The run finished but the results file was cut short (set aside as {cut}) (a full "
            f"disk or a read-only directory?). The answers are saved in {saved}: `lm-eval-ext resume {saved} "
            "--output_path DIR` scores them again and writes the results to a writable DIR.") in proc.stderr

    resumed = run_cli(["lm-eval-ext", "resume", saved, "--output_path", tmp_path / "again"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (written,) = _results(tmp_path / "again")
    direct = run_cli(["lm-eval-ext", "run", *flags, "--output_path", tmp_path / "direct"])
    assert direct.returncode == 0, direct.stderr[-3000:]
    (expected,) = _results(tmp_path / "direct")
    assert written["results"] == expected["results"] and written["n-samples"] == expected["n-samples"]
    assert not saved.exists()  # resume removes the answers once the results are written
    again = run_cli(["lm-eval-ext", "resume", saved])  # the same command once more, from the shell's history
    assert again.returncode == 2 and again.stderr.endswith(
        f"lm-eval-ext: error: {saved} does not exist. A run's saved answers are removed once its results are written "
        "(by `lm-eval-ext run`, or by `lm-eval-ext resume`, whose last message names a new directory when some "
        "answers are left to judge). Check the path.\n"), again.stderr[-2000:]
    elsewhere = run_cli(["lm-eval-ext", "resume", tmp_path])  # a directory, but no run's
    assert elsewhere.returncode == 2 and elsewhere.stderr.endswith(
        f"lm-eval-ext: error: {tmp_path} holds no saved answers (a run directory holds <task>.jsonl files written "
        "before scoring; the run's log names it). Check the path.\n"), elsewhere.stderr[-2000:]


def test_a_run_set_up_in_a_config_file_checks_its_results_and_removes_its_answers(run_cli, data_dir, tmp_path):
    """`lm-eval-ext run --config FILE` with the output path and the answers folder only in the file: the command
    reads them as the harness does (the file under the flags), so it removes the run's answers once its results
    are written, as with flags."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -3.0}))
    answers = tmp_path / "answers"
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({"model": "ext-loglik-table", "model_args": {"table": str(table)},
                                  "tasks": ["lieder_base"], "limit": 4, "output_path": str(tmp_path / "out"),
                                  "metadata": {"answers_dir": str(answers)}}))  # JSON is YAML
    proc = run_cli(["lm-eval-ext", "run", "--config", config])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results,) = _results(tmp_path / "out")
    assert results["results"]["lieder_base"]["alias"] == "lieder_base"
    assert answers.is_dir() and not list(answers.iterdir())  # the run's answers were saved there, then removed


def test_samples_that_cannot_be_written_fail_the_run_and_resume_writes_them(run_cli, data_dir, tmp_path):
    """A full disk while the harness writes the samples: exit 2, the cut samples file set aside (not left under its
    own name), resume writes results and samples whole."""
    full = 65536  # bytes: no file of the run grows past this size
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -3.0}))
    answers = tmp_path / "answers"
    flags = ["--model", "ext-loglik-table", "--model_args", f"table={table}", "--tasks", "lieder_base", "--limit", "16",
             "--log_samples", "--metadata", json.dumps({"answers_dir": str(answers)})]
    # 64 kB: the answers and the results file (about 21 kB on lm-eval 0.4, more on 0.5) fit, the samples file (about
    # 134 kB) does not; a process of its own: the file-size limit is the process's
    proc = run_cli([*LM_EVAL_EXT, "run", *flags, "--output_path", tmp_path / "out"], file_size_limit=full)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (results,) = (tmp_path / "out").rglob("results_*.json")
    json.loads(results.read_text())  # whole
    (cut,) = (tmp_path / "out").rglob("samples_*.jsonl.incomplete")
    assert cut.stat().st_size == full and not list((tmp_path / "out").rglob("samples_*.jsonl"))
    (saved,) = answers.iterdir()
    assert (f"lm-eval-ext: error: The run finished but the samples file {cut.name[:-len('.incomplete')]} was cut "
            f"short (set aside as {cut}) (a full disk or a read-only directory?). The answers are saved in {saved}: "
            f"`lm-eval-ext resume {saved} --output_path DIR` scores them again and writes the results to a writable "
            "DIR.") in proc.stderr

    resumed = run_cli(["lm-eval-ext", "resume", saved, "--output_path", tmp_path / "again"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (samples,) = (tmp_path / "again").rglob("samples_lieder_base_*.jsonl")
    assert sorted(json.loads(line)["doc_id"] for line in samples.read_text().splitlines()) == list(range(16))
    assert cut.read_bytes() == samples.read_bytes()[:full]  # the same samples, cut where the disk was full


def test_a_group_named_in_the_saved_command_is_resumed_through_its_tasks(tmp_path, capsys):
    """The saved run named a group and a task (`--tasks lieder,lieder_base`, as the harness reads it: split at the
    comma); its answers are of the task alone: resume runs that task, and a note names the group."""
    from lm_eval_ext.answers import FORMAT
    from lm_eval_ext.commands.resume import resume_arguments

    command = ["lm-eval-ext", "run", "--model", "hf", "--model_args", "pretrained=m", "--tasks", "lieder,lieder_base"]
    (tmp_path / "lieder_base.jsonl").write_text(json.dumps({"format": FORMAT, "task": "lieder_base", "command": command,
                                                            "rank": 0, "world_size": 1}) + "\n")
    flags = resume_arguments(str(tmp_path), [])
    assert flags[flags.index("--tasks") + 1:] == ["lieder_base"]
    assert capsys.readouterr().err == (f"lm-eval-ext: note: lieder saved no answers of their own in {tmp_path} (groups "
                                       "and tags are resumed through their tasks: lieder_base)\n")


def test_an_empty_samples_file_is_set_aside(tmp_path):
    """A samples file left empty (the disk was full when the harness opened it) is not left under its real name."""
    from lm_eval_ext.commands.run import ResultsNotWrittenError, _check_results

    out = tmp_path / "out" / "model"
    out.mkdir(parents=True)
    (out / "results_2030-01-01T00-00-00.json").write_text("{}")
    (out / "samples_lieder_base_2030-01-01T00-00-00.jsonl").write_text('{"doc_id": 0}\n')
    empty = out / "samples_lieder_two_2030-01-01T00-00-00.jsonl"
    empty.touch()
    with pytest.raises(ResultsNotWrittenError) as caught:
        _check_results(tmp_path / "out", started=time.time() - 1, saved=tmp_path / "no-answers")
    assert str(caught.value) == (f"The run finished but the samples file {empty.name} was cut short (set aside as "
                                 f"{empty}.incomplete) (a full disk or a read-only directory?). ")
    assert sorted(p.name for p in out.iterdir()) == [
        "results_2030-01-01T00-00-00.json", "samples_lieder_base_2030-01-01T00-00-00.jsonl",
        "samples_lieder_two_2030-01-01T00-00-00.jsonl.incomplete"]


# The first questions of the closed-book Lost in the Middle data, in document order, and an accepted answer
CLOSEDBOOK = [("who got the first nobel prize in physics", "Wilhelm Conrad Röntgen"),
              ("when is the next deadpool movie being released", "May 18, 2018")]
SYSTEM = "Answer in a few words."


def _posts(srv) -> int:
    return sum(request["method"] == "POST" for request in srv.requests)


@pytest.mark.parametrize("model", ["ext-canned-gen", "local-chat-completions"])
def test_a_chat_run_resumed_builds_its_prompts_and_records_its_chat_template(run_cli, data_dir, tmp_path, model):
    """A run with --apply_chat_template (and a system prompt), resumed from its saved answers: the replay builds the
    run's chat prompts byte for byte (sample logs, task hashes), the results record the run's chat template and
    settings, so the report sees one model, and nothing is generated again. ext-canned-gen renders the chat as text
    and has a chat template of its own; local-chat-completions (the stub server) sends the messages, its chat
    template is the server's."""
    from doubles.scripted import CHAT_TEMPLATE
    from lm_eval_ext.results.load import load_models

    def lines(request: dict) -> str:
        return "".join(f"{m['role']}: {m['content']}\n" for m in request["messages"])

    # question 0 is answered right; question 1 only below the system prompt, so the prompts must carry both the
    # chat template and --system_instruction (the stub's chat is matched as ext-canned-gen renders it)
    (question0, answer0), (question1, answer1) = CLOSEDBOOK
    rules = [{"contains": f"user: Question: {question0}\n", "response": answer0},
             {"contains": f"system: {SYSTEM}\nuser: Question: {question1}\n", "response": answer1}]
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": "no idea"}))
    answers, task = tmp_path / "answers", "litm_qa_closedbook"

    def reply(request: dict) -> str:
        return next((rule["response"] for rule in rules if rule["contains"] in lines(request)), "no idea")

    with StubOpenAIServer(responder=reply) as srv:
        model_args = (f"responses={responses},calls_log={tmp_path / 'calls.jsonl'}" if model == "ext-canned-gen"
                      else f"model=stub,base_url={srv.chat_url}")
        flags = ["--model", model, "--model_args", model_args, "--tasks", task, "--limit", "4",
                 "--apply_chat_template", "--system_instruction", SYSTEM, "--log_samples",
                 "--metadata", json.dumps({"answers_dir": str(answers)})]
        # plain lm_eval keeps the run's answers
        first = run_cli(["lm_eval", "run", *flags, "--output_path", str(tmp_path / "first")])
        assert first.returncode == 0, first.stderr[-3000:]
        (saved,) = answers.iterdir()
        generated = (_generations(tmp_path), _posts(srv))
        resumed = run_cli(["lm-eval-ext", "resume", str(saved), "--output_path", str(tmp_path / "resumed")])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert (_generations(tmp_path), _posts(srv)) == generated  # nothing generated again
    assert generated == ((4, 0) if model == "ext-canned-gen" else (0, 4))
    (original,), (again,) = _results(tmp_path / "first"), _results(tmp_path / "resumed")
    assert original["results"][task]["acc,first_line"] == 0.5  # questions 0 and 1 of 4
    assert again["results"] == original["results"] and again["task_hashes"] == original["task_hashes"]
    template = CHAT_TEMPLATE if model == "ext-canned-gen" else ""  # a chat API's template is the server's
    settings = ("chat_template", "chat_template_sha", "fewshot_as_multiturn", "system_instruction",
                "system_instruction_sha", "model_name")
    assert {key: again[key] for key in settings} == {key: original[key] for key in settings}
    assert original["chat_template"] == template and original["system_instruction"] == SYSTEM
    assert original["chat_template_sha"] == (hashlib.sha256(template.encode()).hexdigest() if template else None)
    assert again["config"]["resumed_from"] == str(saved)

    def prompts(out: Path) -> list:
        (samples,) = out.rglob(f"samples_{task}_*.jsonl")
        return [line["arguments"] for line in sorted(map(json.loads, samples.read_text().splitlines()),
                                                     key=lambda line: line["doc_id"])]

    assert prompts(tmp_path / "resumed") == prompts(tmp_path / "first")
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Question: {question0}\nAnswer:"}]
    logged = prompts(tmp_path / "first")[0]["gen_args_0"]["arg_0"]
    if model == "ext-canned-gen":
        assert logged == lines({"messages": messages})
    else:  # the harness's JsonChatStr, logged as a list; lm-eval 0.5 adds "type": "text" to each message
        (text,) = logged
        assert [{key: m[key] for key in ("role", "content")} for m in json.loads(text)] == messages
    (one_model,) = load_models([str(tmp_path / "first"), str(tmp_path / "resumed")])
    assert len(one_model.runs) == 2
