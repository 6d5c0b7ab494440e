"""The provenance of a leaderboard record: what a maintainer needs to check where its numbers came from.

``provenance`` (schema 1.2) holds:

- ``status``: ``community`` (what every export writes) or ``verified`` (set only by ``lm-eval-ext
  leaderboard verify`` after the maintainers' rerun agreed; ``verification`` then says with what);
- ``model_revision``: the commit of the model's weights (:func:`model_revision`), or null with the reason;
- ``files``: the sha256 of every results and samples file the record was made from (:func:`source_files`);
- ``content_sha256``: the sha256 of the record itself (:func:`content_sha256`), so that a record
  edited by hand after the export (a changed score, a changed checksum) no longer passes
  ``leaderboard validate``.

The harness and plugin versions are the record's ``versions`` and ``runs[].lm_eval_version``; the judge
(model, template sha256) and its validation are ``judge`` and ``judge_validation``.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

from ..data import sha256_of
from ..results.load import Run

COMMUNITY, VERIFIED = "community", "verified"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _run_revision(run: Run) -> tuple[str | None, str | None, str]:
    """(commit, where it was found, or why there is none) for one run."""
    sha = run.config.get("model_sha")  # the harness's hf model asks the Hub for the commit of its revision
    if isinstance(sha, str) and _COMMIT.match(sha):
        return sha, "config.model_sha", ""
    revision = str(run.model_args.get("revision") or "")
    if _COMMIT.match(revision):
        return revision, "model_args.revision", ""
    if "model_sha" in run.config:
        said = f"revision={revision}" if revision else "no revision= (the default branch)"
        return None, None, (f"the harness could not look up the commit (config.model_sha is empty: run offline or "
                            f"from a local directory) and model_args gives {said}, not a commit hash")
    return None, None, (f"the run ({run.model_source} model) records no commit of the model's weights (the harness "
                        "records config.model_sha for hf models only; an API model has none) and model_args has no "
                        "revision=<commit>")


def model_revision(runs: list[Run]) -> dict:
    """The commit of the model's weights, the same in every run of the record: ``{revision, source, reason}``;
    ``revision`` null (and ``reason`` saying why) when a run has none or the runs disagree."""
    found = [_run_revision(run) for run in runs]
    commits = {commit for commit, _, _ in found}
    if len(commits) == 1 and None not in commits:
        return {"revision": found[0][0], "source": found[0][1], "reason": None}
    if None not in commits:
        listing = ", ".join(f"run {index}: {commit}" for index, (commit, _, _) in enumerate(found))
        return {"revision": None, "source": None,
                "reason": f"the record's runs were made at different model commits ({listing})"}
    index, reason = next((index, why) for index, (commit, _, why) in enumerate(found) if commit is None)
    return {"revision": None, "source": None, "reason": f"run {index}: {reason}"}


def source_files(runs: list[Run], tasks: dict[Path, list[str]], seed_runs: list[Run]) -> list[dict]:
    """Every file the record was made from, with its sha256: each run's results file and the sample logs of
    the tasks taken from it (``run``: index into ``runs``), and the results files of the other seed runs that
    the seeds summary read (``run`` null)."""
    files = []
    for index, run in enumerate(runs):
        files.append({"kind": "results", "path": str(run.path), "sha256": sha256_of(run.path), "run": index,
                      "task": None})
        for task in tasks[run.path]:
            if (samples := run.samples_path(task)) is not None:
                files.append({"kind": "samples", "path": str(samples), "sha256": sha256_of(samples), "run": index,
                              "task": task})
    listed = {run.path for run in runs}
    for run in seed_runs:
        if run.path not in listed:
            listed.add(run.path)
            files.append({"kind": "results", "path": str(run.path), "sha256": sha256_of(run.path), "run": None,
                          "task": None})
    return files


def content_sha256(record: dict) -> str:
    """The sha256 of the record without ``provenance.content_sha256``, as canonical JSON (sorted keys, no
    spaces, UTF-8): the same whatever indentation the file has."""
    body = copy.deepcopy(record)
    (body.get("provenance") or {}).pop("content_sha256", None)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(record: dict) -> dict:
    """Set ``provenance.content_sha256`` to the record's digest (after the export or a verification); returns it."""
    record["provenance"]["content_sha256"] = content_sha256(record)
    return record


def provenance_entry(runs: list[Run], tasks: dict[Path, list[str]], seed_runs: list[Run]) -> dict:
    """A new record's ``provenance``: ``community``, not verified, not yet sealed (:func:`seal`)."""
    return {"status": COMMUNITY, "model_revision": model_revision(runs), "files": source_files(runs, tasks, seed_runs),
            "verification": None}
