"""The harness task for LIEDER: one document per group, one log-likelihood request per row.

Used from the task YAMLs as ``class: !function lm_eval_ext.lieder.task.LiederTask`` and
``custom_dataset: !function lm_eval_ext.lieder.task.load_stimuli``.

Log-probabilities from a completions server that cannot give them (it ignores ``echo``, or returns
no generated token) stop the run with one paragraph; for a model behind a server (``base_url`` among
the model arguments) each document carries one check request for that (server_check.py).
"""
from __future__ import annotations

import logging

import datasets
from lm_eval.api.metrics import mean

from ..errors import UserError
from ..task_base import ExtTask
from .comparisons import STIMULUS_SETS
from .scoring import family_metric_names, required_items, score_group
from .server_check import check_arguments, check_logprobs, server_url
from .stimuli import StimulusError, read_groups

log = logging.getLogger(__name__)


def load_stimuli(stimulus_set: str, stimuli_file: str | None = None, **_metadata) -> dict[str, datasets.Dataset]:
    """Load one stimulus set as the task's test split.

    ``stimuli_file`` (``--metadata '{"stimuli_file": "PATH"}'``) replaces the published file,
    e.g. with a set from the stimulus generator; it must use the same JSONL format.
    """
    from ..data import resolve_file  # the data layer is only needed once a task is built

    if stimulus_set not in STIMULUS_SETS:
        raise UserError(f"Unknown LIEDER stimulus set {stimulus_set!r}; use one of {', '.join(STIMULUS_SETS)}.")
    path = resolve_file("lieder", f"stimuli/{stimulus_set}/{stimulus_set}_stimuli.jsonl", explicit=stimuli_file)
    groups = read_groups(path)
    for group in groups:  # checked before anything is asked of the model: scoring needs every row
        rows = {(row["context_type"], row["kind"]) for row in group["rows"]}
        missing = required_items(stimulus_set, any(kind == "nonref" for _, kind in rows)) - rows
        if missing:
            raise StimulusError(
                f"{path}: group {group['group']} has no row for {', '.join(f'{c} {k}' for c, k in sorted(missing))} "
                f"(context type, continuation), which the comparisons of the {stimulus_set} set need. Give every "
                "group a row for each context type and continuation the set compares (the published file shows "
                "them), or run the task of the set the file was made for.")
    return {"test": datasets.Dataset.from_list(groups)}


class LiederTask(ExtTask):
    """Scores each noun x family group by comparing its rows' log-likelihoods (Zhu & Frank, 2024)."""

    BENCHMARK, OPTIONS = "LIEDER", ("stimuli_file",)

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        super().__init__(config=config, **kwargs)
        self.stimulus_set = self.config.dataset_kwargs["stimulus_set"]
        self.server = server_url(self.config.metadata or {})

    def subset_metrics(self) -> dict:
        """``acc_family_<family>`` (and ``acc_rel_family_<family>``): one family's documents only."""
        docs = self.task_docs
        relative = any(row["kind"] == "nonref" for doc in docs for row in doc["rows"])
        return dict.fromkeys(family_metric_names(tuple(dict.fromkeys(docs["family"])), relative), (mean, True))

    def doc_to_text(self, doc, doc_to_text=None) -> str:
        """The first row's context (what `--write_out` shows); requests carry every row's own context."""
        return doc["rows"][0]["context"]

    def doc_to_target(self, doc, doc_to_target=None) -> str:
        """LIEDER has no single target: the comparisons are the targets."""
        return ""

    def fewshot_context(self, doc, num_fewshot, **kwargs) -> str:
        """LIEDER scores raw text: no few-shot examples (``num_fewshot: 0`` in its YAML makes the
        harness ignore ``--num_fewshot``), no chat template; each request carries its row's context."""
        return ""

    def review_requests(self, instances, chat_template=None, system_instruction=None) -> None:
        """Say so when ``--apply_chat_template`` or ``--system_instruction`` was given, which LIEDER does not apply
        (its requests are the raw sentences); recorded as ``flags_not_applied`` in the task's results metadata."""
        given = [flag for flag, value in (("--apply_chat_template", chat_template),
                                          ("--system_instruction", system_instruction)) if value]
        if given:
            log.warning("%s: %s not applied: LIEDER compares the log-probabilities of raw sentences, as its authors "
                        "did, so its numbers are those of a run without.", self.config.task, " and ".join(given))
            self.record_run_info(flags_not_applied=given)

    def construct_requests(self, doc: dict, ctx: str, **kwargs) -> list:
        """One ``loglikelihood(context, " " + continuation)`` request per row, in row order; for a model
        behind a server, then the server check request (server_check.py), which is not scored."""
        arguments = [(row["context"], " " + row["continuation"]) for row in doc["rows"]]
        if self.server:
            arguments.append(check_arguments(doc))
        return [self.request("loglikelihood", doc, args, i, **kwargs) for i, args in enumerate(arguments)]

    def document_metrics(self, doc: dict, results: list[tuple[float, bool]]) -> dict[str, float]:
        """Comparison outcomes of this group; each row's log-probability is in the sample's ``resps``.

        Stops the run (:class:`~lm_eval_ext.lieder.server_check.ServerLogprobsError`) when the
        log-probabilities show a server that cannot give them.
        """
        logprobs = [logprob for logprob, _ in results]
        rows = len(doc["rows"])
        check_logprobs(self.config.task, doc, logprobs[:rows], logprobs[rows:], self.server)
        return score_group(doc, logprobs[:rows], self.stimulus_set)
