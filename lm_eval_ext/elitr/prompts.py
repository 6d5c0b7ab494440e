"""The authors' answer prompt and the user messages of a conversation about one meeting.

The first user message is the answer template (``templates/elitr_answer_<language>.txt``) with
``{transcript}`` replaced by the transcript, then ``"\\n\\n"``, then the first question: the
template already ends with two newlines, so four newlines precede the question, as in the
authors' code (``format_inference_prompt(transcript) + "\\n\\n" + question``). Every later user
message is the question alone. A question is stripped; with QA markers it becomes
``"QUESTION: <question> ANSWER:"``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..paths import templates_dir

PLACEHOLDER = "{transcript}"
QUESTION_SEPARATOR = "\n\n"


@lru_cache(maxsize=None)
def answer_template(language: str) -> str:
    """The answer prompt template of ``language`` (en or cs), byte for byte."""
    return (templates_dir() / f"elitr_answer_{language}.txt").read_text(encoding="utf-8")


def format_question(question: str, qa_markers: bool = False) -> str:
    """A question as the model sees it: stripped, with the optional QA markers."""
    question = question.strip()
    return f"QUESTION: {question} ANSWER:" if qa_markers else question


@dataclass(frozen=True)
class FirstMessage:
    """The first user message, with the span of the transcript in it (what may be truncated)."""

    text: str
    transcript_start: int
    transcript_end: int

    def with_transcript(self, transcript: str) -> str:
        """The same message with another transcript text (e.g. a shortened one)."""
        return self.text[: self.transcript_start] + transcript + self.text[self.transcript_end :]

    @property
    def transcript(self) -> str:
        """The transcript's text within the first message."""
        return self.text[self.transcript_start : self.transcript_end]


def first_message(template: str, transcript: str, question: str) -> FirstMessage:
    """Template with the transcript, then two newlines, then the (already formatted) question."""
    head, tail = template.split(PLACEHOLDER)  # exactly one placeholder: the templates are fixed files
    text = head + transcript + tail + QUESTION_SEPARATOR + question
    return FirstMessage(text, len(head), len(head) + len(transcript))


def user_messages(template: str, transcript: str, questions: list[str], qa_markers: bool = False) -> tuple[FirstMessage, list[str]]:
    """The first message and the list of all user messages (first message text, then the later questions)."""
    formatted = [format_question(q, qa_markers) for q in questions]
    first = first_message(template, transcript, formatted[0])
    return first, [first.text, *formatted[1:]]
