"""``python -m doubles lm_eval ARGS...`` or ``python -m doubles lm-eval-ext ARGS...``: the command, in this
process, with the test doubles registered (they are not installed with the plugin).

The commands run exactly as their console scripts do (``lm_eval.__main__.cli_evaluate``,
``lm_eval_ext.cli.main``), with ``sys.argv[0]`` the command's name.
"""
import sys

from doubles import register

COMMANDS = ("lm_eval", "lm-eval-ext")


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python -m doubles {{{','.join(COMMANDS)}}} ARGS...")
    register()
    sys.argv = sys.argv[1:]
    if sys.argv[0] == "lm_eval":
        from lm_eval.__main__ import cli_evaluate

        cli_evaluate()
    else:
        from lm_eval_ext.cli import main as lm_eval_ext

        sys.exit(lm_eval_ext())


main()
