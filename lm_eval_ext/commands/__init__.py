"""Commands of ``lm-eval-ext`` that drive whole harness runs (run, check, the ELITR-Bench seed protocol).

They sit above everything else: they may import any package of the plugin, and nothing imports them.
"""
