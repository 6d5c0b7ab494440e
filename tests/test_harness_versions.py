"""One codebase on every supported harness: lm-eval 0.4.12, 0.4.13 and 0.5.0.dev1.

Run this module under each of them (docs/testing.md). The run test gives plain ``lm_eval run`` one task
of each benchmark (ELITR-Bench multi-turn, with its judge filter) with the scripted test double and
checks the same numbers on every version (tests/fixtures/harness_versions_results.json), and
``lm-eval-ext run`` the same numbers as ``lm_eval run``. Where the harness's output or configs differ
between versions, the plugin's readers, its unsafe-code mark and its judge check give the same on each.
The guard tests switch each adaptation to a harness difference off (the boundary's detected feature
turned round) and check that ``boundary.missing_internals`` names what then no longer holds; and they
take away, one at a time, each internal the plugin's commands reach through the boundary, and check
that it is named.
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

from helpers.files import FIXTURES
from helpers.harness import broken
from helpers.judge import answering_the_probe
from helpers.runs import Run, lm_eval_run
from helpers.scripted import MAGNIFICO_GOLDS, elitr_meeting_rules, litm_kv4_rules, write_lieder_table

TASKS = ("lieder_base", "litm_kv_generated", "magnifico_direct_plausible", "elitr_bench_qa_dev_mt")
MEETINGS = ("meeting_en_dev_001",)  # --limit 8: the first 8 questions of meeting 1, as one conversation

# What each detected difference stands for: the internal the guard names when the adaptation is switched off
# on a harness that has the difference (and the one it names when switched on where the harness lacks it).
INTERNALS = {
    "instance_keywords": ("Instance(task_name=, doc_id=, repeats=)", "Instance(metadata=(task_name, doc_id, repeats))"),
    "doc_id_keyword": ("construct_requests(doc, ctx, *, doc_id", "construct_requests(doc, ctx, **kwargs) given metadata"),
    "per_type_task_classes": ("Task._registry of one class per output type", "construct_requests building requests"),
    "lazy_documents": ("dataset loaded when first read", "__init__ loading the documents"),
    "scorers": ("_build_scorers, Task.aggregate and lm_eval.scorers.build_scorer", "no scorers"),
    "filters_list_per_doc": ("a list per document (take_first: [r[0]])", "one value per document (take_first: r[0])"),
    "filter_options_in_kwargs": ("options under kwargs", "options beside function"),
    "private_task_index": ("TaskManager._task_index", "TaskManager.task_index"),
    "task_names_stripped": ("task names at commas, the spaces around them dropped",
                            "task names at commas, the spaces around them kept"),
}

# The internals the plugin's commands reach through the boundary: what the guard names -> the boundary's function
# that reaches it (made to fail as on a harness without it).
COMMAND_INTERNALS = {
    "EvaluatorConfig.from_cli": "run_config",
    "lm_eval.__main__.cli_evaluate(), the function of the `lm_eval` command": "_harness_command",
    "lm_eval.models.api_models.TemplateAPI taking seed=": "_template_api",
    "lm_eval._cli.utils.handle_cli_value_string": "read_flag_value",
}


def judge_score(question: str) -> int:
    """The stub judge's score of an answer to ``question``."""
    return 1 + len(question) % 10


pytestmark = pytest.mark.xdist_group("harness_versions")  # one worker builds `out`

@pytest.fixture(scope="module")
def out(tmp_path_factory, data_dir, tiny_model_dir) -> Path:
    """``lm_eval run`` of the four tasks, --limit 8, with the scripted model and a stub judge."""
    from doubles.stub_openai import StubOpenAIServer

    root = tmp_path_factory.mktemp("harness_versions")
    table = write_lieder_table(data_dir, root / "table.json")
    rules = litm_kv4_rules(root / "kv4.jsonl")
    rules += [{"contains": f"-- {text}\nSELECT", "response": body} for text, body in MAGNIFICO_GOLDS.items()]
    rules += elitr_meeting_rules(MEETINGS)[0]
    responses = root / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": "no_such_column FROM no_such_table",
                                     "turn_marker": "QUESTION: "}))

    def judge(request: dict) -> str:
        question = re.search(r"### Question:\n(.*?)\n\n### Response to evaluate:", request["messages"][-1]["content"], re.S)[1]
        return f"Feedback: fine.\n\\boxed{{{judge_score(question.strip())}}}"

    with StubOpenAIServer(responder=answering_the_probe(judge), model="stub-judge") as server:
        # --metadata as JSON: the one form every supported harness version accepts
        metadata = {"max_length": 3000, "tokenizer": str(tiny_model_dir), "litm_kv_pairs": 4,
                    "litm_kv_file": str(root / "kv4.jsonl"), "litm_positions": "all", "qa_markers": True,
                    "overflow": "truncate", "judge_model": "stub-judge", "judge_cache": "none",
                    "judge_base_url": server.base_url}
        folder = lm_eval_run(["--model", "ext-scripted-dist", "--model_args", f"table={table},responses={responses}",
                           "--tasks", ",".join(TASKS), "--confirm_run_unsafe_code", "--metadata", json.dumps(metadata),
                           "--limit", "8"], root / "run", env={"OPENAI_API_KEY": "sk-test-not-a-secret"})
    return folder


@pytest.fixture(scope="module")
def run(out) -> Run:
    return Run.load(out)


def same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_every_benchmark_gives_the_same_numbers_on_this_harness(run):
    expected = json.loads((FIXTURES / "harness_versions_results.json").read_text())
    for task in TASKS:
        # the documents scored, which lm-eval 0.4.12 miscounts (tests/helpers/harness.py, docs/troubleshooting.md)
        if not broken("sample_count"):
            assert run.results["n-samples"][task]["effective"] == expected[task]["sample_len"] == 8
        expected[task].pop("sample_len")
        got = {k: v for k, v in run.results["results"][task].items() if k not in ("alias", "name", "sample_len")}
        assert set(got) == set(expected[task]), (task, sorted(set(got) ^ set(expected[task])))
        wrong = {k: (got[k], v) for k, v in expected[task].items() if not same(got[k], v)}
        assert not wrong, (task, wrong)
    # independent of the fixture: the judge's scores are the stub's, each answer judged once
    elitr = run.samples["elitr_bench_qa_dev_mt"]
    scores = [judge_score(s["doc"]["question"]) for s in elitr]
    assert run.results["results"]["elitr_bench_qa_dev_mt"]["score,judge"] == sum(scores) / len(scores)
    assert [s["doc"]["turn"] for s in sorted(elitr, key=lambda s: s["doc_id"])] == list(range(1, 9))


def test_the_plugins_readers_read_this_harness_s_files(out, run):
    from lm_eval_ext.results.load import find_results, read_run

    (path,) = find_results(out)
    loaded = read_run(path)
    magnifico = loaded.metrics("magnifico_direct_plausible")
    assert (magnifico["ex"], magnifico["ex_base"], magnifico["rel_perf"]) == (0.5, 1.0, 50.0)
    assert loaded.metrics("litm_kv_generated")["acc"] == 0.25
    for task in TASKS:
        assert [s["doc_id"] for s in loaded.samples(task)] == [s["doc_id"] for s in run.samples[task]]
    # the per-document values the report reads from the sample logs
    items = [s["rel_perf"] for s in loaded.samples("magnifico_direct_plausible")]
    assert [(item["side"], item["score"]) for item in items] == [("novel", 1), ("base", 1)] * 2 + [("novel", 0), ("base", 1)] * 2


def test_the_documents_a_run_took_are_counted_on_this_harness(out, run):
    """--limit 8: each task took 8 documents. The tasks record it, so that the reports read 8 where lm-eval 0.4.12's
    own count (n-samples.effective) is that of the task's last metric (a LIEDER family, a LitM position)."""
    from lm_eval_ext.results.load import find_results, read_run
    from lm_eval_ext.results.status import documents_scored, run_status

    (path,) = find_results(out)
    loaded = read_run(path)
    for task in TASKS:
        assert run.results["configs"][task]["metadata"]["documents"] == 8
        assert loaded.documents(task)["effective"] == 8
    assert documents_scored(loaded, "lieder_base") == 8  # less skipped prompts and judge failures: LIEDER has none
    scored = [flag.text() for flag in run_status(loaded).flags if "documents scored" in flag.text()]
    assert [text.split(" of ")[0] for text in scored] == [f"{task}: 8" for task in loaded.tasks if task in TASKS]


def test_the_guard_finds_everything_on_this_harness():
    from lm_eval_ext import boundary

    assert boundary.missing_internals() == []
    assert boundary.guard_paragraph() is None


@pytest.mark.parametrize("feature", sorted(INTERNALS))
def test_the_guard_names_each_difference_when_its_adaptation_is_switched_off(monkeypatch, feature):
    from lm_eval_ext import boundary

    found = boundary.features()
    wrong = found._replace(**{feature: not getattr(found, feature)})
    monkeypatch.setattr(boundary, "features", lambda: wrong)
    missing = boundary.missing_internals()
    # the internal the wrong setting relies on is named, and nothing else
    named = INTERNALS[feature][0 if getattr(wrong, feature) else 1]
    assert len(missing) == 1 and named in missing[0], missing
    paragraph = boundary.guard_paragraph()
    assert named in paragraph and "0.4.12, 0.4.13, 0.5.0.dev1" in paragraph and "\n" not in paragraph
    assert f"lm-eval {boundary.harness_version()}" in paragraph


@pytest.mark.parametrize("internal", sorted(COMMAND_INTERNALS))
def test_the_guard_names_each_internal_the_commands_use_when_it_is_gone(monkeypatch, internal):
    from lm_eval.api.registry import get_model

    from lm_eval_ext import boundary

    def gone(*args, **kwargs):
        raise AttributeError("not in this harness")

    get_model("local-completions")  # an API model loaded: the guard looks inside TemplateAPI only then
    monkeypatch.setattr(boundary, COMMAND_INTERNALS[internal], gone)
    missing = boundary.missing_internals()
    assert len(missing) == 1 and internal in missing[0], missing


def _build_all_requests(self, *, limit=None, rank=0, world_size=1):  # fewer keywords than the evaluator passes
    raise AssertionError("not called")


def _fewshot_context(self, doc, num_fewshot, system_instruction=None):  # fewer parameters than the tasks take
    raise AssertionError("not called")


def _task_manager_init(self, verbosity=None, include_path=None, include_defaults=True, metadata=None):
    raise AssertionError("not called")  # builds no index with the module's TaskIndex


@pytest.mark.parametrize("owner, name, replacement, named", [
    ("lm_eval.api.task:Task", "build_all_requests", _build_all_requests, "Task.build_all_requests(rank, world_size"),
    ("lm_eval.api.task:ConfigurableTask", "fewshot_context", _fewshot_context, "ConfigurableTask.fewshot_context("),
    ("lm_eval.tasks.manager:TaskManager", "__init__", _task_manager_init, "with the manager module's TaskIndex"),
])
def test_the_guard_names_each_method_the_tasks_rely_on_when_it_changes(monkeypatch, owner, name, replacement, named):
    import importlib

    from lm_eval_ext import boundary

    if name == "__init__" and boundary.harness_discovers(boundary.TASKS_GROUP):
        pytest.skip("this harness discovers plugin tasks itself: the plugin does not add them through TaskIndex")
    module, cls = owner.split(":")
    monkeypatch.setattr(getattr(importlib.import_module(module), cls), name, replacement)
    missing = boundary.missing_internals()
    assert len(missing) == 1 and named in missing[0], missing


def test_the_guard_names_json_chat_str_when_it_holds_no_prompt(monkeypatch):
    from lm_eval.api.registry import get_model

    from lm_eval_ext import boundary

    get_model("local-chat-completions")  # an API model loaded: the guard looks inside its module only then
    monkeypatch.setattr(sys.modules[boundary.API_MODELS], "JsonChatStr", str)
    missing = boundary.missing_internals()
    assert len(missing) == 1 and "JsonChatStr(prompt)" in missing[0], missing


def test_the_commands_read_the_run_and_its_model_as_this_harness_does():
    from lm_eval.api.registry import get_model

    from lm_eval_ext import boundary
    from lm_eval_ext.commands.seeds import seed_arguments

    flags = ["--model", "hf", "--tasks", "lieder_base,litm_kv_generated", "--limit", "0.5", "--metadata",
             json.dumps({"judge_model": "m"}), "--output_path", "out", "--include_path", "tasks"]
    config = boundary.run_config(boundary.parse_run_args(flags))
    assert (config.model, config.tasks, config.limit, config.metadata, config.output_path, config.include_path) == (
        "hf", ["lieder_base", "litm_kv_generated"], 0.5, {"judge_model": "m"}, "out", "tasks")
    # the seed protocol gives an API model its seed among its model arguments, and the hf model none
    assert boundary.api_model(get_model("local-completions")) and not boundary.api_model(get_model("hf"))
    api = ["--model", "local-completions", "--model_args", "base_url=http://h/v1/completions,model=m",
           "--tasks", "elitr_bench_qa_test2_st"]
    assert seed_arguments(api, 2024, "out")[len(api):] == ["--seed", "2024", "--output_path", "out/seed_2024",
                                                          "--model_args", "seed=2024"]


def test_the_prompt_length_check_assumes_this_harness_s_defaults():
    """The length check counts the tokens a model reserves for its answer and its context as the harness's adapters
    do when a run does not say: those defaults are copied into lm_eval_ext/prompt_length.py, so a harness that
    changes one fails here."""
    import inspect

    from lm_eval.models.api_models import TemplateAPI
    from lm_eval.models.huggingface import HFLM

    from lm_eval_ext import prompt_length

    api = inspect.signature(TemplateAPI.__init__).parameters
    assert (api["max_gen_toks"].default, api["max_length"].default) == (
        prompt_length.DEFAULT_MAX_GEN_TOKS, prompt_length.API_DEFAULT_MAX_LENGTH)
    # the hf adapter's answer budget is a property that returns a constant (it reads nothing of the model)
    assert HFLM.max_gen_toks.fget(None) == prompt_length.DEFAULT_MAX_GEN_TOKS
    assert HFLM._DEFAULT_MAX_LENGTH == prompt_length.DEFAULT_MAX_LENGTH


def test_no_option_name_or_model_argument_reads_as_a_misspelled_option():
    """The harness passes --model_args to the tasks with --metadata, so a key close to a task option is an error only
    if no model of this harness takes it, no other option of the plugin has that name and no task records it."""
    import inspect

    from lm_eval.api.registry import get_model

    from lm_eval_ext.elitr.task import ElitrTask
    from lm_eval_ext.errors import misspelled_key
    from lm_eval_ext.judge.config import OPTION_NAMES, metadata_name
    from lm_eval_ext.lieder.task import LiederTask
    from lm_eval_ext.litm.task import LitmTask
    from lm_eval_ext.magnifico.task import MagnificoTask

    arguments = set()
    for name in ("hf", "local-completions", "local-chat-completions", "openai-completions", "openai-chat-completions"):
        for cls in get_model(name).__mro__:
            if "__init__" in vars(cls):
                arguments |= set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}
    assert {"pretrained", "base_url", "timeout", "max_length", "num_concurrent"} <= arguments
    recorded = {"version", "prompt_length", "documents_by_position", "documents", "excluded", "reply_format", "judge"}
    tasks = (ElitrTask, LiederTask, LitmTask, MagnificoTask)
    keys = arguments | recorded | {key for task in tasks for key in task.OPTIONS} | {metadata_name(o) for o in OPTION_NAMES}
    for task in tasks:
        assert task.OPTIONS and misspelled_key(keys, task.OPTIONS, task.PREFIX) is None, task


def test_lm_eval_ext_run_gives_the_numbers_of_lm_eval_run(out, run, tmp_path):
    # the harness's own command, run by lm-eval-ext run in its process after the checks (boundary.run_harness)
    inputs = out.parent.parent
    folder = lm_eval_run(["--model", "ext-scripted-dist", "--model_args",
                          f"table={inputs / 'table.json'},responses={inputs / 'responses.json'}",
                          "--tasks", "lieder_base", "--limit", "8"], tmp_path / "ext_run", program="lm-eval-ext")
    assert Run.load(folder).results["results"]["lieder_base"] == run.results["results"]["lieder_base"]


def test_a_missing_internal_stops_the_task_with_the_paragraph(monkeypatch):
    from lm_eval_ext import boundary
    from lm_eval_ext.errors import UserError

    monkeypatch.setattr(boundary, "missing_internals", lambda: ["lm_eval.api.instance.Instance(probe)"])
    boundary.check_harness.cache_clear()
    try:
        with pytest.raises(UserError, match=r"lm_eval.api.instance.Instance\(probe\)\. lm-eval-ext is checked on"):
            boundary.check_harness()
    finally:
        boundary.check_harness.cache_clear()


def test_an_untested_harness_version_is_one_warning_line(monkeypatch, capsys):
    from lm_eval_ext import boundary

    monkeypatch.setattr(boundary, "harness_version", lambda: "0.9.1")
    boundary.check_harness.cache_clear()
    try:
        boundary.check_harness()
        boundary.check_harness()  # once per process
    finally:
        boundary.check_harness.cache_clear()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lm-eval-ext: warning: lm-eval 0.9.1 is not among"), lines


def test_predict_only_keeps_the_answers_of_a_conversation_and_runs_nothing(out, tmp_path):
    # --predict_only: no SQL is executed and no judge asked (no judge_base_url is given: a call would fail)
    inputs = out.parent.parent
    folder = lm_eval_run(["--model", "ext-scripted-dist", "--model_args",
                          f"table={inputs / 'table.json'},responses={inputs / 'responses.json'}",
                          "--tasks", "elitr_bench_qa_dev_mt,magnifico_direct_plausible", "--confirm_run_unsafe_code",
                          "--metadata", json.dumps({"qa_markers": True}), "--limit", "2", "--predict_only"],
                         tmp_path / "predict", program="lm-eval-ext")
    run = Run.load(folder)
    for task in ("elitr_bench_qa_dev_mt", "magnifico_direct_plausible"):
        assert {k for k in run.results["results"][task] if "," in k} == {"bypass,none", "bypass_stderr,none"}
    turns = [json.loads(s["resps"][0][0]) for s in sorted(run.samples["elitr_bench_qa_dev_mt"], key=lambda s: s["doc_id"])]
    assert [(t["turn"], t["text"]) for t in turns] == [(1, "meeting_en_dev_001-answer-1"), (2, "meeting_en_dev_001-answer-2")]


def test_a_group_run_is_read_by_its_tasks_names(out, tmp_path):
    """lm-eval 0.5 keys the tasks of a group by their path (`lieder::lieder_base`) in the results file and the samples
    files' names; the plugin's readers (report, export, leaderboard) name them as 0.4 does."""
    from lm_eval_ext.results.load import find_results, read_run

    inputs = out.parent.parent
    folder = lm_eval_run(["--model", "ext-scripted-dist", "--model_args", f"table={inputs / 'table.json'}",
                          "--tasks", "lieder", "--limit", "8"], tmp_path / "group", program="lm-eval-ext")
    (path,) = find_results(folder)
    written = json.loads(path.read_text())["results"]
    loaded = read_run(path)
    assert sorted(loaded.tasks) == ["lieder", "lieder_base", "lieder_diff"]
    assert loaded.is_group("lieder") and loaded.data["group_subtasks"] == {"lieder": ["lieder_base", "lieder_diff"]}
    for task in ("lieder_base", "lieder_diff"):
        assert [s["doc_id"] for s in loaded.samples(task)] == list(range(8))
        assert loaded.documents(task)["effective"] == 8 and loaded.version(task) == 1.0
        assert loaded.metrics(task)["acc"] == written[loaded.file_keys.get(task, task)]["acc,none"]


def test_a_task_that_executes_model_output_needs_the_confirmation(tmp_path):
    """MAGNIFICo executes the model's SQL: the harness refuses it without --confirm_run_unsafe_code, also on
    lm-eval 0.5.0.dev1, which never marks a task of its own as unsafe (the plugin's tasks mark themselves)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir

    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"default": "SELECT 1"}))
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False)  # the plugin's tasks alone
    with pytest.raises(ValueError, match="magnifico_direct_plausible which is marked as unsafe"):
        lm_eval.simple_evaluate(model="ext-canned-gen", model_args={"responses": str(responses)},
                                tasks=["magnifico_direct_plausible"], task_manager=manager, limit=1)


def test_the_judge_s_request_estimate_reads_the_fields_the_yaml_names(tmp_path):
    """The check before a judged run builds its judge requests from the document fields the task's JudgeFilter names
    (lm-eval 0.5 keeps a filter's options under `kwargs`)."""
    from lm_eval.tasks import TaskManager

    from helpers.judge_toy import DOCS, write_task_dir
    from lm_eval_ext.judge.harness import JudgedTask

    manager = TaskManager(include_path=str(write_task_dir(tmp_path)), include_defaults=False)
    (task,) = manager.load(["judged_toy"])["tasks"].values()
    assert isinstance(task, JudgedTask)  # the toy names question_field: question, reference_field: answer
    prompts = [request["messages"][-1]["content"] for request in task.judge_requests_estimate()]
    assert [re.search(r"### Question:\n(.*?)\n\n### Response to evaluate:\n(.*?)\n\n", p).groups() for p in prompts] == [
        (doc["question"], doc["answer"]) for doc in DOCS]
