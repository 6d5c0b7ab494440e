"""The plugin's harness model: ``ext-replay`` (:mod:`.replay`), which ``lm-eval-ext resume`` runs.

Nothing is registered by importing this package: the harness finds it by name through the plugin's
``lm_eval.models`` entry point (lazily: its module is imported only when a run asks for it).
"""
