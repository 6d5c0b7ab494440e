"""The package's import structure: no import circles, no module importing from a layer above its own, and
nothing private of the harness used outside the boundary.

The layers (docs/architecture.md), lowest first; a module may import from its own layer and the ones
below it, never from one above. Imports inside functions count as much as those at the top of a module.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lm_eval_ext"

LAYERS = [
    # foundation
    {"lm_eval_ext", "lm_eval_ext.errors", "lm_eval_ext.paths", "lm_eval_ext.atomic_write"},
    # data layer
    {"lm_eval_ext.data"},
    # shared machinery below the benchmarks
    {"lm_eval_ext.prompt_length", "lm_eval_ext.served_model", "lm_eval_ext.sweeps", "lm_eval_ext.metrics",
     "lm_eval_ext.sql"},
    {"lm_eval_ext.conversation", "lm_eval_ext.judge"},
    # the harness boundary (task base class, request types, discovery)
    {"lm_eval_ext.startup_hook", "lm_eval_ext.autoload", "lm_eval_ext.boundary", "lm_eval_ext.task_base", "lm_eval_ext.answers", "lm_eval_ext.judge.harness",
     "lm_eval_ext.models", "lm_eval_ext.user_errors", "lm_eval_ext.interrupts"},
    # the benchmarks: data -> prompts -> tasks -> scoring
    {"lm_eval_ext.lieder", "lm_eval_ext.litm", "lm_eval_ext.magnifico", "lm_eval_ext.elitr"},
    # reading results, published numbers
    {"lm_eval_ext.results", "lm_eval_ext.published"},
    # outputs
    {"lm_eval_ext.report", "lm_eval_ext.export", "lm_eval_ext.leaderboard"},
    # the command line
    {"lm_eval_ext.commands", "lm_eval_ext.cli"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    """The layer of the most specific prefix of ``module`` listed in LAYERS."""
    best, layer = -1, None
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, layer = len(name), index
    assert layer is not None, f"{module} is in no layer of tests/test_architecture.py (add it, and to docs/architecture.md)"
    return layer


def _imports() -> dict[str, set[str]]:
    """module -> the plugin modules it imports (at any depth of its code)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                    names = [f"{target}.{alias.name}" for alias in node.names]
                else:
                    target, names = node.module or "", [f"{node.module}.{alias.name}" for alias in node.names]
                # `from . import x` names a module x when x is one
                found = [n for n in names if _exists(n)] or [target]
                targets.update(t for t in found if t.startswith("lm_eval_ext"))
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name.startswith("lm_eval_ext"))
        # a module's own packages (their __init__ re-exports) are not an import between modules
        graph[module] = {t for t in targets if t != module and not module.startswith(t + ".")}
    return graph


def _exists(module: str) -> bool:
    relative = Path(*module.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").is_file() or (PACKAGE.parent / relative / "__init__.py").is_file()


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
              for module, targets in sorted(_imports().items()) for target in sorted(targets)
              if _layer(target) > _layer(module)]
    assert not upward, "imports against the data flow:\n" + "\n".join(upward)


def test_no_import_circles():
    graph = _imports()
    cycles = []

    def visit(module: str, stack: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target in stack:
                cycles.append(" -> ".join(stack[stack.index(target):] + [target]))
            elif target not in done:
                visit(target, stack + [target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert not cycles, "import circles:\n" + "\n".join(sorted(set(cycles)))


# The modules that may use what is private of the harness, each use saying why and checked by
# boundary.missing_internals() on every supported harness version (docs/architecture.md, "The harness boundary").
BOUNDARY = {"lm_eval_ext.boundary", "lm_eval_ext.task_base"}

# The harness's public API, which every module may import: module -> the names it offers. Public means offered to
# users on every supported version (lm-eval 0.4.12, 0.4.13, 0.5.0.dev1) by the harness's README or docs/, or by
# the module's own __all__. A module listed here may also be imported whole. The check reads imports, and the
# attributes read straight off what they bind: an attribute with a leading underscore is private. It cannot see a
# public class's undocumented method, so a class the plugin needs only for one (EvaluatorConfig, for from_cli) is
# not listed.
PUBLIC_HARNESS = {
    "lm_eval": {"simple_evaluate", "evaluate"},  # lm_eval.__all__; docs/python-api.md
    "lm_eval.api.filter": {"Filter"},  # docs/task_guide.md, writing a filter
    "lm_eval.api.metrics": {"mean"},  # docs/task_guide.md, the aggregation functions (0.5: docs/api/metrics.md)
    "lm_eval.api.model": {"LM"},  # docs/python-api.md and docs/model_guide.md, a model of one's own
    # docs/model_guide.md names the module ("what sorts of registries and decorators exist"); these are in its
    # __all__ on every supported version
    "lm_eval.api.registry": {"get_model", "model_registry", "register_model", "filter_registry", "register_filter",
                             "metric_registry", "register_metric", "aggregation_registry", "register_aggregation"},
    # lm_eval.tasks.__all__; docs/python-api.md; TaskManager's docstring names load() and all_tasks
    "lm_eval.tasks": {"TaskManager", "get_task_dict"},
}


def _harness_uses(tree: ast.AST) -> list[str]:
    """What of the harness the module ``tree`` uses: ``module`` for a module imported whole (also through
    ``importlib.import_module`` with a literal name), ``module:name`` for a name imported from it, and
    ``module:name._attribute`` / ``module._attribute`` for a private attribute read off what an import bound."""
    found, bound = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and _is_harness(node.module):
            for alias in node.names:
                found.append(f"{node.module}:{alias.name}")
                bound[alias.asname or alias.name] = found[-1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_harness(alias.name):
                    found.append(alias.name)
                    bound[alias.asname or alias.name] = alias.name
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and _is_harness(node.args[0].value)):
            found.append(node.args[0].value)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{bound[node.value.id]}.{node.attr}")
    return found


def _is_harness(module) -> bool:
    return isinstance(module, str) and (module == "lm_eval" or module.startswith("lm_eval."))


def _public(used: str) -> bool:
    module, _, name = used.partition(":")
    return module in PUBLIC_HARNESS and (not name or name in PUBLIC_HARNESS[module]
                                         or f"{module}.{name}" in PUBLIC_HARNESS)


def test_only_the_boundary_uses_what_is_private_of_the_harness():
    private = [f"{_module_name(path)} uses {used}" for path in sorted(PACKAGE.rglob("*.py"))
               if _module_name(path) not in BOUNDARY
               for used in _harness_uses(ast.parse(path.read_text(encoding="utf-8")))
               if not _public(used)]
    assert not private, ("the harness's private names outside lm_eval_ext/boundary.py and task_base.py (add a "
                         "function to the boundary, and its check to boundary.missing_internals()):\n"
                         + "\n".join(private))
