"""The harness's request cache (``--cache_requests``) and the plugin's tasks.

The harness keys that cache on a task's name, few-shot count, chat flags, system instruction and tokenizer; the
plugin's prompts also depend on ``--metadata`` and the data. Its tasks neither read nor write the cache, and the
run says so once. Each run is a process of its own: the harness reads ``LM_HARNESS_CACHE_PATH`` when it is imported.
"""
from __future__ import annotations

import json

import pytest

from doubles import LM_EVAL, LM_EVAL_EXT
from helpers.runs import Run

WARNING = ("--cache_requests is not used for the plugin's tasks (LIEDER, Lost in the Middle, MAGNIFICo, ELITR-Bench): "
           "their prompts depend on --metadata and the data files, which the harness's request cache does not key "
           "on, so a cached request could hold another setting's prompt. Their requests are built anew and not "
           "written to the cache; other tasks of the run use it as usual.")


@pytest.mark.slow
def test_a_new_setting_gets_its_own_prompts_under_the_request_cache(run_cli, data_dir, tmp_path):
    """``litm_kv_generated`` with 4 pairs, then with 8, both with ``--cache_requests true`` (the first through
    ``lm_eval``, the second through ``lm-eval-ext``): the second run's prompts hold 8 pairs, not the first's 4."""
    cache = tmp_path / "request-cache"
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "an answer"}))
    for program, pairs in ((LM_EVAL, 4), (LM_EVAL_EXT, 8)):
        out = tmp_path / f"out{pairs}"
        proc = run_cli([*program, "run", "--model", "ext-canned-gen", "--model_args", f"responses={responses}",
                        "--tasks", "litm_kv_generated", "--limit", "2", "--cache_requests", "true",
                        "--metadata", json.dumps({"litm_kv_pairs": pairs}), "--output_path", str(out),
                        "--log_samples"], env={"LM_HARNESS_CACHE_PATH": str(cache)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stderr.count(WARNING) == 1, proc.stderr[-3000:]
        samples = Run.load(out).samples["litm_kv_generated"]
        assert len(samples) == 2
        for sample in samples:
            prompt, doc = sample["arguments"]["gen_args_0"]["arg_0"], sample["doc"]
            data = json.loads(prompt.split("JSON data:\n", 1)[1].split("\n\nKey:", 1)[0])
            assert doc["k"] == pairs and len(data) == pairs and data[doc["key"]] == doc["value"]
        assert not cache.exists() or not any(cache.iterdir())  # nothing written for the plugin's task
