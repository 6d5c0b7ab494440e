"""``lm-eval-ext leaderboard init``: a new leaderboard repository that takes submissions as pull requests.

It holds ``records/`` (the submitted records), a README with the submission steps and a GitHub
Actions workflow (``.github/workflows/leaderboard.yml``) that validates the records a pull request
adds or changes and, on the default branch, builds the site and publishes it with GitHub Pages.
Both texts are templates (``templates/leaderboard_repo/``) filled with the plugin version that wrote
them and what the workflow installs (:mod:`lm_eval_ext.leaderboard.install`: one release, pinned, so
that the records are checked by the same plugin until the maintainers change the pin); a wheel given
as a file is copied into ``wheels/``.

Nothing is ever overwritten: a directory that already has one of these files (e.g. an existing
leaderboard) is refused; other content (``.git``, a licence) is left as it is.
"""
from __future__ import annotations

from pathlib import Path

import jinja2

from .. import __version__
from ..atomic_write import output_dir, write_bytes, write_text
from ..paths import templates_dir
from .install import WHEELS, Install
from .records import LeaderboardError

WORKFLOW = Path(".github/workflows/leaderboard.yml")
README = Path("README.md")
RECORDS = Path("records")
# what init writes, and the template of each (records/ gets a README so that git keeps the directory)
FILES = {README: "README.md.j2", WORKFLOW: "leaderboard.yml.j2", RECORDS / "README.md": "records_README.md.j2"}


def render(template: str, install: Install) -> str:
    """A file of the repository, from its template under ``templates/leaderboard_repo/``."""
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir() / "leaderboard_repo"),
                                     undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return environment.get_template(template).render(version=__version__, install=install.requirement,
                                                     wheel=install.wheel is not None)


def init_repository(directory: str | Path, install: Install) -> list[Path]:
    """Write a new leaderboard repository into ``directory`` whose workflow installs ``install``; returns the files
    it wrote."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise LeaderboardError(f"{directory} is a file. Give `lm-eval-ext leaderboard init` a new or empty directory "
                               "(a fresh `git init` or clone is fine).")
    names = [README, WORKFLOW, RECORDS] + ([WHEELS / install.wheel.name] if install.wheel else [])
    taken = [str(name) for name in names if (directory / name).exists()]
    if taken:
        raise LeaderboardError(
            f"{directory} already has {', '.join(taken)}: `lm-eval-ext leaderboard init` writes a new leaderboard "
            "and overwrites nothing. Give a new or empty directory (a fresh `git init` or clone is fine); to move an "
            f"existing leaderboard to another lm-eval-ext, change what its {WORKFLOW} installs (both jobs).")
    output_dir(directory, "DIR")
    written = [write_text(directory / name, render(template, install), "DIR") for name, template in FILES.items()]
    if install.wheel:
        written.append(write_bytes(directory / WHEELS / install.wheel.name, install.wheel.read_bytes(), "DIR"))
    return written
