"""The installed harness, for the tests that meet a defect of one harness version (docs/troubleshooting.md)."""
from __future__ import annotations

import importlib.metadata

import pytest

VERSION = importlib.metadata.version("lm_eval")

# harness version -> what of it is broken, by the feature the skipped tests use
DEFECTS = {
    "samples": {"0.5.0.dev1": "lm-eval 0.5.0.dev1 raises IndexError in evaluator_utils._build_logged_samples for "
                              "--samples with --log_samples"},
    "sample_count": {"0.4.12": "lm-eval 0.4.12 writes as a task's sample_len and n-samples effective the count of "
                                 "the last metric it aggregates (fewer for a metric only some documents report)"},
    "wandb_loglikelihood": {"0.5.0.dev1": "lm-eval 0.5.0.dev1's W&B logger reads a log-likelihood task's filtered "
                                          "responses one list level too shallow (IndexError: 'Logging to W&B "
                                          "failed'), for its own tasks too"},
    "comma_split": {version: f"lm-eval {version} splits a key=value flag at every comma (a ValueError traceback "
                             "for a value holding one)" for version in ("0.4.12", "0.5.0.dev1")},
    "numeric_target": {"0.5.0.dev1": "lm-eval 0.5.0.dev1 reads a generation task's target that looks like a number "
                                      "(\"4\") as that number, which no reply (the text \"4\") matches exactly"},
    "validate": {"0.5.0.dev1": "lm-eval 0.5.0.dev1's `lm_eval validate` reports unknown tasks as found"},
}


def broken(feature: str) -> bool:
    """True when the installed harness version has the defect ``feature`` (:data:`DEFECTS`)."""
    return VERSION in DEFECTS[feature]


def assert_documents(results: dict, task: str, count: int) -> None:
    """The results of a run took ``count`` documents of ``task``: the plugin's count (``configs.<task>.metadata
    .documents``) and, where the harness counts documents (:data:`DEFECTS` ``sample_count``), its ``n-samples``."""
    assert results["configs"][task]["metadata"]["documents"] == count
    if not broken("sample_count"):
        assert results["n-samples"][task]["effective"] == count


def filtered(sample: dict):
    """The filtered response of a logged sample's (first) request, as 0.4 logs it (0.5 logs a list of one)."""
    from lm_eval_ext.boundary import unlisted

    return unlisted(sample["filtered_resps"][0])


def skip_where_broken(feature: str):
    """Skip the test on a harness version whose ``feature`` is broken, with the reason."""
    reason = DEFECTS[feature].get(VERSION)
    return pytest.mark.skipif(reason is not None, reason=reason or "")
