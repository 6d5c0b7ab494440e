"""The harness's built-in task YAMLs, parsed once per test run instead of once per harness process.

Every ``lm_eval run`` builds a TaskManager, and the TaskManager's index parses each of the harness's ~14,000
built-in task YAMLs (about 11 CPU seconds): the same files, to the same dicts, in each of the many harness
processes the suite starts. When :data:`ENV` names a file, :func:`install` makes this process read those
parses from it: the first process of the run to get there parses every built-in YAML with the harness's own
loader and writes them (under a file lock), the others load them. The index itself (walking the directory,
deciding what is a task, a group or a tag, merging the plugin's and the user's directories) stays the
harness's code; only the built-in files' parse is reused, a fresh copy per call. YAMLs outside the harness's
own directory (the plugin's tasks, a test's ``--include_path``) are parsed as usual.

tests/conftest.py sets :data:`ENV` for the whole test run and installs it in the pytest process; every process the
suite starts installs it as it starts (tests/startup/sitecustomize.py), the installed commands too. The shared
``lm_eval ls tasks`` runs with :data:`ENV` empty, as a user types it.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path

from doubles.made_once import made_once
from doubles.on_import import on_import

ENV = "LM_EVAL_EXT_TEST_BUILTIN_YAMLS"
# The harness's modules that parse task YAMLs with the index's call: the index, and the task manager's listing
# (``lm_eval ls tasks`` parses every task's file again for its output type). Both import the same private
# function, ``lm_eval.tasks._yaml_loader.load_yaml``, on every supported harness version.
MODULES = ("lm_eval.tasks._index", "lm_eval.tasks.manager")
_parsed: dict[str, bytes] = {}  # this process's copy of the store, loaded when first needed


def install() -> None:
    """If :data:`ENV` is set, reuse the built-in YAMLs' parses in this process: now in those of :data:`MODULES`
    imported already, else as soon as something imports them (installing imports nothing)."""
    if os.environ.get(ENV):
        for name in MODULES:
            on_import(name, _reuse)


def _reuse(module) -> None:
    parse = module.load_yaml
    if getattr(parse, "reused", False):  # installed twice in this process
        return

    root = Path(module.__file__).parent

    def load_yaml(path, *, resolve_func=True, recursive=True, **kwargs):
        blob = None
        if not resolve_func and recursive and not kwargs and str(path).startswith(f"{root}{os.sep}"):
            if not _parsed:  # the first built-in file this process asks for (the plugin's own do not need them)
                _parsed.update(_load_or_build(Path(os.environ[ENV]), root, parse))
            blob = _parsed.get(str(path))
        if blob is None:
            return parse(path, resolve_func=resolve_func, recursive=recursive, **kwargs)
        ok, value = pickle.loads(blob)
        if not ok:
            raise value
        return value

    load_yaml.reused = True
    module.load_yaml = load_yaml


def _load_or_build(store: Path, root: Path, parse) -> dict[str, bytes]:
    def parse_all() -> bytes:
        parsed = {}
        for path in root.glob("**/*.yaml"):
            try:
                parsed[str(path)] = pickle.dumps((True, parse(path, resolve_func=False, recursive=True)))
            except Exception as err:  # noqa: BLE001 -- the index skips such a file; it gets the same error
                parsed[str(path)] = pickle.dumps((False, err))
        return pickle.dumps({"root": str(root), "parsed": parsed})

    saved = pickle.loads(made_once(store, parse_all))
    assert saved["root"] == str(root), f"{store} holds the YAMLs of another harness ({saved['root']})"
    return saved["parsed"]
