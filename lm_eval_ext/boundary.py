"""The plugin's one boundary with the harness's internals (with :class:`lm_eval_ext.task_base.ExtTask`).

Everything else in the plugin uses the harness's public API: task YAMLs, ``ConfigurableTask``
methods, filters, ``lm_eval.api.registry``, ``simple_evaluate``, the ``lm_eval`` command. The
few things no public API offers are done here, each with one line saying why and on which
harness versions it was checked (:data:`CHECKED_ON`); :func:`missing_internals` lists the ones an
installed harness no longer has or does otherwise, found by importing and inspecting it.

1. Discovery (``on_harness_import``, called by :mod:`lm_eval_ext.autoload`): on releases without
   entry-point plugins, the plugin's task directory is indexed by every ``TaskManager`` (after the
   built-ins, before the user's ``--include_path``, also without the built-ins: as the upstream
   plugin support does) and its model is registered as a lazy placeholder with the harness's
   built-in table. A harness that reads the ``lm_eval.tasks`` / ``lm_eval.models`` entry points
   itself is left alone.
2. Request types (``install_request_types``): the harness sends each request to the model
   method named by its request type (``getattr(lm, request_type)`` in ``evaluator.evaluate``).
   The plugin adds two types to every harness model: ``ext_conversation`` (dependent multi-turn
   generation, :mod:`lm_eval_ext.conversation`) and ``ext_withheld`` (a request the task decided
   not to send, e.g. a prompt longer than the model's context: answered with None, no model call).
3. The harness's command line and its models, for the plugin's commands: ``lm_eval run``'s flags
   parsed (``parse_run_args``) and made the run's configuration (``run_config``) as the harness does,
   and its task index (``task_index``), read by ``lm-eval-ext run`` and ``check`` to check a run before
   the model is loaded; the ``lm_eval`` command run in this process (``run_harness``); whether a model
   is one of the harness's API models (``api_model``, for ``lm-eval-ext elitr seeds``); the chat template a
   model gives a run and its chat-formatted prompts kept as data (``chat_template_of``, ``stored_prompt``,
   ``restored_prompt``), which the saved answers record for ``lm-eval-ext resume``.
4. The harness's log (``install_log_filter``): its warning that a task's metrics were scored on
   different numbers of documents is kept only where a group over-weights one of them.
5. What differs between the supported harness versions (``features``: lm-eval 0.4.12, 0.4.13 and
   the 0.5 refactor), detected by inspecting the installed harness; :class:`lm_eval_ext.task_base.ExtTask`
   adapts to it. :func:`check_harness` stops a run whose harness lacks an internal (:func:`guard_paragraph`)
   and warns once on a version not in :data:`CHECKED_ON`.
"""
from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

CHECKED_ON = ("0.4.12", "0.4.13", "0.5.0.dev1")
DISTRIBUTION = "lm-eval-ext"
TASKS_GROUP, MODELS_GROUP = "lm_eval.tasks", "lm_eval.models"
CONVERSATION = "ext_conversation"
WITHHELD = "ext_withheld"

_settings = {"builtin_tasks": True}


# -- 1. discovery ---------------------------------------------------------------------------


def plugin_task_paths() -> list[Path]:
    """The directories holding the plugin's task YAMLs."""
    from .paths import tasks_dir

    return [tasks_dir()]


def index_builtin_tasks(enabled: bool) -> None:
    """Whether TaskManagers built from now on index the harness's ~14,700 built-in tasks (``lm-eval-ext run``
    turns it off when the plugin's tasks and ``--include_path``'s hold every task asked for)."""
    _settings["builtin_tasks"] = enabled


def harness_discovers(group: str, module=None) -> bool:
    """True when the installed harness loads the plugins of entry-point ``group`` by itself."""
    module_name, names = _NATIVE_DISCOVERY[group]
    if module is None:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return False
    return all(callable(getattr(module, name, None)) for name in names)


# Feature detection, not version checks: the harness's entry-point plugin support is in no
# release yet (EleutherAI/lm-evaluation-harness PR #4013, models: registry.load_plugins and
# import_plugins; PR #4015, tasks: manager.discover_plugin_task_paths read in TaskManager.__init__).
_NATIVE_DISCOVERY = {
    MODELS_GROUP: ("lm_eval.api.registry", ("load_plugins", "import_plugins")),
    TASKS_GROUP: ("lm_eval.tasks.manager", ("discover_plugin_task_paths",)),
}
# The modules the start-up hook watches (lm_eval_ext/startup_hook.py): the task manager, and the built-in
# model table, which the harness imports on the first model lookup (not the registry: importing it must
# import nothing of the plugin).
_WATCHED = {"lm_eval.tasks.manager": TASKS_GROUP, "lm_eval.models": MODELS_GROUP}


def activate() -> None:
    """Make the plugin visible to the harness in this process, whether or not the start-up hook ran."""
    for name in _WATCHED:
        on_harness_import(name, importlib.import_module(name))


def on_harness_import(name: str, module) -> None:
    """Called by the start-up hook right after the harness imported ``name``: add what it does not discover."""
    group = _WATCHED.get(name)
    if group == TASKS_GROUP and not harness_discovers(group, module):
        _add_plugin_tasks(module)
    elif group == MODELS_GROUP:
        registry = importlib.import_module(_NATIVE_DISCOVERY[group][0])  # the model table imported it already
        if not harness_discovers(group, registry):
            _register_plugin_models(registry)


def _add_plugin_tasks(manager_module) -> None:
    # Private: TaskManager takes task paths only as an argument (no environment variable or config
    # file adds one). Its __init__ builds the index with the manager module's `TaskIndex().build(paths)`,
    # paths = [built-ins if include_defaults] + include_path; so that name is given a subclass whose build
    # puts the plugin's directory where #4015 puts it (`all_paths += discover_plugin_task_paths()` between
    # the two). TaskManager itself, its arguments and attributes, and the frames its warnings name stay
    # the harness's own. Checked on CHECKED_ON.
    base = manager_module.TaskIndex
    if getattr(base, "lm_eval_ext_plugin_tasks", False):
        return
    builtin = Path(manager_module.__file__).parent

    class TaskIndex(base):
        lm_eval_ext_plugin_tasks = True

        @staticmethod
        def build(paths, **kwargs):
            return base.build(_with_plugin_tasks(list(paths), builtin), **kwargs)

    TaskIndex.__doc__ = base.__doc__
    manager_module.TaskIndex = TaskIndex


def _with_plugin_tasks(paths: list, builtin: Path) -> list:
    """``paths`` (a TaskManager's: the built-ins first when it includes them) with the plugin's directories
    after the built-ins, before the rest; the built-ins left out when :func:`index_builtin_tasks` says so."""
    builtins, rest = (paths[:1], paths[1:]) if paths and Path(paths[0]) == builtin else ([], paths)
    # `--include_path "$(lm-eval-ext tasks-dir)"` names a directory the hook adds already: index it once, where
    # the user put it (twice, the harness warns that every task overrides itself)
    given = {Path(path).resolve() for path in rest}
    plugin = [path for path in plugin_task_paths() if path.resolve() not in given]
    return [*(builtins if _settings["builtin_tasks"] else []), *plugin, *rest]


def plugin_models() -> list[importlib.metadata.EntryPoint]:
    """The plugin's harness models (``ext-replay``): its ``lm_eval.models`` entry points."""
    try:
        points = importlib.metadata.distribution(DISTRIBUTION).entry_points
    except importlib.metadata.PackageNotFoundError:
        return []
    return [point for point in points if point.group == MODELS_GROUP]


def _register_plugin_models(registry_module) -> None:
    # Public API, as #4013's load_plugins does it once the built-in table is registered: each entry point
    # as a lazy placeholder (its module is imported only when a run names the model), never over a name
    # already taken.
    for point in plugin_models():
        if point.name not in registry_module.model_registry:
            registry_module.model_registry.register(point.name, target=point)


# -- 2. request types -------------------------------------------------------------------------


def install_request_types() -> None:
    """Give every harness model the plugin's request types (module docstring, item 2)."""
    from lm_eval.api.model import LM

    # Private: the harness has no registry of request types; it calls the model method named
    # by Instance.request_type. A method on the LM base class serves every model. Checked on CHECKED_ON.
    if not hasattr(LM, CONVERSATION):
        setattr(LM, CONVERSATION, _generate_conversations)
    if not hasattr(LM, WITHHELD):
        setattr(LM, WITHHELD, _withheld)


def _generate_conversations(self, requests) -> list[str]:
    """Dependent multi-turn generation with this model's ``generate_until`` (lm_eval_ext.conversation)."""
    from .conversation import run_conversations

    return run_conversations(requests, lambda batch: _generate_until_cached(self, batch),
                             getattr(self, "apply_chat_template", None))


def _generate_until_cached(lm, requests) -> list[str]:
    """``lm.generate_until``, answered from the harness's response cache (``--use_cache``) where it can be.

    The harness's CachingLM wraps the model object the evaluator holds, so a method called on the
    model itself bypasses it. Private: the cache is read through the CacheHook CachingLM gives the
    model (``cache_hook.dbdict``, keys of ``lm_eval.api.model.hash_args``), as CachingLM itself
    does; the model writes new answers to it as usual. Checked on CHECKED_ON.
    """
    # the conversation runner shows one progress bar for every turn: the model's own bar per call is turned off
    # where its generate_until takes the harness models' disable_tqdm (TemplateLM subclasses do, LM does not)
    quiet = {"disable_tqdm": True} if "disable_tqdm" in inspect.signature(lm.generate_until).parameters else {}
    cache = getattr(getattr(lm, "cache_hook", None), "dbdict", None)
    if cache is None:
        return lm.generate_until(requests, **quiet)
    from lm_eval.api.model import hash_args

    results: list = [None] * len(requests)
    todo = []
    for i, request in enumerate(requests):
        key = hash_args("generate_until", request.args)
        if not request.args[1].get("do_sample", False) and key in cache:
            results[i] = cache[key]
        else:
            todo.append(i)
    if todo:
        for i, output in zip(todo, lm.generate_until([requests[i] for i in todo], **quiet), strict=True):
            results[i] = output
    return results


def _withheld(self, requests) -> list[None]:
    """No response and no model call for each request a task withheld."""
    return [None] * len(requests)


# -- 3. the harness's command line, task index and models ---------------------------------------

API_MODELS = "lm_eval.models.api_models"  # the module of TemplateAPI, the base class of the harness's API models


def parse_run_args(argv: list[str]):
    """``argv`` (the flags of ``lm_eval run``) parsed exactly as ``lm_eval run`` parses them.

    Raises ``ValueError`` where the harness's ``key=value`` parser does (0.4.12 and 0.5.0.dev1: a part without
    ``=``); argparse's own errors exit with its usage line, as under ``lm_eval run``.
    """
    # Private: lm_eval._cli holds the only definition of the run command's flags. Checked on CHECKED_ON.
    from lm_eval._cli.harness import HarnessCLI

    return HarnessCLI()._parser.parse_args(["run", *argv])


def read_flag_value(text: str):
    """One value of a ``key=value`` flag of ``lm_eval run`` as the harness reads it: ``false`` a bool, ``8`` an int,
    ``[0, 1]`` a list, anything else the text."""
    # Private: lm_eval._cli.utils holds the run command's reading of a value. Checked on CHECKED_ON.
    from lm_eval._cli.utils import handle_cli_value_string

    return handle_cli_value_string(text)


def run_config(args):
    """The harness's ``EvaluatorConfig`` of a run, from its flags (:func:`parse_run_args`), as ``lm_eval run`` makes it.

    Raises what the harness raises for flags it rejects (``ValueError``, ``TypeError``, ``FileNotFoundError``).
    """
    # Private: EvaluatorConfig is public (docs/python-api.md), its from_cli is not: it reads the namespace of the
    # private parser above. The config it makes (the flags merged over --config's YAML, then validated) is the one
    # the run gets. Checked on CHECKED_ON.
    from lm_eval.config.evaluate_config import EvaluatorConfig

    return EvaluatorConfig.from_cli(args)


def task_names(tasks) -> list[str]:
    """The names a run's ``tasks`` setting stands for, as the harness reads it: split at commas (``--tasks a,b``; in a
    ``--config`` file ``tasks: a,b`` or a list whose items may hold commas), each with the spaces around it dropped
    where the harness drops them (0.5; lm-eval 0.4 reads ``a, b`` as ``a`` and ``b`` with a space before it)."""
    names = [name for item in (tasks if isinstance(tasks, list) else [tasks]) for name in str(item).split(",")]
    return [name.strip() for name in names] if features().task_names_stripped else names


def _harness_command():
    # Private: the harness documents the `lm_eval` command, not the function its console script calls.
    from lm_eval.__main__ import cli_evaluate

    return cli_evaluate


def run_harness(argv: list[str]) -> None:
    """Run ``lm_eval run ARGV`` in this process, as the ``lm_eval`` command runs it."""
    # In this process, so that what lm-eval-ext run set up (the plugin activated, the task index, the handlers
    # of Ctrl-C and SIGTERM) holds for the run. The function reads sys.argv, as a console script does. Checked
    # on CHECKED_ON.
    command = _harness_command()
    sys.argv = ["lm_eval", "run", *argv]
    command()


def _template_api():
    # Private: docs/API_guide.md describes TemplateAPI and its `seed` argument, not the module it is in.
    return importlib.import_module(API_MODELS).TemplateAPI


def api_model(model_class) -> bool:
    """Whether ``model_class`` (a harness model class, as ``get_model`` gives it) is one of the harness's API models
    (``TemplateAPI``), which send their ``seed`` model argument with each request."""
    # Every API model's module has imported TemplateAPI's, so a process that has not uses none, and it is not imported
    # for the others: it needs the harness's `api` extra (aiohttp), without which it fails to import. Checked on
    # CHECKED_ON.
    return API_MODELS in sys.modules and isinstance(model_class, type) and issubclass(model_class, _template_api())


def chat_template_of(render) -> str | None:
    """The chat template the harness records for a run with ``--apply_chat_template`` (``lm.chat_template(True)``)
    of the model whose ``apply_chat_template`` is ``render``, as the harness gives it to a task's
    ``build_all_requests``."""
    # Private: evaluate() hands tasks the model's bound method (its __self__ is the model; through --use_cache's
    # CachingLM, the model it wraps), and a task is never told --apply_chat_template's value, only that it is on:
    # True, the value of the flag given without a template name. Checked on CHECKED_ON.
    return render.__self__.chat_template(True)


def stored_prompt(prompt) -> dict | None:
    """A chat-formatted prompt (what a model's ``apply_chat_template`` returns) as JSON data, None for a kind
    the harness's models do not return."""
    # A str (hf, vllm, completion APIs), the messages themselves (a remote tokenizer), or JsonChatStr (chat
    # APIs: a NamedTuple whose `prompt` is the messages as JSON), which the harness's API models and the plugin's
    # length check tell apart by type. Checked on CHECKED_ON.
    if isinstance(prompt, str):
        return {"text": prompt}
    if isinstance(prompt, list):
        return {"messages": prompt}
    if type(prompt).__name__ == "JsonChatStr":  # importing its module needs the harness's `api` extra
        return {"json_chat": prompt.prompt}
    return None


def restored_prompt(stored: dict):
    """The prompt :func:`stored_prompt` stored, of the kind the model returned."""
    # JsonChatStr(prompt) as the harness's chat API models make it (stored_prompt). Checked on CHECKED_ON.
    if "json_chat" in stored:
        return importlib.import_module(API_MODELS).JsonChatStr(stored["json_chat"])
    return stored["text"] if "text" in stored else stored["messages"]


class IndexEntry(NamedTuple):
    """One name of the harness's task index: ``kind`` (task, group or tag), the names it stands for (a
    group's tasks and groups, a tag's tasks) and, for a task, its YAML config (functions unresolved)."""

    kind: str
    members: tuple[str, ...] = ()
    config: dict | None = None


def task_index(include_path=None, include_defaults: bool = True) -> dict[str, IndexEntry]:
    """Every task, group and tag a TaskManager with these arguments would see."""
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._index import Kind

    manager = TaskManager(include_path=include_path, include_defaults=include_defaults)
    index = {}
    # Private: the index entries' kind and raw config are how a group's members are known before
    # the group is built (which loads every member's data); 0.5 renamed the index _task_index. Checked on CHECKED_ON.
    entries = manager._task_index if features().private_task_index else manager.task_index
    for name, entry in entries.items():
        if entry.kind is Kind.GROUP:
            children = [c if isinstance(c, str) else c.get("task") or c.get("group")
                        for c in (entry.cfg or {}).get("task", [])]
            index[name] = IndexEntry("group", tuple(c for c in children if c))
        elif entry.kind is Kind.TAG:
            index[name] = IndexEntry("tag", tuple(sorted(entry.tags)))
        else:
            index[name] = IndexEntry("task", (), entry.cfg or {})
    return index


# -- 4. the harness's log ----------------------------------------------------------------------

# lm_eval.evaluator_utils._compute_task_aggregations warns when a task's metrics were scored on different
# numbers of documents: the group aggregation weights every metric of the task by its largest count.
_UNEQUAL_COUNTS = re.compile(r"^\[(?P<task>[^\]]+)\] Metrics were not scored on the same number of documents "
                             r"\((?P<counts>[^)]*)\)")


class _UnequalCountsFilter(logging.Filter):
    """Drops the harness's unequal-counts warning for a plugin task unless a group of the plugin size-weights one
    of the metrics the task scored on fewer documents (only then is that metric over-weighted in a group score).

    The plugin's tasks report some metrics over a subset of their documents by design (scores by position or
    question type, a novel-items accuracy, documents whose prompt was skipped), and its size-weighted groups
    aggregate only metrics every document reports (tests/test_group_weights.py), so for them the warning is
    never true. A group of the user's own is not seen here: docs/reports.md says which metrics not to size-weight.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        match = _UNEQUAL_COUNTS.match(record.getMessage())
        if match is None:
            return True
        tasks, weighted = plugin_groups_weighting()
        task = match["task"]
        if task not in tasks:
            return True
        counts = {key.split(",", 1)[0]: int(n) for key, n in re.findall(r"(\S+?)=(\d+)", match["counts"])}
        fewer = {metric for metric, n in counts.items() if n < max(counts.values())}
        return bool(fewer & weighted.get(task, set()))


def install_log_filter() -> None:
    """Keep the harness's unequal-counts warning only where it is true (:class:`_UnequalCountsFilter`)."""
    # Private: the warning's logger and text (lm_eval.evaluator_utils, f"[{task}] Metrics were not scored on
    # the same number of documents (...)") are the harness's; no option turns it off per task. Checked on 0.4.13.
    logger = logging.getLogger("lm_eval.evaluator_utils")
    if not any(isinstance(f, _UnequalCountsFilter) for f in logger.filters):
        logger.addFilter(_UnequalCountsFilter())


@functools.lru_cache(maxsize=1)
def plugin_groups_weighting() -> tuple[frozenset[str], dict[str, set[str]]]:
    """The plugin's task names, and per task the metrics a plugin group containing it (at any depth) averages
    weighted by size (``weight_by_size``, true unless the YAML says false, as in the harness)."""
    import yaml

    # libyaml's parser where PyYAML has it, as the harness's own loader does (the pure-Python one takes about five
    # times as long over the plugin's YAMLs, in every run that logs the harness's unequal-counts warning)
    base = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader

    class _Loader(base):
        """Reads task YAMLs without resolving ``!function`` (only names and aggregations are needed)."""

    _Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    tasks, groups = set(), {}
    for root in plugin_task_paths():
        for path in sorted(Path(root).rglob("*.yaml")):
            config = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
            if "group" in config:
                members = [m if isinstance(m, str) else m.get("task") or m.get("group") for m in config.get("task", [])]
                metrics = {a["metric"] for a in config.get("aggregate_metric_list") or []
                           if a.get("weight_by_size", True)}
                groups[config["group"]] = ([m for m in members if m], metrics)
            elif "task" in config:
                tasks.add(config["task"])

    def leaves(name: str, seen: frozenset = frozenset()) -> set[str]:
        if name not in groups or name in seen:
            return {name}
        return set().union(*(leaves(m, seen | {name}) for m in groups[name][0]))

    weighted: dict[str, set[str]] = {}
    for name, (_, metrics) in groups.items():
        for task in leaves(name):
            weighted.setdefault(task, set()).update(metrics)
    return frozenset(tasks), weighted


# -- 5. what differs between the supported harness versions -----------------------------------
#
# Feature detection, never version numbers: each flag says how the installed harness does one thing
# the plugin depends on, found by importing and inspecting (signatures, attributes, small probes).
# lm_eval_ext.task_base.ExtTask adapts to each flag; missing_internals() checks that what each flag
# says holds on this harness (a wrong flag, or a harness that moved on, is named there).


class HarnessFeatures(NamedTuple):
    """How the installed harness does what differs between lm-eval 0.4 and the 0.5 refactor."""

    instance_keywords: bool  # Instance(task_name=, doc_id=, repeats=) rather than metadata=(task, doc_id, repeats)
    doc_id_keyword: bool  # construct_requests gets doc_id= rather than metadata=(task, doc_id, repeats)
    per_type_task_classes: bool  # ConfigurableTask is an abstract base; a class per output type builds requests
    lazy_documents: bool  # a task loads its documents when first read, not in __init__ (no task_docs)
    scorers: bool  # metrics are scorer objects built from filter_list + metric_list and the output type
    filters_list_per_doc: bool  # a filter step returns a list per document (take_first: [r[0]], not r[0])
    filter_options_in_kwargs: bool  # TaskConfig moves a filter step's options under "kwargs"
    private_task_index: bool  # the TaskManager's index is _task_index (0.4: task_index)
    task_names_stripped: bool  # EvaluatorConfig.process_tasks drops the spaces around each name of --tasks


@functools.cache
def features() -> HarnessFeatures:
    """The installed harness's :class:`HarnessFeatures` (detected once per process)."""
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks import TaskManager

    construct = ConfigurableTask.construct_requests
    step = _probe_filter_step()
    return HarnessFeatures(
        instance_keywords=_probe_instance(keywords=True).doc_id == 7,
        doc_id_keyword="doc_id" in inspect.signature(construct).parameters,
        per_type_task_classes=bool(getattr(construct, "__isabstractmethod__", False)),
        lazy_documents=isinstance(inspect.getattr_static(ConfigurableTask, "dataset", None), property),
        scorers=callable(getattr(ConfigurableTask, "_build_scorers", None)),
        filters_list_per_doc=_probe_take_first() == [["a"]],
        filter_options_in_kwargs=step.get("kwargs") == {"probe": 1},
        private_task_index=not hasattr(TaskManager, "task_index") and hasattr(TaskManager, "_task_index"),
        task_names_stripped="strip" in _code_names(_process_tasks()),
    )


def _process_tasks():
    # Private: EvaluatorConfig is public, process_tasks (its reading of the task names) is not.
    from lm_eval.config.evaluate_config import EvaluatorConfig

    return EvaluatorConfig.process_tasks


def _probe_instance(keywords: bool):
    from lm_eval.api.instance import Instance

    identity = {"task_name": "probe", "doc_id": 7, "repeats": 1} if keywords else {"metadata": ("probe", 7, 1)}
    return Instance(request_type="generate_until", doc={}, arguments=("", {}), idx=0, **identity)


def _probe_take_first() -> list:
    from lm_eval.filters import build_filter_ensemble

    return [list(r) if isinstance(r, (list, tuple)) else r
            for r in build_filter_ensemble("probe", [["take_first", None]]).filters[0]().apply([["a", "b"]], [{}])]


def _task_config_class():
    # Private on 0.5 (lm_eval.config.task); 0.4 keeps it beside the task classes.
    try:
        from lm_eval.config.task import TaskConfig
    except ImportError:
        from lm_eval.api.task import TaskConfig
    return TaskConfig


def _probe_filter_step() -> dict:
    config = _task_config_class()(task="probe", output_type="generate_until", generation_kwargs={"until": ["\n"]},
                                  filter_list=[{"name": "n", "filter": [{"function": "take_first", "probe": 1}]}])
    return dict(config.filter_list[0]["filter"][0])


def new_instance(request_type: str, doc: dict, arguments: tuple, idx: int, *, task_name: str, doc_id: int,
                 repeats: int = 1, **fields):
    """A harness ``Instance`` for document ``doc_id`` of task ``task_name``, on every supported harness."""
    from lm_eval.api.instance import Instance

    identity = {"task_name": task_name, "doc_id": doc_id, "repeats": repeats} if features().instance_keywords \
        else {"metadata": (task_name, doc_id, repeats)}
    return Instance(request_type=request_type, doc=doc, arguments=arguments, idx=idx, **identity, **fields)


def filter_step_options(step: dict) -> dict:
    """The options a task YAML gives one ``filter_list`` step (beside ``function``), wherever TaskConfig keeps them."""
    if features().filter_options_in_kwargs:
        return dict(step.get("kwargs") or {})
    return {key: value for key, value in step.items() if key != "function"}


def unlisted(response):
    """One document's filtered response as 0.4 filters give it: the 0.5 filters' list of one, unwrapped."""
    if features().filters_list_per_doc and isinstance(response, (list, tuple)) and len(response) == 1:
        return response[0]
    return response


def index_directories(paths) -> dict:
    """The harness's index of the task YAMLs under ``paths`` alone: name -> entry (``.kind``, raw ``.cfg``)."""
    # Private: lm_eval.tasks._index reads YAMLs without resolving their functions or loading data,
    # and indexes given folders without the built-in tasks. Checked on CHECKED_ON.
    from lm_eval.tasks._index import TaskIndex

    return TaskIndex.build(list(paths))


# -- the check ----------------------------------------------------------------------------------


def _code_names(function) -> set[str]:
    """The global and attribute names ``function``'s compiled code uses (its bytecode, not its source)."""
    code = inspect.unwrap(function).__code__
    names, todo = set(), [code]
    while todo:
        code = todo.pop()
        names |= set(code.co_names)
        todo += [const for const in code.co_consts if inspect.iscode(const)]
    return names


def _instances_property_reads_the_list() -> bool:
    from lm_eval.api.task import ConfigurableTask

    probe = object.__new__(ConfigurableTask)
    marker = [object()]
    probe._instances = marker
    return ConfigurableTask.instances.fget(probe) == marker


def _scorer_takes_plugin_metrics() -> bool:
    from lm_eval.api.metrics import Metric, mean
    from lm_eval.scorers import build_scorer

    metric = Metric(name="probe", fn=lambda *a, **k: None, output_type={"generate_until"}, aggregation=mean)
    scorer = build_scorer(cfg={"name": "n", "filter": [], "metric_list": [metric]}, output_type="generate_until")
    numbers, count = scorer.aggregate({0: {"probe": 1.0}, 1: {"probe": 0.0}}, bootstrap_iters=0)
    return numbers.get("probe,n") == 0.5 and count == 2 and hasattr(scorer, "reduced_docs")


def _run_config_holds_the_flags() -> bool:
    config = run_config(parse_run_args(["--model", "hf", "--tasks", "x"]))
    return config.model == "hf" and config.tasks == ["x"]


def _harness_command_is_lm_eval() -> bool:
    command = _harness_command()
    inspect.signature(command).bind()  # called with no argument, as a console script calls it
    scripts = {point.name: point.value for point in importlib.metadata.distribution("lm_eval").entry_points
               if point.group == "console_scripts"}
    return scripts.get("lm_eval") == f"{command.__module__}:{command.__name__}"


def _api_models_hold(check: Callable[[object], bool]) -> Callable[[], bool]:
    """``check`` of the API models' module where it is loaded. Only a process that loaded an API model relies on it
    (TemplateAPI for api_model, JsonChatStr for stored_prompt): elsewhere, that the module is there. Importing it
    would cost every run a tenth of a second, and fails without the harness's `api` extra."""
    def holds() -> bool:
        if API_MODELS not in sys.modules:
            return importlib.util.find_spec(API_MODELS) is not None
        return check(sys.modules[API_MODELS])
    return holds


def _feature_checks(found: HarnessFeatures) -> list[tuple[str, Callable[[], bool]]]:
    """(internal, check) for the way ``found`` says this harness does each thing (section 4)."""
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks import TaskManager

    construct = inspect.signature(ConfigurableTask.construct_requests).parameters
    keyword_only = [name for name, p in construct.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return [
        ("lm_eval.api.instance.Instance(task_name=, doc_id=, repeats=)" if found.instance_keywords else
         "lm_eval.api.instance.Instance(metadata=(task_name, doc_id, repeats))",
         lambda: _probe_instance(keywords=found.instance_keywords).doc_id == 7),
        ("ConfigurableTask.construct_requests(doc, ctx, *, doc_id, ...)" if found.doc_id_keyword else
         "ConfigurableTask.construct_requests(doc, ctx, **kwargs) given metadata=(task_name, doc_id, repeats)",
         lambda: ("doc_id" in keyword_only) == found.doc_id_keyword),
        ("lm_eval.api.task: ConfigurableTask an abstract base, Task._registry of one class per output type"
         if found.per_type_task_classes else "lm_eval.api.task.ConfigurableTask.construct_requests building requests",
         lambda: (bool(getattr(ConfigurableTask.construct_requests, "__isabstractmethod__", False))
                  and {"generate_until", "loglikelihood"} <= set(getattr(ConfigurableTask, "_registry", {})))
         if found.per_type_task_classes else
         not getattr(ConfigurableTask.construct_requests, "__isabstractmethod__", False)),
        ("ConfigurableTask.dataset loaded when first read (eval_docs; no task_docs)" if found.lazy_documents else
         "ConfigurableTask.__init__ loading the documents (dataset, task_docs)",
         lambda: isinstance(inspect.getattr_static(ConfigurableTask, "dataset", None), property) == found.lazy_documents
         and (not found.lazy_documents or isinstance(inspect.getattr_static(ConfigurableTask, "eval_docs", None),
                                                     property))),
        ("ConfigurableTask._build_scorers, Task.aggregate and lm_eval.scorers.build_scorer with Metric objects"
         if found.scorers else "ConfigurableTask scoring through process_results and metric_list (no scorers)",
         lambda: (callable(getattr(ConfigurableTask, "_build_scorers", None))
                  and "bootstrap_iters" in inspect.signature(ConfigurableTask.aggregate).parameters
                  and _scorer_takes_plugin_metrics()) if found.scorers else
         not hasattr(ConfigurableTask, "_build_scorers")),
        ("filters returning a list per document (take_first: [r[0]])" if found.filters_list_per_doc else
         "filters returning one value per document (take_first: r[0])",
         lambda: _probe_take_first() == ([["a"]] if found.filters_list_per_doc else ["a"])),
        ("TaskConfig keeping a filter step's options under kwargs" if found.filter_options_in_kwargs else
         "TaskConfig keeping a filter step's options beside function",
         lambda: (_probe_filter_step().get("kwargs") == {"probe": 1}) if found.filter_options_in_kwargs else
         _probe_filter_step().get("probe") == 1),
        ("lm_eval.tasks.TaskManager._task_index" if found.private_task_index else
         "lm_eval.tasks.TaskManager.task_index",
         lambda: hasattr(TaskManager, "_task_index" if found.private_task_index else "task_index")),
        ("EvaluatorConfig.process_tasks splitting the task names at commas, the spaces around them dropped"
         if found.task_names_stripped else
         "EvaluatorConfig.process_tasks splitting the task names at commas, the spaces around them kept",
         lambda: "split" in _code_names(_process_tasks())
         and ("strip" in _code_names(_process_tasks())) == found.task_names_stripped),
    ]


def missing_internals() -> list[str]:
    """What the plugin relies on that the installed harness does not have or does otherwise (empty when all holds).

    Checked by importing and inspecting: signatures, attributes, small probes of the harness's classes.
    """
    missing = []

    def need(what: str, check) -> None:
        try:
            ok = check()
        except Exception:  # noqa: BLE001 -- anything failing here means "not there"
            ok = False
        if not ok:
            missing.append(what)

    try:
        found = features()
    except Exception as err:  # noqa: BLE001 -- a harness this far moved on is reported, not raised
        return [f"the harness's task, request and filter classes ({type(err).__name__}: {err})"]
    for what, check in _feature_checks(found):
        need(what, check)

    def module(name):
        return importlib.import_module(name)

    need("lm_eval.tasks.manager.TaskManager.__init__(verbosity, include_path, include_defaults, metadata)",
         lambda: list(inspect.signature(module("lm_eval.tasks.manager").TaskManager.__init__)
                      .parameters)[1:5] == ["verbosity", "include_path", "include_defaults", "metadata"])
    need("lm_eval.tasks._index: TaskIndex.build(paths) and entries with .kind, .cfg, .tags",
         lambda: {"kind", "cfg", "tags"} <= set(module("lm_eval.tasks._index").Entry.__dataclass_fields__)
         and "paths" in inspect.signature(module("lm_eval.tasks._index").TaskIndex.build).parameters)
    need("lm_eval.tasks.manager.TaskManager.__init__ building its index with the manager module's TaskIndex (the "
         "name the plugin's tasks are added through), where the harness does not discover plugin tasks itself",
         lambda: harness_discovers(TASKS_GROUP) or "TaskIndex" in _code_names(module("lm_eval.tasks.manager")
                                                                                .TaskManager.__init__))
    need("lm_eval.tasks._index.Kind.GROUP / TAG",
         lambda: {"GROUP", "TAG"} <= set(module("lm_eval.tasks._index").Kind.__members__))
    need("lm_eval._cli.harness.HarnessCLI()._parser with a 'run' command",
         lambda: parse_run_args(["--tasks", "x"]).tasks == ["x"])
    need("lm_eval._cli.utils.handle_cli_value_string(text), the run command's reading of a key=value value",
         lambda: read_flag_value("false") is False and read_flag_value("[0, 1]") == [0, 1])
    need("lm_eval.config.evaluate_config.EvaluatorConfig.from_cli(the namespace of `lm_eval run`'s flags)",
         _run_config_holds_the_flags)
    need("lm_eval.__main__.cli_evaluate(), the function of the `lm_eval` command", _harness_command_is_lm_eval)
    need(f"{API_MODELS}.TemplateAPI taking seed=, the base class of the harness's API models",
         _api_models_hold(lambda _: "seed" in inspect.signature(_template_api().__init__).parameters))
    need(f"{API_MODELS}.JsonChatStr(prompt), the chat API models' prompt",
         _api_models_hold(lambda api: api.JsonChatStr("[]").prompt == "[]"))
    need("lm_eval.api.registry.model_registry.register(name, target='module:Class')",
         lambda: "target" in inspect.signature(module("lm_eval.api.registry").model_registry.register).parameters)
    need("lm_eval.api.model.hash_args and CacheHook.dbdict (the response cache)",
         lambda: callable(module("lm_eval.api.model").hash_args)
         and module("lm_eval.api.model").CacheHook(type("CachingLM", (), {"dbdict": {"k": 1}})()).dbdict == {"k": 1})
    evaluate = module("lm_eval.evaluator").evaluate
    need("lm_eval.evaluator.evaluate calling the model method named by each request_type (getattr)",
         lambda: {"getattr", "request_type"} <= _code_names(evaluate))
    need("lm_eval.evaluator.evaluate padding several processes' requests by task.OUTPUT_TYPE (task_base.py)",
         lambda: "OUTPUT_TYPE" in _code_names(evaluate))
    need("lm_eval.api.task.Task.instances returning self._instances (task_base.py moves scored documents)",
         _instances_property_reads_the_list)
    need("lm_eval.api.task.ConfigurableTask.fewshot_context(doc, num_fewshot, system_instruction, apply_chat_template, "
         "fewshot_as_multiturn, chat_template, gen_prefix), the parameters MAGNIFICo's and ELITR-Bench's tasks take",
         lambda: list(inspect.signature(module("lm_eval.api.task").ConfigurableTask.fewshot_context).parameters)[1:]
         == ["doc", "num_fewshot", "system_instruction", "apply_chat_template", "fewshot_as_multiturn",
             "chat_template", "gen_prefix"])
    need("lm_eval.api.task.Task.build_all_requests(rank, world_size, apply_chat_template, chat_template, "
         "tokenizer_name, system_instruction, cache_requests, rewrite_requests_cache), the keywords task_base.py "
         "reads or sets in the evaluator's call",
         lambda: {"rank", "world_size", "apply_chat_template", "chat_template", "tokenizer_name", "system_instruction",
                  "cache_requests", "rewrite_requests_cache"}
         <= set(inspect.signature(module("lm_eval.api.task").Task.build_all_requests).parameters))
    need("ConfigurableTask.override_metric(metric_name), the harness's --predict_only",
         lambda: "metric_name" in inspect.signature(module("lm_eval.api.task").ConfigurableTask.override_metric).parameters)
    return missing


def harness_version() -> str:
    """The installed lm-eval's version."""
    return importlib.metadata.version("lm_eval")


def guard_paragraph(missing: list[str] | None = None) -> str | None:
    """One paragraph naming what the installed harness lacks of what the plugin relies on, or None when all holds."""
    missing = missing_internals() if missing is None else missing
    if not missing:
        return None
    return (f"lm-eval-ext cannot run its tasks on the installed lm-eval {harness_version()}: the harness no longer has "
            f"(or does otherwise) what the plugin relies on: {'; '.join(missing)}. lm-eval-ext is checked on lm-eval "
            f"{', '.join(CHECKED_ON)}: install one of them (pip install 'lm-eval=={CHECKED_ON[-1]}' --pre), or an "
            "lm-eval-ext release that supports this harness.")


@functools.cache
def check_harness() -> None:
    """Once per process, before a plugin task is built: stop with the guard's paragraph when an internal the plugin
    relies on is missing; on a harness version it was not checked on, one warning line."""
    paragraph = guard_paragraph()
    if paragraph is not None:
        from .errors import UserError

        raise UserError(paragraph)
    if harness_version() not in CHECKED_ON:
        sys.stderr.write(f"lm-eval-ext: warning: lm-eval {harness_version()} is not among the versions lm-eval-ext is "
                         f"checked on ({', '.join(CHECKED_ON)}); its internals look as expected, but check your "
                         "numbers.\n")
