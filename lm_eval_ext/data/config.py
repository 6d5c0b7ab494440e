"""Environment settings of the data layer (read on every call, so tests can monkeypatch)."""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

DATA_DIR_ENV = "LM_EVAL_EXT_DATA_DIR"
CACHE_DIR_ENV = "LM_EVAL_EXT_CACHE_DIR"
SPIDER_DIR_ENV = "LM_EVAL_EXT_SPIDER_DIR"
OFFLINE_ENV = "LM_EVAL_EXT_OFFLINE"
DOWNLOAD_BASE_ENV = "LM_EVAL_EXT_DOWNLOAD_BASE"
# The harness's own offline switches also forbid our downloads: a user who set
# them expects no network traffic at all.
OFFLINE_ENVS = (OFFLINE_ENV, "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")

_TRUE = {"1", "true", "yes", "on"}


def _path_from(variable: str) -> Path | None:
    value = os.environ.get(variable, "").strip()
    return Path(value).expanduser() if value else None


def mirror_dir() -> Path | None:
    """The mirror directory from ``$LM_EVAL_EXT_DATA_DIR``, or None when unset."""
    return _path_from(DATA_DIR_ENV)


def spider_dir() -> Path | None:
    """The Spider database directory from ``$LM_EVAL_EXT_SPIDER_DIR``, or None when unset."""
    return _path_from(SPIDER_DIR_ENV)


def cache_dir() -> Path:
    """The user cache: ``$LM_EVAL_EXT_CACHE_DIR``, else the platform's (``~/.cache/lm_eval_ext`` on Linux)."""
    given = _path_from(CACHE_DIR_ENV)
    if given is not None:
        return given
    import pooch  # imported only when needed: it costs start-up time

    return Path(pooch.os_cache("lm_eval_ext"))


def offline_reason() -> str | None:
    """Name the variable that forbids downloads (e.g. ``LM_EVAL_EXT_OFFLINE=1``), or None."""
    for name in OFFLINE_ENVS:
        if os.environ.get(name, "").strip().lower() in _TRUE:
            return f"{name}={os.environ[name]}"
    return None


def download_url(url: str) -> str:
    """Map a canonical URL to the one actually fetched.

    With ``$LM_EVAL_EXT_DOWNLOAD_BASE`` set (an internal mirror, or a test
    server), ``https://host/path`` becomes ``$BASE/host/path``.
    """
    base = os.environ.get(DOWNLOAD_BASE_ENV, "").strip()
    if not base:
        return url
    parts = urlsplit(url)
    return f"{base.rstrip('/')}/{parts.netloc}{parts.path}"
