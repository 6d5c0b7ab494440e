"""`lm-eval-ext leaderboard validate`: a record is checked before submission (schema, task versions known to
this plugin, partial runs marked, a validated judge for ELITR-Bench). Records: exports of the hand-written
results in tests/fixtures/results."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.files import FIXTURES

RESULTS = FIXTURES / "results"


def _export(tmp_path: Path, name: str, **options) -> dict:
    from lm_eval_ext.export.write import export_leaderboard

    (path, _) = export_leaderboard([str(RESULTS / name)], tmp_path / name, allow_partial=True, **options)
    return json.loads(path.read_text())


def _check(record: dict) -> list[str]:
    """The record's problems, sealed first as an export would (the tests change records to show each check; the
    seal's own check is test_a_record_changed_after_its_export_fails)."""
    from lm_eval_ext.export.provenance import seal
    from lm_eval_ext.leaderboard.validate import check_record

    if record.get("schema_version") == "1.2" and isinstance(record.get("provenance"), dict):
        seal(record)
    return check_record(record)


def test_a_marked_partial_record_passes(tmp_path):
    record = _export(tmp_path, "lieder_limit")
    assert record["status"]["partial"] and record["runs"][0]["limit"] == 4.0
    assert _check(record) == []


def test_an_unmarked_partial_record_fails(tmp_path):
    record = _export(tmp_path, "lieder_limit")
    record["status"].update(partial=False, allowed_partial=False, reasons=[])
    assert _check(record) == ["the record is partial (lieder_base) but its status does not say so"]
    record = _export(tmp_path, "litm")
    record["tasks"]["litm_qa_20docs"]["metrics"]["prompts_skipped"]["value"] = 0.0
    record["tasks"]["litm_kv_generated"]["metrics"]["prompts_skipped"]["value"] = 0.0
    assert _check(record) == ["the record's status says partial but none of its tasks is"]


def test_task_versions_must_be_this_plugins(tmp_path):
    record = _export(tmp_path, "lieder_limit")
    record["versions"]["tasks"]["lieder_base"] = "2.0"
    record["versions"]["tasks"]["lieder_fancy"] = "1.0"
    assert _check(record) == [
        "task lieder_base is at version 2.0, this lm-eval-ext has 1.0 (different prompts, data or scoring: rerun it "
        "with this version)",
        "task lieder_fancy is not a task of this lm-eval-ext version",
    ]


def test_elitr_needs_a_validated_judge(tmp_path):
    record = _export(tmp_path, "elitr")
    problems = _check(record)
    assert len(problems) == 2 and problems[0].startswith(
        "elitr_bench_qa_dev_mt was scored by judge stub-judge (template judge_gpt4_rubric_en.txt), which the record "
        "shows no validation of")
    validated = _export(tmp_path / "validated", "elitr", judge_validation=[str(FIXTURES / "judge_validation.json")])
    assert _check(validated) == []
    validated["judge_validation"][0]["judge"]["template_sha256"] = "0" * 64  # another template's validation
    assert len(_check(validated)) == 2
    validated["judge_validation"][0]["judge"]["template_sha256"] = record["judge"]["elitr_bench_qa_dev_st"]["template_sha256"]
    validated["judge_validation"][0]["source"] = "my-own-file.json"  # not the published validation file
    assert len(_check(validated)) == 2


def test_schema_problems_stop_the_check(tmp_path):
    record = _export(tmp_path, "lieder_limit")
    del record["status"]
    record["runs"][0]["results_sha256"] = "not-a-hash"
    problems = _check(record)
    assert problems == ["schema: (top): 'status' is a required property",
                        "schema: runs/0/results_sha256: 'not-a-hash' does not match '^[0-9a-f]{64}$'"]


def test_a_record_of_an_older_schema_is_refused_with_one_paragraph(tmp_path):
    from lm_eval_ext import __version__
    from lm_eval_ext.leaderboard.validate import check_record

    record = _export(tmp_path, "lieder_limit")
    record["schema_version"] = "1.1"
    del record["provenance"]
    assert check_record(record) == [
        f"schema: the record is of schema version 1.1, and lm-eval-ext {__version__} reads version 1.2 only (1.2 added the "
        "provenance a leaderboard checks: the model's commit, the sha256 of every results and samples file, community "
        "or verified): export it again from its results with `lm-eval-ext export --format leaderboard`"]


def test_a_record_changed_after_its_export_fails(tmp_path):
    from lm_eval_ext.leaderboard.validate import check_record

    record = _export(tmp_path, "lieder_limit")
    assert check_record(record) == []
    sealed = record["provenance"]["content_sha256"]
    record["benchmarks"]["lieder"]["headline"]["lieder_base/acc"] = 0.95
    (problem,) = check_record(record)
    assert problem.startswith("the record was changed after it was exported: its sha256 is ")
    assert f"provenance.content_sha256 says {sealed[:12]}..." in problem
    # a results sha256 that is not the one provenance.files lists, sealed again (by hand or with this code)
    record = _export(tmp_path / "again", "lieder_limit")
    record["runs"][0]["results_sha256"] = "0" * 64
    assert _check(record) == [f"run 0 ({record['runs'][0]['results_file']}): its results_sha256 is not the sha256 "
                              "provenance.files lists for its results file: export the record again"]


def test_verified_needs_the_verification(tmp_path):
    record = _export(tmp_path, "lieder_limit")
    record["provenance"]["status"] = "verified"
    assert _check(record) == [
        "schema: the record claims status verified but has no provenance.verification (the maintainers' rerun it was "
        "compared with): only `lm-eval-ext leaderboard verify RECORD RESULTS_DIR` marks a record verified; submit it "
        "as exported (community)"]
    # and a community record carries none
    record["provenance"].update(status="community", verification={"verified_at": "2030-01-01T00:00:00+00:00"})
    assert _check(record)[0].startswith("schema: provenance/verification: ")


def test_validate_command(tmp_path, run_cli):
    good = _export(tmp_path, "lieder_limit")
    from lm_eval_ext.export.provenance import seal

    bad = seal(json.loads(json.dumps(dict(good, versions={**good["versions"], "tasks": {"lieder_base": "0.9"}}))))
    (tmp_path / "submit").mkdir()
    (tmp_path / "submit" / "good.json").write_text(json.dumps(good))
    (tmp_path / "submit" / "bad.json").write_text(json.dumps(bad))
    proc = run_cli(["lm-eval-ext", "leaderboard", "validate", str(tmp_path / "submit" / "good.json")])
    assert (proc.returncode, proc.stdout) == (0, f"ok   {tmp_path / 'submit' / 'good.json'} (community; partial, marked)\n")
    proc = run_cli(["lm-eval-ext", "leaderboard", "validate", str(tmp_path / "submit")])
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        f"FAIL {tmp_path / 'submit' / 'bad.json'}",
        "  - task lieder_base is at version 0.9, this lm-eval-ext has 1.0 (different prompts, data or scoring: rerun "
        "it with this version)",
        f"ok   {tmp_path / 'submit' / 'good.json'} (community; partial, marked)",
    ]
    (tmp_path / "broken.json").write_text("{")
    proc = run_cli(["lm-eval-ext", "leaderboard", "validate", str(tmp_path / "broken.json")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "Cannot read the record" in proc.stderr


@pytest.mark.parametrize("name", ["litm", "magnifico", "elitr"])
def test_exported_records_are_valid_and_say_why_they_are_partial(name, tmp_path):
    record = _export(tmp_path, name, judge_validation=[str(FIXTURES / "judge_validation.json")])
    assert record["status"]["partial"] and _check(record) == []


def test_a_judge_validation_without_correlations_is_refused(tmp_path):
    """A validation whose correlations are null (too few items scored, or a judge that always gives one score)
    validates nothing."""
    record = _export(tmp_path, "elitr", judge_validation=[str(FIXTURES / "judge_validation.json")])
    record["judge_validation"][0]["vs_gold"]["pearson"] = None
    record["judge_validation"][0]["vs_silver"]["kendall"] = None
    problems = _check(record)
    assert problems == [
        f"{task}: the validation of judge stub-judge has no vs_gold.pearson, vs_silver.kendall (388 of 390 items "
        "scored; a correlation is missing when too few items were scored or the scores never vary): run "
        "`lm-eval-ext judge validate` again until every item is scored, and export with the new validation.json"
        for task in ("elitr_bench_qa_dev_mt", "elitr_bench_qa_dev_st")]


@pytest.mark.parametrize("field, value", [("base_url_host", "judge.example.org"), ("model", "stub-judge-2"),
                                          ("template_sha256", "0" * 64)])
def test_a_validation_of_another_judge_is_refused(field, value, tmp_path):
    """The same model behind another endpoint, another model, or another template is another judge."""
    record = _export(tmp_path, "elitr", judge_validation=[str(FIXTURES / "judge_validation.json")])
    assert _check(record) == []
    record["judge_validation"][0]["judge"][field] = value
    other = {**record["judge_validation"][0]["judge"]}
    problems = _check(record)
    assert len(problems) == 2
    assert problems[1] == (
        "elitr_bench_qa_dev_st was scored by judge stub-judge (template judge_gpt4_rubric_en.txt), which the record "
        "shows no validation of (it was scored by stub-judge at 127.0.0.1 (template sha256 befed4d27cc7...); the "
        f"record validates {other['model']} at {other['base_url_host']} (template sha256 "
        f"{other['template_sha256'][:12]}...)): run `lm-eval-ext judge validate` with that judge (same endpoint, "
        "model and template) and export with --judge-validation validation.json")
