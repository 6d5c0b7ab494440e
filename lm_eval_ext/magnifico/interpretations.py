"""The 24 interpretations: kind, category, form words and descriptions, with the paper's form names.

Form names: ``base`` (the data's ``baseline``: the meaning stated plainly), ``plausible``,
``foreign`` (the data's ``nonsense``), ``adversarial``, and ``concept`` (the
``concept_word`` placeholder, filled with a word the user gives).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError, metadata_arg
from .facts import INTERPRETATIONS

# paper form name -> folder name in magnifico_data/<interpretation>/
FORM_DIRS = {"base": "baseline", "plausible": "plausible", "foreign": "nonsense", "adversarial": "adversarial",
             "concept": "concept"}
CATEGORIES = ("basic", "subquery", "value", "column")
PLACEHOLDER = "concept_word"


class InterpretationError(UserError):
    """An unknown interpretation, or a form it does not have."""


@dataclass(frozen=True)
class Interpretation:
    """One interpretation (e.g. ``maximum``) and its forms."""

    name: str
    kind: str  # single_word | phrase
    category: str  # basic | subquery | value | column | phrase
    words: dict  # paper form name -> form word (single-word interpretations)
    descriptions: dict  # paper form name -> description

    def word(self, form: str, custom_word: str | None = None) -> str:
        """The word standing for the interpretation in ``form`` (``concept``: the user's word)."""
        if form == "concept":
            return _require_word(custom_word)
        try:
            return self.words[form]
        except KeyError:
            raise InterpretationError(f"Interpretation {self.name!r} has no {form!r} form; it has "
                                      f"{', '.join(self.words) or 'only its phrase'}.") from None

    def description(self, form: str, custom_word: str | None = None) -> str:
        """The one-line description for ``form`` (the Description prompt's text)."""
        if form == "concept":
            # every single-word description starts with its form word: put the user's word there
            plausible = self.descriptions["plausible"]
            return _require_word(custom_word) + plausible[len(self.words["plausible"]):]
        if self.kind == "phrase":
            return self.descriptions["plausible"]
        try:
            return self.descriptions[form]
        except KeyError:
            raise InterpretationError(f"Interpretation {self.name!r} has no description for form {form!r}.") from None


def _require_word(word: str | None) -> str:
    if not word or not word.strip():
        raise InterpretationError(f"The concept form needs a form word: add {metadata_arg(form_word='WORD')} (the word "
                                  "that stands for each interpretation in the questions and descriptions).")
    return word.strip()


def _build() -> dict[str, Interpretation]:
    paper = {"nonsense": "foreign"}
    table = {}
    for name, facts in INTERPRETATIONS.items():
        table[name] = Interpretation(
            name=name,
            kind=facts["kind"],
            category=facts["category"],
            words={paper.get(k, k): v for k, v in facts["forms"].items()},
            descriptions={paper.get(k, k): v for k, v in facts["descriptions"].items()},
        )
        if facts["kind"] == "single_word":
            for form, text in table[name].descriptions.items():
                assert text.startswith(table[name].words[form] + " "), (name, form)
    return table


_TABLE = _build()


def get(name: str) -> Interpretation:
    """The interpretation called ``name``."""
    try:
        return _TABLE[name]
    except KeyError:
        raise InterpretationError(f"Unknown MAGNIFICo interpretation {name!r}; known: {', '.join(_TABLE)}.") from None


def of_kind(kind: str) -> list[Interpretation]:
    """Every interpretation of ``kind`` (``single_word`` or ``phrase``), in the authors' order."""
    return [i for i in _TABLE.values() if i.kind == kind]
