"""A task's setting, its base setting, and the harness documents both give.

A *setting* is one task: scope (single-word interpretations, phrase interpretations,
the dialogue interpretations, or two interpretations at once), prompt type, form and
position. A novel-interpretation task also holds the items of its *base* setting (the
setting without the novel interpretation, :meth:`Setting.base`), so that its ``rel_perf`` needs nothing
from another task; each document says which side it is on (``role``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError
from . import interpretations as interp
from .examples import Example, parse_question, read_combination, read_examples

SCOPES = ("single", "phrase", "dialogue", "multi")
PROMPT_TYPES = ("direct", "description", "fewshot", "dialogue")
POSITIONS = ("start", "mid", "end")
DIALOGUE_FOLDERS = {"start": "dialogue_data", "mid": "dialogue_data_mid", "end": "dialogue_data_end"}
# the interpretations that have conversations (the dialogue data of Patel et al., EMNLP 2023)
DIALOGUE_INTERPRETATIONS = ("average", "city_mv_pa", "lname_fname", "maximum", "more_than_max", "salary_more_than",
                            "value_mode", "yellow_card")
NOVEL, BASE = "novel", "base"


class SettingError(UserError):
    """A task's dataset_kwargs or --metadata options do not describe a valid MAGNIFICo setting."""


@dataclass(frozen=True)
class Setting:
    """One task's setting; ``position`` only for description and dialogue prompts."""

    scope: str
    prompt_type: str
    form: str
    position: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.scope not in SCOPES:
            problems.append(f"scope {self.scope!r} (use {', '.join(SCOPES)})")
        if self.prompt_type not in PROMPT_TYPES:
            problems.append(f"prompt_type {self.prompt_type!r} (use {', '.join(PROMPT_TYPES)})")
        if self.form not in interp.FORM_DIRS:
            problems.append(f"form {self.form!r} (use {', '.join(interp.FORM_DIRS)})")
        if (self.prompt_type == "dialogue") != (self.scope == "dialogue"):
            problems.append("dialogue prompts go with the dialogue scope only")
        if self.prompt_type in ("description", "dialogue") and self.position not in POSITIONS:
            problems.append(f"position {self.position!r} (use {', '.join(POSITIONS)})")
        if self.form == "base" and self.prompt_type == "description":
            problems.append("base items have no description (the meaning is stated in the question)")
        if self.scope == "phrase" and self.form not in ("base", "plausible"):
            problems.append("phrase interpretations have the base and plausible forms only")
        if self.scope in ("dialogue", "multi") and self.form == "concept":
            problems.append(f"the {self.scope} scope has no concept form")
        if problems:
            raise SettingError(f"Invalid MAGNIFICo setting {self}: {'; '.join(problems)}.")

    def base(self) -> Setting | None:
        """The setting whose items are the base of this one (None for a base setting).

        Direct and Description -> base items with the Direct prompt; Few-shot -> base items
        with the base demonstrations; Dialogue -> base items with the ``concept_edited``
        conversation (it exists for the start position only); two interpretations ->
        ``combination/baseline.tsv`` with Direct (for Direct and Description) or Few-shot.
        """
        if self.form == "base":
            return None
        if self.prompt_type == "dialogue":
            return Setting(self.scope, "dialogue", "base", "start")
        return Setting(self.scope, "fewshot" if self.prompt_type == "fewshot" else "direct", "base")


def _replace_question(example: Example, replacements: dict[str, str]) -> Example:
    question = example.question
    for placeholder, word in replacements.items():
        question = question.replace(placeholder, word)
    db_id, text, tables = parse_question(question)
    return Example(example.item_id, question, example.gold, db_id, text, tables)


def _doc(setting: Setting, role: str, names: list[str], example: Example, **extra) -> dict:
    kinds = [interp.get(n) for n in names]
    return {
        "item_id": example.item_id,
        "interpretation": "+".join(names),
        "interpretations": names,
        "category": "+".join(k.category for k in kinds),
        "role": role,
        "form": setting.form,
        "prompt_type": setting.prompt_type,
        "position": setting.position,
        "db_id": example.db_id,
        "question": example.question,
        "text": example.text,
        "tables": list(example.tables),
        "gold": example.gold,
        "description": None,
        "demonstrations": [],
        "dialogue": None,
        "form_word": None,
        **extra,
    }


def _single_docs(setting: Setting, role: str, item: interp.Interpretation, form_word: str | None) -> list[dict]:
    folder = interp.FORM_DIRS[setting.form]
    examples = read_examples(f"{item.name}/{folder}/test.tsv")
    if setting.form == "concept":
        word = item.word("concept", form_word)
        examples = [_replace_question(e, {interp.PLACEHOLDER: word}) for e in examples]
    extra: dict = {"form_word": form_word if setting.form == "concept" else None}
    if setting.prompt_type == "description":
        extra["description"] = item.description(setting.form, form_word)
    if setting.prompt_type == "fewshot":
        extra["demonstrations"] = [{"file": f"{item.name}/{folder}/train.tsv", "row": i}
                                   for i in range(len(read_examples(f"{item.name}/{folder}/train.tsv")))]
    docs = []
    for example in examples:
        doc = _doc(setting, role, [item.name], example, **extra)
        if setting.prompt_type == "dialogue":
            position = "start" if setting.form == "base" else setting.position
            variant = "concept_edited" if setting.form == "base" else folder
            doc["dialogue"] = f"{item.name}/{DIALOGUE_FOLDERS[position]}/{variant}/{example.db_id}.txt"
        docs.append(doc)
    return docs


def _multi_docs(setting: Setting, role: str, keep) -> dict[str, list[dict]]:
    folder = interp.FORM_DIRS[setting.form]
    by_pair: dict[str, list[dict]] = {}
    for name1, name2, example in read_combination("baseline" if setting.form == "base" else "concept"):
        if not keep(f"{name1}+{name2}", (name1, name2)):
            continue
        first, second = interp.get(name1), interp.get(name2)
        extra: dict = {}
        if setting.form != "base":
            example = _replace_question(example, {"concept_word1": first.word(setting.form),
                                                  "concept_word2": second.word(setting.form)})
        if setting.prompt_type == "description":
            extra["description"] = first.description(setting.form) + " " + second.description(setting.form)
        if setting.prompt_type == "fewshot":
            # rows 1, 3 and 5 of each interpretation's train file, first then second
            extra["demonstrations"] = [{"file": f"{name}/{folder}/train.tsv", "row": row}
                                       for name in (name1, name2) for row in (0, 2, 4)]
        by_pair.setdefault(f"{name1}+{name2}", []).append(_doc(setting, role, [name1, name2], example, **extra))
    return by_pair


def scope_interpretations(scope: str) -> list[str]:
    """The interpretation names a scope covers (for multi: none; pairs come from the combination file)."""
    if scope == "single":
        return [i.name for i in interp.of_kind("single_word")]
    if scope == "phrase":
        return [i.name for i in interp.of_kind("phrase")]
    if scope == "dialogue":
        return list(DIALOGUE_INTERPRETATIONS)
    return []


def _docs_by_key(setting: Setting, role: str, selected: set[str] | None, form_word: str | None) -> dict[str, list]:
    def keep(key: str, names: tuple[str, ...]) -> bool:
        return selected is None or key in selected or all(n in selected for n in names)

    if setting.scope == "multi":
        return _multi_docs(setting, role, keep)
    return {name: _single_docs(setting, role, interp.get(name), form_word)
            for name in scope_interpretations(setting.scope) if keep(name, (name,))}


def build_documents(setting: Setting, selected: set[str] | None = None, form_word: str | None = None) -> list[dict]:
    """The documents of a task: per interpretation (or pair), its novel items interleaved with its base items.

    Interleaving (novel 1, base 1, novel 2, ...) keeps both sides of each interpretation
    together, so that even a ``--limit``-ed run can compute ``rel_perf``. ``selected``
    restricts the interpretations (names, or ``a+b`` pairs).
    """
    if selected is not None:
        known = set(scope_interpretations(setting.scope)) | {i.name for i in interp.of_kind("single_word")}
        unknown = {s for s in selected if s not in known and any(part not in known for part in s.split("+"))}
        if unknown:
            raise SettingError(f"Unknown interpretation(s) in --metadata interpretations: {', '.join(sorted(unknown))}. "
                               f"The option applies to every MAGNIFICo task of the run; the names are "
                               f"{', '.join(sorted(known))}, and a pair is written a+b.")
    base_setting = setting.base()
    main_role = NOVEL if base_setting else BASE
    main = _docs_by_key(setting, main_role, selected, form_word)
    base = _docs_by_key(base_setting, BASE, selected, form_word) if base_setting else {}
    docs = []
    for key, novel_docs in main.items():
        base_docs = base.get(key, [])
        for i in range(max(len(novel_docs), len(base_docs))):
            docs.extend(d[i] for d in (novel_docs, base_docs) if i < len(d))
    return docs
