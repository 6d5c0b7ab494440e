"""``vllm.tokenizers.get_tokenizer``: a Hugging Face tokenizer, as vLLM returns for Hugging Face models."""


def get_tokenizer(tokenizer_name, *, tokenizer_mode="auto", trust_remote_code=False, revision=None, **kwargs):
    """``AutoTokenizer.from_pretrained`` of ``tokenizer_name`` (a local directory in the tests)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_name, trust_remote_code=trust_remote_code, revision=revision,
                                         use_fast=tokenizer_mode != "slow", **kwargs)
