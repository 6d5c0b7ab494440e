"""Checks of a run that need no model, done before the model is loaded (``lm-eval-ext run`` and ``check``).

In order, each failure one paragraph (all failures are reported, then the command exits with 2):

1. the flags the harness would reject later (``--limit`` of 0 or below, ``--log_samples`` without
   ``--output_path``, ...), read exactly as ``lm_eval run`` reads them;
2. the model name, and task and group names, with the closest names when one is unknown; the model's required
   arguments given in ``--model_args``, the local paths there (``pretrained``, ``tokenizer``, ``gguf_file``)
   existing (a folder of GGUF files with ``gguf_file``), and the server its ``base_url`` names answering;
3. ``--confirm_run_unsafe_code`` when a task executes model output (MAGNIFICo);
4. the output path: it can be created and written; ``--samples`` names tasks of the run (a group's name, or
   another task's, would pick no document: the harness picks them task by task, and runs a task it does not
   name on all its documents), and, for the plugin's tasks, documents they have;
5. the plugin's tasks are built as the run will build them: every data file they need is found
   and verified (Spider databases included; the items left out for missing databases are
   counted), every task option is valid; and, when the model's context length is known, the run's prompts
   that would stop it are found (Lost in the Middle under ``litm_too_long=skip``: none fits; ELITR-Bench under
   ``overflow=error``: one does not), measured without a chat template, which only lengthens them;
6. the judge of every judged task answers (lm_eval_ext/judge/probe.py), unless ``--predict_only``; then
   a note estimates the judge's calls, tokens and price (lm_eval_ext/judge/usage.py).

The plain ``lm_eval`` command gets checks 5 and 6 from the tasks themselves, when the harness
builds them (after it has loaded the model, before anything is generated).
"""
from __future__ import annotations

import difflib
import fnmatch
import inspect
import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import boundary
from ..errors import UserError


class PreflightError(UserError):
    """One or more checks failed; the message holds one paragraph per failure."""


@dataclass
class Preflight:
    """What the checks found: failures (paragraphs), notes (facts worth knowing before a long run), what was not
    checked and why, whether a requested name is not one of the plugin's tasks (so the run needs the harness's
    built-in task index), and the run's configuration as the harness makes it (``config``: the flags merged over
    ``--config``'s YAML, :func:`lm_eval_ext.boundary.run_config`; None when the flags are not valid)."""

    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    needs_builtin_tasks: bool = False
    config: object = None

    def fail(self, text: str) -> None:
        """Record a failure: one paragraph saying what, where and what to do."""
        self.failures.append(text)


def _harness_config(args, report: Preflight):
    if args.limit is not None and args.limit <= 0:
        report.fail(f"--limit {args.limit:g}: a limit is a number of documents per task (1 or more) or a fraction "
                    "of them (above 0, at most 1). Give a positive limit, or leave --limit out to run everything.")
        return None
    if args.limit is not None and args.limit != int(args.limit) and args.limit > 1:
        report.fail(f"--limit {args.limit:g}: a fraction of the documents must be at most 1 (e.g. --limit 0.1), a "
                    "count a whole number (e.g. --limit 100).")
        return None
    try:
        return boundary.run_config(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        report.fail(f"The run's flags are not valid: {str(err).rstrip('.')}. See `lm_eval run --help`.")
        return None


def _matches(name: str, index: dict) -> list[str]:
    """The index names ``name`` selects (the harness accepts shell-style patterns in --tasks)."""
    if any(ch in name for ch in "*?["):
        return fnmatch.filter(list(index), name)
    return [name] if name in index else []


def _self_contained(names: list[str], index: dict) -> bool:
    """Whether ``names`` are in ``index`` with every task and group they stand for, none of them a tag or a pattern
    (a tag gathers the tasks of every folder, the harness's built-ins too; a pattern may match a built-in task)."""
    pending, seen = list(names), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        entry = index.get(name)
        if entry is None or entry.kind == "tag":  # not in the folders (a pattern never is), or a tag
            return False
        pending.extend(entry.members)
    return True


def _resolve_names(names: list[str], include_path, report: Preflight,
                   where: str = "--tasks") -> tuple[dict, list[str]]:
    """The task index holding every requested name (the plugin's and --include_path's alone when they hold every
    task asked for), and the names; ``where`` is where the names were given, for the failure paragraphs."""
    wanted = [n for n in names if not (n.endswith(".yaml") or Path(n).exists())]
    index = boundary.task_index(include_path=include_path, include_defaults=False)
    report.needs_builtin_tasks = len(wanted) < len(names) or not _self_contained(wanted, index)
    if report.needs_builtin_tasks:
        index = boundary.task_index(include_path=include_path, include_defaults=True)
    selected, unknown = [], []
    for name in wanted:
        found = _matches(name, index)
        if not found:
            unknown.append(name)
        selected += found
    lowered = {}  # names compared in lower case: `LIEDER_BASE` is close to `lieder_base`
    for known in index if unknown else ():
        lowered.setdefault(known.lower(), []).append(known)
    for name in unknown:
        close = [known for match in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
                 for known in lowered[match]]
        hint = _hint(name, index, close)  # lm-eval 0.4 reads `a, b` as `a` and ` b`
        report.fail(f"Unknown task or group {name!r} in {where}.{hint} `lm_eval ls tasks` lists every task and "
                    "group the harness and the plugin provide.")
    return index, selected


def _hint(name: str, known, close: list[str]) -> str:
    """What to write instead of an unknown ``name``: itself without the spaces around it when that is a ``known``
    name (the harness keeps such spaces), else the ``close`` names."""
    if name.strip() != name and name.strip() in known:
        return f" The harness keeps the spaces around a name: write {name.strip()!r} without them."
    return f" Did you mean: {', '.join(close)}?" if close else ""


def _leaves(names: list[str], index: dict) -> list[str]:
    leaves, pending, seen = [], list(names), set()
    while pending:
        name = pending.pop(0)
        if name in seen or name not in index:
            continue
        seen.add(name)
        entry = index[name]
        if entry.kind == "task":
            leaves.append(name)
        else:
            pending.extend(entry.members)
    return leaves


def _check_output(path: str | None, report: Preflight) -> None:
    if not path:
        return
    folder = Path(path).expanduser()
    folder = folder.parent if folder.suffix == ".json" else folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".lm-eval-ext-check-"):
            pass
    except OSError as err:
        report.fail(f"The output path {folder} cannot be written ({err.strerror or err}). Nothing would be saved: "
                    "give a writable --output_path (the run's results and samples go there).")


def _check_tasks(leaves: list[str], cfg, predict_only: bool, report: Preflight) -> None:
    """Build the plugin's tasks as the harness will (their data and options), then probe their judges."""
    from lm_eval.tasks import TaskManager

    from ..judge.harness import JudgedTask
    from ..task_base import ExtTask

    manager = TaskManager(include_path=cfg.include_path, include_defaults=False, metadata=cfg.metadata or {})
    judged = []
    for name in leaves:
        if name not in manager.all_tasks:
            continue  # a harness task: the harness checks it
        try:
            task = manager.load([name])["tasks"][name]
        except UserError as err:
            report.fail(str(err))
            continue
        if not isinstance(task, ExtTask):
            continue
        indices = _samples_of(cfg, name)
        if indices is not None and (problem := _indices_problem(name, indices, len(task.eval_docs))):
            report.fail(problem)
            continue
        try:
            problem = task.length_problem(_run_documents(task, name, cfg), {**(task.config.generation_kwargs or {}),
                                                                            **(cfg.gen_kwargs or {})})
        except UserError as err:
            problem = str(err)
        if problem:
            report.fail(problem)
        excluded = (task.config.metadata or {}).get("excluded")
        left_out = sum(excluded.get(k, 0) for k in ("db_missing", "gold_error", "gold_budget")) if excluded else 0
        if left_out:
            missing = ", ".join(f"{db} ({n} items)" for db, n in excluded["missing_databases"].items())
            report.notes.append(f"{name}: {left_out} of {excluded['items']} items will be left out "
                                f"({excluded['db_missing']} whose Spider database is missing"
                                f"{': ' + missing if missing else ''}; {excluded['gold_error']} whose gold query fails; "
                                f"{excluded['gold_budget']} whose gold query does not finish within its budget)")
        if isinstance(task, JudgedTask) and not predict_only:
            try:
                task.check_judge()
                if not task.judge_config().dry_run:
                    judged.append((task.judge_config(), task.judge_requests_estimate(cfg.limit)))
            except UserError as err:
                report.fail(f"{name}: {err}")
    if judged:
        report.notes.append(judge_estimate_note(judged))


def _samples_of(cfg, name: str) -> list[int] | None:
    """The indices ``--samples`` gives for the task ``name``, None when it gives none."""
    return cfg.samples.get(name) if isinstance(cfg.samples, dict) else None


def _indices_problem(name: str, indices, count: int) -> str | None:
    """Why ``indices`` (what ``--samples`` gives the task ``name`` of ``count`` documents) cannot be the run's
    documents (the harness's assertion, or a TypeError, when it reads them), None when they can."""
    if not isinstance(indices, list):
        return (f"--samples gives {name} {json.dumps(indices)}, which is not a list of document indices. Give a list, "
                f"e.g. --samples '{json.dumps({name: [0, 1]})}'.")
    beyond = [i for i in dict.fromkeys(indices) if type(i) is not int or not 0 <= i < count]
    if beyond:
        return (f"--samples names document(s) {', '.join(map(json.dumps, beyond))} of {name}, which has {count} "
                f"(0 to {count - 1}). Give whole numbers from 0 to {count - 1}.")
    return None


def _check_samples(samples, leaves: list[str], index: dict, report: Preflight) -> None:
    """Every name in ``--samples`` is a task of the run: the harness looks each task up there by its own name, so a
    group's name or another task's picks nothing, and a task it does not find runs on all its documents."""
    if not isinstance(samples, dict):
        return
    for key in samples:
        if key in leaves:
            continue
        entry = index.get(key)
        if entry is not None and entry.kind != "task":
            members = _leaves([key], index)
            example = json.dumps({member: samples[key] for member in members[:2]})
            report.fail(f"--samples names {key!r}, a {entry.kind}: the harness picks documents task by task, so it "
                        f"would run every document of {', '.join(members)}. Give the indices of each task instead, "
                        f"e.g. --samples '{example}'.")
        else:
            close = difflib.get_close_matches(key, leaves, n=1)
            fix = f"Did you mean {close[0]!r}?" if close else f"Name the run's tasks there, or add {key} to --tasks."
            report.fail(f"--samples names {key!r}, which is not a task of this run ({', '.join(leaves)}), so its "
                        f"indices would pick nothing. {fix}")
    unnamed = [name for name in leaves if name not in samples]
    if unnamed and not report.failures:
        report.notes.append(f"--samples names no document of {', '.join(unnamed)}: the harness runs "
                            f"{'it on all its' if len(unnamed) == 1 else 'them on all their'} documents")


def _run_documents(task, name: str, cfg) -> list[dict]:
    """The documents of ``task`` the run takes in one process: all, the first ``--limit`` (a fraction of them
    rounded up, as the harness's evaluator counts it) or those ``--samples`` names."""
    limit, samples = cfg.limit, _samples_of(cfg, name)
    if limit is not None:
        limit = math.ceil(len(task.eval_docs) * limit) if limit < 1.0 else int(limit)
    return [doc for _, doc in task.rank_documents(limit=limit, samples=samples)]


def judge_estimate_note(judged: list) -> str:
    """The judge's calls, tokens and price for the run, from (config, requests) per judged task."""
    from ..judge.usage import estimate, estimate_text

    estimates = [estimate(config, requests) for config, requests in judged]
    total = {key: sum(e[key] for e in estimates) for key in estimates[0] if all(key in e for e in estimates)}
    return (f"the judge: {estimate_text(total)} (one call per answer, before re-asks and the judge's cache; answers "
            "estimated as long as the references, ~4 characters per token)")


def run_checks(args, *, model_required: bool = True) -> Preflight:
    """Every check of the module docstring on ``args`` (``lm_eval run`` flags, parsed). ``model_required=False``
    leaves the model's arguments unchecked when the flags name no model (``check`` of the data and the judge alone;
    a run loads the harness's default model then, and needs them)."""
    report = Preflight()
    cfg = report.config = _harness_config(args, report)
    if cfg is None:
        return report
    named = getattr(args, "model", None) is not None or bool(cfg.model_args)
    _check_model(cfg.model, cfg.model_args if model_required or named else None, report)
    if not (model_required or named):
        report.unchecked.append("the model's arguments (no --model or --model_args)")
    if cfg.predict_only:
        report.unchecked.append("the judge (--predict_only)")
    where = "--tasks" if getattr(args, "tasks", None) else f"the tasks of the --config file {args.config}"
    index, selected = _resolve_names(boundary.task_names(cfg.tasks), cfg.include_path, report, where)
    leaves = _leaves(selected, index)
    unsafe = [name for name in leaves if (index[name].config or {}).get("unsafe_code")]
    if unsafe and not cfg.confirm_run_unsafe_code:
        report.fail(f"{', '.join(unsafe)} execute(s) the model's output (SQL, in a read-only sandbox): the harness "
                    "runs such tasks only with --confirm_run_unsafe_code. Add it to the command.")
    _check_output(cfg.output_path, report)
    _check_samples(cfg.samples, leaves, index, report)
    if not report.failures:  # building the tasks reads their data: only for a run that could go ahead
        _check_tasks(leaves, cfg, bool(cfg.predict_only), report)
    return report


def _check_model(name, model_args, report: Preflight) -> None:
    if not isinstance(name, str):
        return  # a model object (Python API): nothing to look up
    from lm_eval.api.registry import get_model, model_registry

    try:
        model = get_model(name)  # fills the built-in table on first use; imports only this model's module
    except ValueError:
        close = difflib.get_close_matches(name, list(model_registry.keys()), n=3, cutoff=0.6)
        hint = _hint(name, model_registry.keys(), close)  # every version keeps the spaces in a model's name
        report.fail(f"Unknown model {name!r} in --model.{hint} Known models: {', '.join(sorted(model_registry.keys()))}.")
    except ImportError as err:
        report.fail(f"The model {name!r} (--model) needs a package that is not installed: {err}. Install the "
                    "harness's extra for it (e.g. pip install \"lm-eval[vllm]\" for vllm).")
    else:
        if isinstance(model_args, dict):
            _check_model_args(name, model, model_args, report)


# what the harness passes to every model beside --model_args (--batch_size, --max_batch_size, --device)
_RUN_MODEL_ARGS = {"batch_size", "max_batch_size", "device"}
# --model_args that name files loaded on this machine when they are paths (a hub model's name is not)
_LOCAL_FILE_ARGS = ("pretrained", "tokenizer")


def _check_model_args(name: str, model, model_args: dict, report: Preflight) -> None:
    """The model's required arguments are given, the local paths it is given exist and the server it is given
    answers: without this the model fails as it loads or sends, with a traceback (a missing path reads as an invalid
    hub name)."""
    try:
        parameters = list(inspect.signature(model.__init__).parameters.values())[1:]
    except (TypeError, ValueError):  # a constructor without a signature Python can read: nothing to check
        parameters = []
    missing = [p.name for p in parameters if p.default is p.empty and p.name not in model_args
               and p.name not in _RUN_MODEL_ARGS and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if missing:
        given = ",".join(f"{key}=..." for key in missing)
        example = (" (pretrained=gpt2 for a hub model, pretrained=/path/to/folder for one on this machine)"
                   if "pretrained" in missing else "")
        report.fail(f"The model {name!r} (--model) needs {', '.join(missing)} in --model_args, which does not give "
                    f"{'it' if len(missing) == 1 else 'them'}. Add --model_args {given}{example}.")
    for key in _LOCAL_FILE_ARGS:
        value = model_args.get(key)
        if isinstance(value, str) and _looks_local(value) and not Path(value).exists():
            expanded = " (the harness does not expand ~: give the whole path)" if value.startswith("~") else ""
            report.fail(f"--model_args {key}={value}: there is no such file or folder{expanded}. Give the folder "
                        "of a model saved on this machine, or a hub model's name (e.g. HuggingFaceTB/SmolLM2-135M).")
    base_url = model_args.get("base_url")
    if isinstance(base_url, str) and base_url.startswith(("http://", "https://")):
        _check_server(base_url, report)
    folder, gguf = model_args.get("pretrained"), model_args.get("gguf_file")
    if isinstance(folder, str) and isinstance(gguf, str) and Path(folder).is_dir() and not (Path(folder) / gguf).exists():
        report.fail(f"--model_args gguf_file={gguf}: {folder} holds no such file. Name a GGUF file of that folder "
                    "(the model is loaded from pretrained's folder joined with gguf_file).")
    elif isinstance(folder, str) and gguf is None and Path(folder).is_dir():
        _check_gguf_folder(Path(folder), any(p.name == "gguf_file" for p in parameters), report)


def _check_gguf_folder(folder: Path, takes_gguf_file: bool, report: Preflight) -> None:
    """A folder of GGUF files given as ``pretrained`` without ``gguf_file``: transformers finds no config.json in it
    and fails as it loads ("Unrecognized model ... Should have a `model_type` key")."""
    files = sorted(path.name for path in folder.glob("*.gguf"))
    if not files or (folder / "config.json").exists():
        return
    how = (f"Name the one to load with --model_args gguf_file={files[0]} (the model is loaded from pretrained's "
           "folder joined with gguf_file)." if takes_gguf_file else
           f"This model takes no gguf_file: give the GGUF file's own path as pretrained if it loads GGUF files (vLLM "
           f"does, e.g. pretrained={folder / files[0]} with tokenizer=...), or the folder of a saved model.")
    report.fail(f"--model_args pretrained={folder}: the folder holds no config.json, only the GGUF file(s) "
                f"{', '.join(files)}. {how}")


def _check_server(base_url: str, report: Preflight) -> None:
    from ..served_model import ServerUnavailable, check_reachable, endpoints

    try:
        check_reachable(base_url)
    except ServerUnavailable as err:
        # where: the server without the credentials a URL may carry
        report.fail(f"The model's server at {endpoints(base_url).where} (--model_args base_url) {err}. "
                    "Start it, or wait until it answers (`vllm serve` logs \"Application startup complete\"), or "
                    "correct base_url.")


def _looks_local(value: str) -> bool:
    """A path on this machine, never a hub model's name (``owner/name``): absolute, ``./``, ``../``, ``~``, or deeper
    than one folder."""
    return value.startswith(("/", ".", "~")) or value.count("/") > 1


def raise_on_failures(report: Preflight) -> None:
    """Raise :class:`PreflightError` with every failure, one paragraph each."""
    if report.failures:
        count = len(report.failures)
        raise PreflightError(f"{count} check(s) failed before the model was loaded:\n\n" + "\n\n".join(report.failures))
