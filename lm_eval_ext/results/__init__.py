"""Reading what the harness wrote, for the report, the export and the leaderboard.

- :mod:`.load`: results files and their sample logs, grouped into models;
- :mod:`.status`: whether a run's numbers are partial (``--limit``, ``--samples``, ``--predict_only``,
  items skipped) or truncated;
- :mod:`.lieder`: what LIEDER's sample logs give beyond the results file (the human-baseline
  comparison and the base vs diff novelty test), shared by the report and the export;
- :mod:`.stats`: the exact paired tests.

This package sits below :mod:`lm_eval_ext.report`, :mod:`lm_eval_ext.export`,
:mod:`lm_eval_ext.published` and :mod:`lm_eval_ext.leaderboard`, which all read results
through it and never through each other.
"""
