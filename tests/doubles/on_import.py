"""Patch a module when it is first imported, without importing it now (the doubles' hooks in a process's start-up)."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable


def on_import(name: str, patch: Callable) -> None:
    """``patch(module)`` now if module ``name`` is imported already, else right after something first imports it."""
    if name in sys.modules:
        patch(sys.modules[name])
    elif not any(isinstance(finder, _OnImport) and finder.name == name for finder in sys.meta_path):
        # just before the path finder: finders others put first (the plugin's start-up hook) stay first
        path_finder = sys.meta_path.index(importlib.machinery.PathFinder)
        sys.meta_path.insert(path_finder, _OnImport(name, patch))


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of one module, once, so that the module is patched as it loads."""

    def __init__(self, name: str, patch: Callable) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None:
            return None
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            self.patch(module)

        spec.loader.exec_module = exec_module
        return spec
