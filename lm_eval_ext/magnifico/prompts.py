"""Building the authors' prompts (Create Table + Select 3) from a document.

Direct: prefix + ``\\n\\n-- <question>\\nSELECT``. Description: the description is
placed at ``start`` (before the first table), ``mid`` (after table floor(n/2), or after
the only table) or ``end`` (after the "Using valid SQLite" line, as ``\\n\\n-- <desc>``).
Few-shot: prefix, then ``\\n\\n-- <demo question>\\n<demo gold SQL>`` per demonstration,
then the question. Dialogue: the conversation, then the schema as User1's turn, and
``User2: SELECT``. Each prefix (database x description x position) is built once.

Every prompt ends with its *completion cue*, the start of the answer a completion model continues
(:data:`QUERY_CUE` after the question, :data:`DIALOGUE_CUE` in a dialogue); the chat path leaves it
out (``build(doc, cue=False)``, :mod:`lm_eval_ext.magnifico.chat`).
"""
from __future__ import annotations

from .examples import read_dialogue, read_examples
from .interpretations import PLACEHOLDER
from .schema import SchemaBlocks

USING_LINE = "-- Using valid SQLite, answer the following questions for the tables provided above."
DIALOGUE_SCHEMA = "User1: Suppose you are given the following schema:\n\n"
DIALOGUE_QUESTION = "Using valid SQLite, answer the following question with the corresponding SQL query:\n"
QUERY_CUE = "\nSELECT"
DIALOGUE_CUE = "\n\nUser2: SELECT"


def assemble_prefix(blocks: tuple[str, ...], description: str | None = None, position: str | None = None,
                    postfix: bool = True) -> str:
    """Schema blocks with the description at ``position``, then (``postfix``) the "Using valid SQLite" line."""
    parts = []
    if description is not None and position == "start":
        parts.append(description + "\n\n")
    for number, block in enumerate(blocks, 1):
        parts.append(block)
        if description is not None and position == "mid" and (len(blocks) == 1 or number == len(blocks) // 2):
            parts.append(description + "\n\n")
    if postfix:
        parts.append(USING_LINE)
    if description is not None and position == "end":
        parts.append("\n\n-- " + description)
    return "".join(parts)


class PromptBuilder:
    """Prompts for documents of :func:`~lm_eval_ext.magnifico.documents.build_documents`, with caches."""

    def __init__(self, schema: SchemaBlocks | None = None) -> None:
        self.schema = schema or SchemaBlocks()
        self._prefixes: dict[tuple, str] = {}
        self._demos: dict[tuple, str] = {}

    def prefix(self, db_id: str, tables: tuple[str, ...], description: str | None = None,
               position: str | None = None, postfix: bool = True) -> str:
        """The schema prefix of a database, cached per (database, tables, description, position)."""
        key = (db_id, tables, description, position, postfix)
        if key not in self._prefixes:
            self._prefixes[key] = assemble_prefix(self.schema.blocks(db_id, tables), description, position, postfix)
        return self._prefixes[key]

    def demonstrations(self, demos: list[dict], form_word: str | None) -> str:
        """``\\n\\n-- <question>\\n<gold SQL>`` for each demonstration (file, row)."""
        key = (tuple((d["file"], d["row"]) for d in demos), form_word)
        if key not in self._demos:
            parts = []
            for demo in demos:
                example = read_examples(demo["file"])[demo["row"]]
                text = example.text.replace(PLACEHOLDER, form_word) if form_word else example.text
                parts.append(f"\n\n-- {text}\n{example.gold}")
            self._demos[key] = "".join(parts)
        return self._demos[key]

    def build(self, doc: dict, cue: bool = True) -> str:
        """The prompt of one document; without its completion cue when ``cue`` is False (module docstring)."""
        tables = tuple(doc["tables"])
        kind = doc["prompt_type"]
        if kind == "dialogue":
            interpretation, folder, variant, file = doc["dialogue"].split("/")
            dialogue = read_dialogue(interpretation, folder, variant, file[: -len(".txt")])
            schema = self.prefix(doc["db_id"], tables, postfix=False)
            return f"{dialogue}\n\n{DIALOGUE_SCHEMA}{schema}{DIALOGUE_QUESTION}{doc['text']}" + (DIALOGUE_CUE if cue else "")
        if kind == "description":
            prefix = self.prefix(doc["db_id"], tables, doc["description"], doc["position"])
        else:
            prefix = self.prefix(doc["db_id"], tables)
        if kind == "fewshot":
            prefix += self.demonstrations(doc["demonstrations"], doc["form_word"])
        return f"{prefix}\n\n-- {doc['text']}" + (QUERY_CUE if cue else "")
