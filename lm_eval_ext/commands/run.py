"""``lm-eval-ext run``: the harness's ``lm_eval run``, plus what a plugin can only do before the harness starts.

Every flag of ``lm_eval run`` keeps its meaning and the harness's own command does the run
(``lm_eval.__main__.cli_evaluate``). Before it starts, this command

- activates the plugin even where the start-up hook is off (``LM_EVAL_EXT_AUTOLOAD=0``, ``python -S``);
- indexes only the plugin's tasks when only plugin tasks are asked for (the harness otherwise
  reads its ~14,700 built-in task configs on every run).
"""
from __future__ import annotations

import sys

from .. import boundary


def requested_tasks(args) -> list[str]:
    """The task, group and tag names given with ``--tasks`` (comma-separated or repeated)."""
    return [name for item in (args.tasks or []) for name in str(item).split(",") if name]


def main(argv: list[str]) -> int:
    """Run the harness with ``argv`` (everything after ``lm-eval-ext run``)."""
    from lm_eval.__main__ import cli_evaluate

    boundary.activate()
    args = boundary.parse_run_args(argv)
    requested = requested_tasks(args)
    if requested and not args.include_path and not getattr(args, "config", None):
        plugin_names = boundary.task_index(include_defaults=False)
        boundary.index_builtin_tasks(not set(requested) <= set(plugin_names))
    sys.argv = ["lm_eval", "run", *argv]
    cli_evaluate()
    return 0
