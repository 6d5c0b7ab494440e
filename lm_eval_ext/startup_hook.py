"""The code of the start-up hook's ``.pth`` line: setup.py writes it into ``lm_eval_ext_autoload.pth``.

Python runs a ``.pth`` line that starts with ``import`` at every interpreter start. So this code
imports nothing the interpreter has not loaded already (``os``, ``sys``) and nothing of the
plugin: it puts a finder at the front of ``sys.meta_path`` that answers only for the harness's
task manager and its table of built-in models. Only when one of them is imported (``lm_eval run``,
``ls``, ``validate``, ``TaskManager()``, ``simple_evaluate``, the first model looked up by name)
does it import :mod:`lm_eval_ext.autoload`, which lets the normal import run and then activates
the plugin (``import lm_eval`` and ``import lm_eval.api.registry`` import neither). A process
that never imports ``lm_eval`` pays for this code and one set lookup per import (bench/startup_overhead.py).

Never imported as a module: the ``.pth`` line runs this source. Opt out with
``LM_EVAL_EXT_AUTOLOAD=0``; if the plugin cannot be imported, one warning line, and the harness
goes on without it.
"""
import os
import sys


class LmEvalExtStartupHook:
    """A meta path finder for the two watched modules; the work is :func:`lm_eval_ext.autoload.find_spec`'s."""

    watched = frozenset({"lm_eval.tasks.manager", "lm_eval.models"})
    warned = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in cls.watched:
            return None
        try:
            from lm_eval_ext.autoload import find_spec
        except Exception as err:  # noqa: BLE001 -- never break the harness: warn once and go on
            if not cls.warned:
                cls.warned = True
                sys.stderr.write(f"lm-eval-ext: warning: the plugin could not be loaded into lm_eval "
                                 f"({type(err).__name__}: {err}); the harness runs without its tasks and models. "
                                 "Reinstall lm-eval-ext, or set LM_EVAL_EXT_AUTOLOAD=0 to stop loading it.\n")
            return None
        return find_spec(cls, name, path, target)


if os.environ.get("LM_EVAL_EXT_AUTOLOAD", "").strip().lower() not in ("0", "false", "no", "off") and not any(
        getattr(finder, "__name__", None) == LmEvalExtStartupHook.__name__ for finder in sys.meta_path):
    sys.meta_path.insert(0, LmEvalExtStartupHook)
