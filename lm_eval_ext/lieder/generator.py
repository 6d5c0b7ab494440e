"""The LIEDER stimulus generator: the paper's design for user-given nouns, verbs and names.

A lexicon is a JSON list of items; each item gives the words one noun's sentences need::

    {"noun": "dog", "names": ["John", "Mark"], "np": "dog", "np_plural": "dogs",
     "verb": "owns", "verb_negated": "doesn't own", "suffix": "",
     "manage": "adopt", "manage_suffix": "",
     "sg": "The dog is very cute.", "pl": "The dogs are very cute."}

giving "John owns a dog but Mark doesn't own a dog.", "I know that John owns a dog ...",
"John managed to adopt a dog ..." and the two continuations. The output is the stimuli
JSONL format of the published sets, in their row order, so the LIEDER tasks read it with
``--metadata stimuli_file=FILE``. With the published lexicon it reproduces the published
``base``, ``diff`` and ``two`` files byte for byte (tested).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..errors import UserError
from .comparisons import STIMULUS_SETS

ITEM_FIELDS = ("noun", "names", "np", "np_plural", "verb", "verb_negated", "suffix", "manage", "manage_suffix", "sg", "pl")
NONREF = "It's not a big deal."
# (positive word, negative word) of each family, in the published files' order
FAMILIES = {"affirmative_negation": ("affirmative", "negation"), "know_doubt": ("know", "doubt"), "managed_failed": ("managed", "failed")}
CONTEXTS = {
    "base": ("pos_neg", "pos_pos", "neg_pos", "neg_neg"),
    "diff": ("pos_neg", "pos_pos", "neg_pos", "neg_neg"),
    "two": ("pos_neg", "two_neg", "pos_pos", "neg_pos", "neg_two", "neg_neg"),
}
CONTINUATIONS = {"base": ("sref", "pref", "nonref"), "diff": ("sref", "pref", "nonref"), "two": ("sref", "pref")}


def _clause(item: dict, family: str, name: str, positive: bool, np: str) -> str:
    if family == "managed_failed":
        return f"{name} {'managed' if positive else 'failed'} to {item['manage']} {np}{item['manage_suffix']}"
    affirmative = f"{name} {item['verb']} {np}{item['suffix']}"
    if family == "know_doubt":
        return f"I {'know' if positive else 'doubt'} that {affirmative}"
    return affirmative if positive else f"{name} {item['verb_negated']} {np}{item['suffix']}"


def context_sentence(item: dict, family: str, context: str, stimulus_set: str) -> str:
    """The two-clause context of one item, family and context type (e.g. ``pos_neg``)."""
    first, second = context.split("_")
    nps = {"pos": f"a {item['np']}", "neg": f"a {item['np']}", "two": f"two {item['np_plural']}"}
    np2 = f"a different {item['np']}" if stimulus_set == "diff" and context == "pos_pos" else nps[second]
    name1, name2 = item["names"]
    clause1 = _clause(item, family, name1, first != "neg", nps[first])
    clause2 = _clause(item, family, name2, second != "neg", np2)
    same = (first == "neg") == (second == "neg")
    if context == "pos_pos":
        # explicit novelty ("a different dog") replaces the additive particle
        tail = "" if stimulus_set == "diff" else (" too" if family == "affirmative_negation" else " as well")
    elif context == "neg_neg":
        tail = " either" if family == "affirmative_negation" else " as well"
    else:
        tail = ""
    return f"{clause1} {'and' if same else 'but'} {clause2}{tail}."


def _expected(context: str, continuation: str) -> int:
    if continuation == "nonref":
        return -1
    referents = sum({"pos": 1, "neg": 0, "two": 2}[part] for part in context.split("_"))
    return int(referents == 1) if continuation == "sref" else int(referents > 1)


def generate(lexicon: list[dict], stimulus_set: str) -> Iterator[dict]:
    """Stimulus records (``id``, ``sent``, ``expected``) for every item, family, context and continuation."""
    if stimulus_set not in STIMULUS_SETS:
        raise UserError(f"Unknown LIEDER stimulus set {stimulus_set!r}; use one of {', '.join(STIMULUS_SETS)}.")
    for number, item in enumerate(lexicon, 1):
        for family, (pos_word, neg_word) in FAMILIES.items():
            for context in CONTEXTS[stimulus_set]:
                words = [{"pos": pos_word, "neg": neg_word, "two": "two"}[part] for part in context.split("_")]
                sentence = context_sentence(item, family, context, stimulus_set)
                for continuation in CONTINUATIONS[stimulus_set]:
                    text = {"sref": item["sg"], "pref": item["pl"], "nonref": NONREF}[continuation]
                    yield {
                        "id": f"{number}_{item['noun']}_{words[0]}_{words[1]}_{continuation}",
                        "sent": f"{sentence} {text}",
                        "expected": _expected(context, continuation),
                    }


def read_lexicon(path: str | Path) -> list[dict]:
    """Read and check a lexicon file (a JSON list of items with every field of ``ITEM_FIELDS``)."""
    try:
        lexicon = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"Cannot read the LIEDER lexicon {path}: {err}. It must be a JSON list of items.") from None
    if not isinstance(lexicon, list) or not lexicon:
        raise UserError(f"The LIEDER lexicon {path} must be a non-empty JSON list of items.")
    for index, item in enumerate(lexicon):
        missing = [field for field in ITEM_FIELDS if field not in item] if isinstance(item, dict) else list(ITEM_FIELDS)
        if missing or len(item["names"]) != 2 or "_" in item["noun"]:
            raise UserError(
                f"Item {index} of the LIEDER lexicon {path} is incomplete: it needs {', '.join(ITEM_FIELDS)}, "
                f"'names' with two names and a 'noun' without '_' (missing: {', '.join(missing) or 'none'})."
            )
    return lexicon


def stimuli_jsonl(lexicon: list[dict], stimulus_set: str) -> tuple[str, int]:
    """The generated set as JSONL (the published files' formatting), and its row count."""
    rows = list(generate(lexicon, stimulus_set))
    return "".join(json.dumps(row) + "\n" for row in rows), len(rows)
