"""The validation of an LLM judge, carried into a leaderboard record so that ELITR-Bench scores can be trusted.

``lm-eval-ext judge validate`` writes ``validation.json``: the judge under test (its record:
model, template and its sha256, endpoint host, sampling) beside the published judges and the
human scores of ELITR-Bench's judge-validation file. ``lm-eval-ext export --judge-validation
validation.json`` embeds its summary in the record (``judge_validation``); the leaderboard
checks that each ELITR-Bench task was scored by a judge (same endpoint host, model and template)
validated on the published file (:data:`PUBLISHED_SOURCE`).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import UserError
from ..judge.records import JudgeRecord, JudgeRecordError

# what `lm-eval-ext judge validate` names its default input: ELITR-Bench's published validation file
PUBLISHED_SOURCE = "elitr_bench/generated-responses.zip:"
JUDGE_FIELDS = ("judge", "model", "base_url_host", "template", "template_sha256", "temperature", "top_p", "seed")
AGREEMENT = ("n", "pearson", "spearman", "kendall")


class JudgeValidationError(UserError):
    """A --judge-validation file is not a report of `lm-eval-ext judge validate`."""


def read_validation(path: str | Path) -> dict:
    """The record's summary of one ``validation.json``: the judge, the file it was validated on, how many
    items it scored, its agreement with the gold and silver human scores, and the report's sha256."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        report = json.loads(raw)
        judge = JudgeRecord.from_dict(report["judge"])
        scorer = report["scorers"]["judge"]
        entry = {
            "judge": {field: getattr(judge, field) for field in JUDGE_FIELDS},
            "source": report["source"],
            "n_items": report["n_items"],
            "n_scored": scorer["n_scored"],
            "n_failures": scorer["n_failures"],
            "vs_gold": {key: scorer["vs_gold"].get(key) for key in AGREEMENT},
            "vs_silver": {key: scorer["vs_silver"].get(key) for key in AGREEMENT},
            "report_sha256": hashlib.sha256(raw).hexdigest(),
        }
    except OSError as err:
        raise JudgeValidationError(f"Cannot read the judge validation report {path}: {err.strerror or err}.") from None
    except JudgeRecordError as err:
        raise JudgeValidationError(f"{path}: {err} (the judge under test); rerun `lm-eval-ext judge validate` with "
                                   "this version of lm-eval-ext.") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise JudgeValidationError(
            f"{path} is not a judge validation report with a judge under test (missing {err}): give the "
            "validation.json that `lm-eval-ext judge validate --judge-model ...` wrote (not a --from-file run)."
        ) from None
    return entry


def validates(entry: dict, judge: JudgeRecord) -> bool:
    """True when the validation ``entry`` is of the same judge (endpoint host, model and template) as a task's ``judge`` record,
    on the published validation file."""
    return entry["source"].startswith(PUBLISHED_SOURCE) and JudgeRecord.from_dict(entry["judge"]).same_judge(judge)
