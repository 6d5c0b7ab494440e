"""``lm-eval-ext tasks-dir``: where the plugin's task YAMLs are, for ``lm_eval --include_path``."""
from __future__ import annotations

import argparse


def add_tasks_dir_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``tasks-dir`` to a CLI's subparsers."""
    tasks = subparsers.add_parser("tasks-dir", help="print the directory holding the plugin's task YAMLs "
                                  "(for --include_path)")
    tasks.set_defaults(func=tasks_dir_command)
    return tasks


def tasks_dir_command(_args: argparse.Namespace) -> int:
    """``lm-eval-ext tasks-dir``."""
    from ..paths import tasks_dir

    print(tasks_dir())
    return 0
