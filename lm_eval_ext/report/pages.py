"""The HTML pages' templates (``templates/html/``), shared by the report and the leaderboard site.

Jinja2 with autoescaping on: the Python side passes data (text, numbers, links), the templates hold
every tag, and every value is escaped where it lands. Undefined names are errors, not empty text.
"""
from __future__ import annotations

from functools import lru_cache

import jinja2

from ..paths import templates_dir


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir() / "html"), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def render(template: str, **data) -> str:
    """The page ``template`` (a path under ``templates/html/``) filled with ``data``."""
    return _environment().get_template(template).render(**data)
