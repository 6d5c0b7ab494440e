"""The commands of ``lm-eval-ext``: one module per command group, named for it.

``run``, ``check`` and ``resume`` (with ``preflight``, the checks made before the model is loaded),
``tasks_dir``, ``data``, ``elitr`` (with ``seeds``, the paper's seed protocol), ``judge`` (also the
``--judge-*`` flags that ``check`` and ``elitr`` take), ``report``, ``export``, ``leaderboard`` and ``lieder``;
:mod:`lm_eval_ext.cli` assembles them. They sit above everything else: they may import any package of the
plugin, and only the command line imports them.
"""
