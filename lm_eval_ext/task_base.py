"""``ExtTask``: the base class of every plugin task, and with :mod:`lm_eval_ext.boundary` its one
boundary with the harness.

A plugin task is a harness ``ConfigurableTask`` configured by its YAML (``class: !function
lm_eval_ext.<benchmark>.task.<Class>``). The YAML declares the metrics every document reports
in ``metric_list`` (custom aggregations through ``!function``), as the harness's own tasks do;
this class adds:

- **Metrics over subsets** (a LIEDER family, a LitM position, an ELITR question type): reported
  only by the documents they are about, so they cannot be in ``metric_list`` (the harness's
  loggers read every listed metric from every sample). A subclass names them in
  :meth:`subset_metrics`; :meth:`aggregation` / :meth:`higher_is_better` (public methods the
  evaluator calls) return them beside the YAML's.
- **Request review** (:meth:`review_requests`): after the harness has built the requests (chat
  template applied), a subclass may withhold a request (it is then answered with None and never
  reaches the model: ``boundary.WITHHELD``) or replace its arguments (a shortened prompt).
- **Filters that see the run's options**: a filter class derived from :class:`RunAwareFilter`
  gets the task's :class:`RunContext` (task name, ``--metadata``, the run's seed) when the
  task applies its ``filter_list``; used outside an ``ExtTask`` it refuses to run.
- ``--predict_only``: every task only keeps the raw answers (no execution, no judge).
- **Answers saved before scoring** (:mod:`lm_eval_ext.answers`): the raw responses are written
  to disk before the filters run, so a scoring stage that fails or is killed loses nothing
  (``lm-eval-ext resume``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lm_eval.api.filter import Filter
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask
from lm_eval.filters import build_filter_ensemble

from . import answers
from .boundary import CONVERSATION, WITHHELD, install_request_types
from .errors import UserError

BYPASS = "bypass"  # the harness's metric under --predict_only


@dataclass(frozen=True)
class RunContext:
    """What a :class:`RunAwareFilter` learns about the run: the task, ``--metadata``, the run's seed, and
    whether the task's responses are conversation records (:func:`lm_eval_ext.conversation.result_record`)."""

    task: str
    metadata: dict = field(default_factory=dict)
    seed: int | None = None
    conversation: bool = False


class RunAwareFilter(Filter):
    """A filter that needs the run's options (``--metadata``); :class:`ExtTask` passes ``run=``."""

    def __init__(self, run: RunContext | None = None, **kwargs) -> None:
        super().__init__()
        if run is None:
            raise UserError(
                f"The filter {type(self).__module__}.{type(self).__name__} needs the run's options, which only a "
                "task whose class derives from lm_eval_ext.task_base.ExtTask gives it (for a judged task: "
                "`class: !function lm_eval_ext.judge.harness.JudgedTask` in the task YAML).")
        self.run = run


class ExtTask(ConfigurableTask):
    """A ConfigurableTask with subset metrics, request review and run-aware filters (module docstring)."""

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        # `class` selects this class in the YAML; it is not a TaskConfig field.
        config = {key: value for key, value in (config or {}).items() if key != "class"}
        # The metric_list metrics come from this class's process_results; naming it in the config
        # (the harness's own convention, see Task.override_metric) keeps the harness from looking
        # each metric name up in its registry and in Hugging Face `evaluate`.
        config.setdefault("process_results", f"{type(self).__module__}.{type(self).__qualname__}.process_results")
        self._run_seed: int | None = None
        self._rank, self._world_size = 0, 1
        super().__init__(config=config, **kwargs)
        install_request_types()

    # -- metrics ------------------------------------------------------------------------------

    @property
    def predict_only(self) -> bool:
        """True under ``--predict_only`` (the harness replaced the metrics with ``bypass``)."""
        return [m.get("metric") for m in self.config.metric_list or []] == [BYPASS]

    def process_results(self, doc: dict, results: list) -> dict:
        """``bypass`` under ``--predict_only`` (the answers are only kept), else :meth:`document_metrics`."""
        if self.predict_only:
            return {BYPASS: None}
        return self.document_metrics(doc, results)

    def document_metrics(self, doc: dict, results: list) -> dict:
        """The metric values of one document from its (filtered) results."""
        raise NotImplementedError

    def subset_metrics(self) -> dict[str, tuple[Callable, bool]]:
        """Metrics reported by some documents only: name -> (aggregation, higher is better)."""
        return {}

    def aggregation(self) -> dict:
        """The YAML's aggregations plus those of :meth:`subset_metrics`."""
        base = super().aggregation()
        if self.predict_only:
            return base
        return {**{name: agg for name, (agg, _) in self.subset_metrics().items()}, **base}

    def higher_is_better(self) -> dict:
        """The YAML's directions plus those of :meth:`subset_metrics`."""
        base = super().higher_is_better()
        if self.predict_only:
            return base
        return {**{name: better for name, (_, better) in self.subset_metrics().items()}, **base}

    def record_run_info(self, **info) -> None:
        """Add ``info`` to this task's ``metadata`` in the results file (``configs.<task>.metadata``)."""
        self.set_config(key="metadata", value={**(self.config.metadata or {}), **info})

    # -- requests -----------------------------------------------------------------------------

    def build_all_requests(self, **kwargs) -> None:
        """Build the requests as the harness does, then let the subclass review them."""
        self._rank, self._world_size = kwargs.get("rank", 0), kwargs.get("world_size", 1)
        super().build_all_requests(**kwargs)
        self.review_requests(self.instances, chat_template=kwargs.get("chat_template")
                             if kwargs.get("apply_chat_template") else None,
                             system_instruction=kwargs.get("system_instruction"))

    def review_requests(self, instances: list[Instance], chat_template=None, system_instruction=None) -> None:
        """Withhold (:meth:`withhold`) or change requests before they are sent; default: keep all."""

    @staticmethod
    def withhold(instance: Instance) -> None:
        """Never send ``instance`` to the model: it is answered with None."""
        instance.request_type = WITHHELD

    @staticmethod
    def conversation_request(doc: dict, turn: str, gen_kwargs: dict, **kwargs) -> Instance:
        """A request for one turn of a dependent conversation (lm_eval_ext.conversation)."""
        return Instance(request_type=CONVERSATION, doc=doc, arguments=(turn, gen_kwargs), idx=0, **kwargs)

    # -- filters ------------------------------------------------------------------------------

    def set_fewshot_seed(self, seed: int | None = None) -> None:
        """The harness hands every task the run's (few-shot) seed here; run-aware filters get it."""
        super().set_fewshot_seed(seed)
        self._run_seed = seed

    @property
    def conversation(self) -> bool:
        """True when this task's requests are conversation turns (``conversation_request``)."""
        return False

    def run_context(self) -> RunContext:
        """The options run-aware filters get."""
        return RunContext(task=self.config.task, metadata=dict(self.config.metadata or {}), seed=self._run_seed,
                          conversation=self.conversation)

    def answers_dir(self) -> Path:
        """Where this run saves its answers before scoring them (:mod:`lm_eval_ext.answers`)."""
        return answers.run_dir(self.config.metadata or {})

    def apply_filters(self):
        """Save the answers, then apply the YAML's ``filter_list``, giving run-aware filters the run's options.

        Under ``--predict_only`` only the answers are kept (``take_first``): nothing is executed
        or judged.
        """
        answers.save(self.answers_dir(), self.config.task, self.instances, self._rank, self._world_size)
        for ensemble in self._filter_ensembles():
            ensemble.apply(self.instances)
        return self.instances

    def _filter_ensembles(self) -> list:
        if self.predict_only or not self.config.filter_list:
            return [build_filter_ensemble("none", [["take_first", None]])]
        run = self.run_context()
        ensembles = []
        for entry in self.config.filter_list:
            components = []
            for step in entry["filter"]:
                function = step["function"]
                kwargs = {key: value for key, value in step.items() if key != "function"}
                if isinstance(function, type) and issubclass(function, RunAwareFilter):
                    kwargs["run"] = run
                components.append([function, kwargs])
            ensembles.append(build_filter_ensemble(entry["name"], components))
        return ensembles
