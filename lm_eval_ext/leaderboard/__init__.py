"""``lm-eval-ext leaderboard``: a static leaderboard site from submitted records, and the check of a record.

Data flows one way: :mod:`.records` reads the records (``lm-eval-ext export --format
leaderboard``) and, with :mod:`lm_eval_ext.published`, makes the rows; :mod:`.validate` checks
each record (schema, task versions, partial runs marked, ELITR-Bench judge validated, provenance);
:mod:`.site` writes the pages; :mod:`.build` runs these steps; :mod:`.verify` marks a record verified
after a rerun; :mod:`.repository` writes a leaderboard repository that takes submissions as pull
requests; :mod:`lm_eval_ext.commands.leaderboard` is the command.
"""
