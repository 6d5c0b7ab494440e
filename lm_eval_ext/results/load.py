"""Finding and reading the harness's output: results files, their sample logs, and the models that ran.

The harness (``--output_path DIR``) writes ``DIR/<model>/results_<date>.json`` and, with
``--log_samples``, ``samples_<task>_<date>.jsonl`` beside it with the same ``<date>``.
A *run* is one results file (and its sample files); a *model* is every run of one
model with the same settings (:attr:`Run.settings`: chat template, system prompt, few-shot,
``--gen_kwargs``), so that a benchmark run in several invocations (or with several seeds, context
lengths or batch sizes) is reported together, and runs whose settings change the numbers are
different models, labelled with those settings (:func:`settings_text`).
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..errors import UserError
from ..judge.records import JudgeRecord, JudgeRecordError

# The harness's date id: datetime.now().isoformat() with ':' replaced by '-'.
_DATE_ID = re.compile(r"_(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)$")
# model_args keys from which the harness takes a model's name (EvaluationTracker).
_NAME_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")
# model_args that may hold a credential (api_key, hf_token, secret, password, auth, ...: whole words of
# the name, so that tokenizer= or max_tokens= stay visible); reports and exports show them redacted.
_SECRET = re.compile(r"(?:^|_)(?:api_?key|key|token|secret|password|passwd|auth|authorization|credentials?)(?:$|_)", re.I)
REDACTED = "<redacted>"
# The model argument naming the wrapped model in results of multi-turn runs made by lm-eval-ext before
# multi-turn tasks ran with any harness model (`--model ext-multiturn --model_args inner_model=M,...`).
_INNER = "inner_model"
# model_args that say how a model was run, not which model it is: runs differing only in these are one
# model (seed runs of an API model pass seed=S; a report lists the differences, Model.differences).
EXECUTION_ARGS = frozenset({
    _INNER, "seed", "max_length", "max_model_len", "batch_size", "max_batch_size", "device", "device_map",
    "parallelize", "tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization",
    "num_concurrent", "max_retries", "timeout",
})
# run config entries that say how a model was run, listed beside the execution model_args
_EXECUTION_CONFIG = ("batch_size", "device")
# Run.settings' value of a chat template applied without its text recorded: a model whose provider applies it
# (a chat-completions API: the harness records an empty template)
TEMPLATE_APPLIED = "applied"


# The sections of a results file (and of what lm_eval.simple_evaluate returns: samples) keyed by task name.
_BY_TASK = ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "task_hashes", "samples")


class ResultsError(UserError):
    """A results path that cannot be read as the harness's output."""


def recorded_gen_kwargs(value) -> dict:
    """``--gen_kwargs`` as a results file's ``config`` (or a leaderboard record) holds it, as a dict; the one reader
    of that value (:attr:`Run.gen_kwargs`).

    Every lm-eval release (0.4.0 to 0.5) records the dict it parsed the flag into, and ``{}``, null or ``""`` when
    none was given. A ``k=v,...`` text, which only a results file written otherwise holds, is read as the flag's
    text (values as text), so that its generation settings still make the run another model, and its export
    holds them as an object."""
    if isinstance(value, str):
        value = dict(item.split("=", 1) for item in value.split(",") if "=" in item)
        return {key.strip(): item.strip() for key, item in value.items()}
    return dict(value) if isinstance(value, dict) else {}


def gen_kwargs_text(value) -> dict[str, str]:
    """:func:`recorded_gen_kwargs` with values as text, so that one setting recorded as ``0.7`` or ``"0.7"``
    compares equal."""
    return {str(key).strip(): str(item).strip() for key, item in sorted(recorded_gen_kwargs(value).items())}


def settings_text(settings: dict, template_id: bool = False) -> str:
    """What :attr:`Run.settings` says, for a model's label: e.g. ``chat template, gen_kwargs temperature=0.7``
    (empty for a plain run). ``template_id``: name the chat template by the start of its sha256 (when a model has
    runs with two templates)."""
    parts = []
    template = settings.get("chat_template")
    if template is not None:
        parts.append("chat template" + (f" {template[:8]}" if template_id and template != TEMPLATE_APPLIED else ""))
        if settings.get("fewshot_as_multiturn") is False:
            parts.append("few-shot in one message")
    if settings.get("system_instruction"):
        parts.append(f"system prompt {settings['system_instruction'][:8]}")
    by_shots: dict[int, list[str]] = {}
    for task, shots in (settings.get("num_fewshot") or {}).items():
        by_shots.setdefault(shots, []).append(task)
    for shots, tasks in sorted(by_shots.items()):
        parts.append(f"{tasks[0]} {shots}-shot" if len(tasks) == 1 else f"{shots}-shot ({len(tasks)} tasks)")
    if settings.get("gen_kwargs"):
        parts.append("gen_kwargs " + ",".join(f"{key}={value}" for key, value in settings["gen_kwargs"].items()))
    return ", ".join(parts)


def _number(value) -> float | None:
    """A metric value as a float, None for the harness's "N/A" and non-finite values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass
class Run:
    """One results file of the harness and the sample files written with it."""

    path: Path
    data: dict
    label: str = ""
    # task -> its key in the files, where the harness named it by its group path (lm-eval 0.5: `group::task`)
    file_keys: dict = field(default_factory=dict)
    _samples: dict = field(default_factory=dict, repr=False)

    @property
    def date_id(self) -> str | None:
        """The timestamp shared by the results file and its sample files."""
        match = _DATE_ID.search(self.path.stem)
        return match[1] if match else None

    @property
    def config(self) -> dict:
        """The run's ``config`` block (model, model_args, gen_kwargs, seeds, ...)."""
        return self.data.get("config") or {}

    @property
    def gen_kwargs(self) -> dict:
        """``--gen_kwargs`` of the run, as a dict (:func:`recorded_gen_kwargs`; empty when none was given)."""
        return recorded_gen_kwargs(self.config.get("gen_kwargs"))

    @property
    def model_args(self) -> dict:
        """``model_args`` as a dict (the harness records a string when it was given one)."""
        args = self.config.get("model_args") or {}
        if isinstance(args, str):
            pairs = (item.split("=", 1) for item in args.split(",") if "=" in item)
            return {key.strip(): value.strip() for key, value in pairs}
        return dict(args)

    @property
    def public_model_args(self) -> dict:
        """``model_args`` with every argument whose name suggests a credential redacted."""
        return {key: (REDACTED if _SECRET.search(key) else value) for key, value in self.model_args.items()}

    @property
    def model_source(self) -> str:
        """The harness model type (``hf``, ``vllm``, ``local-chat-completions``, ...).

        In results files of the ``ext-multiturn`` model (:data:`_INNER`), the type is the inner model's; in a
        resumed run's (:attr:`resumed_from`), the replayed model's, which its ``config`` records.
        """
        if self.resumed_from:
            return str(self.config.get("model") or "unknown")
        return str(self.model_args.get(_INNER) or self.data.get("model_source") or self.config.get("model") or "unknown")

    @property
    def resumed_from(self) -> str | None:
        """The saved answers a resumed run (``lm-eval-ext resume``) scored again, None for a run that generated them."""
        return self.config.get("resumed_from")

    def verdicts_from_cache(self) -> dict[str, int]:
        """Per judged task, how many of its answers' judge verdicts came from the judge's cache
        (``configs.<task>.metadata.judge.run.from_cache``)."""
        found = {}
        for task, config in (self.data.get("configs") or {}).items():
            judged = ((config or {}).get("metadata") or {}).get("judge") or {}
            count = (judged.get("run") or {}).get("from_cache") if isinstance(judged, dict) else None
            if isinstance(count, int):
                found[task] = count
        return found

    @property
    def model_key(self) -> str:
        """What identifies the model: its type and arguments, without those that only say how it was run
        (:data:`EXECUTION_ARGS`: the multi-turn wrapper, the seed, context length, batch size, devices)."""
        args = {key: value for key, value in self.model_args.items() if key not in EXECUTION_ARGS}
        return json.dumps([self.model_source, args], sort_keys=True, default=str)

    @property
    def chat_template(self) -> str | None:
        """The chat template the run applied (``--apply_chat_template``): the sha256 the harness recorded
        (``chat_template_sha``), :data:`TEMPLATE_APPLIED` when it recorded none, None when no template was
        applied (the harness records ``chat_template`` null then, and nothing at all in results it did not write
        itself)."""
        if self.data.get("chat_template") is None:
            return None
        return self.data.get("chat_template_sha") or TEMPLATE_APPLIED

    @property
    def settings(self) -> dict:
        """The settings that change the run's numbers, beyond the model: those given, with their values.

        ``chat_template`` (:attr:`chat_template`); ``fewshot_as_multiturn`` (with a chat template and few-shot
        examples, where it changes the prompts); ``system_instruction`` (the sha256 of ``--system_instruction``);
        ``num_fewshot`` (``{task: shots}`` of the tasks with examples, the harness's ``n-shot``); ``gen_kwargs``
        (``--gen_kwargs``, values as text). Empty for a plain run. Runs with different settings are different
        models (:func:`load_models`).
        """
        found: dict = {}
        shots = {task: n for task, n in (self.data.get("n-shot") or {}).items()
                 if isinstance(n, int) and not isinstance(n, bool) and n > 0}
        if self.chat_template is not None:
            found["chat_template"] = self.chat_template
            if shots and self.data.get("fewshot_as_multiturn") is not None:
                found["fewshot_as_multiturn"] = bool(self.data["fewshot_as_multiturn"])
        instruction = self.data.get("system_instruction")
        if instruction:
            found["system_instruction"] = self.data.get("system_instruction_sha") or hashlib.sha256(
                str(instruction).encode("utf-8")).hexdigest()
        if shots:
            found["num_fewshot"] = dict(sorted(shots.items()))
        gen_kwargs = gen_kwargs_text(self.gen_kwargs)
        if gen_kwargs:
            found["gen_kwargs"] = gen_kwargs
        return found

    @property
    def execution(self) -> dict[str, str]:
        """How the model was run: the execution model_args and the run's batch size and device, as text."""
        found = {f"config.{key}": self.config.get(key) for key in _EXECUTION_CONFIG}
        found |= {key: value for key, value in self.public_model_args.items() if key in EXECUTION_ARGS and key != _INNER}
        return {key: json.dumps(value, default=str) if not isinstance(value, str) else value
                for key, value in found.items() if value is not None}

    @property
    def model_name(self) -> str | None:
        """The harness's model name when the arguments give one (else the harness made up a random id)."""
        args = self.model_args
        return self.data.get("model_name") if any(args.get(key) for key in _NAME_KEYS) else None

    def default_label(self) -> str:
        """The model's name when its arguments give one (the last path part of a local path; the file's name for
        a model loaded from a GGUF file, ``gguf_file=``, which names the weights better than their folder or
        repository), else its type."""
        args = self.model_args
        if args.get("gguf_file"):
            return Path(str(args["gguf_file"])).name
        for key in _NAME_KEYS:
            if args.get(key):
                name = str(args[key])
                return Path(name).name if name.startswith(("/", ".", "~")) else name
        return self.model_source

    @property
    def seed(self):
        """The run's ``--seed`` for Python's random module (the harness's first seed)."""
        return self.config.get("random_seed")

    @property
    def tasks(self) -> list[str]:
        """Every task and group with results in this run."""
        return list(self.data.get("results") or {})

    def _entry(self, task: str) -> dict:
        return (self.data.get("results") or {}).get(task) or {}

    def _split(self, task: str) -> dict[str, dict[str, object]]:
        """``{filter: {metric: raw value}}`` of one task, from the harness's ``metric,filter`` keys."""
        by_filter: dict[str, dict[str, object]] = {}
        for key, value in self._entry(task).items():
            if "," in key:
                metric, filter_name = key.split(",", 1)
                by_filter.setdefault(filter_name, {})[metric] = value
        return by_filter

    def _primary(self, task: str) -> dict[str, object]:
        # Plugin tasks score unfiltered output ("none"); a task with one other filter uses that one.
        by_filter = self._split(task)
        if "none" in by_filter:
            return by_filter["none"]
        if len(by_filter) == 1:
            return next(iter(by_filter.values()))
        return {f"{metric},{name}": value for name, metrics in by_filter.items() for metric, value in metrics.items()}

    def metrics(self, task: str) -> dict[str, float]:
        """Metric values of a task or group (standard errors left out); non-numeric values dropped.

        Items a task left out when it was loaded (MAGNIFICo: ``configs.<task>.metadata.excluded``) come
        as ``excluded_<reason>`` counts beside its metrics; so do a judged task's answers that no judge scored
        or failed on (``not_judged``: a judge dry run), from its judge record (``metadata.judge.run``).
        """
        values = {}
        for name, raw in self._primary(task).items():
            number = _number(raw)
            if number is not None and not name.split(",")[0].endswith("_stderr"):
                values[name] = number
        metadata = self.task_config(task).get("metadata") or {}
        excluded = metadata.get("excluded") or {}
        for reason in ("db_missing", "gold_error", "gold_budget"):
            if isinstance(excluded.get(reason), (int, float)):
                values[f"excluded_{reason}"] = excluded[reason]
        judge = metadata.get("judge")
        judged = judge.get("run") if isinstance(judge, dict) else None
        if isinstance(judged, dict) and all(isinstance(judged.get(key), int) for key in ("answers", "scored")):
            # an answer is scored, failed (judge_failures) or not judged
            not_judged = judged["answers"] - judged["scored"] - int(values.get("judge_failures") or 0)
            if not_judged > 0:
                values["not_judged"] = not_judged
        return values

    def documents(self, task: str) -> dict | None:
        """The harness's document counts of a task, ``{"original", "effective"}`` (``n-samples``), with
        ``effective`` the number of documents the run took as the task recorded it (``configs.<task>.metadata.
        documents``) when it did; None when the results file has no counts."""
        counts = (self.data.get("n-samples") or {}).get(task)
        if not isinstance(counts, dict):
            return None
        # lm-eval 0.4.12 writes as `effective` the number of values of the task's last metric, fewer than the
        # documents when its metrics are over different documents (by position, by family, skipped prompts)
        taken = (self.task_config(task).get("metadata") or {}).get("documents")
        return {**counts, "effective": taken} if isinstance(taken, int) else counts

    def stderr(self, task: str) -> dict[str, float]:
        """Standard errors of a task's metrics, keyed by metric name (absent when "N/A")."""
        errors = {}
        for name, raw in self._primary(task).items():
            number = _number(raw)
            if number is not None and name.split(",")[0].endswith("_stderr"):
                errors[name.replace("_stderr", "", 1)] = number
        return errors

    def is_group(self, task: str) -> bool:
        """True for a group (its metrics aggregate its subtasks')."""
        return task in (self.data.get("groups") or {}) or bool((self.data.get("group_subtasks") or {}).get(task))

    def version(self, task: str):
        """The task's ``metadata.version`` as the harness recorded it."""
        return (self.data.get("versions") or {}).get(task)

    def task_config(self, task: str) -> dict:
        """The task's resolved config as the harness recorded it (empty for groups)."""
        return (self.data.get("configs") or {}).get(task) or {}

    def judge_record(self, task: str) -> JudgeRecord | None:
        """The judge that scored ``task``, as the task recorded it (``configs.<task>.metadata.judge``); None when
        the task was not judged."""
        data = (self.task_config(task).get("metadata") or {}).get("judge")
        if data is None:
            return None
        try:
            return JudgeRecord.from_dict(data)
        except JudgeRecordError as err:
            raise ResultsError(f"{self.path}: the judge record of {task} (configs.{task}.metadata.judge) cannot be "
                               f"read: {err}. The file was changed after the run or is damaged; run the task "
                               "again.") from None

    def samples_path(self, task: str) -> Path | None:
        """The task's sample log, if the run was made with ``--log_samples``."""
        if self.date_id is None:
            return None
        path = self.path.parent / f"samples_{self.file_keys.get(task, task)}_{self.date_id}.jsonl"
        return path if path.is_file() else None

    def samples(self, task: str) -> list[dict] | None:
        """The task's logged samples (one dict per document), or None without ``--log_samples``."""
        if task not in self._samples:
            path = self.samples_path(task)
            if path is None:
                self._samples[task] = None
            else:
                try:
                    with open(path, encoding="utf-8") as handle:
                        self._samples[task] = [json.loads(line) for line in handle if line.strip()]
                except (OSError, ValueError) as err:
                    raise ResultsError(f"Cannot read the sample log {path}: {err}. Rerun the task with --log_samples.") from None
        return self._samples[task]


@dataclass
class Model:
    """Every run of one model with the same settings (:attr:`Run.settings`), in date order."""

    label: str
    runs: list[Run]
    settings: dict = field(default_factory=dict)  # the settings every run of it has (Run.settings)

    @cached_property
    def tasks(self) -> list[str]:
        """Every task and group any run of this model has results for."""
        return sorted({task for run in self.runs for task in run.tasks})

    def runs_with(self, task: str) -> list[Run]:
        """The runs that have results for ``task``, oldest first."""
        return [run for run in self.runs if task in run.tasks]

    def latest(self, task: str) -> Run | None:
        """The newest run with results for ``task`` (a report shows the most complete: ``results.status.shown_run``)."""
        runs = self.runs_with(task)
        return runs[-1] if runs else None

    def metrics(self, task: str) -> dict[str, float]:
        """Metrics of ``task`` in the newest run that has it (empty when no run has it)."""
        run = self.latest(task)
        return run.metrics(task) if run else {}

    def differences(self) -> dict[str, list[str]]:
        """The execution settings (:attr:`Run.execution`) that differ between this model's runs: name ->
        the values, in run order; a setting some runs lack counts as "(not set)" there."""
        keys = list(dict.fromkeys(key for run in self.runs for key in run.execution))
        found = {}
        for key in keys:
            values = list(dict.fromkeys(run.execution.get(key, "(not set)") for run in self.runs))
            if len(values) > 1:
                found[key] = values
        return found


def find_results(path: Path) -> list[Path]:
    """Results files under ``path`` (a directory, searched recursively, or one results JSON file)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(path.rglob("results_*.json"))
    raise ResultsError(f"{path} does not exist. Give the --output_path directory of an `lm-eval-ext run` / `lm_eval run`, or one of its results_*.json files.")


def read_run(path: Path) -> Run:
    """Parse one results file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ResultsError(f"Cannot read the results file {path}: {err}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ResultsError(f"{path} is not a results file of the harness (it has no 'results' object).")
    data, file_keys = by_task_name(data)
    return Run(path=path, data=data, file_keys=file_keys)


def by_task_name(data: dict) -> tuple[dict, dict[str, str]]:
    """A results file's data (or what ``lm_eval.simple_evaluate`` returns) with its tasks named by their own names,
    and task -> its key in ``data`` for each task renamed.

    lm-eval 0.5 keys a task run as part of a group by its path, ``group::task`` (``lieder::lieder_base``), in every
    section and in its samples file's name; 0.4 by the task's name. A task whose own name is taken (run alone and
    in a group, or in two groups) keeps its keys.
    """
    names = [key.rsplit("::", 1)[-1] for key in data["results"]]
    file_keys = {key.rsplit("::", 1)[1]: key for key in data["results"]
                 if "::" in key and names.count(key.rsplit("::", 1)[1]) == 1}
    if not file_keys:
        return data, {}
    own = {key: task for task, key in file_keys.items()}
    renamed = {section: {own.get(key, key): value for key, value in data[section].items()}
               for section in _BY_TASK if isinstance(data.get(section), dict)}
    renamed["group_subtasks"] = {group: [own.get(key, key) for key in tasks]
                                 for group, tasks in (data.get("group_subtasks") or {}).items()}
    return {**data, **renamed}, file_keys


def _split_source(source: str) -> tuple[str | None, Path]:
    """``LABEL=PATH`` or ``PATH`` (a path that exists is never split)."""
    if "=" in source and not Path(source).exists():
        label, path = source.split("=", 1)
        return label or None, Path(path)
    return None, Path(source)


def load_models(sources: list[str]) -> list[Model]:
    """Read every results file named by ``sources`` (``[LABEL=]PATH`` each) and group the runs by model.

    Runs given a LABEL are that model's, whatever model they ran; other runs are grouped by
    model type and arguments and labelled with the model's name. Either way runs with different
    settings (:attr:`Run.settings`) are different models, and a model's label names its settings
    (``SmolLM2-135M-Instruct (chat template)``). Models that would share a label but ran on different
    model types name their type (``SmolLM2-135M-Instruct (vllm)``); a number is appended when two
    models would still share a label. Models keep the order in which they were first found; a file
    named twice is read once.
    """
    # (("label", LABEL) or ("key", model key), settings key) -> runs, in order of first appearance
    groups: dict[tuple[tuple[str, str], str], list[Run]] = {}
    seen: set[Path] = set()
    for source in sources:
        label, path = _split_source(source)
        files = find_results(path)
        if not files:
            raise ResultsError(
                f"No results_*.json file under {path}. Run the harness with --output_path {path} "
                "(and --log_samples for the per-item figures), or give the right directory."
            )
        for file in files:
            if file.resolve() in seen:  # the same file named twice (a directory and a file in it)
                continue
            seen.add(file.resolve())
            run = read_run(file)
            model = ("label", label) if label else ("key", run.model_key)
            groups.setdefault((model, json.dumps(run.settings, sort_keys=True)), []).append(run)
    # a model run with two chat templates: each label names its template
    templates: dict[tuple[str, str], set] = {}
    for (model, _), runs in groups.items():
        templates.setdefault(model, set()).add(runs[0].settings.get("chat_template"))
    stems = {}  # group -> (its name, what its settings add)
    types: dict[tuple[str, str], set[str]] = {}  # the model types of the unlabelled models sharing a stem
    for group, runs in groups.items():
        kind, name = group[0]
        stems[group] = (name if kind == "label" else runs[0].default_label(),
                        settings_text(runs[0].settings, template_id=len(templates[group[0]] - {None}) > 1))
        if kind != "label":  # e.g. one model on hf and on vllm
            types.setdefault(stems[group], set()).add(runs[0].model_source)
    names: dict = {}
    taken: set[str] = set()
    # labelled models first: a label the user gave keeps its name; a model found without one is numbered around it
    for group in sorted(groups, key=lambda group: group[0][0] != "label"):
        base, text = stems[group]
        if group[0][0] != "label" and len(types[stems[group]]) > 1:
            text = ", ".join(filter(None, [groups[group][0].model_source, text]))
        label = stem = f"{base} ({text})" if text else base
        number = 2
        while label in taken:
            label, number = f"{stem} ({number})", number + 1
        taken.add(label)
        names[group] = label
    models = [Model(names[group], runs, runs[0].settings) for group, runs in groups.items()]
    for model in models:
        model.runs.sort(key=lambda run: (run.date_id or "", str(run.path)))
        for run in model.runs:
            run.label = model.label
    return models
