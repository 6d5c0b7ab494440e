"""From data files to harness documents: one document per (example, gold position), example-major.

Documents are small (the question or key, the answers or value, k and the gold position);
the passages and pairs stay in :class:`LitmData`, shared by every position of an example, and
the prompt is built from both when the harness asks for it. Example-major order means that
``--limit N`` takes whole examples at every position (N a multiple of the number of positions);
otherwise the first positions get one document more, which the task records and reports (task.py).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..data import resolve_file
from .contexts import KVExample, QAExample, authors_random_orders, kv_example, qa_example
from .kv_generator import generate_kv_records
from .options import LitmSetup, OptionError
from .published import check_published, local_published_file, published_relpath
from .records import RecordError, iter_records

log = logging.getLogger(__name__)

DATASET = "lost_in_the_middle"
ORACLE_FILE = "qa_data/nq-open-oracle.jsonl.gz"


def kv_relpath(k: int) -> str:
    """The registry path of the published KV file with k pairs."""
    return f"kv_retrieval_data/kv-retrieval-{k}_keys.jsonl.gz"


@dataclass
class LitmData:
    """A task's examples (and, for random order, each question's distractor permutation) plus its documents."""

    examples: list = field(default_factory=list)
    orders: list[list[int]] | None = None
    docs: list[dict] = field(default_factory=list)
    source: str = ""


def _doc(n: int, position: int | None, fields: dict) -> dict:
    doc = {"doc_key": f"{n}" if position is None else f"{n}@{position}", "example": n, **fields}
    if position is not None:
        doc["gold_index"] = position
        doc["gold_position"] = position + 1
    return doc


def load_qa(setup: LitmSetup) -> LitmData:
    """QA, oracle and closed-book documents (see the module docstring)."""
    relpath = ORACLE_FILE if setup.setting in ("oracle", "closedbook") else published_relpath(setup.k, 0)
    path = resolve_file(DATASET, relpath, explicit=setup.qa_file)
    examples: list[QAExample] = [qa_example(r, path, i) for i, r in enumerate(iter_records(path))]
    if not examples:
        raise RecordError(f"{path} holds no readable Lost in the Middle QA record.")
    data = LitmData(examples=examples, source=str(path))
    if setup.setting == "qa":
        short = [e.question for e in examples if len(e.distractors) < setup.k - 1]
        if short:
            raise RecordError(f"{setup.task}: {len(short)} question(s) of {path} have fewer than {setup.k - 1} "
                              f"distractor passages (first: {short[0]!r}); {setup.k} documents need a file with at "
                              f"least {setup.k} passages per question.")
        if setup.random_order:
            data.orders = authors_random_orders(len(examples), setup.k - 1)
        if setup.qa_file is None and setup.verify_published:
            _verify_published(setup, examples)
    for n, example in enumerate(examples):
        fields = {"question": example.question, "answers": list(example.answers), "k": setup.k}
        for position in setup.positions or (None,):
            data.docs.append(_doc(n, position, fields))
    return data


def _verify_published(setup: LitmSetup, examples: list[QAExample]) -> None:
    # Position 0 is the source file itself; the others are checked when already on this machine.
    for position in setup.positions:
        if position == 0:
            continue
        path = local_published_file(setup.k, position)
        if path is not None:
            check_published(examples, setup.k, position, iter_records(path), path)


def load_kv(setup: LitmSetup) -> LitmData:
    """KV documents from the published file, a user file (``litm_kv_file``) or the seeded generator."""
    if setup.generated and setup.kv_file is None:
        records = generate_kv_records(setup.k, setup.kv_examples, setup.kv_seed)
        source = f"generated: {setup.k} pairs x {setup.kv_examples} examples, seed {setup.kv_seed}"
    else:
        # An explicit file is used as given; kv_relpath only names what it replaces.
        path = resolve_file(DATASET, kv_relpath(setup.k), explicit=setup.kv_file)
        records, source = iter_records(path), str(path)
    examples: list[KVExample] = [kv_example(r, source, i) for i, r in enumerate(records)]
    if not examples:
        raise RecordError(f"{source} holds no readable key-value record.")
    wrong = [i for i, e in enumerate(examples) if len(e.pairs) != setup.k]
    if wrong:
        raise OptionError(f"{setup.task}: record {wrong[0] + 1} of {source} has {len(examples[wrong[0]].pairs)} "
                          f"key-value pairs; this task sweeps {setup.k}-pair contexts. Use the task of that size "
                          "(or litm_kv_generated with litm_kv_pairs=N).")
    data = LitmData(examples=examples, source=source)
    for n, example in enumerate(examples):
        fields = {"key": example.key, "value": example.value, "k": setup.k}
        for position in setup.positions:
            data.docs.append(_doc(n, position, fields))
    return data


def load(setup: LitmSetup) -> LitmData:
    """The task's data and documents."""
    data = load_kv(setup) if setup.setting == "kv" else load_qa(setup)
    log.info("%s: %d examples x %d position(s) = %d documents from %s", setup.task, len(data.examples),
             max(1, len(setup.positions)), len(data.docs), data.source)
    return data
