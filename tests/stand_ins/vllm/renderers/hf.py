"""``vllm.renderers.hf.resolve_chat_template``: the template the harness passes to ``apply_chat_template``."""


def resolve_chat_template(tokenizer, chat_template, tools, *, model_config):
    """The given template, else the tokenizer's own (vLLM also looks for a processor template first: none here)."""
    return chat_template if chat_template is not None else getattr(tokenizer, "chat_template", None)
