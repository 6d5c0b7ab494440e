"""Running untrusted SQL against SQLite files without letting it change anything or hang the run.

- :mod:`.readonly`: a connection that can only read (read-only URI, ``query_only``, an
  authorizer, limits, a time bound per query), plus the ``stdev`` aggregate.
- :mod:`.worker`: the loop a sandbox process runs.
- :mod:`.pool`: :class:`SandboxPool`, worker processes with a watchdog that kills and
  replaces a stuck or crashed worker.
- :mod:`.compare`: comparing result sets (MAGNIFICo's authors' rule, Spider test-suite style),
  in the worker when a query comes with the gold rows (:class:`Against`).
"""
from .compare import COMPARISONS, Against, authors_match, query_orders, results_match, testsuite_match
from .pool import SandboxPool, shared_pool
from .readonly import Limits, QueryResult, connect_readonly, run_query

__all__ = [
    "COMPARISONS",
    "Against",
    "Limits",
    "QueryResult",
    "SandboxPool",
    "authors_match",
    "connect_readonly",
    "query_orders",
    "results_match",
    "run_query",
    "shared_pool",
    "testsuite_match",
]
