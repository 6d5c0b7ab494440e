"""The data layer's exceptions: each message is one complete, user-facing paragraph."""
from ..errors import UserError

REVIEW = "the registry (lm_eval_ext/data/manifest.json) needs review."
NOT_SAVED = f"Nothing was saved. Retry later; if it persists, the upstream file changed and {REVIEW}"


class DataError(UserError):
    """A dataset file is missing, corrupted, unsafe or unreadable (what failed, where it looked, what to do)."""


class DownloadError(DataError):
    """A download failed in transport (network, HTTP status, offline): resolution adds where it looked."""
