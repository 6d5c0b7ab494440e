"""Test doubles as harness models: ``ext-loglik-table`` and ``ext-canned-gen`` (:mod:`.scripted`).

Nothing is registered by importing this package. The harness finds them by name through the
plugin's ``lm_eval.models`` entry points (lazily: their module is imported only when a run asks
for one of them), or by an explicit ``import lm_eval_ext.models.scripted``. docs/testing.md.
"""
