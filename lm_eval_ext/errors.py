"""The base class of errors a user can cause (bad arguments, missing data, unreachable services), and the
wording their advice shares.

``lm-eval-ext`` prints such an error as one paragraph instead of a traceback.
"""
import json
import shlex


class UserError(Exception):
    """An error whose message tells the user what went wrong, where, and what to do."""


def metadata_arg(**options: object) -> str:
    """The ``--metadata`` argument that sets ``options``, in the JSON form every supported harness version
    reads (lm-eval 0.4.12 and 0.5 read no ``key=value``): ``metadata_arg(overflow="truncate")`` is
    ``--metadata '{"overflow": "truncate"}'``, quoted for a POSIX shell."""
    return f"--metadata {shlex.quote(json.dumps(options))}"
