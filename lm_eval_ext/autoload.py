"""What the start-up hook does once the harness is imported: activate the plugin on the fresh module.

The hook itself (lm_eval_ext/startup_hook.py, run by the ``lm_eval_ext_autoload.pth`` line at
every interpreter start) imports nothing of the plugin; when the harness imports its task
manager or its table of built-in models, the hook calls :func:`find_spec` here, which lets the normal
import run and then hands the module to :func:`lm_eval_ext.boundary.on_harness_import`.

- Opt out: ``LM_EVAL_EXT_AUTOLOAD=0`` (the hook installs no finder; ``lm-eval-ext run`` and
  ``--include_path "$(lm-eval-ext tasks-dir)"`` still work).
- Fails safe: if the plugin cannot be activated, one warning line goes to stderr and the
  harness goes on without the plugin's tasks and models.
- ``python -S`` / ``-I`` skip ``.pth`` files, and so this hook (docs/architecture.md).

A hand-written finder rather than a post-import-hook library: the hook's code is paid by every
Python process on the machine.
"""
import sys

OPT_OUT = "LM_EVAL_EXT_AUTOLOAD"
_warned = False


def _warn_once(err: BaseException) -> None:
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(f"lm-eval-ext: warning: the plugin could not be loaded into lm_eval ({type(err).__name__}: "
                         f"{err}); the harness runs without its tasks and models. Reinstall lm-eval-ext, or set "
                         f"{OPT_OUT}=0 to stop loading it.\n")


class _ActivatingLoader:
    """Runs the real loader, then activates the plugin on the new module."""

    def __init__(self, loader, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, found):
        return self._loader.create_module(found)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        try:
            from lm_eval_ext.boundary import on_harness_import

            on_harness_import(self._name, module)
        except Exception as err:  # noqa: BLE001 -- never break the harness: warn and go on
            _warn_once(err)

    def __getattr__(self, attr):  # get_source, get_resource_reader, ...: the real loader's
        return getattr(self._loader, attr)


def find_spec(hook, name, path=None, target=None):
    """What the other finders return for ``name``, its loader wrapped to activate the plugin once the module ran."""
    for finder in sys.meta_path:
        if finder is hook or not hasattr(finder, "find_spec"):
            continue
        found = finder.find_spec(name, path, target)
        if found is not None:
            if found.loader is not None and hasattr(found.loader, "exec_module"):
                found.loader = _ActivatingLoader(found.loader, name)
            return found
    return None
