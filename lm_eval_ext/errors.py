"""The base class of errors a user can cause (bad arguments, missing data, unreachable services), and the
wording their advice shares.

``lm-eval-ext`` prints such an error as one paragraph instead of a traceback.
"""
import difflib
import json
import shlex
from collections.abc import Iterable, Sequence


# the spellings of true and false an option accepts, in any case (a JSON boolean too)
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


class UserError(Exception):
    """An error whose message tells the user what went wrong, where, and what to do."""


def truth_value(value: object) -> bool | None:
    """``value`` as a boolean: a bool, or 1/0, true/false, yes/no, on/off in any case; None when it is none of
    them (the caller says which option and what to give)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return text in _TRUE if text in _TRUE | _FALSE else None


def metadata_arg(**options: object) -> str:
    """The ``--metadata`` argument that sets ``options``, in the JSON form every supported harness version
    reads (lm-eval 0.4.12 and 0.5 read no ``key=value``): ``metadata_arg(overflow="truncate")`` is
    ``--metadata '{"overflow": "truncate"}'``, quoted for a POSIX shell."""
    return f"--metadata {shlex.quote(json.dumps(options))}"


def misspelled_key(given: Iterable[str], options: Sequence[str], prefix: str = "") -> tuple[str, str | None] | None:
    """The first of the keys ``given`` that is none of ``options`` but can only be meant as one (ignored, it would
    leave that option at its default), with the option it is closest to (None when none is): a key so close to an
    option that it can only be a misspelling of it, or any key starting with ``prefix``, a name space the options
    own. None when there is none: other keys are let be (``--metadata`` also holds the model's arguments and the
    user's own keys)."""
    for key in sorted(set(given) - set(options)):
        close = difflib.get_close_matches(key, options, n=1, cutoff=0.8)
        if close or (prefix and key.startswith(prefix)):
            return key, close[0] if close else None
    return None
