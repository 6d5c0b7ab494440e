"""Answers generated elsewhere, for score-only mode: the published generated-responses files and harness samples.

``PATH`` may be:

- a JSON file in the authors' generated-responses format (``{"split", "meetings": [{"id",
  "questions": [{..., "generated-responses": [{"model", "generated-response",
  "<judge>-eval_score", ...}]}]}]}``), one answer per model per question;
- a member of a zip written ``ARCHIVE.zip:MEMBER``, e.g. ``generated-responses.zip:
  elitr-bench-qa_dev_st_gpt-4-eval.json``: a local zip, or else the registered ELITR-Bench
  archive of that name (through the data layer); the member may omit its folder; the password
  ``utter`` is known; the archive is read in memory;
- a harness samples file (``samples_<task>_<date>.jsonl`` of ``--log_samples``) of an
  ELITR-Bench task: one model (named after the folder the harness wrote it in, or
  ``model_name``); its stored score is the sample's ``score`` (or a judge failure).
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import UserError
from .data import DATASET, PASSWORD, differentiating_questions

PUBLISHED_SCORE_FIELD = "gpt-4-eval_score"


class ResponsesFormatError(UserError):
    """A responses file cannot be read or is in neither supported format."""


@dataclass(frozen=True)
class Answer:
    """One model's answer to one question, with the score stored beside it (if any)."""

    model: str
    meeting: str
    question_id: str
    question: str
    reference: str
    question_type: str
    answer_position: str
    differentiating: bool
    response: str
    stored_score: float | None = None
    stored_failure: bool = False

    @property
    def doc(self) -> dict:
        """The fields the metrics read (as in a task document)."""
        return {"question_type": self.question_type, "answer_position": self.answer_position,
                "differentiating": self.differentiating}


def read_source(path: str) -> tuple[bytes, str]:
    """The bytes of ``path`` (a file, or ``ARCHIVE.zip:MEMBER``) and a name for reports."""
    if ".zip:" in path and not Path(path).is_file():
        archive, member = path.split(".zip:", 1)
        return _read_member(archive + ".zip", member), path
    try:
        return Path(path).read_bytes(), path
    except OSError as err:
        raise ResponsesFormatError(f"Cannot read the responses file {path}: {err}.") from None


def _read_member(archive: str, member: str) -> bytes:
    from ..data import read_zip_member
    from ..data.archives import read_zip_bytes

    local = Path(archive).expanduser()
    zip_path = local if local.is_file() else None
    if zip_path is None:
        from ..data import resolve_file

        zip_path = resolve_file(DATASET, PurePosixPath(archive).name)
    with zipfile.ZipFile(zip_path) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
    matches = [n for n in names if n == member or n.endswith("/" + member)]
    if len(matches) != 1:
        raise ResponsesFormatError(f"{archive} has {'no' if not matches else 'several'} member(s) matching "
                                   f"{member!r}; its members are: {', '.join(names)}.")
    if local.is_file():
        return read_zip_bytes(zip_path, matches[0], PASSWORD)
    return read_zip_member(DATASET, PurePosixPath(archive).name, matches[0], password=PASSWORD)


def _score(value, where: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ResponsesFormatError(f"{where}: stored score {value!r} is not a number.") from None


def parse_published(data: dict, source: str, score_field: str = PUBLISHED_SCORE_FIELD) -> list[Answer]:
    """Answers of a generated-responses JSON (every model, every question)."""
    try:
        differing = differentiating_questions(data["split"])
        answers = []
        for meeting in data["meetings"]:
            for question in meeting["questions"]:
                key = (meeting["id"], str(question["id"]))
                for generated in question["generated-responses"]:
                    where = f"{source}: {key[0]} question {key[1]} ({generated['model']})"
                    answers.append(Answer(
                        model=generated["model"], meeting=key[0], question_id=key[1], question=question["question"],
                        reference=question["groundtruth-answer"], question_type=question["question-type"],
                        answer_position=question["answer-position"], differentiating=key in differing,
                        response=generated["generated-response"],
                        stored_score=_score(generated.get(score_field), where)))
    except (KeyError, TypeError) as err:
        raise ResponsesFormatError(f"{source} is not in the generated-responses format (missing {err}); see "
                                   "the ELITR-Bench README or tasks/elitr_bench/README.md.") from None
    return answers


def parse_samples(lines: list[str], source: str, model_name: str) -> list[Answer]:
    """Answers of a harness samples file of an ELITR-Bench task."""
    answers = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
            doc = sample["doc"]
            response = sample["resps"][0][0]
            answers.append(Answer(
                model=model_name, meeting=doc["meeting"], question_id=str(doc["question_id"]), question=doc["question"],
                reference=doc["reference"], question_type=doc["question_type"],
                answer_position=doc["answer_position"], differentiating=bool(doc["differentiating"]),
                response=response, stored_score=_score(sample.get("score"), f"{source}, line {number}"),
                stored_failure=sample.get("judge_failures") == 1))
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise ResponsesFormatError(f"{source}, line {number}: not a sample of an ELITR-Bench task ({err!r}); "
                                       "give a samples_<task>_<date>.jsonl file written with --log_samples.") from None
    return answers


def load_answers(path: str, *, score_field: str = PUBLISHED_SCORE_FIELD, model_name: str | None = None) -> tuple[list[Answer], str]:
    """Every answer in ``path`` (see the module docstring) and the source's name."""
    raw, source = read_source(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResponsesFormatError(
            f"{source} is not UTF-8 text (byte {err.start} cannot be decoded): give the published answers file or a "
            "samples_<task>_<date>.jsonl file written with --log_samples, as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)."
        ) from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and "meetings" in data:
        answers = parse_published(data, source, score_field)
    else:
        name = model_name or Path(path).parent.name or "model"
        answers = parse_samples(text.splitlines(), source, name)
    if not answers:
        raise ResponsesFormatError(f"{source} holds no answers: give the samples file of an ELITR-Bench run "
                                   "(--log_samples) or the authors' generated-responses JSON.")
    return answers, source
