"""Writing leaderboard records: one JSON file per model and one CSV with a row per model.

Everything is read, built and validated before the output directory is touched; files are
written atomically (:mod:`lm_eval_ext.atomic_write`).
"""
from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from ..atomic_write import output_dir, write_text
from ..results.load import load_models
from .judge_validation import read_validation
from .leaderboard import csv_row, leaderboard_record
from .schema import ExportError, validate_record

CSV_NAME = "leaderboard.csv"


class PartialRunError(ExportError):
    """A record would be made from partial runs and --allow-partial was not given."""


def record_file_name(label: str) -> str:
    """A file name for a model label (``EleutherAI/pythia-160m`` -> ``EleutherAI__pythia-160m.json``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "__", label).strip("_.") + ".json"


def _refuse_partial(records: list[dict]) -> None:
    partial = [record for record in records if record["status"]["partial"]]
    if partial:
        why = " | ".join(f"{r['model']['label']}: " + "; ".join(
            (f"{x['task']}: " if x["task"] else "") + x["reason"] for x in r["status"]["reasons"] if x["kind"] == "partial")
            for r in partial)
        raise PartialRunError(
            f"Not exporting: the results of {len(partial)} model(s) are partial, so they do not measure the whole "
            f"benchmark ({why}). Rerun without --limit/--samples/--predict_only and with every item scored, or pass "
            "--allow-partial to export anyway: the record is then marked partial (status.partial) and a "
            "leaderboard shows it as such."
        )


def export_leaderboard(sources: list[str], out: str | Path, *, allow_partial: bool = False,
                       judge_validation: list[str] = ()) -> list[Path]:
    """Export every model of the runs named by ``sources`` (``[LABEL=]PATH``); returns the files written.

    Records of partial runs are refused unless ``allow_partial``. ``judge_validation``: reports of
    ``lm-eval-ext judge validate`` to embed. Every record is validated against the schema before
    anything is written.
    """
    exported_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    models = load_models(sources)
    validations = [read_validation(path) for path in judge_validation]
    records = [record for model in models
               if (record := leaderboard_record(model, exported_at, allow_partial=allow_partial,
                                                judge_validation=validations))]
    if not records:
        raise ExportError(
            f"None of the runs in {', '.join(sources)} has results of an lm-eval-ext task (lieder_*, litm_*, "
            "magnifico_*, elitr_bench_*); there is nothing to export."
        )
    if not allow_partial:
        _refuse_partial(records)
    for record in records:
        validate_record(record)
    out = output_dir(out)
    written = [write_text(out / record_file_name(record["model"]["label"]),
                          json.dumps(record, indent=2, ensure_ascii=False) + "\n") for record in records]
    rows = [csv_row(record) for record in records]
    columns = list(dict.fromkeys(column for row in rows for column in row))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    # repr() keeps every float exactly as the results file has it
    writer.writerows({key: repr(value) if isinstance(value, float) else value for key, value in row.items()}
                     for row in rows)
    written.append(write_text(out / CSV_NAME, text.getvalue()))
    return written
