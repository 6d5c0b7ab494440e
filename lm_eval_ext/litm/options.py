"""The settings of one Lost in the Middle task: its YAML ``dataset_kwargs`` plus the run's ``--metadata``.

YAML (per task): ``setting`` (qa, oracle, closedbook, kv), ``k`` (documents or key-value pairs),
``positions`` (0-based gold indices), ``query_aware``, ``random_order``, ``generated`` (KV data
from the generator).

``--metadata`` (the whole run; names start with ``litm_`` because the harness also puts the
model arguments into the same dictionary):

- ``litm_positions``: 0-based gold indices, e.g. ``litm_positions=[0,9,19]`` or ``litm_positions=all``;
- ``litm_too_long``: ``skip`` (default) or ``truncate``;
- ``litm_qa_file`` / ``litm_kv_file``: a data file in the published format instead of the published one;
- ``litm_kv_pairs`` (required), ``litm_kv_examples`` (500), ``litm_kv_seed`` (0): the generated KV tasks;
- ``litm_verify_published``: ``false`` skips the check against published ``gold_at_i`` files.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError, metadata_arg, truth_value

SETTINGS = ("qa", "oracle", "closedbook", "kv")
TOO_LONG_POLICIES = ("skip", "truncate")
MIN_KV_PAIRS = 2  # a generated key-value context: the gold pair and at least one distractor
METADATA_KEYS = ("litm_positions", "litm_too_long", "litm_qa_file", "litm_kv_file", "litm_kv_pairs",
                 "litm_kv_examples", "litm_kv_seed", "litm_verify_published")


class OptionError(UserError):
    """A Lost in the Middle task argument is invalid."""


@dataclass(frozen=True)
class LitmSetup:
    """Everything that decides a task's documents, prompts and length policy."""

    task: str
    setting: str
    k: int  # documents (qa; 1 for oracle, 0 for closed-book) or key-value pairs (kv)
    positions: tuple[int, ...]  # 0-based gold indices swept; empty for oracle and closed-book
    query_aware: bool = False
    random_order: bool = False
    generated: bool = False
    too_long: str = "skip"
    qa_file: str | None = None
    kv_file: str | None = None
    kv_examples: int = 500
    kv_seed: int = 0
    verify_published: bool = True

    @property
    def swept(self) -> bool:
        """True when the task moves a gold item through positions (qa and kv)."""
        return self.setting in ("qa", "kv")


def quarter_positions(k: int) -> tuple[int, ...]:
    """0 and the last index of every quarter of k items: 140 -> 0, 34, 69, 104, 139."""
    return tuple(sorted({0} | {-(-k * j // 4) - 1 for j in range(1, 5)}))


def parse_positions(value, k: int, task: str) -> tuple[int, ...]:
    """``all``, an int, a list of ints, or ints separated by spaces, ``;`` or ``:`` -> sorted unique indices < k."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return tuple(range(k))
    if isinstance(value, bool):
        items = None
    elif isinstance(value, int):
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*\d+([\s;:]+\d+)*\s*", value):
        items = [int(x) for x in re.split(r"[\s;:]+", value.strip())]
    else:
        items = None
    if not items or not all(isinstance(p, int) and not isinstance(p, bool) for p in items):
        raise OptionError(f"{task}: positions {value!r} are not understood. Give 0-based gold indices, e.g. "
                          f"{metadata_arg(litm_positions=[0, 9, 19])} (or \"all\").")
    bad = [p for p in items if not 0 <= p < k]
    if bad:
        raise OptionError(f"{task}: gold positions {bad} are outside 0..{k - 1} (this task has {k} items; positions "
                          "are 0-based: the first item is 0). The litm_positions of --metadata apply to every Lost in the "
                          "Middle task of the run: run tasks of different sizes separately.")
    return tuple(sorted(set(items)))


def _int_option(metadata: dict, key: str, default: int | None, task: str, minimum: int) -> int | None:
    value = metadata.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OptionError(f"{task}: {key}={value!r} must be an integer of at least {minimum}.")
    return value


def _flag_option(metadata: dict, key: str, default: bool, task: str) -> bool:
    value = metadata.get(key, default)
    if (truth := truth_value(value)) is None:
        raise OptionError(f"{task}: {key}={value!r} must be true or false (e.g. {metadata_arg(**{key: False})}).")
    return truth


def setup_from(task: str, dataset_kwargs: dict, metadata: dict) -> LitmSetup:
    """Validate the task's YAML settings and the run's ``litm_*`` metadata into a LitmSetup."""
    setting = dataset_kwargs.get("setting")
    if setting not in SETTINGS:
        raise OptionError(f"{task}: dataset_kwargs.setting must be one of {', '.join(SETTINGS)}, got {setting!r}.")
    too_long = str(metadata.get("litm_too_long", "skip")).lower()
    if too_long not in TOO_LONG_POLICIES:
        raise OptionError(f"{task}: litm_too_long={metadata['litm_too_long']!r}; use skip (the default: over-long "
                          "prompts are skipped and counted) or truncate (the model adapter cuts them, and they are counted).")
    generated = bool(dataset_kwargs.get("generated", False))
    k = {"oracle": 1, "closedbook": 0}.get(setting, dataset_kwargs.get("k"))
    if generated:
        k = _int_option(metadata, "litm_kv_pairs", None, task, MIN_KV_PAIRS)
        if k is None:
            raise OptionError(f"{task} runs on generated key-value data and needs the number of pairs: "
                              f"{metadata_arg(litm_kv_pairs=1000)} for 1000 (an integer; optionally also litm_kv_examples, "
                              "default 500, and litm_kv_seed, default 0).")
    if not isinstance(k, int) or isinstance(k, bool):
        raise OptionError(f"{task}: dataset_kwargs.k must be an integer, got {k!r}.")
    positions: tuple[int, ...] = ()
    if setting in ("qa", "kv"):
        default = dataset_kwargs.get("positions") or quarter_positions(k)
        positions = parse_positions(metadata.get("litm_positions", default), k, task)
    return LitmSetup(
        task=task,
        setting=setting,
        k=k,
        positions=positions,
        query_aware=bool(dataset_kwargs.get("query_aware", False)),
        random_order=bool(dataset_kwargs.get("random_order", False)),
        generated=generated,
        too_long=too_long,
        qa_file=metadata.get("litm_qa_file"),
        kv_file=metadata.get("litm_kv_file"),
        kv_examples=_int_option(metadata, "litm_kv_examples", 500, task, 1),
        kv_seed=_int_option(metadata, "litm_kv_seed", 0, task, 0),
        verify_published=_flag_option(metadata, "litm_verify_published", True, task),
    )
