"""The model's answers, saved before they are scored, so that a failed or interrupted scoring stage loses nothing.

Every plugin task writes its raw responses (``Instance.resps``, what the model returned) to
``<answers dir>/<run id>/<task>.jsonl`` (``<task>.rank<r>.jsonl`` in a multi-process run)
right after generation, before the first task's filters run (the judge, the SQL sandbox;
``ExtTask.save_answers``). The first line
is a header: the command that started the run, the task, the time, the rank and, in a run with
``--apply_chat_template``, ``chat`` (:class:`ChatPrompts`: what the model gave the harness for the chat
template); then one line per request: ``doc_id``, ``idx``, the request type and the responses.

``lm-eval-ext resume DIR`` reruns that command with the ``ext-replay`` model, which answers every
request from the saved responses (lm_eval_ext/models/replay.py): scoring runs again, finished
judge verdicts come from the judge's cache, and the harness writes the same results files.

The answers dir is ``--metadata '{"answers_dir": "DIR"}'`` when given, else ``answers/`` in the plugin's
cache (``$LM_EVAL_EXT_CACHE_DIR``, default ``~/.cache/lm_eval_ext``). ``lm-eval-ext run`` removes
a run's answers once its results are written; runs of the plain ``lm_eval`` command keep them.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .atomic_write import atomic_open
from .boundary import chat_template_of, stored_prompt
from .errors import UserError, metadata_arg

FORMAT = 1
METADATA_KEY = "answers_dir"
_RUN_ID = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"  # one process, one run
_SAVED: dict[Path, list[str]] = {}  # run directory -> the tasks whose answers this process saved there


class SavedAnswersError(UserError):
    """Saved answers cannot be written or read."""


def answers_root(metadata: dict) -> Path:
    """Where runs keep their answers: ``--metadata answers_dir``, else the cache's ``answers/``."""
    from .data.config import cache_dir

    given = metadata.get(METADATA_KEY)
    return Path(str(given)).expanduser() if given else cache_dir() / "answers"


def run_dir(metadata: dict) -> Path:
    """This process's run directory under :func:`answers_root`."""
    return answers_root(metadata) / _RUN_ID


def chat_key(chat_history: list[dict], add_generation_prompt: bool) -> str:
    """What identifies one call of a model's ``apply_chat_template``: the sha256 of its arguments."""
    data = json.dumps([chat_history, add_generation_prompt], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class ChatPrompts:
    """A model's chat template, recorded for replay while one task builds its requests.

    A replayed run (lm_eval_ext/models/replay.py) must build the prompts the run did, byte for byte: the
    task's length checks, the sample logs and the harness's task hashes read them, and the results record
    the chat template. So the task renders every chat through this object, which calls the model's
    ``apply_chat_template`` and keeps each prompt it returned (by :func:`chat_key`), and keeps the model's
    ``tokenizer_name`` and chat template; :func:`save` writes them in the header.
    """

    def __init__(self, render, tokenizer_name: str) -> None:
        self.render, self.tokenizer_name = render, tokenizer_name
        self.prompts: dict[str, dict] = {}
        try:
            self.template = {"chat_template": chat_template_of(render)}
        except (ValueError, AttributeError):
            # several named templates and none the default (the one the run named is not known here), or an
            # apply_chat_template that is not the model's method: left out, and a replay says so
            self.template = {}

    def __call__(self, chat_history: list[dict], add_generation_prompt: bool = True):
        """The model's prompt for ``chat_history``, kept for the replay."""
        prompt = self.render(chat_history, add_generation_prompt=add_generation_prompt)
        stored = stored_prompt(prompt)
        if stored is not None:
            self.prompts[chat_key(chat_history, add_generation_prompt)] = stored
        return prompt

    def record(self) -> dict:
        """The header's ``chat``: ``tokenizer_name``, ``chat_template`` (left out when unknown), ``prompts``."""
        return {"tokenizer_name": self.tokenizer_name, **self.template, "prompts": self.prompts}


def save(folder: Path, task: str, instances: Iterable, rank: int = 0, world_size: int = 1,
         chat: ChatPrompts | None = None) -> Path:
    """Write the responses of ``instances`` (one task's requests) to ``folder``, with the prompts ``chat`` recorded
    when the run applied a chat template; returns the file."""
    name = f"{task}.jsonl" if world_size == 1 else f"{task}.rank{rank}.jsonl"
    path = folder / name
    header = {"format": FORMAT, "task": task, "command": list(sys.argv), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "rank": rank, "world_size": world_size}
    if chat is not None:
        header["chat"] = chat.record()
    try:
        with atomic_open(path, "w", encoding="utf-8") as out:
            out.write(json.dumps(header, ensure_ascii=False) + "\n")
            for instance in instances:
                out.write(json.dumps({"doc_id": instance.doc_id, "idx": instance.idx, "type": instance.request_type,
                                      "resps": instance.resps}, ensure_ascii=False) + "\n")
        _SAVED.setdefault(folder, []).append(task)
    except OSError as err:
        raise SavedAnswersError(
            f"The answers of {task} could not be saved to {path} before scoring ({err.strerror or err}). Free some "
            f"space or give a writable directory with {metadata_arg(**{METADATA_KEY: 'DIR'})}; nothing was scored.") from None
    return path


def saved_by_this_process() -> dict[Path, list[str]]:
    """The run directories this process saved answers in (and still on disk), with their tasks."""
    return {folder: tasks for folder, tasks in _SAVED.items() if folder.is_dir()}


@dataclass(frozen=True)
class SavedRun:
    """The saved answers of one run: its command, per task the responses by (doc_id, idx) and, for a run with a
    chat template, what the model gave for it (:meth:`ChatPrompts.record`, every task's prompts together)."""

    folder: Path
    command: list[str]
    responses: dict[str, dict[tuple[int, int], list]]
    chat: dict | None = None

    @property
    def tasks(self) -> list[str]:
        """The tasks whose answers were saved, in file order."""
        return list(self.responses)

    def run_args(self):
        """The saved command's ``lm_eval run`` flags, parsed as the harness parses them (None when the run was
        not started by ``lm_eval`` or ``lm-eval-ext``: the Python API)."""
        from .boundary import parse_run_args

        program = Path(self.command[0]).name if self.command else ""
        if program not in ("lm_eval", "lm-eval", "lm-eval-ext", "__main__.py"):
            return None
        flags = self.command[1:]
        return parse_run_args(flags[1:] if flags[:1] == ["run"] else flags)


def load(folder: str | Path) -> SavedRun:
    """Read a run directory written by :func:`save` (every task and rank)."""
    folder = Path(folder)
    if not folder.exists():
        raise SavedAnswersError(f"{folder} does not exist. A run's saved answers are removed once its results are "
                                "written (by `lm-eval-ext run`, or by `lm-eval-ext resume`, whose last message names a "
                                "new directory when some answers are left to judge). Check the path.")
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        raise SavedAnswersError(f"{folder} holds no saved answers (a run directory holds <task>.jsonl files written "
                                "before scoring; the run's log names it). Check the path.")
    command: list[str] | None = None
    responses: dict[str, dict[tuple[int, int], list]] = {}
    chat: dict | None = None
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            header = json.loads(lines[0])
            records = [json.loads(line) for line in lines[1:]]
        except (OSError, ValueError, IndexError) as err:
            raise SavedAnswersError(f"Cannot read the saved answers {path}: {err}. The file is damaged; the run's "
                                    "answers cannot be replayed from it.") from None
        if header.get("format") != FORMAT:
            raise SavedAnswersError(f"{path} is not a saved-answers file of this lm-eval-ext version (format "
                                    f"{header.get('format')!r}, expected {FORMAT}).")
        if command is not None and header["command"] != command:
            raise SavedAnswersError(f"{folder} mixes the answers of different runs ({path.name} has another "
                                    "command); give the directory of one run.")
        command = header["command"]
        if "chat" in header:
            chat = {**header["chat"], "prompts": {**(chat or {}).get("prompts", {}), **header["chat"]["prompts"]}}
        task = responses.setdefault(header["task"], {})
        for record in records:
            task[record["doc_id"], record["idx"]] = record["resps"]
    return SavedRun(folder=folder, command=command or [], responses=responses, chat=chat)
