"""The data layer's exceptions: each message is one complete, user-facing paragraph."""
from __future__ import annotations

from ..errors import UserError

REVIEW = "the registry (lm_eval_ext/data/manifest.json) needs review."
NOT_SAVED = f"Nothing was saved. Retry later; if it persists, the upstream file changed and {REVIEW}"


class DataError(UserError):
    """A dataset file is missing, corrupted, unsafe or unreadable (what failed, where it looked, what to do)."""

    def fresh(self) -> DataError:
        """The same error as a new exception, to raise again without the traceback of its first raise."""
        return type(self)(str(self))


class DownloadError(DataError):
    """A download failed in transport (network, HTTP status, offline): resolution adds where it looked."""


class HostUnreachable(DownloadError):
    """The download host ``host`` could not be connected to, or its connections broke, in all tries (no network, a
    name that does not resolve, a refused or timed-out connection): its other files would fail the same way."""

    def __init__(self, message: str, host: str) -> None:
        super().__init__(message)
        self.host = host

    def fresh(self) -> HostUnreachable:
        return HostUnreachable(str(self), self.host)
