"""`lm-eval-ext export --format leaderboard`: records valid under the schema file, numbers equal to the results,
partial runs refused unless --allow-partial (and then marked), LIEDER's derived tests, the judge's validation."""
from __future__ import annotations

import copy
import hashlib
import json
import math
import zipfile
from pathlib import Path

import pytest

from helpers.files import FIXTURES, harness, read_csv, results_json
from helpers.harness import VERSION

SCHEMA = Path(__file__).resolve().parents[1] / "lm_eval_ext" / "export" / "schema" / "leaderboard.schema.json"


def _validator():
    from jsonschema import Draft202012Validator, FormatChecker

    schema = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


def _export(run_cli, tmp_path, *sources, options=()) -> Path:
    out = tmp_path / "lb"
    proc = run_cli(["lm-eval-ext", "export", "--format", "leaderboard", *map(str, sources), "-o", str(out), *options])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_lieder_record_valid_and_exact(lieder_scripted, data_dir, run_cli, tmp_path):
    out = _export(run_cli, tmp_path, f"scripted={lieder_scripted}")
    assert sorted(p.name for p in out.iterdir()) == ["leaderboard.csv", "scripted.json"]
    record = json.loads((out / "scripted.json").read_text())
    assert not list(_validator().iter_errors(record))

    results_file = next(lieder_scripted.rglob("results_*.json"))
    results = results_json(lieder_scripted)
    assert record["model"] == {"label": "scripted", "source": "ext-loglik-table", "name": None,
                               "args": results["config"]["model_args"]}
    assert record["versions"]["lm_eval"] == VERSION  # the harness that made the run
    from lm_eval_ext import __version__

    assert record["versions"]["lm_eval_ext"] == __version__
    assert record["versions"]["tasks"] == {"lieder": "1.0", "lieder_base": "1.0", "lieder_diff": "1.0", "lieder_two": "1.0"}
    assert record["schema_version"] == "1.2"
    assert record["status"] == {"partial": False, "truncated": False, "allowed_partial": False, "reasons": []}
    (run,) = record["runs"]
    assert run["limit"] is None
    assert run["results_sha256"] == hashlib.sha256(results_file.read_bytes()).hexdigest()
    assert run["seeds"] == {"random": 0, "numpy": 1234, "torch": 1234, "fewshot": 1234}  # the harness's defaults
    assert run["apply_chat_template"] is False

    # provenance: every results and samples file with its sha256, exported as community
    provenance = record["provenance"]
    assert provenance["status"] == "community" and provenance["verification"] is None
    samples = sorted(lieder_scripted.rglob("samples_*.jsonl"))
    assert len(samples) == 3
    assert provenance["files"] == [{"kind": "results", "path": str(results_file), "sha256": run["results_sha256"],
                                    "run": 0, "task": None}] + [
        {"kind": "samples", "path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "run": 0,
         "task": path.name.split("_", 1)[1].rsplit("_", 1)[0].rsplit("::", 1)[-1]} for path in samples]  # 0.5: group::task
    assert provenance["model_revision"]["revision"] is None and "ext-loglik-table" in provenance["model_revision"]["reason"]

    # every metric, value and stderr, exactly as in the results file
    for task, entry in record["tasks"].items():
        raw = results["results"][task]
        assert set(entry["metrics"]) == {k.split(",")[0] for k in raw if k.endswith(",none") and "_stderr" not in k}
        for name, value in entry["metrics"].items():
            assert value["value"] == raw[f"{name},none"]
            stderr = raw.get(f"{name}_stderr,none")
            assert value["stderr"] == (stderr if isinstance(stderr, float) else None)
    assert record["tasks"]["lieder"]["is_group"] and not record["tasks"]["lieder_base"]["is_group"]
    assert record["tasks"]["lieder_base"]["n_samples"] == {"original": 48, "effective": 48}
    assert record["tasks"]["lieder_base"]["task_hash"] == results["task_hashes"]["lieder_base"]

    headline = record["benchmarks"]["lieder"]["headline"]
    assert headline["lieder/acc"] == results["results"]["lieder"]["acc,none"]
    assert headline["lieder_base/acc_novelty"] == results["results"]["lieder_base"]["acc_novelty,none"]
    assert "lieder_two/acc_rel" not in headline  # no nonref rows in the two set
    assert not any("family" in key or "_gt_" in key for key in headline)  # per-comparison metrics are not headline
    assert record["judge"] is None and record["judge_validation"] is None

    # LIEDER's derived results, from the sample logs, by the report's functions (helpers/scripted.py derives them)
    derived = record["benchmarks"]["lieder"]["derived"]
    assert derived["notes"] == []
    human = derived["human_baseline"]
    assert human["families"] == ["affirmative_negation", "managed_failed"]
    assert math.isclose(human["model"]["acc"], 8 / 15) and human["model"]["acc_uniqueness"] == 0.0
    human_rows = read_csv(Path(data_dir) / "lieder/human/human_accuracy.csv")
    informative = [int(r["correct"]) for r in human_rows if r["type"] not in ("neg_pos_s>pos_neg_s", "neg_pos_p>pos_neg_p")]
    assert math.isclose(human["human"]["acc"], sum(informative) / len(informative))
    tests = {(t["metric"], t["scope"]): t for t in derived["novelty_test"]}
    assert len(tests) == 16
    p_greater = sum(math.comb(28, k) for k in range(16, 29)) / 2 ** 28
    everything = tests[("acc", "pos_pos (7 comparisons)")]
    assert (everything["n_groups"], everything["groups_up"], everything["groups_down"], everything["groups_tied"]) == (48, 16, 12, 20)
    assert math.isclose(everything["p_diff_gt_base"], p_greater) and math.isclose(everything["p_two_sided"], 2 * p_greater)
    assert math.isclose(everything["base_acc"], 16 / 48) and math.isclose(everything["diff_acc"], 20 / 48)

    # data: the stimuli each task read, with the registry's sha256 (= the mirror file's)
    files = {f["task"]: f for f in record["data"]["files"]}
    for task in ("lieder_base", "lieder_diff", "lieder_two"):
        stimulus_set = task.split("_")[1]
        path = f"stimuli/{stimulus_set}/{stimulus_set}_stimuli.jsonl"
        assert files[task]["path"] == path and files[task]["user_file"] is False
        assert files[task]["sha256"] == hashlib.sha256((Path(data_dir) / "lieder" / path).read_bytes()).hexdigest()
    assert record["data"]["datasets"]["lieder"]["source"].endswith("/LIEDER/ab5f161feb0b15fd94dbd68e52497ccc033b52b6/")

    (row,) = read_csv(out / "leaderboard.csv")
    assert row["model"] == "scripted" and row["lm_eval_version"] == VERSION and row["status"] == "complete"
    headline_columns = [c for c in row if "/" in c]
    assert headline_columns == list(headline)
    for column in headline_columns:
        assert float(row[column]) == headline[column]


def test_secrets_in_model_args_are_redacted(lieder_scripted, run_cli, tmp_path):
    results = json.loads(next(lieder_scripted.rglob("results_*.json")).read_text())
    results["config"]["model_args"] = {"model": "gpt-x", "api_key": "sk-SECRET123", "hf_token": "hf_SECRET456",
                                       "tokenizer": "gpt2", "max_tokens": 16, "base_url": "http://127.0.0.1:1/v1"}
    results["model_name"] = "gpt-x"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results_2030-01-01T00-00-00.000001.json").write_text(json.dumps(results))
    out = _export(run_cli, tmp_path, run_dir)
    written = "".join(p.read_text() for p in out.iterdir())
    assert "sk-SECRET123" not in written and "hf_SECRET456" not in written
    record = json.loads((out / "gpt-x.json").read_text())
    assert record["model"]["args"] == {"model": "gpt-x", "api_key": "<redacted>", "hf_token": "<redacted>",
                                       "tokenizer": "gpt2", "max_tokens": 16, "base_url": "http://127.0.0.1:1/v1"}
    assert record["model"]["name"] == "gpt-x"


def test_user_stimuli_file_is_recorded_with_its_own_checksum(data_dir, run_cli, tmp_path):
    lines = (Path(data_dir) / "lieder/stimuli/base/base_stimuli.jsonl").read_text().splitlines()[:24]
    stimuli = tmp_path / "mine.jsonl"
    stimuli.write_text("\n".join(lines) + "\n")
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -1.0}))
    out = harness(tmp_path / "out", "ext-loglik-table", f"table={table}", "lieder_base", "--metadata",
                  json.dumps({"stimuli_file": str(stimuli)}))
    record = json.loads((_export(run_cli, tmp_path, f"mine={out}") / "mine.json").read_text())
    (entry,) = record["data"]["files"]
    assert entry == {"task": "lieder_base", "dataset": "lieder", "path": str(stimuli),
                     "sha256": hashlib.sha256(stimuli.read_bytes()).hexdigest(), "user_file": True}


def test_schema_rejects_broken_records(lieder_scripted, run_cli, tmp_path):
    record = json.loads((_export(run_cli, tmp_path, lieder_scripted) / "ext-loglik-table.json").read_text())
    validator = _validator()
    assert not list(validator.iter_errors(record))
    broken = []
    for mutate in (
        lambda r: r.pop("versions"),
        lambda r: r["tasks"]["lieder_base"]["metrics"]["acc"].update(value="0.5"),
        lambda r: r["benchmarks"].update(unknown_bench={"title": "x", "headline": {}}),
        lambda r: r["runs"][0].update(results_sha256="not-a-hash"),
        lambda r: r.update(extra_field=1),
        lambda r: r["model"].pop("label"),
        lambda r: r["status"].update(partial=True),  # partial without --allow-partial
        lambda r: r.pop("status"),
        lambda r: r["benchmarks"]["lieder"]["derived"].update(novelty_test="none"),
    ):
        bad = copy.deepcopy(record)
        mutate(bad)
        broken.append(bool(list(validator.iter_errors(bad))))
    assert all(broken), broken

    from lm_eval_ext.export.schema import ExportError, validate_record

    bad = copy.deepcopy(record)
    bad["tasks"]["lieder_base"]["metrics"]["acc"]["value"] = "0.5"
    with pytest.raises(ExportError, match="does not match leaderboard.schema.json"):
        validate_record(bad)


def test_nothing_to_export_is_one_clear_error(run_cli, tmp_path):
    results = {"results": {"hellaswag": {"acc,none": 0.5}}, "config": {"model": "hf", "model_args": {"pretrained": "x"}}}
    (tmp_path / "results_2030-01-01T00-00-00.000001.json").write_text(json.dumps(results))
    proc = run_cli(["lm-eval-ext", "export", "--format", "leaderboard", str(tmp_path), "-o", str(tmp_path / "lb")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "nothing to export" in proc.stderr
    assert not (tmp_path / "lb").exists()


def test_wheel_ships_the_schema(plugin_wheel):
    names = set(zipfile.ZipFile(plugin_wheel).namelist())
    assert "lm_eval_ext/export/schema/leaderboard.schema.json" in names
    assert {"lm_eval_ext/commands/report.py", "lm_eval_ext/report/sections/lieder.py", "lm_eval_ext/commands/export.py"} <= names


def _all_results(out: Path) -> dict[str, list[dict]]:
    """{task: [results file data of every run that has it]}."""
    found: dict[str, list[dict]] = {}
    for path in sorted(out.rglob("results_*.json")):
        data = json.loads(path.read_text())
        for task in data["results"]:
            found.setdefault(task, []).append(data)
    return found


def test_every_benchmark_exports_valid_exact_records(lieder_scripted, litm_scripted, magnifico_scripted,
                                                     elitr_scripted, run_cli, tmp_path):
    sources = (f"lieder={lieder_scripted}", f"litm={litm_scripted}", f"sql={magnifico_scripted}", f"elitr={elitr_scripted}")
    # the Lost in the Middle runs (--limit 8) and the MAGNIFICo runs (a Spider database missing) are partial
    refused = run_cli(["lm-eval-ext", "export", *sources, "-o", str(tmp_path / "refused")])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr and not (tmp_path / "refused").exists()
    assert "Not exporting: the results of 2 model(s) are partial" in refused.stderr
    assert "litm: litm_kv_75keys: 8 of 2000 documents scored (--limit 8)" in refused.stderr
    assert "--allow-partial" in refused.stderr
    out = _export(run_cli, tmp_path, *sources, options=["--allow-partial"])
    validator = _validator()
    rows = {row["model"]: row for row in read_csv(out / "leaderboard.csv")}
    assert list(rows) == ["lieder", "litm", "sql", "elitr"]
    for label, directory, benchmark in (("litm", litm_scripted, "lost_in_the_middle"), ("sql", magnifico_scripted, "magnifico"),
                                        ("elitr", elitr_scripted, "elitr_bench")):
        record = json.loads((out / f"{label}.json").read_text())
        assert not list(validator.iter_errors(record)), label
        assert list(record["benchmarks"]) == [benchmark]
        runs = _all_results(directory)
        for key, value in record["benchmarks"][benchmark]["headline"].items():
            task, metric = key.split("/")
            newest = max(runs[task], key=lambda data: data["date"])
            (raw,) = [v for k, v in newest["results"][task].items() if k.split(",")[0] == metric and "," in k]
            assert value == raw, key
            assert float(rows[label][key]) == value, key
        for task, entry in record["tasks"].items():
            version = "3.0" if benchmark == "magnifico" else "2.0"  # the tasks at this version
            assert entry["version"] == version and record["versions"]["tasks"][task] == version
            assert record["runs"][entry["run"]]["tasks"].count(task) == 1

    statuses = {label: json.loads((out / f"{label}.json").read_text())["status"] for label in rows}
    assert [(label, s["partial"]) for label, s in statuses.items()] == [("lieder", False), ("litm", True), ("sql", True),
                                                                        ("elitr", False)]
    assert any((r["kind"], r["task"], r["reason"]) == ("partial", "litm_kv_75keys", "8 of 2000 documents scored (--limit 8)")
               for r in statuses["litm"]["reasons"])
    assert any(r["task"].startswith("magnifico_") and "Spider database is missing" in r["reason"]
               for r in statuses["sql"]["reasons"])
    assert all(s["allowed_partial"] for s in statuses.values())
    assert [rows[label]["status"] for label in rows] == ["complete", "partial", "partial", "complete"]

    litm = json.loads((out / "litm.json").read_text())
    headline = litm["benchmarks"]["lost_in_the_middle"]["headline"]
    assert headline["litm_qa_20docs/acc"] == 3 / 10 and headline["litm_qa_20docs/acc_pos_10"] == 0.5
    files = {(f["task"], f["path"]) for f in litm["data"]["files"]}
    assert ("litm_kv_75keys", "kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz") in files
    assert all(f["user_file"] for f in litm["data"]["files"] if f["task"].startswith("litm_qa"))
    assert litm["judge"] is None and len(litm["runs"]) == 4 - 1  # litm_kv_generated: the newest of its two runs

    sql = json.loads((out / "sql.json").read_text())
    assert sql["benchmarks"]["magnifico"]["headline"]["magnifico_direct_plausible/rel_perf"] == 50.0
    assert set(sql["data"]["datasets"]) == {"magnifico", "spider"}

    elitr = json.loads((out / "elitr.json").read_text())
    judge = elitr["judge"]["elitr_bench_qa_dev_st"]
    assert (judge["model"], judge["template"], judge["seed"]) == ("stub-judge", "judge_gpt4_rubric_en.txt", 2024)
    assert len(judge["template_sha256"]) == 64
    # the judge's tokens, per task as it recorded them, and their sum over the record's tasks
    assert judge["usage"]["requests"] > 0 and judge["usage"]["prompt_tokens"] > 0
    assert elitr["judge_usage"] == {
        **{key: sum(task["usage"][key] for task in elitr["judge"].values())
           for key in ("requests", "prompt_tokens", "completion_tokens", "from_cache")},
        "cost_usd": round(sum(task["usage"]["cost_usd"] for task in elitr["judge"].values()), 6)}  # at the run's prices
    assert elitr["judge_usage"]["cost_usd"] > 0
    assert "judge_usage" not in litm
    seeds = elitr["benchmarks"]["elitr_bench"]["seeds"]["elitr_bench_qa_dev_st/score"]
    low, high = (data["results"]["elitr_bench_qa_dev_st"]["score,judge"] for data in _all_results(elitr_scripted)["elitr_bench_qa_dev_st"])
    assert seeds["n"] == 2 and sorted(seeds["seeds"]) == [2023, 2024]
    assert math.isclose(seeds["mean"], (low + high) / 2) and math.isclose(seeds["sd"], math.sqrt(0.5))
    assert {f["path"] for f in elitr["data"]["files"]} == {"data.zip"}


def test_judge_validation_is_embedded(run_cli, tmp_path):
    validation = FIXTURES / "judge_validation.json"
    out = _export(run_cli, tmp_path, FIXTURES / "results" / "elitr", options=["--allow-partial", "--judge-validation",
                                                                              str(validation)])
    record = json.loads((out / "org__tiny-chat.json").read_text())
    assert not list(_validator().iter_errors(record))
    (entry,) = record["judge_validation"]
    assert entry["judge"]["model"] == "stub-judge" == record["judge"]["elitr_bench_qa_dev_st"]["model"]
    assert entry["judge"]["template_sha256"] == record["judge"]["elitr_bench_qa_dev_st"]["template_sha256"]
    assert entry["vs_gold"] == {"n": 388, "pearson": 0.71, "spearman": 0.69, "kendall": 0.56}
    assert entry["report_sha256"] == hashlib.sha256(validation.read_bytes()).hexdigest()
    assert entry["source"].startswith("elitr_bench/generated-responses.zip:")
    # partial (a judge failure) and truncated (prompts cut), both said
    assert record["status"]["partial"] and record["status"]["truncated"]
    # a file that is not a validation report is one paragraph
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"source": "x", "scorers": {}}))
    proc = run_cli(["lm-eval-ext", "export", str(FIXTURES / "results" / "elitr"), "--allow-partial", "--judge-validation",
                    str(bad), "-o", str(tmp_path / "other")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "is not a judge validation report" in proc.stderr
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("config, model_args, expected", [
    ({"model_sha": "a" * 40, "model_revision": "main"}, {}, ("a" * 40, "config.model_sha", None)),
    ({"model_sha": "", "model_revision": "b" * 40}, {"revision": "b" * 40}, ("b" * 40, "model_args.revision", None)),
    ({"model_sha": "", "model_revision": "main"}, {"revision": "main"},
     (None, None, "run 0: the harness could not look up the commit (config.model_sha is empty: run offline or from a "
                  "local directory) and model_args gives revision=main, not a commit hash")),
])
def test_the_model_commit_is_recorded_when_the_run_has_one(config, model_args, expected, tmp_path):
    from lm_eval_ext.export.write import export_leaderboard

    data = json.loads(next((FIXTURES / "results" / "lieder_limit").glob("results_*.json")).read_text())
    data["config"].update(config)
    data["config"]["model_args"].update(model_args)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results_2030-01-01T00-00-00.000001.json").write_text(json.dumps(data))
    (path, _) = export_leaderboard([str(tmp_path / "run")], tmp_path / "lb", allow_partial=True)
    revision = json.loads(path.read_text())["provenance"]["model_revision"]
    assert (revision["revision"], revision["source"], revision["reason"]) == expected


def test_runs_at_two_model_commits_have_no_commit(tmp_path):
    from lm_eval_ext.export.write import export_leaderboard

    data = json.loads(next((FIXTURES / "results" / "litm" / "max512").glob("results_*.json")).read_text())
    other = json.loads(next((FIXTURES / "results" / "litm" / "max1024").glob("results_*.json")).read_text())
    data["config"]["model_sha"], other["config"]["model_sha"] = "a" * 40, "c" * 40
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "results_2030-01-01T00-00-00.000001.json").write_text(json.dumps(data))
    (tmp_path / "runs" / "results_2030-01-02T00-00-00.000001.json").write_text(json.dumps(other))
    (path, _) = export_leaderboard([f"m={tmp_path / 'runs'}"], tmp_path / "lb", allow_partial=True)
    revision = json.loads(path.read_text())["provenance"]["model_revision"]
    assert revision == {"revision": None, "source": None, "reason": "the record's runs were made at different model "
                        f"commits (run 0: {'a' * 40}, run 1: {'c' * 40})"}
