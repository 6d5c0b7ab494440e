"""The plugin's harness model: ``ext-replay`` (:mod:`.replay`), which ``lm-eval-ext resume`` runs.

Nothing is registered by importing this package: the harness finds it by name through the plugin's
``lm_eval.models`` entry point (lazily: its module is imported only when a run asks for it).
"""

# In the package, not in replay.py, so that ``lm-eval-ext resume`` names the model without importing the harness
# (every ``lm-eval-ext`` command builds resume's parser).
NAME = "ext-replay"
OWN_ARGS = ("answers", "replayed_model")  # the model's own arguments; every other one is the replayed model's
