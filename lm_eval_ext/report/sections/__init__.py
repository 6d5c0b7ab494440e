"""One module per benchmark; each has ``TITLE``, ``KEY`` and ``build(models, published) -> Section | None``.

A section is built only from metrics the benchmark's tasks write (results files and
sample logs), and from the benchmark's published numbers (``published``, None with
``--no-published``); it returns None when no model ran the benchmark.
"""
from . import elitr, lieder, litm, magnifico

SECTIONS = (lieder, litm, magnifico, elitr)
