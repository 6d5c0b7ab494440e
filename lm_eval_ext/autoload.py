"""Start-up hook that makes the plugin visible to a plain ``lm_eval`` (installed as ``lm_eval_ext_autoload.pth``).

Python runs the ``.pth`` line at every interpreter start, so this module does almost nothing
then: it puts a finder at the front of ``sys.meta_path`` that answers only for the harness's
task manager and model registry modules. When one of them is imported (``lm_eval run``, ``ls``,
``validate``, ``TaskManager()``, ``simple_evaluate``), the finder lets the normal import run and
then hands the fresh module to :func:`lm_eval_ext.boundary.on_harness_import`. A process that
never imports ``lm_eval`` pays one set lookup per import (bench/startup_overhead.py measures it).

- Opt out: ``LM_EVAL_EXT_AUTOLOAD=0`` (the finder is not installed; ``lm-eval-ext run`` and
  ``--include_path "$(lm-eval-ext tasks-dir)"`` still work).
- Fails safe: if the plugin cannot be activated, one warning line goes to stderr and the
  harness goes on without the plugin's tasks and models.
- ``python -S`` / ``-I`` skip ``.pth`` files, and so this hook (docs/architecture.md).

A hand-written finder rather than a post-import-hook library: any import here is paid by every
Python process on the machine.
"""
import os
import sys

WATCHED = frozenset({"lm_eval.tasks.manager", "lm_eval.api.registry"})
OPT_OUT = "LM_EVAL_EXT_AUTOLOAD"
_OFF = ("0", "false", "no", "off")


def _warn_once(err: BaseException) -> None:
    if not _HarnessFinder.warned:
        _HarnessFinder.warned = True
        sys.stderr.write(f"lm-eval-ext: warning: the plugin could not be loaded into lm_eval ({type(err).__name__}: "
                         f"{err}); the harness runs without its tasks and models. Reinstall lm-eval-ext, or set "
                         f"{OPT_OUT}=0 to stop loading it.\n")


class _ActivatingLoader:
    """Runs the real loader, then activates the plugin on the new module."""

    def __init__(self, loader, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        try:
            from lm_eval_ext.boundary import on_harness_import

            on_harness_import(self._name, module)
        except Exception as err:  # noqa: BLE001 -- never break the harness: warn and go on
            _warn_once(err)

    def __getattr__(self, attr):  # get_source, get_resource_reader, ...: the real loader's
        return getattr(self._loader, attr)


class _HarnessFinder:
    """A meta path finder that wraps the loader of the watched modules and of nothing else."""

    warned = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is cls or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ActivatingLoader(spec.loader, name)
                return spec
        return None


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once), unless the user opted out."""
    if os.environ.get(OPT_OUT, "").strip().lower() in _OFF or _HarnessFinder in sys.meta_path:
        return
    sys.meta_path.insert(0, _HarnessFinder)


install()
