"""The harness's built-in task YAMLs, parsed once per test run instead of once per harness process.

Every ``lm_eval run`` builds a TaskManager, and the TaskManager's index parses each of the harness's ~14,000
built-in task YAMLs (about 11 CPU seconds): the same files, to the same dicts, in each of the many harness
processes the suite starts. When :data:`ENV` names a file, :func:`install` makes this process read those
parses from it: the first process of the run to get there parses every built-in YAML with the harness's own
loader and writes them (under a file lock), the others load them. The index itself (walking the directory,
deciding what is a task, a group or a tag, merging the plugin's and the user's directories) stays the
harness's code; only the built-in files' parse is reused, a fresh copy per call. YAMLs outside the harness's
own directory (the plugin's tasks, a test's ``--include_path``) are parsed as usual.

tests/conftest.py sets :data:`ENV` for the whole test run. ``python -m doubles ...`` processes use it, and so
do both pytest processes of the harness's own tests (tests/test_harness_own_tests.py, through a conftest.py
it writes beside them) and the ``simple_evaluate`` script of tests/test_user_errors.py, which imports the
doubles already; the tests of the installed commands (``lm_eval``, ``lm-eval-ext``, the README's commands and
script) run without it.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path

from doubles.made_once import made_once

ENV = "LM_EVAL_EXT_TEST_BUILTIN_YAMLS"


def install() -> None:
    """If :data:`ENV` is set, reuse the built-in YAMLs' parses in this process (the index's private parse
    function, ``lm_eval.tasks._index.load_yaml``, the same on every supported harness version)."""
    store = os.environ.get(ENV)
    if not store:
        return
    from lm_eval.tasks import _index

    root = Path(_index.__file__).parent
    parse = _index.load_yaml
    parsed = _load_or_build(Path(store), root, parse)

    def load_yaml(path, *, resolve_func=True, recursive=True, **kwargs):
        blob = parsed.get(str(path)) if not resolve_func and recursive and not kwargs else None
        if blob is None:
            return parse(path, resolve_func=resolve_func, recursive=recursive, **kwargs)
        ok, value = pickle.loads(blob)
        if not ok:
            raise value
        return value

    _index.load_yaml = load_yaml


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
