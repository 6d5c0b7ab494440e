"""HTTP download on pooch: ``Pooch.fetch`` streams into a temporary file with ``HTTPDownloader`` (progress bar),
checks the sha256, moves the file into place only when it matches, and retries a dropped connection or a
mismatch. Here: a client error (404) is made final, the bar is hidden off a terminal, errors are one paragraph."""
from pathlib import Path
from urllib.parse import urlsplit

import pooch
from tqdm.auto import tqdm

from . import config
from .errors import NOT_SAVED, DataError, DownloadError, HostUnreachable

RETRIES = 2  # attempts after the first, 1 s then 2 s later: a dropped connection, a timeout, a 5xx, a bad body
# Seconds to connect, and between two pieces of the reply: a host that takes longer to accept a connection is
# not reachable from here (a firewall that drops packets), and each attempt would otherwise wait the minute.
TIMEOUT = (10, 60)


def checksum_error(what: str, expected: str, actual: str, advice: str) -> DataError:
    """The standard sha256-mismatch error."""
    return DataError(f"Checksum mismatch for {what}: expected sha256 {expected}, got {actual}. "
                     f"The file is corrupted, truncated or a different version. {advice}")


def download(url: str, dest: Path, sha256: str | None = None, desc: str | None = None) -> Path:
    """Download ``url`` (or its ``config.download_url``) to ``dest``, checking ``sha256`` when given; DownloadError
    for a transport failure, DataError for a checksum mismatch, and nothing left behind either way."""
    import requests  # imported when first needed: it costs start-up time

    if reason := config.offline_reason():
        raise DownloadError(f"downloads are disabled ({reason})")
    actual_url, received, attempts = config.download_url(url), [], f"{RETRIES + 1} attempts"

    def downloader(source: str, output_file: str, fetcher: pooch.Pooch) -> None:
        # total=1 until pooch sets the size (pooch asks the bar's truth value); delay=1 spares small files a bar.
        with tqdm(total=1, unit="B", unit_scale=True, unit_divisor=1024, desc=desc or dest.name, disable=None,
                  leave=False, delay=1) as bar:
            try:
                pooch.HTTPDownloader(progressbar=bar, chunk_size=1 << 16, timeout=TIMEOUT)(source, output_file, fetcher)
            except requests.HTTPError as err:
                if err.response is not None and 400 <= err.response.status_code < 500:
                    # Not an HTTPError, which pooch would retry: asking again cannot help.
                    raise DownloadError(f"downloading {source} failed with HTTP {err.response.status_code} "
                                        f"{err.response.reason}") from None
                raise
        received.append(pooch.file_hash(output_file))  # for the mismatch message: pooch gives it only in prose

    fetcher = pooch.create(path=dest.parent, base_url="", registry={dest.name: sha256 and f"sha256:{sha256}"},
                           urls={dest.name: actual_url}, retry_if_failed=RETRIES)
    try:
        fetcher.fetch(dest.name, downloader=downloader)
    except ValueError as err:  # pooch's hash mismatch, after the retries
        if not (sha256 and received and received[-1] != sha256):
            raise DownloadError(f"downloading {actual_url} failed ({attempts}): {err}") from None
        raise checksum_error(f"the download of {actual_url} ({attempts})", sha256, received[-1], NOT_SAVED) from None
    except requests.RequestException as err:
        wrapped = err.args[0] if err.args else None  # urllib3's "Max retries exceeded" says less than its reason
        message = f"downloading {actual_url} failed ({attempts}): {getattr(wrapped, 'reason', None) or err}"
        if isinstance(err, requests.ConnectionError):
            raise HostUnreachable(message, urlsplit(actual_url).netloc) from None
        raise DownloadError(message) from None
    except OSError as err:
        raise DownloadError(f"downloading {actual_url} to {dest} failed: {err}") from None
    return dest
