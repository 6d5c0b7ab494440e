"""The paragraph for ``lm_eval run`` flags the harness cannot read.

lm-eval 0.4.12 and 0.5.0.dev1 split a ``key=value`` flag (``--model_args``, ``--gen_kwargs``,
``--metadata``, ...) at every comma, so a value holding one (``suppress_tokens=[0,1]``) ends in a
``ValueError`` traceback that names neither the flag nor the way out; 0.4.13 splits outside brackets
and quotes. :func:`unreadable_flags` names the flag and gives the same arguments as JSON, which every
supported harness reads whole.
"""
from __future__ import annotations

import json
import shlex

from .. import boundary
from ..errors import UserError


class FlagsError(UserError):
    """The harness could not read the run's flags."""


def unreadable_flags(argv: list[str], err: ValueError) -> FlagsError:
    """The error for ``err``, raised by the harness while parsing the flags ``argv`` of ``lm_eval run``."""
    version = boundary.harness_version()
    for flag, value in _flag_values(argv):
        if value.lstrip().startswith("{") or all("=" in part for part in value.split(",")):
            continue
        items = _split_outside_brackets(value)
        keyless = [item for item in items if "=" not in item]
        if keyless:
            return FlagsError(f"{flag} {value}: {keyless[0]!r} is not key=value. Give each argument as key=value "
                              "(see `lm_eval run --help`).")
        as_json = json.dumps(dict(_key_value(item) for item in items))
        part = next(p for p in value.split(",") if "=" not in p)
        return FlagsError(f"{flag} {value}: lm-eval {version} splits a key=value argument at every comma, so the "
                          f"part {part!r} has no key. Give the argument as JSON, which it reads whole: "
                          f"{flag} {shlex.quote(as_json)}")
    return FlagsError(f"The run's flags could not be read: lm-eval {version} raised ValueError: {err}. "
                      "See `lm_eval run --help`.")


def _flag_values(argv: list[str]):
    """(flag, value) for each value given to a key=value flag in ``argv`` (``--flag=value`` or ``--flag v1 v2``)."""
    flag = None
    for token in argv:
        if token.startswith("--"):
            flag, _, value = token.partition("=")
            if not _key_value_flag(flag):
                flag = None
            elif value:
                yield flag, value
        elif flag is not None:
            yield flag, token


def _key_value_flag(flag: str) -> bool:
    """Whether the harness reads ``flag`` as key=value arguments (--model_args, --gen_kwargs, --wandb_args, ...)."""
    return flag.endswith(("_args", "_kwargs")) or flag == "--metadata"


def _split_outside_brackets(value: str) -> list[str]:
    """``value`` split at the commas outside brackets and quotes."""
    parts, depth, quote, current = [], 0, None, ""
    for char in value:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[({":
            depth += 1
        elif char in "])}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    return [*parts, current]


def _key_value(item: str) -> tuple[str, object]:
    """``key=value`` as the harness reads it (``do_sample=false``: False, not the truthy text "false")."""
    key, _, text = item.partition("=")
    return key.strip(), boundary.read_flag_value(text.strip())
