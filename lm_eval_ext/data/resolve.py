"""Find a dataset file: an explicit path, the mirror, the user cache, else a download into the cache."""
import hashlib
import logging
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import pooch

from ..atomic_write import atomic_write_bytes
from . import config
from .archives import read_members_by_suffix, read_zip_bytes
from .download import checksum_error, download
from .errors import REVIEW, DataError, DownloadError, HostUnreachable
from .registry import PinnedFile, dataset_files, pinned_file

logger = logging.getLogger(__name__)
# (archive URL, cache) -> the problem of each file path when this process fetched the archive.
_archive_problems: dict[tuple[str, str], dict[str, DataError]] = {}
_archive_lock = threading.Lock()


class Resolution(NamedTuple):
    """A resolved file and how it was found: explicit, mirror, cache or download."""

    path: Path
    how: str


@lru_cache(maxsize=None)
def _file_hash(path: str, size: int, mtime_ns: int) -> str:
    return pooch.file_hash(path)  # size and mtime_ns only key the cache


def sha256_of(path: Path) -> str:
    """The sha256 of a local file, hashed once per process unless it changes (size or mtime)."""
    st = path.stat()
    return _file_hash(str(path.resolve()), st.st_size, st.st_mtime_ns)


def local_candidates(pinned: PinnedFile) -> list[tuple[str, Path]]:
    """The (where, path) places a registered file may already be, in resolution order."""
    mirror = config.mirror_dir()
    places = [("mirror", mirror / pinned.dataset / pinned.path)] if mirror is not None else []
    return places + [("cache", config.cache_dir() / pinned.dataset / pinned.path)]


def resolve(dataset: str, path: str, explicit: str | os.PathLike | None = None) -> Resolution:
    """Find file ``path`` (relative to its dataset folder) of ``dataset`` and say how: ``explicit`` (as is,
    unverified), else the mirror ``$LM_EVAL_EXT_DATA_DIR/<dataset>/<path>`` or the user cache (both sha256-checked
    once per process), else a download into the cache. DataError when it cannot be had."""
    if explicit is not None:
        if not (given := Path(explicit).expanduser()).exists():
            raise DataError(f"The path given for {dataset}/{path} does not exist: {given}.")
        logger.info("Using %s for %s/%s as given (unverified: no checksum check)", given, dataset, path)
        return Resolution(given, "explicit")
    pinned = pinned_file(dataset, path)
    looked = [] if config.mirror_dir() else [f"no mirror ({config.DATA_DIR_ENV} is not set)"]
    for where, candidate in local_candidates(pinned):
        if candidate.is_file():
            if (actual := sha256_of(candidate)) != pinned.sha256:
                source = pinned.url or (f"member {pinned.member} of {pinned.archive_url}" if pinned.archive_url
                                        else "no canonical download URL")
                advice = (f"Replace it with a good copy (canonical source: {source}), or unset {config.DATA_DIR_ENV} "
                          f"and run `lm-eval-ext data fetch {dataset}`." if where == "mirror" else
                          f"Delete {candidate} and run `lm-eval-ext data fetch {dataset}` to download it again.")
                raise checksum_error(f"{candidate} ({where} copy of {dataset}/{path})", pinned.sha256, actual, advice)
            return Resolution(candidate, where)
        looked.append(f"the {where} ({candidate}: not there)")
    fix = f"set {config.DATA_DIR_ENV} to a mirror directory that holds {dataset}/{path}"
    try:  # into ``candidate``: the cache, the last place looked
        if pinned.url:
            download(pinned.url, candidate, pinned.sha256, desc=f"{dataset}/{PurePosixPath(path).name}")
        elif pinned.archive_url:
            _fetch_from_archive(pinned)
        else:
            raise DownloadError(f"it cannot be downloaded: {pinned.note or 'no source URL'}")
    except DownloadError as err:
        if pinned.url or pinned.archive_url:
            fix = (f"run `lm-eval-ext data fetch {dataset}` on a machine with internet access and copy its cache "
                   f"({config.cache_dir()}) here, or {fix}")
        message = f"Dataset {dataset!r}: file {path!r} was not found. Looked at: {'; '.join(looked)}; then {err}. " \
                  f"To fix this, {fix}."
        if isinstance(err, HostUnreachable):  # kept: a caller fetching many files skips the host's others
            raise HostUnreachable(message, err.host) from None
        raise DataError(message) from None
    return Resolution(candidate, "download")


def resolve_file(dataset: str, path: str, explicit: str | os.PathLike | None = None) -> Path:
    """The local path of file ``path`` of ``dataset``, found as :func:`resolve` does."""
    return resolve(dataset, path, explicit).path


def read_zip_member(dataset: str, zip_path: str, member: str, password: bytes | None = None,
                    explicit: str | os.PathLike | None = None) -> bytes:
    """The bytes of ``member`` of the registered zip ``zip_path`` (found by :func:`resolve_file`), read in memory:
    the plain texts never touch the disk, as the ELITR-Bench authors ask (ZipCrypto, password ``utter``)."""
    return read_zip_bytes(resolve_file(dataset, zip_path, explicit), member, password)


def _fetch_from_archive(pinned: PinnedFile) -> None:
    """Cache ``pinned`` from its archive; what went wrong is kept per archive, so the other members of a bad
    archive fail at once with the same message instead of downloading it again."""
    key = (config.download_url(pinned.archive_url), str(config.cache_dir()))
    with _archive_lock:
        # Not fetched yet, or fetched fine and the file was removed from the cache since.
        if pinned.path not in (problems := _archive_problems.get(key, {})):
            problems = _archive_problems[key] = _cache_archive_members(pinned)
    if (problem := problems.get(pinned.path)) is not None:
        raise problem.fresh() from None


def _cache_archive_members(pinned: PinnedFile) -> dict[str, DataError]:
    """Download the archive of ``pinned`` once and cache each registered member still missing; problems by path."""
    url, cache = pinned.archive_url, config.cache_dir()
    pending = [s for s in dataset_files(pinned.dataset)
               if s.archive_url == url and not (cache / s.dataset / s.path).is_file()]
    cache.mkdir(parents=True, exist_ok=True)
    try:  # the archive is transient: only the verified members are kept
        with tempfile.TemporaryDirectory(dir=cache, prefix=".archive.") as tmp:
            archive = download(url, Path(tmp) / PurePosixPath(url).name)
            found = read_members_by_suffix(archive, [s.member for s in pending], shown=url)
    except DataError as err:
        return {s.path: err for s in pending}
    problems: dict[str, DataError] = {}
    for s in pending:
        if (data := found.get(s.member)) is None:
            problems[s.path] = DataError(f"The archive {url} has no member ending in {s.member!r} (needed for "
                                         f"{s.dataset}/{s.path}). The registry (lm_eval_ext/data/manifest.json) "
                                         "needs review.")
        elif (actual := hashlib.sha256(data).hexdigest()) != s.sha256:
            problems[s.path] = checksum_error(f"member {s.member} of {url}", s.sha256, actual, "It was not "
                                              f"saved. Retry later; if it persists, the archive changed and {REVIEW}")
        else:
            atomic_write_bytes(cache / s.dataset / s.path, data)
    return problems
