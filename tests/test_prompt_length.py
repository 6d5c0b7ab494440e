"""The fast prompt-length check (sums of pieces) decides exactly as tokenizing every whole prompt does.

Real Lost in the Middle prompts (the mirror's 20-document file, every gold position) are measured
both ways with two tokenizers built offline: the tiny model's byte-level BPE and a SentencePiece-style
one (a word-start marker instead of byte-level pre-tokenization, as Llama 2's). The context lengths
are chosen around the prompts' real sizes, so that many prompts sit right at the limit.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_ext.prompt_length import budget_from_settings

PARTIAL = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/"
           "gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")


pytestmark = pytest.mark.xdist_group("prompt_length")  # one worker builds `metaspace_tokenizer_dir`

@pytest.fixture(scope="module")
def metaspace_tokenizer_dir(tmp_path_factory) -> Path:
    """A SentencePiece-style BPE tokenizer (Metaspace pre-tokenizer, a BOS added), trained offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from doubles.tiny_model import stdlib_corpus

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(stdlib_corpus(), trainers.BpeTrainer(vocab_size=1200, special_tokens=["<unk>", "<s>", "</s>"],
                                                                 initial_alphabet=[f"<0x{i:02X}>" for i in range(256)]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    folder = tmp_path_factory.mktemp("metaspace")
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>").save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def litm_prompts(data_dir):
    """litm_qa_20docs over its first 12 questions, built once for the module: a function of ``chat`` giving
    (context, gen_kwargs) and the pieces of every prompt."""
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, metadata={"litm_qa_file": str(Path(data_dir) / PARTIAL),
                                                            "litm_positions": "all"})
    task = manager.load(["litm_qa_20docs"])["tasks"]["litm_qa_20docs"]
    docs = [doc for doc in task.eval_docs if doc["example"] < 12]
    texts, pieces = [task.doc_to_text(doc) for doc in docs], [task.prompt_pieces(doc) for doc in docs]

    def requests(chat: bool):
        # what a chat template does to the prompt: text before and after it
        prompts = [f"<|user|>\n{p}<|end|>\n<|assistant|>\n" for p in texts] if chat else texts
        return [(p, {"max_gen_toks": 100}) for p in prompts], pieces

    return requests


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("tokenizer", ["byte_level", "metaspace"])
def test_fast_decisions_equal_exact_ones(litm_prompts, tiny_model_dir, metaspace_tokenizer_dir, tokenizer, chat):
    name = str(tiny_model_dir if tokenizer == "byte_level" else metaspace_tokenizer_dir)
    requests, pieces = litm_prompts(chat)
    probe = budget_from_settings((("max_length", 10**9), ("tokenizer", name)))
    counts = [v.prompt_tokens for v in probe.verdicts(requests)]  # every whole prompt, tokenized
    sizes = sorted(counts)
    assert len(requests) == 240 and sizes[0] < sizes[-1]
    # limits at, just below and just above real prompt sizes (+100 generated tokens): the hardest cases
    limits = sorted({sizes[i] + 100 + d for i in (0, 60, 120, 180, 239) for d in (-1, 0, 1)} | {sizes[0] - 500})
    mixed = 0
    for limit in limits:
        budget = budget_from_settings((("max_length", limit), ("tokenizer", name)))
        exact = [n + 100 <= limit for n in counts]
        fast = budget.verdicts(requests, pieces=pieces)
        assert [v.fits for v in fast] == exact, f"max_length={limit}"
        mixed += 0 < sum(exact) < len(exact)
        # the exact count is kept wherever the decision needed it
        assert all(v.exact for v in fast if abs(v.prompt_tokens + 100 - limit) <= 2)
    assert mixed >= 9  # most limits split the prompts: the estimate was put to the test


def test_pieces_join_to_the_prompt(litm_prompts):
    requests, pieces = litm_prompts(chat=False)
    assert all("".join(p) == context for (context, _), p in zip(requests, pieces))
