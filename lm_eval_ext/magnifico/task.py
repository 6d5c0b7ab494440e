"""The harness task for MAGNIFICo: one generation per item, scored by executing the SQL in a sandbox.

Used from the task YAMLs as ``class: !function lm_eval_ext.magnifico.task.MagnificoTask``;
``dataset_kwargs`` names the setting (scope, prompt_type, form, position). Options
(``--metadata``): ``timeout``, ``max_rows``, ``workers``, ``comparison`` (``authors`` |
``testsuite``) for the sandbox (execution.py); ``schema_source`` (``sql_files`` |
``sqlite_master``), ``interpretations`` (comma- or space-separated subset), ``form_word`` (the
concept tasks).

With a chat template (``--apply_chat_template``, e.g. ``local-chat-completions``) the task takes its
chat path (:mod:`lm_eval_ext.magnifico.chat`): the authors' prompt without its final ``SELECT`` plus one
instruction, no stop sequences and a larger token budget, and the query a reader sees in each reply is
executed, or none when the reply holds no query (:mod:`lm_eval_ext.magnifico.replies`); every document
reports ``replies_normalized`` (0 on the completion path). The path is recorded in the task's results
metadata (``reply_format``), where the ``sandbox`` filter reads it.

Items whose Spider database is missing, or whose gold query does not execute, are left out when
the task is loaded; how many (and which databases) is recorded in the task's results metadata
(``excluded``), the same on every rank. Prompts longer than the model's context (when it is
known: ``max_length``) are still sent, and the harness's adapter cuts their start: they are
counted in ``prompts_truncated``.
"""
from __future__ import annotations

import json
import logging
import re
from collections import Counter

import datasets
from lm_eval.api.metrics import mean

from ..errors import UserError
from ..metrics.relative import mean_relative_performance
from ..prompt_length import resolve_budget
from ..task_base import ExtTask
from .chat import chat_generation_kwargs, chat_messages
from .documents import Setting, build_documents
from .execution import GOLD_RETRY_FACTOR, Scorer, database_path, execution_options, gold_out_of_budget
from .execution import OPTIONS as EXECUTION_OPTIONS
from .interpretations import CATEGORIES
from .prompts import PromptBuilder
from .schema import SchemaBlocks
from .scoring import metric_values

logger = logging.getLogger(__name__)


class MagnificoOptionError(UserError):
    """A --metadata option of a MAGNIFICo task is malformed."""


def _selected_interpretations(metadata: dict) -> set[str] | None:
    selected = metadata.get("interpretations")
    if isinstance(selected, str):
        # a JSON list, or a string with commas (TaskManager) or spaces (`--metadata "interpretations=maximum
        # average"` on 0.4.13, whose key=value parser splits on commas)
        return {s for s in re.split(r"[,\s]+", selected) if s}
    return None if selected is None else {str(s) for s in selected}


def split_scorable(docs: list[dict], scorer: Scorer) -> tuple[list[dict], dict[str, int], Counter]:
    """Documents that can be scored, the excluded counts, and the missing databases (with item counts)."""
    from ..data import DataError, spider_database_dir

    spider_database_dir()  # no Spider directory at all is an error, not an exclusion
    missing: Counter = Counter()
    present = []
    for doc in docs:
        try:
            database_path(doc["db_id"])
            present.append(doc)
        except DataError:
            missing[doc["db_id"]] += 1
    golds = scorer.gold_results([(database_path(d["db_id"]), d["gold"]) for d in present])
    kept = [doc for doc, gold in zip(present, golds) if gold.ok]
    over_budget = sum(gold_out_of_budget(gold) for gold in golds)
    return kept, {"db_missing": sum(missing.values()), "gold_error": len(present) - len(kept) - over_budget,
                  "gold_budget": over_budget}, missing


def _key(doc: dict) -> tuple:
    return doc["role"], doc["interpretation"], doc["item_id"]


class MagnificoTask(ExtTask):
    """Generates SQL for each item and scores it by execution (Patel et al., EMNLP 2023); module docstring."""

    BENCHMARK, OPTIONS = "MAGNIFICo", (*EXECUTION_OPTIONS, "schema_source", "interpretations", "form_word")

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        self._truncated: set[tuple] = set()
        super().__init__(config=config, **kwargs)
        self.with_base = self.setting.base() is not None
        self.per_category = self.setting.scope == "single"
        # The YAML's (completion) settings, before the harness applies --gen_kwargs to the config:
        # what differs from them at request time was given on the command line (chat.py).
        self._yaml_generation = dict(self.config.generation_kwargs or {})

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        """Build the documents of this task's setting and leave out the items that cannot be scored."""
        metadata = dict(self.config.metadata or {})
        if "reply_format" in metadata:
            raise MagnificoOptionError(f"Task {self.config.task}: --metadata reply_format is not an option: the task "
                                       "records it (chat with --apply_chat_template, else completion); remove it.")
        setting_args = dict(self.config.dataset_kwargs or {})
        try:
            self.setting = Setting(**setting_args)
        except TypeError:
            raise MagnificoOptionError(f"Task {self.config.task}: dataset_kwargs {setting_args} must name scope, "
                                       "prompt_type, form and (for description and dialogue) position.") from None
        self.prompts = PromptBuilder(SchemaBlocks(str(metadata.get("schema_source", "sql_files"))))
        docs = build_documents(self.setting, _selected_interpretations(metadata), metadata.get("form_word"))
        kept, excluded, missing = split_scorable(docs, Scorer(execution_options(metadata)))
        databases = ", ".join(f"{db} x{n}" for db, n in sorted(missing.items())) or "none"
        message = (f"{self.config.task}: scoring {len(kept)} of {len(docs)} items; left out {excluded['db_missing']} "
                   f"whose Spider database is missing ({databases}), {excluded['gold_error']} whose gold query "
                   f"does not execute and {excluded['gold_budget']} whose gold query does not finish within "
                   f"{GOLD_RETRY_FACTOR} x its budget (--metadata budget)")
        (logger.warning if len(kept) < len(docs) else logger.info)(message)
        if not kept:
            raise UserError(f"Task {self.config.task}: no item left to score ({len(docs)} items, "
                            f"{excluded['db_missing']} with a missing database, "
                            f"{excluded['gold_error']} whose gold query fails, {excluded['gold_budget']} whose gold "
                            "query does not finish within its budget). Missing databases: set LM_EVAL_EXT_SPIDER_DIR "
                            "to the database/ folder of Spider 1.0 (docs/data.md); gold queries over their budget: "
                            "raise --metadata budget.")
        self.record_run_info(excluded={**excluded, "items": len(docs), "missing_databases": dict(sorted(missing.items()))})
        self.dataset = datasets.DatasetDict({"test": datasets.Dataset.from_list(kept)})

    def subset_metrics(self) -> dict:
        """Novel tasks: ``ex``/``em`` (novel items), ``ex_base`` (base items), ``rel_perf_<category>``."""
        if not self.with_base:
            return {}
        metrics = {"ex": (mean, True), "em": (mean, True), "ex_base": (mean, True)}
        if self.per_category:
            metrics |= {f"rel_perf_{c}": (mean_relative_performance, True) for c in CATEGORIES}
        return metrics

    def doc_to_text(self, doc, doc_to_text=None) -> str:
        """The authors' prompt for this item (built from the cached schema prefix of its database)."""
        return self.prompts.build(doc)

    def doc_to_target(self, doc, doc_to_target=None) -> str:
        """The gold SQL (shown in the per-sample logs; scoring executes it)."""
        return doc["gold"]

    def build_all_requests(self, **kwargs) -> None:
        """Record the path (chat with a chat template, else completion) and, on the chat path, use the chat
        generation settings; then build the requests as every plugin task does."""
        chat = bool(kwargs.get("apply_chat_template"))
        if chat:
            self.set_config(key="generation_kwargs",
                            value=chat_generation_kwargs(self.config.generation_kwargs or {}, self._yaml_generation))
        self.record_run_info(reply_format="chat" if chat else "completion")
        super().build_all_requests(**kwargs)

    def fewshot_context(self, doc, num_fewshot, system_instruction=None, apply_chat_template=False,
                        fewshot_as_multiturn=False, chat_template=None, gen_prefix=None):
        """The completion prompt as the harness builds it; with a chat template, the chat prompt
        (the authors' prompt without its completion cue, and the chat instruction, chat.py) as one user message."""
        if not (apply_chat_template and chat_template):
            return super().fewshot_context(doc, num_fewshot, system_instruction=system_instruction,
                                           apply_chat_template=apply_chat_template,
                                           fewshot_as_multiturn=fewshot_as_multiturn, chat_template=chat_template,
                                           gen_prefix=gen_prefix)
        return chat_template(chat_messages(self.prompts.build(doc, cue=False), system_instruction))

    def review_requests(self, instances, chat_template=None, system_instruction=None) -> None:
        """Count the prompts the model's adapter will cut (longer than its context), when the context is known."""
        budget = resolve_budget(self.config.metadata or {})
        if budget is None:
            reason = self.record_lengths_unchecked()
            logger.info("%s: prompt lengths are not checked (%s)", self.config.task, reason)
            return
        verdicts = budget.verdicts([(i.args[0], i.args[1]) for i in instances])
        self._truncated = {_key(i.doc) for i, v in zip(instances, verdicts, strict=True) if not v.fits}
        self.record_run_info(prompt_length=budget.describe())
        logger.info("%s: %d of %d prompts fit the %s", self.config.task, len(instances) - len(self._truncated),
                    len(instances), budget.describe())
        if self._truncated:
            logger.warning("%s: %d of %d prompts do not fit the %s; the model adapter will cut their start "
                           "(prompts_truncated)", self.config.task, len(self._truncated), len(instances),
                           budget.describe())

    def document_metrics(self, doc: dict, results: list[str]) -> dict:
        """Metric values from the execution record (JSON) the ``sandbox`` filter made for this item."""
        record = json.loads(results[0])
        values = metric_values(doc, record, self.with_base, self.per_category)
        return {**values, "prompts_truncated": int(_key(doc) in self._truncated),
                "replies_normalized": int(record["normalized"])}

