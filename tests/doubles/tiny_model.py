"""A tiny randomly initialized Llama model with its own tokenizer, built offline.

Tests and benchmarks cannot download a model, so they build one: a random
``LlamaForCausalLM`` plus a byte-level BPE tokenizer trained on the fly on the
docstrings of a fixed list of stdlib modules, saved with ``save_pretrained``
so that the harness's ``hf`` model loads it with
``--model_args pretrained=<dir>``.

Note for generation tests: greedy decoding from a random model tends to emit
special tokens, which decode to empty text. Pass ``suppress_tokens`` with the
special token ids (``[0, 1, 2, 3]`` here: ``<unk>``, ``<s>``, ``</s>``,
``<pad>``) in the generation kwargs, e.g.
``--gen_kwargs suppress_tokens=[0,1,2,3]`` or ``generation_kwargs:
{suppress_tokens: [0, 1, 2, 3]}`` in a task YAML, to get non-empty text.

Command line (the bigger benchmark model used by ``bench/``)::

    python -m doubles.tiny_model OUT_DIR --layers 12 --hidden 768
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import warnings
from pathlib import Path

# Order matters: the corpus is built in this order, so the tokenizer is
# deterministic. Pure-Python modules only, so the docstrings do not depend on
# how the interpreter was compiled.
CORPUS_MODULES = (
    "argparse", "collections", "csv", "dataclasses", "difflib", "email.message",
    "fractions", "functools", "heapq", "inspect", "json", "logging", "pathlib",
    "pprint", "random", "shutil", "statistics", "string", "subprocess",
    "tarfile", "textwrap", "threading", "typing", "unittest", "urllib.parse",
    "zipfile",
)

# Special tokens take the first ids, in this order (see the module docstring).
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def stdlib_corpus() -> list[str]:
    """Docstrings of ``CORPUS_MODULES`` and their public members, in a fixed order."""
    texts = []
    # Touching every public attribute trips deprecation shims (typing.io, ...).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in CORPUS_MODULES:
            module = importlib.import_module(name)
            texts.append(inspect.getdoc(module) or "")
            for attr in sorted(dir(module)):
                if attr.startswith("_"):
                    continue
                doc = inspect.getdoc(getattr(module, attr))
                if doc:
                    texts.append(doc)
    return texts


def build_tokenizer(vocab_size: int = 1000, model_max_length: int = 2048):
    """Train a byte-level BPE tokenizer on :func:`stdlib_corpus`; return a transformers fast tokenizer.

    The tokenizer has ``<s>``/``</s>``/``<unk>``/``<pad>`` special tokens, adds
    no special tokens when encoding (so ``decode(encode(text)) == text``), and
    carries :data:`CHAT_TEMPLATE` ("role: content" lines).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(stdlib_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=model_max_length,
    )


def build_tiny_model(
    out_dir: str | Path,
    *,
    num_layers: int = 2,
    hidden_size: int = 64,
    vocab_size: int = 1000,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 2048,
    seed: int = 0,
) -> Path:
    """Build and save a random ``LlamaForCausalLM`` and its tokenizer into ``out_dir``.

    Deterministic for a given ``seed`` and set of sizes (same weights, same
    vocabulary); runs offline in seconds. ``intermediate_size`` defaults to
    ``4 * hidden_size``. The directory loads with ``AutoModelForCausalLM`` /
    ``AutoTokenizer`` and with the harness's ``hf`` model
    (``pretrained=<out_dir>``). Returns ``out_dir`` as a ``Path``.
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(vocab_size, max_position_embeddings)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<pad>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"]
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: build a model into OUT_DIR and print its path."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--heads", type=int, default=None, help="default: max(4, hidden // 64)")
    parser.add_argument("--intermediate", type=int, default=None)
    parser.add_argument("--max-positions", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = build_tiny_model(
        args.out_dir,
        num_layers=args.layers,
        hidden_size=args.hidden,
        vocab_size=args.vocab,
        num_heads=args.heads or max(4, args.hidden // 64),
        intermediate_size=args.intermediate,
        max_position_embeddings=args.max_positions,
        seed=args.seed,
    )
    print(out)


if __name__ == "__main__":
    main()
