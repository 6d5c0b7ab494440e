"""The leaderboard record's JSON Schema (shipped in the package) and validation against it."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..errors import UserError

SCHEMA_FILE = "leaderboard.schema.json"
# 1.2: provenance (model commit, every source file's sha256, community/verified, the record's own sha256)
SCHEMA_VERSION = "1.2"


class ExportError(UserError):
    """An export that cannot be written as asked."""


@lru_cache(maxsize=1)
def leaderboard_schema() -> dict:
    """The JSON Schema of a leaderboard record (``lm_eval_ext/export/schema/leaderboard.schema.json``)."""
    return json.loads(resources.files(__package__).joinpath("schema", SCHEMA_FILE).read_text(encoding="utf-8"))


def schema_problems(record) -> list[str]:
    """Every way ``record`` breaks the schema, as ``<path>: <message>`` (empty when it is valid)."""
    from jsonschema import Draft202012Validator, FormatChecker

    validator = Draft202012Validator(leaderboard_schema(), format_checker=FormatChecker())
    errors = sorted(validator.iter_errors(record), key=lambda e: [str(part) for part in e.absolute_path])
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]


def validate_record(record: dict) -> None:
    """Raise ExportError listing every way ``record`` breaks the schema (nothing is written then)."""
    errors = schema_problems(record)
    if errors:
        where = "; ".join(errors[:5])
        raise ExportError(
            f"The leaderboard record of model {record.get('model', {}).get('label')!r} does not match "
            f"{SCHEMA_FILE} ({len(errors)} problem(s): {where}). This is a bug in lm-eval-ext; please report it "
            "with the results files."
        )
