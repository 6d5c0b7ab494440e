"""What a leaderboard repository's workflow installs: the plugin, pinned to one release.

``lm-eval-ext leaderboard init --install WHAT`` takes it as

- a version, ``0.1.0`` (the package index's ``lm-eval-ext==0.1.0``), or that requirement itself;
- a git URL with a tag or commit, ``git+https://host/org/lm-eval-ext@v0.1.0`` (``lm-eval-ext @ git+...``
  is the same); a URL without one would install whatever the branch holds on the day;
- an ``https`` URL of a wheel or sdist;
- a wheel file here (``lm_eval_ext-0.1.0-py3-none-any.whl``): it is copied into the repository
  (``wheels/``), and the workflow installs that copy.

Without ``--install``, the installed distribution says where it came from (PEP 610's
``direct_url.json``): a git URL gives that URL at the installed commit, a wheel file or URL gives that
wheel, an install from a package index (no ``direct_url.json``) gives the installed version. An install
from a directory (a checkout, editable or not) is nothing the workflow can install: that is an error
saying to give ``--install``, never a version pin that no index serves.
"""
from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .. import __version__
from .records import LeaderboardError

DISTRIBUTION = "lm-eval-ext"
WHEELS = Path("wheels")  # where a wheel given as a file goes in the repository
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9.]+)?", re.I)
_NAME = re.compile(r"lm[-_.]eval[-_.]ext", re.I)
# characters that would need escaping in the workflow's YAML and shell line (`pip install "..."`)
_UNSAFE = re.compile(r"[\"'`$\\\s]")
FORMS = ("a version (0.1.0), a git URL with a tag or commit (git+https://HOST/ORG/lm-eval-ext@v0.1.0), an https URL "
         "of a wheel or sdist, or a wheel file here (it is copied into the repository)")


@dataclass(frozen=True)
class Install:
    """The argument of the workflow's ``pip install`` (``requirement``), where it came from (``source``, for the
    message of ``init``), and the wheel file to copy into the repository, when it is one (``wheel``)."""

    requirement: str
    source: str
    wheel: Path | None = None


def install_from_option(value: str) -> Install:
    """The install ``--install VALUE`` asks for (module docstring); LeaderboardError for anything else."""
    given = value.strip()
    source = f"--install {given}"
    if _VERSION.fullmatch(given):
        return Install(f"{DISTRIBUTION}=={given}", source)
    if (pinned := re.fullmatch(rf"{_NAME.pattern}\s*==\s*(\S+)", given, re.I)) and _VERSION.fullmatch(pinned[1]):
        return Install(f"{DISTRIBUTION}=={pinned[1]}", source)
    direct = re.fullmatch(rf"{_NAME.pattern}\s*@\s*(\S+)", given, re.I)
    url = direct[1] if direct else given
    if url.startswith("git+"):
        return Install(f"{DISTRIBUTION} @ {_git_url(url)}", source)
    if url.startswith("https://") and url.endswith((".whl", ".tar.gz")):
        return Install(f"{DISTRIBUTION} @ {_safe(url)}", source)
    if url.endswith(".whl"):
        return _wheel(Path(url).expanduser(), source)
    raise LeaderboardError(f"--install {given!r} is not something the leaderboard's workflow can install: give {FORMS}.")


def installed() -> Install:
    """The install of the distribution running now (PEP 610's ``direct_url.json``; module docstring)."""
    give = f"Give what the leaderboard's workflow should install with --install: {FORMS}."
    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise LeaderboardError(f"lm-eval-ext is not installed as a distribution here, so where it came from is "
                               f"unknown. {give}") from None
    text = distribution.read_text("direct_url.json")
    if text is None:
        return Install(f"{DISTRIBUTION}=={__version__}",
                       f"the installed lm-eval-ext {__version__}, from a package index")
    origin = json.loads(text)
    url = str(origin.get("url", ""))
    vcs = origin.get("vcs_info")
    if vcs and vcs.get("vcs") == "git" and vcs.get("commit_id") and not url.startswith("file:"):
        commit = vcs["commit_id"]
        return Install(f"{DISTRIBUTION} @ {_safe(f'git+{url}@{commit}')}",
                       f"the installed lm-eval-ext, from {url} at commit {commit}")
    if "archive_info" in origin and url.startswith("https://"):
        return Install(f"{DISTRIBUTION} @ {_safe(url)}", f"the installed lm-eval-ext, from {url}")
    if "archive_info" in origin and url.startswith("file:") and url.endswith(".whl"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
        if path.is_file():
            return _wheel(path, f"the installed lm-eval-ext, from the wheel {path}")
        raise LeaderboardError(f"lm-eval-ext was installed from the wheel {path}, which is no longer there. {give}")
    where = "a directory (a checkout of the repository)" if "dir_info" in origin else url or "an unknown place"
    raise LeaderboardError(f"lm-eval-ext was installed from {where}, which the leaderboard's workflow cannot "
                           f"install on GitHub's machines. {give}")


def _git_url(value: str) -> str:
    """``value`` when it pins a tag or commit (``...@REF`` after the repository's path)."""
    path = urllib.parse.urlsplit(value.removeprefix("git+")).path
    if "@" not in path.rsplit("/", 1)[-1]:
        raise LeaderboardError(
            f"--install {value} names no tag or commit, so the workflow would install whatever the branch holds on "
            f"the day; pin one: {value}@v{__version__} (a tag) or {value}@COMMIT.")
    return _safe(value)


def _wheel(path: Path, source: str) -> Install:
    if not path.is_file():
        raise LeaderboardError(f"--install {path}: no such wheel file. Give {FORMS}.")
    if not re.match(r"lm_eval_ext-", path.name, re.I):
        raise LeaderboardError(f"--install {path}: not a wheel of lm-eval-ext (its name starts with lm_eval_ext-).")
    return Install(f"./{WHEELS.as_posix()}/{_safe(path.name)}", source, wheel=path)


def _safe(value: str) -> str:
    if _UNSAFE.search(value):
        raise LeaderboardError(f"--install {value!r}: quotes, blanks, '$' and backslashes cannot go into the "
                               "workflow's install line; give a plain version, URL or file name.")
    return value
