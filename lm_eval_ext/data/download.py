"""HTTP download on pooch: retries, a progress bar, sha256 check and an atomic move into place.

pooch does the work: ``Pooch.fetch`` streams into a temporary file beside the
destination with ``HTTPDownloader``, checks the hash, moves the file under its
final name only when it matches, and retries a dropped connection or a
mismatch. The wrapper below only makes a client error (404) final instead of
retried, keeps the progress bar hidden when the output is not a terminal, and
remembers the hash received for the mismatch message.
"""
from __future__ import annotations

from pathlib import Path

import pooch
from tqdm.auto import tqdm

from ..atomic_write import atomic_write_bytes  # noqa: F401 -- data.resolve imports it from here
from . import config
from .errors import DataError, DownloadError

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


def download(url: str, dest: Path, sha256: str | None = None, desc: str | None = None) -> Path:
    """Download ``url`` to ``dest`` atomically, checking ``sha256`` when given.

    ``url`` is the canonical URL; ``$LM_EVAL_EXT_DOWNLOAD_BASE`` may redirect it.
    A dropped connection, a timeout, a server error or a mismatching body is
    tried again (``RETRIES`` times). Transport failures then raise
    DownloadError; a checksum mismatch raises DataError. Either way nothing is
    left at ``dest`` or beside it.
    """
    import requests  # imported when first needed: it costs start-up time

    reason = config.offline_reason()
    if reason:
        raise DownloadError(f"downloads are disabled ({reason})")
    actual_url = config.download_url(url)
    received: list[str] = []

    def downloader(source: str, output_file: str, fetcher: pooch.Pooch) -> None:
        # total=1 until pooch sets the real size: pooch asks the bar's truth, which tqdm leaves undefined
        # without one; delay=1 shows the bar only once the size is known (and not at all for small files).
        with tqdm(total=1, unit="B", unit_scale=True, unit_divisor=1024, desc=desc or dest.name, disable=None,
                  leave=False, delay=1) as bar:
            try:
                http = pooch.HTTPDownloader(progressbar=bar, chunk_size=1 << 16, timeout=_TIMEOUT_S)
                http(source, output_file, fetcher)
            except requests.HTTPError as err:
                if err.response is not None and 400 <= err.response.status_code < 500:
                    # Not an HTTPError: pooch would retry it, and asking again cannot help.
                    raise DownloadError(f"downloading {source} failed with HTTP {err.response.status_code} "
                                        f"{err.response.reason}") from None
                raise
        received.append(pooch.file_hash(output_file))  # for the mismatch message: pooch gives it only in prose

    fetcher = pooch.create(path=dest.parent, base_url="", registry={dest.name: sha256 and f"sha256:{sha256}"},
                           urls={dest.name: actual_url}, retry_if_failed=RETRIES)
    attempts = f"{RETRIES + 1} attempts"
    try:
        fetcher.fetch(dest.name, downloader=downloader)
    except ValueError as err:  # pooch's hash mismatch, after the retries
        if not (sha256 and received and received[-1] != sha256):
            raise DownloadError(f"downloading {actual_url} failed ({attempts}): {err}") from None
        raise checksum_error(
            f"the download of {actual_url} ({attempts})", sha256, received[-1],
            "Nothing was saved. Retry later; if it persists, the upstream file changed and the "
            "registry (lm_eval_ext/data/manifest.json) needs review.",
        ) from None
    except requests.RequestException as err:
        wrapped = err.args[0] if err.args else None  # urllib3's "Max retries exceeded" says less than its reason
        raise DownloadError(f"downloading {actual_url} failed ({attempts}): "
                            f"{getattr(wrapped, 'reason', None) or err}") from None
    except OSError as err:
        raise DownloadError(f"downloading {actual_url} to {dest} failed: {err}") from None
    return dest
