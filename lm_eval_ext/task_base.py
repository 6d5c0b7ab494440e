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
- ``--cache_requests``: not used (its key leaves out ``--metadata`` and the data, which make the prompts); the
  requests are built anew, with one warning per process.
- **The documents a run took**, counted over every process and recorded in the results
  (``configs.<task>.metadata.documents``): the harness's own count, ``n-samples.effective``, is in
  lm-eval 0.4.12 the number of values of the task's last metric, which a subset metric makes smaller.
- **Several processes** (``accelerate launch`` / ``torchrun`` data parallelism): the harness
  gives each process a share of the documents (:meth:`rank_documents`; a subclass may keep
  groups together) and at the end gathers each metric from every process under the names
  process 0 reports: a metric missing on process 0 is dropped, one missing elsewhere stops the
  run (``lm_eval.evaluator.evaluate`` of lm-eval 0.4; 0.5 gathers by doc id and needs none of this). Subset metrics,
  and documents that report no accuracy (a skipped prompt), make the names differ between
  processes. So after the filters ran, the processes exchange the names their documents report
  (``torch.distributed``), and a process lacking one receives a scored document that reports it
  from a process that has several (:func:`plan_moves`): the document's requests, responses and
  metric values move (its values are those computed where it was generated; it is known by its doc id). Every metric then
  has the values of every document, as in one process (summed in another order). A metric
  reported by fewer documents than there are processes cannot reach each of them: the run
  stops with an error that says so.
- **Answers saved before scoring** (:mod:`lm_eval_ext.answers`): the raw responses are written
  to disk before the filters run, so a scoring stage that fails or is killed loses nothing
  (``lm-eval-ext resume``). The harness generates every task's answers, then scores one task after
  another: the first plugin task it scores saves the answers of every plugin task of the run, so a
  judge that fails on the first task, or Ctrl-C while it is judged, loses no other task's answers.
"""
from __future__ import annotations

import functools
import logging
import weakref
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lm_eval.api.filter import Filter
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask
from lm_eval.filters import build_filter_ensemble

from . import answers, user_errors
from .boundary import (CONVERSATION, WITHHELD, check_harness, features, filter_step_options, install_log_filter,
                       install_request_types, new_instance, unlisted)
from .errors import UserError, misspelled_key
from .prompt_length import not_checked_reason

log = logging.getLogger(__name__)
BYPASS = "bypass"  # the harness's metric under --predict_only
# The plugin tasks of the run under way whose answers are not saved yet, in the order the harness built their
# requests (weak: a task of a run that stopped before scoring is not kept alive by this list).
_UNSAVED: list[weakref.ref] = []
user_errors.install()  # a plugin task is being built: its errors are one paragraph under `lm_eval` too


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


@functools.cache
def _request_cache_not_used() -> None:
    """Say once per process that the plugin's tasks do not use ``--cache_requests``."""
    log.warning("--cache_requests is not used for the plugin's tasks (LIEDER, Lost in the Middle, MAGNIFICo, "
                "ELITR-Bench): their prompts depend on --metadata and the data files, which the harness's request "
                "cache does not key on, so a cached request could hold another setting's prompt. Their requests are "
                "built anew and not written to the cache; other tasks of the run use it as usual.")


class ExtTask(ConfigurableTask):
    """A ConfigurableTask with subset metrics, request review and run-aware filters (module docstring).

    ``BENCHMARK`` names the benchmark, ``OPTIONS`` its ``--metadata`` keys and ``PREFIX`` the name space they own,
    if any: a key one slip away from an option, or any other key of that name space, is an error (ignored, it would
    leave that option at its default), raised before the data is read."""

    BENCHMARK = ""
    OPTIONS: tuple[str, ...] = ()
    PREFIX = ""

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        check_harness()
        if misspelled := misspelled_key((config or {}).get("metadata") or {}, self.OPTIONS, self.PREFIX):
            key, meant = misspelled
            hint = f"; did you mean {meant!r}?" if meant else "."
            raise UserError(f"{(config or {}).get('task')}: --metadata {key!r} is no {self.BENCHMARK} option{hint} "
                            f"The options are {', '.join(self.OPTIONS)}.")
        # `class` selects this class in the YAML; it is not a TaskConfig field.
        config = {key: value for key, value in (config or {}).items() if key != "class"}
        # The metric_list metrics come from this class's process_results; naming it in the config
        # (the harness's own convention, see Task.override_metric) keeps the harness from looking
        # each metric name up in its registry and in Hugging Face `evaluate`.
        config.setdefault("process_results", f"{type(self).__module__}.{type(self).__qualname__}.process_results")
        self._run_seed: int | None = None
        self._rank, self._world_size = 0, 1  # of the run, from build_all_requests
        self._answers_saved = False  # in this run, by this task's scoring or an earlier task's (save_answers)
        self._reported: list | None = None  # this process's documents once they are scored (several processes)
        self._moved: dict[int, tuple[list[Instance], dict]] = {}  # by doc_id: documents scored by another process
        self._scoring: int | None = None  # the doc_id the harness scores now (several processes)
        self._chat: answers.ChatPrompts | None = None  # the chat template's prompts (--apply_chat_template)
        self._predict_only = False
        super().__init__(config=config, **kwargs)
        install_request_types()
        install_log_filter()
        if features().lazy_documents:
            # 0.5 loads a task's documents when they are first read; plugin tasks read task_docs once built (as
            # on 0.4, whose __init__ loads them), so a broken data set stops the run before the model loads.
            self.task_docs = self.eval_docs
        if self.config.unsafe_code:
            # The evaluator refuses a task whose UNSAFE_CODE is set unless the run confirms unsafe code; 0.4 sets
            # it from the config's unsafe_code, 0.5.0.dev1 never does (its own unsafe tasks run unconfirmed).
            self.UNSAFE_CODE = True
        if self.conversation:
            # With several processes the harness pads the request type named by OUTPUT_TYPE with copies of a
            # process's last request, so that processes make as many model calls: padded as generate_until,
            # another task's generations would be repeated. Conversation copies cost no call (each turn is
            # generated once). Only the evaluator's padding reads OUTPUT_TYPE of a task whose
            # construct_requests makes conversation requests. Private: no public API sets the padded request
            # type. Checked on boundary.CHECKED_ON.
            self.OUTPUT_TYPE = CONVERSATION

    # -- metrics ------------------------------------------------------------------------------

    @property
    def predict_only(self) -> bool:
        """True under ``--predict_only`` (the harness replaced the metrics with ``bypass``)."""
        return self._predict_only

    def override_metric(self, metric_name: str) -> None:
        """The harness's ``--predict_only`` replaces the metrics with ``bypass`` here (every supported version)."""
        # 0.5 builds the replacing scorer for OUTPUT_TYPE, which a multi-turn task sets to the conversation type
        padded, self.OUTPUT_TYPE = self.OUTPUT_TYPE, self.config.output_type
        try:
            super().override_metric(metric_name)
        finally:
            self.OUTPUT_TYPE = padded
        self._predict_only = metric_name == BYPASS

    def process_results(self, doc: dict, results: list) -> dict:
        """``bypass`` under ``--predict_only`` (the answers are only kept), else :meth:`document_metrics`."""
        if self.predict_only:
            return {BYPASS: None}
        if self._scoring in self._moved:  # scored where it was generated (several processes)
            instances, scores = self._moved[self._scoring]
            for key, metrics in scores.items():
                if all(r is unlisted(i.filtered_resps[key]) for r, i in zip(results, instances, strict=True)):
                    return metrics
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

    def aggregate(self, bootstrap_iters: int | None = 100000) -> tuple[dict, int]:
        """0.5: the task's numbers, with standard errors where 0.4 gives them (for ``mean``; else "N/A").

        0.5's scorers bootstrap a standard error for every other aggregation, which for the plugin's
        (counts, gaps, p-values) is meaningless or fails on a resample; 0.4 reports "N/A" for them.
        """
        from lm_eval.api.metrics import mean, mean_stderr

        numbers, count = super().aggregate(bootstrap_iters=0)
        if bootstrap_iters and bootstrap_iters > 0:
            aggregations = self.aggregation()
            for scorer in self.scorers:
                values = defaultdict(list)
                for reduced in scorer.reduced_docs.values():
                    for name, value in reduced.items():
                        values[name].append(value)
                for name, items in values.items():
                    if aggregations.get(name) is mean and len(items) > 1:
                        numbers[f"{name}_stderr,{scorer.name}"] = mean_stderr(items)
        return numbers, count

    def record_run_info(self, **info) -> None:
        """Add ``info`` to this task's ``metadata`` in the results file (``configs.<task>.metadata``)."""
        self.set_config(key="metadata", value={**(self.config.metadata or {}), **info})

    def record_lengths_unchecked(self) -> str:
        """Record in the results that this run's prompt lengths are not checked, and why; the reason."""
        reason = not_checked_reason(self.config.metadata or {})
        self.record_run_info(prompt_length=f"not checked ({reason})")
        return reason

    def of_every_process(self, items: list) -> list:
        """``items`` of this process followed by those of the others, in rank order (the run's whole list in a
        multi-process run, where the first process writes the results file; ``items`` itself in one process).
        Every process must call it at the same point (a collective exchange)."""
        if self._world_size == 1:
            return items
        import torch.distributed as dist

        gathered = [None] * self._world_size
        dist.all_gather_object(gathered, items)
        return [item for part in gathered for item in part]

    # -- requests -----------------------------------------------------------------------------

    def build_all_requests(self, **kwargs) -> None:
        """Build the requests as the harness does, then let the subclass review them."""
        self._rank, self._world_size = int(kwargs.get("rank", 0)), int(kwargs.get("world_size", 1))
        self._reported, self._moved = None, {}
        self._chat = None
        if kwargs.get("apply_chat_template") and kwargs.get("chat_template") is not None:
            # every prompt rendered through the recorder, which the saved answers keep for a replay
            self._chat = kwargs["chat_template"] = answers.ChatPrompts(kwargs["chat_template"],
                                                                      kwargs.get("tokenizer_name", ""))
        # A listed task that holds answers was generated for an earlier run that stopped before scoring it: every
        # task of this run is built before anything is generated.
        _UNSAVED[:] = [ref for ref in _UNSAVED if (task := ref()) is not None and not task._answered()]
        _UNSAVED.append(weakref.ref(self))
        self._answers_saved = False
        if kwargs.get("cache_requests") or kwargs.get("rewrite_requests_cache"):
            # The harness keys its request cache on the task's name, few-shot count, chat flags, system instruction
            # and tokenizer, not on --metadata or the data, which make these tasks' prompts: a cached request could
            # be another setting's prompt; and a request read from it is not rendered, so the recorder above would
            # see nothing.
            _request_cache_not_used()
            kwargs["cache_requests"] = kwargs["rewrite_requests_cache"] = False
        super().build_all_requests(**kwargs)
        self.record_run_info(documents=sum(self.of_every_process([len({i.doc_id for i in self.instances})])))
        self.review_requests(self.instances, chat_template=kwargs.get("chat_template")
                             if kwargs.get("apply_chat_template") else None,
                             system_instruction=kwargs.get("system_instruction"))

    def review_requests(self, instances: list[Instance], chat_template=None, system_instruction=None) -> None:
        """Withhold (:meth:`withhold`) or change requests before they are sent; default: keep all."""

    def length_problem(self, docs: list[dict], gen_kwargs: dict) -> str | None:
        """Before the model is loaded (``lm-eval-ext run`` and ``check``): a paragraph when the prompts of ``docs``
        (the run's documents) cannot fit the model's context as this task's length policy needs, so the run would
        stop when its requests are reviewed. The prompts are measured without a chat template and a system
        instruction, which only lengthen them; ``gen_kwargs`` are the run's generation arguments. None when they
        may fit, or when no context length is known; by default, always None."""
        return None

    @staticmethod
    def withhold(instance: Instance) -> None:
        """Never send ``instance`` to the model: it is answered with None."""
        instance.request_type = WITHHELD

    def request(self, request_type: str, doc: dict, arguments: tuple, idx: int = 0, **construct_kwargs) -> Instance:
        """A request of this task for ``doc``; ``construct_kwargs`` are those the harness gave ``construct_requests``."""
        if features().doc_id_keyword:
            identity = {"task_name": self.config.task, "doc_id": construct_kwargs["doc_id"],
                        "repeats": self.config.repeats or 1}
        else:
            task_name, doc_id, repeats = construct_kwargs["metadata"]
            identity = {"task_name": task_name, "doc_id": doc_id, "repeats": repeats}
        return new_instance(request_type, doc, arguments, idx, **identity)

    def conversation_request(self, doc: dict, turn: str, gen_kwargs: dict, **construct_kwargs) -> Instance:
        """A request for one turn of a dependent conversation (lm_eval_ext.conversation)."""
        return self.request(CONVERSATION, doc, (turn, gen_kwargs), 0, **construct_kwargs)

    def construct_requests(self, doc: dict, ctx, **kwargs):
        """The harness's requests for ``doc`` of this task's output type."""
        if features().per_type_task_classes:
            # 0.5: ConfigurableTask is the abstract base and the class of the output type builds the requests.
            # Private: the harness maps output types to those classes in Task._registry (Task.from_config).
            return ConfigurableTask._registry[self.config.output_type].construct_requests(self, doc, ctx, **kwargs)
        return super().construct_requests(doc, ctx, **kwargs)

    def _build_scorers(self) -> list:
        """0.5: the scorers, whose metrics are the YAML's ``metric_list`` computed by :meth:`process_results`.

        The harness builds each metric from its registry, which refuses a registered name of another
        output type (``acc`` on a generation task); plugin metrics come from ``process_results`` only, so
        they are built from their name, aggregation and direction. Private (``Task._build_scorers``, called
        by 0.5's ``Task.__init__``; 0.4 has no scorers).
        """
        from lm_eval.api.metrics import Metric
        from lm_eval.api.registry import get_aggregation
        from lm_eval.scorers import build_scorer

        def computed_by_the_task(*_args, **_kwargs):
            raise RuntimeError(f"{self.config.task}: its metrics come from process_results")

        scorers = []
        for entry in self.config.filter_list:
            metrics = []
            for item in entry.get("metric_list") or self.config.metric_list or []:
                aggregation = item.get("aggregation", "mean")
                metrics.append(Metric(name=item["metric"], fn=computed_by_the_task, output_type={self.config.output_type},
                                      aggregation=get_aggregation(aggregation) if isinstance(aggregation, str) else aggregation,
                                      higher_is_better=item.get("higher_is_better", True)))
            scorers.append(build_scorer(cfg={"name": entry["name"], "filter": [], "metric_list": metrics},
                                        output_type=self.config.output_type, scorer_type=self.config.scorer))
        return scorers

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

    def _answered(self) -> bool:
        return any(instance.resps for instance in self.instances or [])

    def save_answers(self) -> None:
        """Save this task's answers, and those of the run's other plugin tasks not saved yet (module docstring)."""
        listed = [task for ref in _UNSAVED if (task := ref()) is not None and task is not self]
        others = [task for task in listed if task._answered()]
        # a task with no request on this process has no answers to tell it by yet: it saves its own when scored
        _UNSAVED[:] = [weakref.ref(task) for task in listed if not task._answered()]
        for task in [self, *others]:
            answers.save(task.answers_dir(), task.config.task, task.instances, task._rank, task._world_size,
                         task._chat)
            task._answers_saved = True

    def apply_filters(self):
        """Save the answers (:meth:`save_answers`) unless an earlier task of the run did, then apply the YAML's
        ``filter_list``, giving run-aware filters the run's options.

        Under ``--predict_only`` only the answers are kept (``take_first``): nothing is executed
        or judged.
        """
        if not self._answers_saved:
            self.save_answers()
        for ensemble in self._filter_ensembles():
            ensemble.apply(self.instances)
        if self._world_size > 1 and not features().scorers:
            # 0.5 gathers every process's metrics by doc_id (Task._export_reduced): nothing to move
            self._report_every_metric()
        return self.instances

    def _filter_ensembles(self) -> list:
        if self.predict_only or not self.config.filter_list or not any(entry.get("filter") for entry in
                                                                         self.config.filter_list):
            steps = {"none": [["take_first", None]]}
        else:
            run = self.run_context()
            steps = {}
            for entry in self.config.filter_list:
                components = steps[entry["name"]] = []
                for step in entry["filter"]:
                    function, kwargs = step["function"], filter_step_options(step)
                    if isinstance(function, type) and issubclass(function, RunAwareFilter):
                        kwargs["run"] = run
                    components.append([function, kwargs])
        if features().filters_list_per_doc:
            # 0.5's filters give a list per document (take_first: [r[0]]) and its scoring reads that layout;
            # between the steps, and for plugin filters, a document's response is one value, as on 0.4.
            steps = {name: [*(item for component in components for item in (component, [_OneValue, None])),
                            [_ListOfOne, None]] for name, components in steps.items()}
        return [build_filter_ensemble(name, components) for name, components in steps.items()]

    # -- several processes (module docstring) --------------------------------------------------

    def doc_iterator(self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples=None):
        """The documents this process generates (:meth:`rank_documents`) or, once a multi-process run
        has scored them, the documents whose metrics it reports."""
        if self._reported is not None:
            return self._scored_in_order()
        return self.rank_documents(rank=rank, limit=limit, world_size=world_size, samples=samples)

    def rank_documents(self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples=None):
        """The ``(doc_id, doc)`` process ``rank`` of ``world_size`` generates: the harness's split by default."""
        return super().doc_iterator(rank=rank, limit=limit, world_size=world_size, samples=samples)

    def _report_every_metric(self) -> None:
        """Exchange metric names between processes and move scored documents so that each reports every one."""
        import torch.distributed as dist

        rank, world_size = self._rank, self._world_size
        if not (dist.is_available() and dist.is_initialized()):
            raise UserError(f"{self.config.task}: the harness runs {world_size} processes but torch.distributed is not "
                            "initialized, so they cannot exchange their metrics. Launch with `accelerate launch` or "
                            "`torchrun` and a model that joins their process group (e.g. --model hf on GPUs).")
        by_doc: dict[int, list[Instance]] = defaultdict(list)
        for instance in self.instances:
            by_doc[instance.doc_id].append(instance)
        scores = {}
        for doc_id, instances in by_doc.items():
            instances.sort(key=lambda instance: instance.idx)
            scores[doc_id] = {key: self.process_results(instances[0].doc, [unlisted(i.filtered_resps[key])
                                                                           for i in instances])
                              for key in instances[0].filtered_resps}
        names = [None] * world_size
        dist.all_gather_object(names, {doc_id: sorted((metric, key) for key, metrics in by_key.items() for metric in metrics)
                                       for doc_id, by_key in scores.items()})
        try:
            moves = plan_moves(names)
        except UnreportableMetric as err:
            raise UserError(
                f"{self.config.task}: the metric {err.metric!r} is reported by {err.documents} document(s), which "
                f"cannot be shared among {world_size} processes so that each reports it (the harness gathers a metric "
                f"only when every process reports it). Run this task with at most {err.documents} processes, or "
                "select more documents (--limit/--samples).") from None
        if moves:
            outgoing = [(dst, by_doc[doc_id], scores[doc_id]) for doc_id, (src, dst) in moves.items() if src == rank]
            arrived = [None] * world_size
            dist.all_gather_object(arrived, outgoing)
            # Private: `instances` is read-only in public API and the harness scores the documents held in
            # `_instances`; moving a scored document is a change of that list. Checked on lm-eval 0.4.12, 0.4.13.
            self._instances = [i for i in self._instances if moves.get(i.doc_id, (rank, rank))[1] == rank]
            for dst, instances, by_key in (item for items in arrived for item in items):
                if dst == rank:
                    self._instances.extend(instances)
                    self._moved[instances[0].doc_id] = (instances, by_key)
        docs = {instance.doc_id: instance.doc for instance in self._instances}
        self._reported = sorted(docs.items(), key=lambda item: item[0])

    def _scored_in_order(self):
        # Private: 0.4's evaluator scores each document right after doc_iterator yields it, so the doc_id
        # yielded last is that of the next process_results call (checked on lm-eval 0.4.12, 0.4.13).
        for doc_id, doc in self._reported:
            self._scoring = doc_id
            yield doc_id, doc
        self._scoring = None


class _OneValue(Filter):
    """0.5: a filter step's list of one per document, as the one value 0.4's filters give (the next step's input)."""

    def apply(self, resps, docs):
        return [unlisted(response) for response in resps]


class _ListOfOne(Filter):
    """0.5: each document's filtered response as the list its scoring and samples files expect."""

    def apply(self, resps, docs):
        return [[response] for response in resps]


class UnreportableMetric(Exception):
    """A metric some documents report that cannot be given to every process."""

    def __init__(self, metric: str, documents: int) -> None:
        super().__init__(metric)
        self.metric, self.documents = metric, documents


def plan_moves(reported: list[dict[int, list]]) -> dict[int, tuple[int, int]]:
    """Which scored documents must change process so that every process reports every metric.

    ``reported[r]`` maps each document of process ``r`` to the metric names it reports. Returns
    ``{doc_id: (from, to)}``: for each process lacking a name, a document reporting it is taken
    from the process with the most such documents that keeps all its names without it. The same
    on every process (it depends only on ``reported``). Raises :class:`UnreportableMetric`.
    """
    held = [{doc_id: frozenset(map(tuple, names)) for doc_id, names in docs.items()} for docs in reported]

    def names_of(r: int) -> set:
        return set().union(*held[r].values())

    def can_give(s: int, doc_id: int) -> bool:
        others = set().union(*(names for d, names in held[s].items() if d != doc_id))
        return held[s][doc_id] <= others

    everything = set().union(*(names_of(r) for r in range(len(held))))
    moves: dict[int, tuple[int, int]] = {}
    for r in range(len(held)):
        for name in sorted(everything - names_of(r)):
            if name in names_of(r):
                continue  # an earlier move brought it
            donors = sorted((-sum(name in names for names in held[s].values()), s, doc_id)
                            for s in range(len(held)) if s != r for doc_id in held[s]
                            if name in held[s][doc_id] and can_give(s, doc_id))
            if not donors:
                raise UnreportableMetric(name[0], sum(name in names for docs in held for names in docs.values()))
            _, s, doc_id = donors[0]
            held[r][doc_id] = held[s].pop(doc_id)
            moves[doc_id] = (moves.get(doc_id, (s, r))[0], r)
    return {doc_id: (src, dst) for doc_id, (src, dst) in moves.items() if src != dst}
