"""``lm-eval-ext report``: figures, tables and one self-contained HTML page from the harness's output.

Data flows one way: :mod:`lm_eval_ext.results` finds and reads results and sample files,
:mod:`lm_eval_ext.published` gives the models each paper evaluated, each module of
:mod:`.sections` turns the runs of one benchmark (and its published models) into figures,
tables and notes, :mod:`.write` saves the figures (PNG + SVG) and tables (CSV), and
:mod:`.html` assembles the page; :mod:`.build` runs these steps and
:mod:`lm_eval_ext.commands.report` is the command. The leaderboard export
(:mod:`lm_eval_ext.export`) reads runs through the same :mod:`lm_eval_ext.results` package
and never through this one.
"""
