"""The harness task for ELITR-Bench: one document per question, its answer judged 1-10.

Used from the task YAMLs as ``class: !function lm_eval_ext.elitr.task.ElitrTask`` and
``custom_dataset: !function lm_eval_ext.elitr.task.load_dataset``.

Single-turn (``mode: st``): each question gets a fresh prompt (the authors' template with the
transcript, four newlines, the question), rendered with the model's chat template under
``--apply_chat_template`` and used raw otherwise. Multi-turn (``mode: mt``): each question is
turn k of its meeting's conversation, an ``ext_conversation`` request that any harness model
answers turn by turn, each turn seeing the model's own earlier answers (lm_eval_ext.conversation);
each rank takes whole meetings, so a conversation is never split across processes.

Task options (``--metadata '{"key": value}'``): ``qa_markers=true`` (``QUESTION: ... ANSWER:``),
``overflow=error|truncate`` (a prompt longer than the model's context: stop before generating,
or cut the middle of its transcript and count it in ``prompts_truncated``), ``elitr_corpus=DIR``
(transcripts from your copy of the ELITR corpus), and the judge's ``judge_*`` options
(docs/judge.md).
"""
from __future__ import annotations

import copy
import logging

import datasets
from lm_eval.api.metrics import mean

from ..conversation import OVERFLOW_POLICIES, Turn, render, turn_messages
from ..errors import UserError, metadata_arg, truth_value
from ..judge.harness import GENERATION_KEY, JudgedTask, judge_output, judge_result
from ..prompt_length import LengthCheckError, PromptTooLongError, lines_lost, resolve_budget, shorten_middle
from .data import build_documents
from .metrics import SUBSET_METRICS, question_metrics
from .prompts import answer_template, format_question, user_messages

log = logging.getLogger(__name__)

MODES = ("st", "mt")
FIX = ("Use a model with a longer context (or give its real length with max_length=N in --model_args), lower "
       f"max_gen_toks (--gen_kwargs max_gen_toks=N), or pass {metadata_arg(overflow='truncate')} to cut the middle of "
       "the transcript of the prompts that do not fit (they are counted in `prompts_truncated`).")


class ElitrOptionError(UserError):
    """An ELITR-Bench task option has a wrong value, or the task cannot run this way."""


def load_dataset(question_set: str, split: str, language: str, mode: str, elitr_corpus: str | None = None,
                 **_metadata) -> dict[str, datasets.Dataset]:
    """The questions (split ``test``, one document per question) and the transcripts (split ``transcripts``)."""
    docs, transcripts = build_documents(question_set, split, language, corpus=elitr_corpus)
    return {
        "test": datasets.Dataset.from_list(docs),
        "transcripts": datasets.Dataset.from_list([{"meeting": t.meeting, "text": t.text, "source": t.source}
                                                   for t in transcripts]),
    }


def _flag(value, name: str) -> bool:
    if (truth := truth_value(value)) is not None:
        return truth
    raise ElitrOptionError(f"ELITR-Bench option {name}={value!r} must be true or false.")


def _key(doc: dict) -> tuple[str, str]:
    return doc["meeting"], doc["question_id"]


class ElitrTask(JudgedTask):
    """Builds single-turn prompts or multi-turn conversation requests; scores the judged answers."""

    BENCHMARK, OPTIONS = "ELITR-Bench", ("qa_markers", "overflow", "elitr_corpus")  # the judge's: judge_...

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        # Options are checked before the data is loaded.
        name, settings = (config or {}).get("task"), (config or {}).get("dataset_kwargs") or {}
        self.mode, self.language = settings.get("mode"), settings.get("language")
        if self.mode not in MODES:
            raise ElitrOptionError(f"{name}: mode must be st or mt, not {self.mode!r}.")
        if self.mode == "st" and settings.get("question_set") == "conv":
            raise ElitrOptionError(f"{name}: the Conv set is multi-turn only (some questions refer to earlier "
                                   "ones); use mode mt.")
        metadata = (config or {}).get("metadata") or {}
        self.qa_markers = _flag(metadata.get("qa_markers", False), "qa_markers")
        self.overflow = str(metadata.get("overflow", "error"))
        if self.overflow not in OVERFLOW_POLICIES:
            raise ElitrOptionError(f"ELITR-Bench option overflow={self.overflow!r}: use error (stop on a prompt "
                                   "longer than the model's context) or truncate (cut the middle of its transcript).")
        self._dropped: dict[tuple[str, str], int] = {}
        super().__init__(config=config, **kwargs)
        self.template = answer_template(self.language)
        self.transcripts = {row["meeting"]: row["text"] for row in self.dataset["transcripts"]}
        self.questions: dict[str, list[str]] = {}
        for doc in self.task_docs:
            self.questions.setdefault(doc["meeting"], []).append(doc["question"])
        try:
            self.budget = resolve_budget(self.config.metadata or {})
        except LengthCheckError as err:
            raise ElitrOptionError(f"ELITR-Bench: {err}") from None

    @property
    def conversation(self) -> bool:
        """Multi-turn tasks send conversation turns."""
        return self.mode == "mt"

    def subset_metrics(self) -> dict:
        """Scores by question type and answer position, and on the differentiating questions."""
        return dict.fromkeys(SUBSET_METRICS, (mean, True))

    # -- documents on ranks -------------------------------------------------------------------

    def rank_documents(self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples=None):
        """The documents this rank generates: multi-turn splits by meeting (a conversation stays on one rank)."""
        if self.mode == "st" or world_size == 1:
            return super().rank_documents(rank=rank, limit=limit, world_size=world_size, samples=samples)
        # the same documents as one process would take (limit / samples), whole meetings per rank
        chosen = list(super().rank_documents(rank=0, limit=limit, world_size=1, samples=samples))
        meetings = list(dict.fromkeys(doc["meeting"] for _, doc in chosen))
        if len(meetings) < world_size:
            raise ElitrOptionError(
                f"{self.config.task}: the selected questions come from {len(meetings)} meeting(s), which cannot be "
                f"shared among {world_size} processes: each process takes whole meetings, so that a conversation is "
                f"never split. Run it with at most {len(meetings)} processes, or select more meetings.")
        mine = set(meetings[rank::world_size])
        return iter([(doc_id, doc) for doc_id, doc in chosen if doc["meeting"] in mine])

    # -- prompts ------------------------------------------------------------------------------

    def doc_to_text(self, doc, doc_to_text=None) -> str:
        """The question as asked (what ``--write_out`` shows as text); requests carry the full prompt."""
        return format_question(doc["question"], self.qa_markers)

    def doc_to_target(self, doc, doc_to_target=None) -> str:
        """The reference answer (the judge compares the answer with it)."""
        return doc["reference"]

    def fewshot_context(self, doc, num_fewshot, system_instruction=None, apply_chat_template=False,
                        fewshot_as_multiturn=False, chat_template=None, gen_prefix=None):
        """The single-turn prompt, or the multi-turn request's turn (zero-shot: ``num_fewshot`` is 0)."""
        chat = chat_template if apply_chat_template else None
        questions = self.questions[doc["meeting"]][: doc["turn"]] if self.mode == "mt" else [doc["question"]]
        first, user = user_messages(self.template, self.transcripts[doc["meeting"]], questions, self.qa_markers)
        if self.mode == "mt":
            return Turn(conversation=f"{self.config.task}/{doc['meeting']}", turn=doc["turn"], user=tuple(user),
                        system=system_instruction, chat=chat is not None, overflow=self.overflow,
                        document=(first.transcript_start, first.transcript_end),
                        length=self.budget.settings if self.budget else (), too_long_help=FIX).to_request()
        return render(turn_messages(system_instruction, user, []), chat)

    def construct_requests(self, doc: dict, ctx, **kwargs):
        """A ``generate_until`` request (single-turn), or the turn's conversation request (multi-turn)."""
        if self.mode == "mt":
            return self.conversation_request(doc, ctx, copy.deepcopy(self.config.generation_kwargs), **kwargs)
        return super().construct_requests(doc, ctx, **kwargs)

    def length_problem(self, docs: list[dict], gen_kwargs: dict) -> str | None:
        """Under ``overflow=error``: a paragraph when a prompt cannot fit, so the run would stop: a single-turn
        prompt, or a conversation's first turn (its transcript and first question, which every later turn holds)."""
        if self.budget is None or self.overflow != "error" or not docs:
            return None
        if self.mode == "mt":  # (what, meeting, question)
            asked = [(f"the conversation on {meeting}", meeting, self.questions[meeting][0])
                     for meeting in dict.fromkeys(doc["meeting"] for doc in docs)]
        else:
            asked = [(f"{doc['meeting']} question {doc['question_id']}", doc["meeting"], doc["question"])
                     for doc in docs]
        prompts = [render(turn_messages(None, user_messages(self.template, self.transcripts[meeting], [question],
                                                            self.qa_markers)[1], []), None)
                   for _, meeting, question in asked]
        verdicts = self.budget.verdicts([(prompt, gen_kwargs) for prompt in prompts])
        too_long = [(verdict.prompt_tokens, what) for verdict, (what, _, _) in zip(verdicts, asked, strict=True)
                    if not verdict.fits]
        if not too_long:
            return None
        tokens, longest = max(too_long)
        which = ("the first turn of {} of {} conversations (the transcript and the first question, which every later "
                 "turn holds) does" if self.mode == "mt" else "{} of {} prompts do").format(len(too_long), len(asked))
        return (f"{self.config.task}: {which} not fit the {self.budget.describe()}, with "
                f"max_gen_toks={verdicts[0].max_gen_toks} reserved for the answer; measured without a chat template or "
                f"a system instruction, which only lengthen them. The longest, {longest}, has {tokens} tokens. {FIX}")

    def review_requests(self, instances, chat_template=None, system_instruction=None) -> None:
        """Single-turn: measure every prompt before any is sent; stop, or shorten its transcript (``overflow``)."""
        self._dropped = {}
        if self.budget is None:
            reason = self.record_lengths_unchecked()
            log.warning("%s: prompt lengths are NOT checked (%s); a model adapter may cut a long prompt's start, a "
                        "server may refuse it. Give max_length=N (and tokenizer=NAME if the model arguments name "
                        "none) to check them.", self.config.task, reason)
            return
        self.record_run_info(prompt_length=f"{self.budget.describe()}; too long: {self.overflow}")
        if self.mode == "mt":
            return
        verdicts = self.budget.verdicts([(i.args[0], i.args[1]) for i in instances])
        log.info("%s: %d of %d prompts fit the %s", self.config.task, sum(v.fits for v in verdicts), len(verdicts),
                 self.budget.describe())
        for instance, verdict in zip(instances, verdicts, strict=True):
            if verdict.fits:
                continue
            doc, gen_kwargs = instance.doc, instance.args[1]
            where = f"{self.config.task}: the prompt of {doc['meeting']} question {doc['question_id']}"
            if self.overflow != "truncate":
                raise PromptTooLongError(
                    f"{where} has {verdict.prompt_tokens} tokens; with max_gen_toks={verdict.max_gen_toks} it does "
                    f"not fit the {self.budget.describe()}. Nothing was generated. {FIX}")
            first, user = user_messages(self.template, self.transcripts[doc["meeting"]], [doc["question"]],
                                        self.qa_markers)

            def prompt_with(transcript: str, first=first, user=user) -> str:
                messages = turn_messages(system_instruction, [first.with_transcript(transcript), *user[1:]], [])
                return render(messages, chat_template)

            transcript, dropped = shorten_middle(
                first.transcript, lambda t: self.budget.verdicts([(prompt_with(t), gen_kwargs)])[0].fits, what=where)
            instance.arguments = (prompt_with(transcript), gen_kwargs)
            self._dropped[_key(doc)] = dropped
        if self._dropped:
            log.warning("%s: %d of %d prompts did not fit the %s; %s, each counted in prompts_truncated",
                        self.config.task, len(self._dropped), len(verdicts), self.budget.describe(),
                        lines_lost(list(self._dropped.values())))

    # -- scoring ------------------------------------------------------------------------------

    def document_metrics(self, doc: dict, results: list) -> dict:
        """The question's metrics (lm_eval_ext.elitr.metrics) from its judge result."""
        (filtered,) = results
        judged = judge_result(filtered)
        generation = judge_output(filtered).get(GENERATION_KEY, {})
        dropped = generation.get("truncated_lines", 0) if self.mode == "mt" else self._dropped.get(_key(doc), 0)
        return question_metrics(doc, judged.score if judged.scored else None, judged.failed, truncated=dropped > 0)

