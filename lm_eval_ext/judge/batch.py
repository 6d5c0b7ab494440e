"""Batch judging: the judge requests of a run sent through the OpenAI Batch API (``batch: true``).

One round sends every request still needed (the first asks; then the re-asks of replies with no
valid score) as JSONL files of chat-completion requests, split within the API's limits
(``batch_max_requests``, ``batch_max_bytes``): ``files.create``, ``batches.create``, then
``batches.retrieve`` every ``batch_poll`` seconds with a progress bar, and the output and error
files read when the batch ends. A request's ``custom_id`` is its judge-cache key, so every reply goes
into the same cache as a live call's (a rerun sends nothing).

Nothing is paid twice: before a batch is created its request file and sha256 are written to the
state folder (a run's saved-answers folder), and its id right after; a later run (``lm-eval-ext
resume DIR``, or the same command again) looks for a batch already submitted for its requests in
every state folder it is given and collects it instead of submitting a new one. A record whose batch
id was not saved (killed between the two writes) is found again by its input file among the
endpoint's batches. Items a batch reports failed or expired are sent again live (with the client's
retries) and count as judge failures if they still fail. The judge's one ask loop (``runner.Judge``) asks
for every reply, live or batched: :class:`Batched` is its source of replies here.

With ``dry_run`` the request files are written and nothing is sent: they run as they are through
vLLM's offline batch runner (``python -m vllm.entrypoints.openai.run_batch -i FILE -o OUT --model M``),
and ``lm-eval-ext judge collect OUT`` puts its replies into the judge cache.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..atomic_write import atomic_open
from .client import CallBudget, api_key, reply_text
from .config import JudgeConfig, how_to_set
from .errors import JudgeError
from .usage import ItemUsage, reply_usage

log = logging.getLogger(__name__)

ENDPOINT = "/v1/chat/completions"
STATE_FOLDER = "judge_batches"
_DONE = {"completed", "failed", "expired", "cancelled"}


class JudgeBatchError(JudgeError):
    """The batch API refused a batch or a file, or a batch failed as a whole."""


class JudgeBatchDetached(JudgeError):
    """The batches are submitted and saved; judging stops until they are collected (``batch_detach``)."""


def request_lines(requests: dict[str, dict]) -> list[bytes]:
    """One JSONL line (bytes, newline included) per request, keyed by ``custom_id``."""
    return [(json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body}, ensure_ascii=False)
             + "\n").encode("utf-8") for key, body in requests.items()]


def split(lines: list[bytes], max_requests: int, max_bytes: int) -> list[list[bytes]]:
    """The lines in consecutive chunks of at most ``max_requests`` lines and ``max_bytes`` bytes."""
    chunks: list[list[bytes]] = []
    size = 0
    for line in lines:
        if not chunks or len(chunks[-1]) >= max_requests or size + len(line) > max_bytes:
            if len(line) > max_bytes:
                raise JudgeBatchError(f"One judge request is {len(line):,} bytes, more than a batch file may hold "
                                      f"({max_bytes:,}, set with {how_to_set('batch_max_bytes', 'BYTES')}); judge without batch.")
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += len(line)
    return chunks


def read_output(text: str) -> tuple[dict[str, dict], dict[str, str]]:
    """Replies (custom_id -> chat completion) and failures (custom_id -> why) of an output or error file."""
    replies, failures = {}, {}
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        key = record.get("custom_id")
        response = record.get("response") or {}
        body = response.get("body")
        if response.get("status_code") == 200 and isinstance(body, dict) and reply_text(body) is not None:
            replies[key] = body
        else:
            error = record.get("error") or (body or {}).get("error") or {}
            failures[key] = str(error.get("message") or error.get("code") or f"HTTP {response.get('status_code')}")
    return replies, failures


@dataclass
class Outcome:
    """The replies of one round (custom_id -> chat completion) and the requests that got none (-> why)."""

    replies: dict[str, dict]
    failures: dict[str, str]


class BatchRunner:
    """Submits, saves, polls and collects the batches of one judge (module docstring)."""

    def __init__(self, config: JudgeConfig, state_dir: Path, lookup_dirs: list[Path], progress: bool) -> None:
        self.config = config
        self.state_dir = state_dir
        self.lookup_dirs = [state_dir, *(d for d in lookup_dirs if d != state_dir)]
        self.progress = progress
        self._api = None

    # -- the API ------------------------------------------------------------------------------

    def api(self):
        """The openai client for files and batches (no retries of its own: a batch created twice is paid twice)."""
        if self._api is None:
            import openai

            self._api = openai.OpenAI(api_key=api_key(self.config), base_url=self.config.base_url, max_retries=0,
                                      timeout=self.config.timeout)
        return self._api

    def _call(self, what: str, function, *args, **kwargs):
        import openai

        try:
            return function(*args, **kwargs)
        except openai.APIError as err:
            raise JudgeBatchError(
                f"The judge's batch API at {self.config.base_url_host()} failed to {what} ({type(err).__name__}: "
                f"{err}). Batches already submitted are saved in {self.state_dir} and are collected by the next run; "
                f"without the batch API, judge live ({how_to_set('batch', 'false')})."
            ) from None

    # -- saved batches ------------------------------------------------------------------------

    def _records(self) -> list[tuple[Path, dict]]:
        found = []
        for folder in self.lookup_dirs:
            for path in sorted(folder.glob(f"{STATE_FOLDER}/*.json")) if folder.is_dir() else []:
                try:
                    record = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if record.get("endpoint") == self.config.endpoint_id() and not record.get("collected"):
                    found.append((path, record))
        return found

    def _save(self, path: Path, record: dict) -> None:
        with atomic_open(path, "w", encoding="utf-8") as file:
            file.write(json.dumps(record, indent=1))

    # -- one round ----------------------------------------------------------------------------

    def write_files(self, requests: dict[str, dict]) -> list[Path]:
        """Write the request files of ``requests`` (the dry run's output, for vLLM's batch runner)."""
        paths = []
        for chunk in split(request_lines(requests), self.config.batch_max_requests, self.config.batch_max_bytes):
            data = b"".join(chunk)
            path = self.state_dir / STATE_FOLDER / f"requests-{hashlib.sha256(data).hexdigest()[:16]}.jsonl"
            with atomic_open(path) as file:
                file.write(data)
            paths.append(path)
        return paths

    def run(self, requests: dict[str, dict], label: str) -> Outcome:
        """Every reply the batches give for ``requests`` (custom_id -> body): saved batches first, then new ones."""
        outcome = Outcome({}, {})
        wanted = set(requests)
        taken = []
        for path, record in self._records():
            if wanted & set(record["custom_ids"]):
                taken.append((path, record))
                wanted -= set(record["custom_ids"])
        if taken:
            log.info("%s: collecting %d batch(es) submitted before instead of sending their requests again", label,
                     len(taken))
        remaining = {key: body for key, body in requests.items() if key in wanted}
        for chunk in split(request_lines(remaining), self.config.batch_max_requests, self.config.batch_max_bytes):
            taken.append(self._submit(chunk))
        if self.config.batch_detach:
            unfinished = self._unfinished(taken)
            if unfinished:
                raise JudgeBatchDetached(
                    f"The judge's requests are in {len(taken)} batch(es) at {self.config.base_url_host()} "
                    f"({', '.join(unfinished)} not finished yet), saved in {self.state_dir / STATE_FOLDER}. Judging "
                    "stops here (batch_detach); run the same command again, or resume the run, once they are done: "
                    "the finished batches are collected and no request is sent twice.")
        for path, record in taken:
            replies, failures = self._collect(path, record, label)
            outcome.replies.update({k: v for k, v in replies.items() if k in requests})
            outcome.failures.update({k: v for k, v in failures.items() if k in requests})
        for key in requests:
            if key not in outcome.replies and key not in outcome.failures:
                outcome.failures[key] = "the batch gave no reply for it"
        return outcome

    def _submit(self, chunk: list[bytes]) -> tuple[Path, dict]:
        data = b"".join(chunk)
        sha = hashlib.sha256(data).hexdigest()
        folder = self.state_dir / STATE_FOLDER
        request_file = folder / f"requests-{sha[:16]}.jsonl"
        with atomic_open(request_file) as file:
            file.write(data)
        path = folder / f"batch-{sha[:16]}.json"
        record = {"endpoint": self.config.endpoint_id(), "request_file": request_file.name, "sha256": sha,
                  "custom_ids": [json.loads(line)["custom_id"] for line in chunk], "input_file_id": None, "id": None}
        self._save(path, record)  # before anything is paid for
        api = self.api()
        uploaded = self._call("upload a request file", api.files.create, file=(request_file.name, data), purpose="batch")
        record["input_file_id"] = uploaded.id
        self._save(path, record)
        batch = self._call("create a batch", api.batches.create, input_file_id=uploaded.id, endpoint=ENDPOINT,
                           completion_window="24h", metadata={"request_file_sha256": sha})
        record["id"] = batch.id
        self._save(path, record)  # before the first poll
        return path, record

    def _batch_id(self, path: Path, record: dict) -> str | None:
        """The record's batch id; one killed before saving it is found by its input file (None: never created)."""
        if record.get("id"):
            return record["id"]
        if not record.get("input_file_id"):
            return None
        for batch in self._call("list batches", self.api().batches.list, limit=100):
            if batch.input_file_id == record["input_file_id"]:
                record["id"] = batch.id
                self._save(path, record)
                return batch.id
        return None

    def _unfinished(self, taken: list[tuple[Path, dict]]) -> list[str]:
        unfinished = []
        for path, record in taken:
            batch_id = self._batch_id(path, record)
            if batch_id is None:
                continue
            batch = self._call("look at a batch", self.api().batches.retrieve, batch_id)
            if batch.status not in _DONE:
                unfinished.append(f"{batch_id}: {batch.status}")
        return unfinished

    def _collect(self, path: Path, record: dict, label: str) -> tuple[dict, dict]:
        """Poll the record's batch to its end (a progress bar) and read its output and error files."""
        batch_id = self._batch_id(path, record)
        if batch_id is None:  # the process stopped before the batch was created: its requests were never sent
            path.unlink(missing_ok=True)
            return {}, {key: "not submitted" for key in record["custom_ids"]}
        api = self.api()
        bar = tqdm(total=len(record["custom_ids"]), desc=f"judge {label} batch {batch_id}", unit="request",
                   disable=not self.progress, file=sys.stderr)
        try:
            while True:
                batch = self._call("look at a batch", api.batches.retrieve, batch_id)
                counts = batch.request_counts
                if counts is not None:
                    bar.total = counts.total or bar.total
                    bar.n = counts.completed + counts.failed
                    bar.refresh()
                if batch.status in _DONE:
                    break
                time.sleep(self.config.batch_poll)
        finally:
            bar.close()
        replies, failures = {}, {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = self._call("download a batch's results", api.files.content, file_id)
                got, failed = read_output(content.text)
                replies.update(got)
                failures.update(failed)
        for key in record["custom_ids"]:
            if key not in replies and key not in failures:
                failures[key] = f"the batch ended {batch.status}"
        record["collected"] = batch.status
        self._save(path, record)
        return replies, failures


def collect_file(path: Path, config: JudgeConfig) -> tuple[int, int]:
    """Store the replies of a batch output file in the judge cache of ``config``: (stored, without a reply)."""
    from .cache import JudgeCache

    try:
        text = path.read_text(encoding="utf-8")
        replies, failures = read_output(text)
    except (OSError, ValueError) as err:
        raise JudgeBatchError(f"Cannot read the batch output file {path} ({err}): give the output file of a batch "
                              "(JSONL, one reply per line, as OpenAI's batch API and vLLM's run_batch write).") from None
    cache = JudgeCache(config.cache_path())
    try:
        for key, reply in replies.items():
            cache.put(key, reply_text(reply), str(reply.get("model", "")))
    finally:
        cache.close()
    return len(replies), len(failures)


class Batched:
    """The judge's replies from the batch API (``runner.Judge``'s ask loop awaits :meth:`reply` for each ask).

    Once every prompt still without a verdict is waiting for a reply, their requests go as one round
    (:meth:`BatchRunner.run`): the first asks, then the re-asks of replies with no valid score. A request the
    batch failed or let expire is sent once more live (``live``: ``runner.Live``, with the client's retries).
    Each request sent in a batch counts against ``budget``.
    """

    batch = True

    def __init__(self, batches: BatchRunner, live, budget: CallBudget, prompts: int, label: str) -> None:
        self._batches = batches
        self._live = live
        self._budget = budget
        self._active = prompts  # prompts without a verdict yet
        self._label = label
        self._waiting: dict[str, tuple[dict, asyncio.Future]] = {}
        self._failures: dict[str, str] = {}  # why the batch gave no reply, by request key

    def slot(self) -> contextlib.AbstractAsyncContextManager:
        """A prompt waits for its batches without a slot (its live retry takes one of the live source's)."""
        return contextlib.nullcontext()

    def done(self) -> None:
        """A prompt has its verdict (or stopped): the others may be all that a round waits for."""
        self._active -= 1
        self._send_round()

    async def reply(self, key: str, request: dict, usage: ItemUsage) -> str:
        """The reply text to ``request`` from its round's batch, else from a live retry (tokens added to ``usage``)."""
        self._budget.take()
        future = asyncio.get_running_loop().create_future()
        self._waiting[key] = (request, future)
        self._send_round()
        reply = await future
        if reply is not None:
            usage.add(reply_usage(reply), batch=True)
            return self._live.client.redact(reply_text(reply))
        async with self._live.slot():
            return await self._live.reply(key, request, usage)

    def detail(self, key: str, exc: Exception) -> str:
        """What a judge failure of the request ``key`` records: why the batch, then the live retry, failed."""
        return f"batch: {self._failures.get(key)}; live: {exc}"

    def _send_round(self) -> None:
        """Send the round once every prompt without a verdict waits for it; each waiting ask gets its batch's reply
        (None: failed in its batch) or the round's error (e.g. the batches were detached)."""
        if not self._waiting or len(self._waiting) < self._active:
            return
        round_, self._waiting = self._waiting, {}
        try:  # blocks the event loop: every prompt is waiting for this round
            outcome = self._batches.run({key: body for key, (body, _) in round_.items()}, self._label)
        except Exception as exc:
            for _, future in round_.values():
                future.set_exception(exc)
            return
        if outcome.replies:  # the judge answered: a live retry that fails is that item's failure, not a dead judge
            self._live.client.reached, self._live.client.last_reply = True, time.monotonic()
        self._failures.update(outcome.failures)
        for key, (_, future) in round_.items():
            future.set_result(outcome.replies.get(key))
