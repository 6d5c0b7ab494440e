"""ELITR-Bench data: question sets from the password-protected zips, transcripts from the ELITR corpus layout.

The question files are read from ``data.zip`` (English) and ``czech.zip`` (Czech questions and
reference answers) in memory, through the data layer: the authors keep them zipped against
training-data contamination, so their plain text is never written to disk.

Transcripts are the English manual transcripts of the ELITR Minuting Corpus,
``elitr-minuting-corpus-en/<split>/<meeting>/transcript_MAN*.txt``. They come from the data
layer (the registered files: mirror, cache, or the corpus archive), or from a directory of
the official corpus layout that the user gives (``--metadata '{"elitr_corpus": "DIR"}'`` or
``$LM_EVAL_EXT_ELITR_CORPUS``; DIR holds ``elitr-minuting-corpus-en/`` or is that folder).
When a meeting has several ``transcript_MAN*`` files, the first by name is used and logged.
A transcript is used as is: the whole file's text, read like the authors' code does.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import UserError, metadata_arg

log = logging.getLogger(__name__)

DATASET = "elitr_bench"
PASSWORD = b"utter"
SETS = ("qa", "conv")
SPLITS = ("dev", "test2")
LANGUAGES = ("en", "cs")
QUESTION_TYPES = ("who", "what", "when", "howmany")
ANSWER_POSITIONS = {"B": "begin", "M": "middle", "E": "end", "S": "several"}
CORPUS_ROOT = "ELITR-minuting-corpus/elitr-minuting-corpus-en"
CORPUS_FOLDER = "elitr-minuting-corpus-en"
CORPUS_ENV = "LM_EVAL_EXT_ELITR_CORPUS"
TRANSCRIPT_PATTERN = "transcript_MAN*"


class ElitrDataError(UserError):
    """An ELITR-Bench file is missing or does not have the published format."""


@dataclass(frozen=True)
class Transcript:
    """A meeting transcript and where it was read from."""

    meeting: str
    text: str
    source: str


def question_file(set_name: str, split: str, language: str) -> tuple[str, str]:
    """(zip file, member) of a question set, as laid out in the authors' repository."""
    _check_choice("set", set_name, SETS)
    _check_choice("split", split, SPLITS)
    _check_choice("language", language, LANGUAGES)
    if language == "en":
        return "data.zip", f"data/elitr-bench-{set_name}_{split}.json"
    return "czech.zip", f"czech/elitr-bench-czech-{set_name}_{split}.json"


def _check_choice(what: str, value: str, allowed) -> None:
    if value not in allowed:
        raise ElitrDataError(f"ELITR-Bench has no {what} {value!r}; use one of {', '.join(allowed)}.")


def read_question_set(set_name: str, split: str, language: str = "en") -> list[dict]:
    """The meetings of a question set, ``[{"id": meeting, "questions": [...]}, ...]``, checked."""
    from ..data import read_zip_member

    archive, member = question_file(set_name, split, language)
    where = f"{archive}:{member}"
    try:
        data = json.loads(read_zip_member(DATASET, archive, member, password=PASSWORD))
    except ValueError as err:
        raise ElitrDataError(f"ELITR-Bench file {where} is not valid JSON ({err}).") from None
    try:
        meetings = data["meetings"]
        for meeting in meetings:
            str(meeting["id"])
            for question in meeting["questions"]:
                for key in ("id", "question-type", "answer-position", "question", "groundtruth-answer"):
                    question[key]  # noqa: B018 -- presence check
                if question["question-type"] not in QUESTION_TYPES or question["answer-position"] not in ANSWER_POSITIONS:
                    raise ValueError(f"question {question['id']} of {meeting['id']} has type "
                                     f"{question['question-type']!r} / position {question['answer-position']!r}")
    except (KeyError, TypeError, ValueError) as err:
        raise ElitrDataError(f"ELITR-Bench file {where} does not have the published format "
                             f"({{'meetings': [{{'id', 'questions': [...]}}]}}): {err!r}.") from None
    if data.get("split", split) != split:
        raise ElitrDataError(f"ELITR-Bench file {where} says split {data['split']!r}, expected {split!r}.")
    return meetings


def differentiating_questions(split: str, language: str = "en") -> set[tuple[str, str]]:
    """(meeting, question id) of the questions whose text differs between the QA and the Conv set."""
    qa = {(m["id"], str(q["id"])): q["question"] for m in read_question_set("qa", split, language) for q in m["questions"]}
    conv = {(m["id"], str(q["id"])): q["question"] for m in read_question_set("conv", split, language) for q in m["questions"]}
    if qa.keys() != conv.keys():
        raise ElitrDataError(f"The ELITR-Bench QA and Conv sets of {split} ({language}) do not have the same "
                             "meetings and question ids; the data files need review.")
    return {key for key, text in qa.items() if conv[key] != text}


def corpus_dir(explicit: str | os.PathLike | None = None) -> Path | None:
    """The user's ELITR corpus directory (``explicit``, else ``$LM_EVAL_EXT_ELITR_CORPUS``), or None."""
    given = explicit or os.environ.get(CORPUS_ENV)
    if not given:
        return None
    root = Path(given).expanduser()
    for candidate in (root / CORPUS_FOLDER, root):
        if any((candidate / split).is_dir() for split in SPLITS):
            return candidate
    raise ElitrDataError(
        f"The ELITR corpus directory {root} (from {'elitr_corpus' if explicit else CORPUS_ENV}) has neither "
        f"{CORPUS_FOLDER}/<split>/ nor <split>/ folders ({', '.join(SPLITS)}). Give the folder that holds "
        f"{CORPUS_FOLDER}/ (the unzipped ELITR-minuting-corpus.zip), or {CORPUS_FOLDER}/ itself."
    )


def read_transcript(split: str, meeting: str, corpus: Path | None = None) -> Transcript:
    """The transcript of ``meeting``: from ``corpus`` (a corpus directory) if given, else the data layer."""
    if corpus is not None:
        folder = corpus / split / meeting
        candidates = sorted(folder.glob(TRANSCRIPT_PATTERN))
        if not candidates:
            raise ElitrDataError(f"No {TRANSCRIPT_PATTERN} file in {folder} (ELITR corpus directory {corpus}); "
                                 "the directory must have the official corpus layout <split>/<meeting>/.")
        path = candidates[0]
        names = [p.name for p in candidates]
    else:
        from ..data import dataset_files, resolve_file

        prefix = f"{CORPUS_ROOT}/{split}/{meeting}/"
        names = sorted(PurePosixPath(pinned.path).name for pinned in dataset_files(DATASET)
                       if pinned.path.startswith(prefix) and PurePosixPath(pinned.path).match(TRANSCRIPT_PATTERN))
        if not names:
            raise ElitrDataError(f"The data registry has no transcript for meeting {meeting} ({split}); give the "
                                 f"ELITR corpus with {metadata_arg(elitr_corpus='DIR')} or ${CORPUS_ENV}.")
        path = resolve_file(DATASET, prefix + names[0])
    if len(names) > 1:
        log.info("%s has %d transcripts (%s); using the first by name, %s", meeting, len(names), ", ".join(names), names[0])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ElitrDataError(f"Cannot read the transcript {path}: {err}.") from None
    return Transcript(meeting=meeting, text=text, source=str(path))


def build_documents(set_name: str, split: str, language: str = "en",
                    corpus: str | os.PathLike | None = None) -> tuple[list[dict], list[Transcript]]:
    """One document per question (meeting order, then question order) and the meetings' transcripts.

    A document has ``meeting``, ``question_id``, ``turn`` (1-based position of the question in
    its meeting: the turn in multi-turn mode), ``n_turns``, ``question_type``,
    ``answer_position`` (B, M, E, S), ``question``, ``reference``, ``differentiating`` (its text
    differs between the QA and Conv sets), ``set``, ``split``, ``language`` and ``transcript_file``.
    """
    meetings = read_question_set(set_name, split, language)
    differing = differentiating_questions(split, language)
    corpus_path = corpus_dir(corpus)
    docs, transcripts = [], []
    for meeting in meetings:
        transcript = read_transcript(split, meeting["id"], corpus_path)
        transcripts.append(transcript)
        questions = meeting["questions"]
        for turn, question in enumerate(questions, 1):
            docs.append({
                "meeting": meeting["id"],
                "question_id": str(question["id"]),
                "turn": turn,
                "n_turns": len(questions),
                "question_type": question["question-type"],
                "answer_position": question["answer-position"],
                "question": question["question"],
                "reference": question["groundtruth-answer"],
                "differentiating": (meeting["id"], str(question["id"])) in differing,
                "set": set_name,
                "split": split,
                "language": language,
                "transcript_file": Path(transcript.source).name,
            })
    return docs, transcripts
