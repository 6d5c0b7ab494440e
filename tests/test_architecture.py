"""The package's import structure: no import circles, no module importing from a layer above its own.

The layers (docs/architecture.md), lowest first; a module may import from its own layer and the ones
below it, never from one above.
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
    {"lm_eval_ext.prompt_length", "lm_eval_ext.sweeps", "lm_eval_ext.metrics", "lm_eval_ext.sql"},
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
