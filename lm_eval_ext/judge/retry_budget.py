"""The judge's retry budget: how many retries of a run may go at once instead of backing off.

A server error (HTTP 5xx without ``Retry-After``) or a dropped connection is most often one request's bad
luck (a stale kept-alive connection, a worker restarting), and waiting seconds to retry it only makes the
whole run wait for its last item. A server that fails many requests is another matter: retrying those at
once would hammer it. The budget tells the two apart for the run as a whole, as gRPC's retry throttling and
Finagle's ``RetryBudget`` do: a token bucket that starts with ``BURST`` tokens, gains ``ratio`` of a token
at each well-formed reply (up to ``BURST``) and pays one token for each retry that goes at once. While
faults are rarer than ``ratio`` of the replies, their retries go at once; once they are more frequent the
bucket is empty, and retries wait the exponential backoff until replies fill it again.
"""
from __future__ import annotations

import threading

BURST = 10  # retries at the start of a run and at most: a few faults before the first replies go at once
_UNIT = 1000  # tokens are counted in thousandths, as integers: 5 x 0.2 makes exactly one retry


class RetryBudget:
    """A thread-safe token bucket of retries that may go at once (see the module docstring).

    ``ratio`` 0 is no budget: no retry goes at once.
    """

    def __init__(self, ratio: float) -> None:
        self._gain = round(ratio * _UNIT)
        self._cap = BURST * _UNIT if ratio > 0 else 0
        self._tokens = self._cap
        self._lock = threading.Lock()

    def deposit(self) -> None:
        """A well-formed reply came back: ``ratio`` of a retry more, up to the cap."""
        if self._gain:
            with self._lock:
                self._tokens = min(self._cap, self._tokens + self._gain)

    def withdraw(self) -> bool:
        """Pay for one retry at once; False (and nothing paid) when the bucket holds less than one."""
        with self._lock:
            if self._tokens < _UNIT:
                return False
            self._tokens -= _UNIT
            return True
