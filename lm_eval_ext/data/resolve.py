"""Find a dataset file: explicit path, mirror, user cache, then download."""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from . import config
from .archives import read_members_by_suffix, read_zip_bytes
from ..atomic_write import atomic_write_bytes
from .download import checksum_error, download
from .errors import DataError, DownloadError
from .registry import PinnedFile, all_files, pinned_file

logger = logging.getLogger(__name__)

# (archive download URL, cache dir) -> what went wrong per file path when the
# archive was fetched in this process (empty: nothing). See _fetch_from_archive.
_archive_problems: dict[tuple[str, str], dict[str, DataError]] = {}
_archive_lock = threading.Lock()


@dataclass(frozen=True)
class Resolution:
    """A resolved file and how it was found: explicit, mirror, cache or download."""

    path: Path
    how: str


@lru_cache(maxsize=None)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    import pooch  # imported when first needed: it costs start-up time

    return pooch.file_hash(path)  # sha256, read in blocks


def sha256_of(path: Path) -> str:
    """The sha256 of a local file, hashed once per process unless it changes (size or mtime)."""
    st = path.stat()
    return _file_sha256(str(path.resolve()), st.st_size, st.st_mtime_ns)


def local_candidates(pinned: PinnedFile) -> list[tuple[str, Path]]:
    """The (where, path) places a registered file may already be, in resolution order."""
    mirror = config.mirror_dir()
    places = [("mirror", mirror / pinned.dataset / pinned.path)] if mirror is not None else []
    return places + [("cache", config.cache_dir() / pinned.dataset / pinned.path)]


def resolve(dataset: str, path: str, explicit: str | os.PathLike | None = None) -> Resolution:
    """Resolve a file like resolve_file, also saying how it was found."""
    if explicit is not None:
        given = Path(explicit).expanduser()
        if not given.exists():
            raise DataError(f"The path given for {dataset}/{path} does not exist: {given}.")
        logger.info("Using %s for %s/%s as given (unverified: no checksum check)", given, dataset, path)
        return Resolution(given, "explicit")
    pinned = pinned_file(dataset, path)
    looked = [] if config.mirror_dir() else [f"no mirror ({config.DATA_DIR_ENV} is not set)"]
    for where, candidate in local_candidates(pinned):
        if candidate.is_file():
            _verify(candidate, pinned, where)
            return Resolution(candidate, where)
        looked.append(f"the {where} ({candidate}: not there)")
    if not (pinned.url or pinned.archive_url):
        raise DataError(_missing_message(pinned, looked, f"it cannot be downloaded: {pinned.note or 'no source URL'}"))
    target = config.cache_dir() / pinned.dataset / pinned.path
    try:
        if pinned.url:
            download(pinned.url, target, pinned.sha256, desc=f"{pinned.dataset}/{PurePosixPath(pinned.path).name}")
        else:
            _fetch_from_archive(pinned)
    except DownloadError as err:
        raise DataError(_missing_message(pinned, looked, str(err))) from None
    return Resolution(target, "download")


def resolve_file(dataset: str, path: str, explicit: str | os.PathLike | None = None) -> Path:
    """Return a local path for file ``path`` (relative to its dataset folder) of ``dataset``.

    Order: ``explicit`` (used as is, unverified); the mirror
    ``$LM_EVAL_EXT_DATA_DIR/<dataset>/<path>``; the user cache; a download
    from the pinned URL into the cache (sha256-checked, atomic). Mirror and
    cache copies are sha256-verified once per process. Raises DataError with a
    user-facing message when the file cannot be had or is corrupted.
    """
    return resolve(dataset, path, explicit).path


def read_zip_member(dataset: str, zip_path: str, member: str, password: bytes | None = None,
                    explicit: str | os.PathLike | None = None) -> bytes:
    """Return the bytes of ``member`` inside the zip ``zip_path`` of ``dataset``.

    The zip is found with resolve_file (so ``explicit`` works the same way)
    and read in place: its plain contents are never written to disk, which is
    what the ELITR-Bench authors ask (their zips use ZipCrypto, password
    ``utter``). A corrupted zip, wrong password or missing member raises
    DataError.
    """
    return read_zip_bytes(resolve_file(dataset, zip_path, explicit), member, password)


def _verify(path: Path, pinned: PinnedFile, where: str) -> None:
    actual = sha256_of(path)
    if actual != pinned.sha256:
        if where == "mirror":
            advice = (f"Replace it with a good copy (canonical source: {pinned.source}), or unset "
                      f"{config.DATA_DIR_ENV} and run `lm-eval-ext data fetch {pinned.dataset}`.")
        else:
            advice = f"Delete {path} and run `lm-eval-ext data fetch {pinned.dataset}` to download it again."
        raise checksum_error(f"{path} ({where} copy of {pinned.dataset}/{pinned.path})", pinned.sha256, actual, advice)


def _missing_message(pinned: PinnedFile, looked: list[str], problem: str) -> str:
    fix = (f"run `lm-eval-ext data fetch {pinned.dataset}` on a machine with internet access and copy its cache "
           f"({config.cache_dir()}) here, or set {config.DATA_DIR_ENV} to a mirror directory that holds "
           f"{pinned.dataset}/{pinned.path}")
    if not (pinned.url or pinned.archive_url):
        fix = f"set {config.DATA_DIR_ENV} to a mirror directory that holds {pinned.dataset}/{pinned.path}"
    return (f"Dataset {pinned.dataset!r}: file {pinned.path!r} was not found. Looked at: {'; '.join(looked)}; "
            f"then {problem}. To fix this, {fix}.")


def _fetch_from_archive(pinned: PinnedFile) -> None:
    """Cache the file of ``pinned`` from its archive, downloading the archive at most once per run.

    One download serves every registered member still missing. What went wrong
    (the download, or one member) is remembered per archive URL and cache, so
    the other members of a bad archive fail at once with the same message
    instead of downloading it again.
    """
    key = (config.download_url(pinned.archive_url), str(config.cache_dir()))
    with _archive_lock:
        problems = _archive_problems.get(key)
        # Not yet fetched, or fetched fine but the file was removed from the cache since.
        if problems is None or pinned.path not in problems:
            problems = _archive_problems[key] = _cache_archive_members(pinned.archive_url)
    problem = problems.get(pinned.path)
    if problem is not None:
        raise type(problem)(str(problem)) from None  # a fresh exception: no traceback of the earlier raise


def _cache_archive_members(archive_url: str) -> dict[str, DataError]:
    """Download the archive, cache every registered member still missing; return the problems per file path."""
    cache = config.cache_dir()
    pending = [s for s in all_files() if s.archive_url == archive_url and not (cache / s.dataset / s.path).is_file()]
    name = PurePosixPath(archive_url).name
    cache.mkdir(parents=True, exist_ok=True)
    try:
        # The archive itself is transient: only verified members are kept.
        with tempfile.TemporaryDirectory(dir=cache, prefix=".archive.") as tmp:
            archive = download(archive_url, Path(tmp) / name, desc=name)
            found = read_members_by_suffix(archive, [s.member for s in pending], shown=archive_url)
    except DataError as err:
        return {s.path: err for s in pending}
    problems: dict[str, DataError] = {}
    for member_file in pending:
        data = found.get(member_file.member)
        if data is None:
            problems[member_file.path] = DataError(
                f"The archive {archive_url} has no member ending in {member_file.member!r} (needed for "
                f"{member_file.dataset}/{member_file.path}). The registry (lm_eval_ext/data/manifest.json) "
                "needs review.")
        elif (actual := hashlib.sha256(data).hexdigest()) != member_file.sha256:
            problems[member_file.path] = checksum_error(
                f"member {member_file.member} of {archive_url}", member_file.sha256, actual,
                "It was not saved. Retry later; if it persists, the archive changed and the registry "
                "(lm_eval_ext/data/manifest.json) needs review.")
        else:
            atomic_write_bytes(cache / member_file.dataset / member_file.path, data)
    return problems
