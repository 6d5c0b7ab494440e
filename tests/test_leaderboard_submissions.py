"""A leaderboard that takes submissions: `lm-eval-ext leaderboard init` writes the repository and its GitHub Actions
workflow, whose own commands (run here in a temporary git repository, with this checkout's lm-eval-ext in place of
the pinned install) pass a good record and fail a tampered one; `lm-eval-ext leaderboard verify` marks a record
verified when a rerun agrees within the metrics' standard errors, and leaves it unchanged when not.
Records: exports of the hand-written results in tests/fixtures/results."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from helpers.files import FIXTURES

RESULTS = FIXTURES / "results"
RECORD = "org__tiny-lieder.json"  # the export's name for the lieder_limit fixture's model


def _cli(argv: list) -> int:
    from lm_eval_ext.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in argv])
    return exit_info.value.code


def _export(out: Path) -> Path:
    from lm_eval_ext.export.write import export_leaderboard

    (path, csv) = export_leaderboard([str(RESULTS / "lieder_limit")], out, allow_partial=True)
    csv.unlink()
    return path


def _workflow(repo: Path) -> dict:
    workflow = yaml.safe_load((repo / ".github/workflows/leaderboard.yml").read_text())
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads the key `on` as true
    return workflow


def test_init_writes_a_repository_with_a_pinned_workflow(tmp_path, capsys):
    from lm_eval_ext import __version__

    repo = tmp_path / "board"
    (repo / ".git").mkdir(parents=True)  # a fresh `git init` is fine
    assert _cli(["leaderboard", "init", repo, "--install", __version__]) == 0
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()) == [
        ".github/workflows/leaderboard.yml", "README.md", "records/README.md"]
    workflow = _workflow(repo)
    assert set(workflow["on"]) == {"pull_request", "push", "workflow_dispatch"}
    validate, publish = workflow["jobs"]["validate"], workflow["jobs"]["publish"]
    assert validate["if"] == "github.event_name == 'pull_request'"
    assert "github.event.repository.default_branch" in publish["if"] and "pull_request" in publish["if"]
    for job in (validate, publish):
        installs = [step["run"] for step in job["steps"] if "pip install" in step.get("run", "")]
        assert installs == [f'pip install "lm-eval-ext=={__version__}"']
    assert [s["run"] for s in publish["steps"] if "run" in s][1] == "lm-eval-ext leaderboard build records/ --allow-empty -o site/"
    uses = [step.get("uses", "").split("@")[0] for step in publish["steps"]]
    assert uses[-2:] == ["actions/upload-pages-artifact", "actions/deploy-pages"]
    assert publish["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    readme = (repo / "README.md").read_text()
    for step in ("**Run**", "**Export**", "**Check**", "**Open a pull request**", "lm-eval-ext leaderboard verify"):
        assert step in readme
    assert f'pip install "lm-eval-ext=={__version__}"' in readme

    # an existing leaderboard is never overwritten: one paragraph, exit 2, the files as they were
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert _cli(["leaderboard", "init", repo, "--install", __version__]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already has README.md, .github/workflows/leaderboard.yml, records" in err
    assert "overwrites nothing" in err
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before


def _git(run_cli, repo: Path, *args: str) -> str:
    proc = run_cli(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _run_job(run_cli, repo: Path, job: dict, env: dict):
    """The job's `run:` steps in order, as GitHub's runner runs them (bash -e), with this checkout's lm-eval-ext in
    place of the pinned `pip install` (checked by test_init_...); stops at the first failing step."""
    for step in job["steps"]:
        if "run" not in step or step["run"].startswith("pip install"):
            continue
        proc = run_cli(["bash", "--noprofile", "--norc", "-e", "-c", step["run"]], cwd=repo,
                       env={**env, **step.get("env", {})})
        if proc.returncode != 0:
            return proc
    return proc


@pytest.mark.slow
def test_the_workflow_commands_pass_a_good_record_and_fail_a_tampered_one(tmp_path, run_cli):
    repo = tmp_path / "board"
    assert _cli(["leaderboard", "init", repo, "--install", "0.1.0"]) == 0
    jobs = _workflow(repo)["jobs"]
    _git(run_cli, repo, "init", "-q", "-b", "main")
    _git(run_cli, repo, "add", "-A")
    _git(run_cli, repo, "commit", "-qm", "init")
    _git(run_cli, repo, "update-ref", "refs/remotes/origin/main", "HEAD")  # what actions/checkout fetches
    # the validate job's env: BASE is origin/${{ github.base_ref }}, which GitHub fills in
    pull_request = {"GITHUB_BASE_REF": "main"}
    for step in jobs["validate"]["steps"]:
        for key, value in step.get("env", {}).items():
            step["env"][key] = value.replace("${{ github.base_ref }}", "main")

    nothing = _run_job(run_cli, repo, jobs["validate"], pull_request)
    assert (nothing.returncode, nothing.stdout) == (0, "No record added or changed.\n")

    _git(run_cli, repo, "checkout", "-qb", "submit")
    good = _export(repo / "records")
    _git(run_cli, repo, "add", "-A")
    _git(run_cli, repo, "commit", "-qm", "a record")
    passed = _run_job(run_cli, repo, jobs["validate"], pull_request)
    assert (passed.returncode, passed.stdout) == (0, f"ok   records/{RECORD} (community; partial, marked)\n")

    record = json.loads(good.read_text())
    for tamper in (lambda r: r["tasks"]["lieder_base"]["metrics"]["acc"].update(value=0.95),  # a better score
                   lambda r: r["runs"][0].update(results_sha256="0" * 64)):  # another results file
        changed = json.loads(json.dumps(record))
        tamper(changed)
        good.write_text(json.dumps(changed, indent=2) + "\n")
        _git(run_cli, repo, "commit", "-qam", "tampered")
        failed = _run_job(run_cli, repo, jobs["validate"], pull_request)
        assert failed.returncode == 1 and "Traceback" not in failed.stderr
        lines = failed.stdout.splitlines()
        assert lines[0] == f"FAIL records/{RECORD}"
        assert lines[1].startswith("  - the record was changed after it was exported: its sha256 is ")
        assert lines[1].endswith(f"provenance.content_sha256 says {record['provenance']['content_sha256'][:12]}... (a "
                                 "score, a checksum or the status edited by hand): export it again from the results "
                                 "with `lm-eval-ext export --format leaderboard` instead of editing it")

    # merged as exported: the default branch's job builds the site that GitHub Pages publishes
    good.write_text(json.dumps(record, indent=2) + "\n")
    _git(run_cli, repo, "commit", "-qam", "as exported")
    _git(run_cli, repo, "checkout", "-q", "main")
    _git(run_cli, repo, "merge", "-q", "submit")
    built = _run_job(run_cli, repo, jobs["publish"], {})
    assert built.returncode == 0, built.stderr[-2000:]
    page = (repo / "site" / "records" / "org_tiny-lieder.html").read_text()
    assert 'class="badge community"' in page and record["provenance"]["content_sha256"] in page
    assert jobs["publish"]["steps"][-2]["with"]["path"] == "site/"


def test_a_new_leaderboard_builds_with_no_record(tmp_path, capsys):
    repo = tmp_path / "board"
    assert _cli(["leaderboard", "init", repo, "--install", "0.1.0"]) == 0
    assert _cli(["leaderboard", "build", repo / "records", "--allow-empty", "--no-published", "-o", tmp_path / "site"]) == 0
    assert "0 record(s), 0 published model(s)" in capsys.readouterr().out
    assert _cli(["leaderboard", "build", repo / "records", "--no-published", "-o", tmp_path / "other"]) == 2
    assert "No *.json record under" in capsys.readouterr().err


def _rerun(tmp_path: Path, **changes: float) -> Path:
    """A copy of the lieder_limit results with some lieder_base metrics changed (``acc=0.8``)."""
    rerun = tmp_path / "rerun"
    shutil.copytree(RESULTS / "lieder_limit", rerun)
    (path,) = rerun.glob("results_*.json")
    data = json.loads(path.read_text())
    data["results"]["lieder_base"].update({f"{name},none": value for name, value in changes.items()})
    path.write_text(json.dumps(data))
    return rerun


def test_a_rerun_within_the_standard_errors_verifies_the_record(tmp_path, capsys):
    from lm_eval_ext.export.provenance import content_sha256
    from lm_eval_ext.leaderboard.validate import check_record

    record_path = _export(tmp_path / "records")
    exported = json.loads(record_path.read_text())
    # acc: stderr 0.056 on both sides, so 0.75 -> 0.8 is within 2 * sqrt(2) * 0.056 = 0.158; the other nine metrics
    # have no stderr and stay equal
    rerun = _rerun(tmp_path, acc=0.8)
    assert _cli(["leaderboard", "verify", record_path, rerun]) == 0
    assert capsys.readouterr().out == (f"verified {record_path}: 10 metric(s) of 1 task(s) agree with the rerun within "
                                       "2 standard errors (equal where there is none); status verified\n")
    record = json.loads(record_path.read_text())
    (rerun_file,) = rerun.glob("results_*.json")
    verification = record["provenance"].pop("verification")
    assert verification.pop("verified_at")[:2] == "20"
    assert verification == {"lm_eval_ext": exported["versions"]["lm_eval_ext"], "lm_eval": "0.4.13", "sigmas": 2.0,
                            "tasks": ["lieder_base"], "metrics_compared": 10,
                            "files": [{"path": str(rerun_file),
                                       "sha256": hashlib.sha256(rerun_file.read_bytes()).hexdigest()}]}
    assert record["provenance"].pop("status") == "verified"
    # everything else is as exported; the record is sealed again and passes validate
    assert {k: v for k, v in record.items() if k != "provenance"} == {k: v for k, v in exported.items() if k != "provenance"}
    for key in ("model_revision", "files"):
        assert record["provenance"][key] == exported["provenance"][key]
    verified = json.loads(record_path.read_text())
    assert verified["provenance"]["content_sha256"] == content_sha256(verified) != exported["provenance"]["content_sha256"]
    assert check_record(verified) == []


def test_a_rerun_that_disagrees_leaves_the_record_unchanged(tmp_path, capsys):
    record_path = _export(tmp_path / "records")
    before = record_path.read_bytes()
    rerun = _rerun(tmp_path, acc=0.95, acc_rel=0.61)
    assert _cli(["leaderboard", "verify", record_path, rerun]) == 2
    err = capsys.readouterr().err
    assert err == (f"lm-eval-ext: error: {record_path} does not agree with the rerun in {rerun} (2 disagreement(s): "
                   "lieder_base/acc: 0.75 in the record, 0.95 in the rerun, allowed ±0.1584 (2 standard errors); "
                   "lieder_base/acc_rel: 0.6 in the record, 0.61 in the rerun, no stderr: must be equal). The record is "
                   "unchanged and stays community. Check that the rerun used the record's model, commit, tasks and "
                   "settings (its runs[]), and the full data.\n")
    assert record_path.read_bytes() == before
    # a tighter tolerance turns an agreeing rerun into a disagreeing one
    assert _cli(["leaderboard", "verify", record_path, _rerun(tmp_path / "close", acc=0.8), "--sigmas", "0.5"]) == 2
    assert "lieder_base/acc: 0.75 in the record, 0.8 in the rerun, allowed ±0.0396 (0.5 standard errors)" in \
        capsys.readouterr().err
    assert record_path.read_bytes() == before


def test_a_rerun_of_another_length_or_without_a_task_disagrees(tmp_path, capsys):
    record_path = _export(tmp_path / "records")
    rerun = _rerun(tmp_path)
    (path,) = rerun.glob("results_*.json")
    data = json.loads(path.read_text())
    data["n-samples"]["lieder_base"]["effective"] = 48
    path.write_text(json.dumps(data))
    assert _cli(["leaderboard", "verify", record_path, rerun]) == 2
    assert ("lieder_base: documents scored {'original': 48, 'effective': 4} in the record, {'original': 48, "
            "'effective': 48} in the rerun") in capsys.readouterr().err
    assert _cli(["leaderboard", "verify", record_path, RESULTS / "litm"]) == 2
    assert "(1 disagreement(s): lieder_base: not in the rerun)" in capsys.readouterr().err
