"""Code the tests share (never a test module: no test module imports another).

- :mod:`.commands`: running a command as a user runs it (``lm_eval`` and ``lm-eval-ext`` in the test's process);
- :mod:`.files`: a subprocess's environment, one ``lm-eval-ext run``, reading its results and the CSVs, checking
  images;
- :mod:`.scripted`: result directories written by the real harness with scripted models (the session
  fixtures of tests/conftest.py);
- :mod:`.browser`: opening a page in Debian's headless Chromium through playwright.
"""
