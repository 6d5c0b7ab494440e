"""HTTP download on pooch: retries, a progress bar, sha256 check and an atomic move into place.

pooch does the pinned-hash part: it streams into a temporary file beside the
destination, checks the hash, moves the file under its final name only when it
matches, and retries a dropped connection or a mismatch. The downloader below
is ours so that a client error (404) is final instead of retried, the progress
bar follows tqdm's terminal detection, and a mismatch message can give the
hash actually received.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pooch
from tqdm.auto import tqdm

from ..atomic_write import atomic_write_bytes  # noqa: F401 -- data.resolve imports it from here
from . import config
from .errors import DataError, DownloadError

_CHUNK = 1 << 16
_TIMEOUT_S = 60
# Attempts after the first for a dropped connection, a timeout, a 5xx answer or a
# mismatching body; pooch waits 1 s, then 2 s between attempts.
RETRIES = 2


def checksum_error(what: str, expected: str, actual: str, advice: str) -> DataError:
    """The standard sha256-mismatch error."""
    return DataError(
        f"Checksum mismatch for {what}: expected sha256 {expected}, got {actual}. "
        f"The file is corrupted, truncated or a different version. {advice}"
    )


class _Downloader:
    """A pooch downloader: streams one URL into pooch's temporary file with a progress bar.

    Remembers the sha256 of the last body it wrote, for the mismatch message.
    """

    def __init__(self, desc: str):
        self.desc = desc
        self.sha256: str | None = None

    def __call__(self, url: str, output_file: str, _pooch) -> None:
        import requests  # imported when first needed: it costs start-up time

        digest = hashlib.sha256()
        with requests.get(url, stream=True, timeout=_TIMEOUT_S) as response:
            if 400 <= response.status_code < 500:
                # Not a raise_for_status() HTTPError: pooch would retry it, and asking again cannot help.
                raise DownloadError(f"downloading {url} failed with HTTP {response.status_code} {response.reason}")
            response.raise_for_status()
            total = response.headers.get("Content-Length")
            with open(output_file, "wb") as fh, tqdm(
                total=int(total) if total else None, unit="B", unit_scale=True, unit_divisor=1024,
                desc=self.desc, disable=None, leave=False,
            ) as bar:
                for block in response.iter_content(_CHUNK):
                    fh.write(block)
                    digest.update(block)
                    bar.update(len(block))
        self.sha256 = digest.hexdigest()


def download(url: str, dest: Path, sha256: str | None = None, desc: str | None = None) -> Path:
    """Download ``url`` to ``dest`` atomically, checking ``sha256`` when given.

    ``url`` is the canonical URL; ``$LM_EVAL_EXT_DOWNLOAD_BASE`` may redirect it.
    A dropped connection, a timeout, a server error or a mismatching body is
    tried again (``RETRIES`` times). Transport failures then raise
    DownloadError; a checksum mismatch raises DataError. Either way nothing is
    left at ``dest`` or beside it.
    """
    import requests

    reason = config.offline_reason()
    if reason:
        raise DownloadError(f"downloads are disabled ({reason})")
    actual_url = config.download_url(url)
    fetcher = pooch.Pooch(path=dest.parent, base_url="", registry={dest.name: f"sha256:{sha256}" if sha256 else None},
                          urls={dest.name: actual_url}, retry_if_failed=RETRIES)
    downloader = _Downloader(desc or dest.name)
    attempts = f"{RETRIES + 1} attempts"
    try:
        fetcher.fetch(dest.name, downloader=downloader)
    except ValueError as err:  # pooch's hash mismatch, after the retries
        if not (sha256 and downloader.sha256 and downloader.sha256 != sha256):
            raise DownloadError(f"downloading {actual_url} failed ({attempts}): {err}") from None
        raise checksum_error(
            f"the download of {actual_url} ({attempts})", sha256, downloader.sha256,
            "Nothing was saved. Retry later; if it persists, the upstream file changed and the "
            "registry (lm_eval_ext/data/manifest.json) needs review.",
        ) from None
    except requests.RequestException as err:
        raise DownloadError(f"downloading {actual_url} failed ({attempts}): {_cause(err)}") from None
    except OSError as err:
        raise DownloadError(f"downloading {actual_url} to {dest} failed: {err}") from None
    return dest


def _cause(err: Exception) -> str:
    """What a requests error says without urllib3's wrapper ("Max retries exceeded with url: ...")."""
    wrapped = err.args[0] if err.args else None
    return str(getattr(wrapped, "reason", None) or err)
