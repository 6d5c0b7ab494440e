"""Environment settings of the data layer, read on every call (so tests can monkeypatch them)."""
import os
from pathlib import Path
from urllib.parse import urlsplit

import pooch

DATA_DIR_ENV, CACHE_DIR_ENV, SPIDER_DIR_ENV = "LM_EVAL_EXT_DATA_DIR", "LM_EVAL_EXT_CACHE_DIR", "LM_EVAL_EXT_SPIDER_DIR"
DOWNLOAD_BASE_ENV = "LM_EVAL_EXT_DOWNLOAD_BASE"
# The harness's offline switches forbid our downloads too: a user who set them expects no network traffic.
OFFLINE_ENVS = ("LM_EVAL_EXT_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def path_from(variable: str) -> Path | None:
    """The path in environment variable ``variable`` (e.g. ``SPIDER_DIR_ENV``), or None when it is unset or blank."""
    value = os.environ.get(variable, "").strip()
    return Path(value).expanduser() if value else None


def mirror_dir() -> Path | None:
    """The mirror directory from ``$LM_EVAL_EXT_DATA_DIR``, or None when unset."""
    return path_from(DATA_DIR_ENV)


def cache_dir() -> Path:
    """The user cache: ``$LM_EVAL_EXT_CACHE_DIR``, else pooch's ``os_cache`` (``~/.cache/lm_eval_ext`` on Linux)."""
    return path_from(CACHE_DIR_ENV) or Path(pooch.os_cache("lm_eval_ext"))


def offline_reason() -> str | None:
    """The setting that forbids downloads (e.g. ``LM_EVAL_EXT_OFFLINE=1``), or None."""
    return next((f"{name}={os.environ[name]}" for name in OFFLINE_ENVS
                 if os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}), None)


def download_url(url: str) -> str:
    """The URL fetched for ``url``: ``$LM_EVAL_EXT_DOWNLOAD_BASE/host/path`` when that is set (an internal mirror)."""
    base, parts = os.environ.get(DOWNLOAD_BASE_ENV, "").strip(), urlsplit(url)
    return f"{base.rstrip('/')}/{parts.netloc}{parts.path}" if base else url
