"""Code the tests share (never a test module: no test module imports another).

- :mod:`.files`: running the harness in a subprocess, reading its results and the CSVs, checking images;
- :mod:`.scripted`: result directories written by the real harness with scripted models (the session
  fixtures of tests/conftest.py);
- :mod:`.browser`: opening a page in Debian's headless Chromium through playwright.
"""
