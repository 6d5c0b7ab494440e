"""Errors of the judge that a user can cause or fix (configuration, endpoint, budget)."""
from ..errors import UserError


class JudgeError(UserError):
    """A judge problem the user can fix; the message says what, where and what to do."""


class JudgeConfigError(JudgeError):
    """An unknown option, a value of the wrong type, a missing template or key variable."""


class JudgeUnreachableError(JudgeError):
    """The judge endpoint could not be reached at all (connection refused, DNS, timeouts on every try)."""


class JudgeRequestRejected(JudgeError):
    """The endpoint refused every request of the run (bad key, no permission, unknown model)."""


class JudgeBudgetError(JudgeError):
    """The run needs more judge calls than the configured cap allows."""


class JudgeCacheError(JudgeError):
    """The judge cache file cannot be opened or read (damaged, not a cache, no permission)."""
