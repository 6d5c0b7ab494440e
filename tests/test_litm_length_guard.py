"""The long-prompt check: where the context length and tokenizer come from, and the fit rule."""
from __future__ import annotations

import json
import re

import pytest
import yaml
from helpers.files import PROJECT_ROOT

from lm_eval_ext.errors import UserError
from lm_eval_ext.litm import options
from lm_eval_ext.litm.task import remedies, shorter_tasks
from lm_eval_ext.prompt_length import LengthBudget, resolve_budget


def words(prompts):
    return [len(p.split()) for p in prompts]


def test_fit_rule_reserves_the_generated_tokens():
    budget = LengthBudget(max_length=10, length_source="test", tokenizer_name="words", count_tokens=words)
    six, seven = "a b c d e f", "a b c d e f g"
    # 6 + 4 = 10 fits exactly; 7 + 4 = 11 does not; no max_gen_toks -> 256 (the adapters' default)
    fits = [v.fits for v in budget.verdicts([(six, {"max_gen_toks": 4}), (seven, {"max_gen_toks": 4}), (six, {})])]
    assert fits == [True, False, False]
    assert budget.verdicts([(seven, {"max_gen_toks": 3})])[0].prompt_tokens == 7


def test_no_context_length_means_no_check():
    assert resolve_budget({}) is None
    assert resolve_budget({"responses": "r.json", "model": "gpt-4o"}) is None  # API model without max_length


def test_context_length_sources(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompt = "Return the value of a key."
    budget = resolve_budget({"pretrained": str(tiny_model_dir)})
    assert (budget.max_length, budget.length_source) == (2048, f"the model config of {tiny_model_dir}")  # max_position_embeddings
    assert budget.count_tokens([prompt]) == [len(tok(prompt)["input_ids"])]
    assert resolve_budget({"pretrained": str(tiny_model_dir), "max_length": 512}).max_length == 512  # hf/vLLM/API model arg
    assert resolve_budget({"pretrained": str(tiny_model_dir), "max_model_len": "300"}).max_length == 300  # vLLM
    # an explicit tokenizer wins over pretrained/model
    assert resolve_budget({"max_length": 99, "model": "x", "tokenizer": str(tiny_model_dir)}).tokenizer_name == str(tiny_model_dir)


def test_a_context_length_above_the_models_positions_is_warned(tiny_model_dir, tmp_path, caplog):
    """The tiny model's config has 2048 positions: max_length=4096 is warned about (once), 2048 is not, and a config
    that scales its rotary positions is let be."""
    scaled = tmp_path / "scaled"
    scaled.mkdir()
    config = json.loads((tiny_model_dir / "config.json").read_text())
    (scaled / "config.json").write_text(json.dumps({**config, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}))
    with caplog.at_level("WARNING", logger="lm_eval_ext.prompt_length"):
        assert resolve_budget({"pretrained": str(tiny_model_dir), "max_length": 4096}).max_length == 4096
        assert resolve_budget({"pretrained": str(tiny_model_dir), "max_length": 4096, "dtype": "float32"})
        assert resolve_budget({"pretrained": str(tiny_model_dir), "max_model_len": 2048})
        assert resolve_budget({"pretrained": str(scaled), "tokenizer": str(tiny_model_dir), "max_length": 8192})
    assert [r.getMessage() for r in caplog.records if r.name == "lm_eval_ext.prompt_length"] == [
        f"max_length=4096 is above the 2048 positions of the model config of {tiny_model_dir}: prompts of up to 4096 "
        "tokens count as fitting and are sent whole, past the positions the model was built for. Give "
        "max_length=2048 or less, unless the model is meant to run longer."]


def test_unusable_tokenizer_and_config_are_user_errors(tmp_path):
    missing = str(tmp_path / "no-such-tokenizer")  # a local path: no hub lookup, whatever the offline settings
    with pytest.raises(UserError, match="cannot load a tokenizer for .*no-such-tokenizer"):
        resolve_budget({"max_length": 4096, "model": missing})
    with pytest.raises(UserError, match="cannot read the model config"):
        resolve_budget({"pretrained": str(tmp_path)})  # an empty directory
    with pytest.raises(UserError, match="max_length=0 is not a positive number"):
        resolve_budget({"max_length": 0, "tokenizer": "t"})


def test_chat_api_contexts_are_measured_as_the_chat_template_renders_them(tiny_model_dir):
    import json

    from lm_eval.models.api_models import JsonChatStr
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    budget = resolve_budget({"max_length": 1000, "tokenizer": str(tiny_model_dir)})
    chat = JsonChatStr(json.dumps([{"role": "user", "content": "Question: who\nAnswer:"}]))
    # the tiny model's template: "<role>: <content>\n" per message, then "assistant: " (tiny_model.py)
    rendered = "user: Question: who\nAnswer:\nassistant: "
    (verdict,) = budget.verdicts([(chat, {"max_gen_toks": 100})])
    assert verdict.prompt_tokens == len(tok(rendered)["input_ids"]) > len(tok("Question: who\nAnswer:")["input_ids"])


def test_every_prompt_skipped_is_an_error_naming_what_helps():
    from lm_eval_ext.prompt_length import NothingToScoreError, require_prompts_left

    budget = LengthBudget(max_length=512, length_source="max_length in --model_args", tokenizer_name="words",
                          count_tokens=words)
    require_prompts_left("t", 2, 3, budget, "Use a longer context.")  # some prompts left: nothing to say
    require_prompts_left("t", 0, 0, budget, "Use a longer context.")  # no prompt at all (e.g. an empty shard)
    with pytest.raises(NothingToScoreError) as err:
        require_prompts_left("t", 3, 3, budget, "Use a longer context.")
    assert isinstance(err.value, UserError)
    assert str(err.value) == (
        "Task t: none of its 3 prompts fits the model's context length 512 (max_length in --model_args), tokens "
        "counted with words (with the tokens reserved for the answer), so none of its documents could be scored; "
        "nothing was generated. Use a longer context.")


def test_what_helps_names_only_tasks_with_shorter_prompts_of_the_same_kind():
    """The advice names the tasks of the failing task's kind with fewer documents or pairs (never the task
    itself), each a task the plugin has."""
    def shorter(task, dataset_kwargs, metadata=None):
        return shorter_tasks(options.setup_from(task, dataset_kwargs, metadata or {}))

    assert shorter("litm_qa_30docs", {"setting": "qa", "k": 30, "positions": [0]}) == (
        "fewer documents: litm_qa_20docs, litm_qa_10docs, litm_qa_oracle")
    assert shorter("litm_qa_20docs_qac", {"setting": "qa", "k": 20, "positions": [0], "query_aware": True}) == (
        "fewer documents: litm_qa_10docs_qac, litm_qa_oracle")
    assert shorter("litm_qa_10docs", {"setting": "qa", "k": 10, "positions": [0]}) == "fewer documents: litm_qa_oracle"
    assert shorter("litm_kv_300keys", {"setting": "kv", "k": 300, "positions": [0]}) == (
        "fewer key-value pairs: litm_kv_140keys, litm_kv_75keys, "
        """litm_kv_generated with --metadata '{"litm_kv_pairs": 150}'""")
    assert shorter("litm_kv_75keys_qac", {"setting": "kv", "k": 75, "positions": [0], "query_aware": True}) == (
        """fewer key-value pairs: litm_kv_generated_qac with --metadata '{"litm_kv_pairs": 37}'""")
    assert shorter("litm_kv_generated", {"setting": "kv", "generated": True}, {"litm_kv_pairs": 1000}) == (
        """fewer key-value pairs: litm_kv_300keys, litm_kv_140keys, litm_kv_75keys, litm_kv_generated with """
        """--metadata '{"litm_kv_pairs": 500}'""")
    assert shorter("litm_kv_generated", {"setting": "kv", "generated": True}, {"litm_kv_pairs": 3}) == ""
    assert shorter("litm_qa_oracle", {"setting": "oracle"}) == ""
    assert shorter("litm_qa_closedbook", {"setting": "closedbook"}) == ""

    # the advice without a shorter task
    oracle = remedies(options.setup_from("litm_qa_oracle", {"setting": "oracle"}, {}))
    assert oracle == (
        "What would help: a model with a longer context (and max_length=N in --model_args, up to what the model "
        """supports), or --metadata '{"litm_too_long": "truncate"}' to send them anyway, cut at the start by the """
        "model adapter (scored and counted in prompts_truncated: not the published prompts).")
    # every name given, for every task of the plugin (1,000 pairs for the generated ones), is one of its tasks
    folder = PROJECT_ROOT / "tasks" / "lost_in_the_middle"
    configs = [yaml.safe_load(path.read_text()) for path in folder.glob("litm_*.yaml")]
    named = set()
    for config in configs:
        given = shorter(config["task"], {"positions": [0], **config["dataset_kwargs"]}, {"litm_kv_pairs": 1000})
        named |= set(re.findall(r"\blitm_\w+", given))
    assert named - {"litm_kv_pairs"} <= {config["task"] for config in configs}
    assert "litm_kv_generated_qac" in named and "litm_qa_10docs_qac" in named


@pytest.mark.slow
@pytest.mark.parametrize("command", ["lm_eval", "lm-eval-ext"])
def test_a_task_whose_every_prompt_is_too_long_stops_before_generating(run_cli, tiny_model_dir, data_dir, tmp_path,
                                                                        command):
    """litm_kv_75keys (prompts of several thousand tokens) with a 512-token window: nothing could be scored.

    Plain `lm_eval` with the tiny hf model (the user's path); `lm-eval-ext` with a scripted model whose
    calls log shows that nothing was generated.
    """
    out = tmp_path / "out"
    if command == "lm_eval":
        model = ["--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32,max_length=512",
                 "--device", "cpu"]
    else:
        responses = tmp_path / "responses.json"
        responses.write_text('{"rules": [], "default": "an answer"}')
        # the scripted model takes no max_length: the task reads the window from --metadata as well
        model = ["--model", "ext-canned-gen", "--model_args", f"responses={responses},calls_log={tmp_path / 'calls'}",
                 "--metadata", json.dumps({"max_length": 512, "tokenizer": str(tiny_model_dir)})]
    proc = run_cli([command, "run", *model, "--tasks", "litm_kv_75keys", "--limit", "3", "--output_path", str(out),
                    "--log_samples"])
    assert proc.returncode != 0
    assert "Task litm_kv_75keys: none of its 3 prompts fits the model's context length 512" in proc.stderr
    setup = options.setup_from("litm_kv_75keys", {"setting": "kv", "k": 75, "positions": [0]}, {})
    assert remedies(setup) in proc.stderr
    assert ("a task with shorter prompts (fewer key-value pairs: litm_kv_generated with "
            """--metadata '{"litm_kv_pairs": 37}')""") in proc.stderr
    assert not list(out.rglob("results_*.json")) and not (tmp_path / "calls").exists()
    if command == "lm-eval-ext":
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
