"""The Spark runner's refusals, and the one-line form of a failure met on a user's own query."""
from __future__ import annotations

from typing import NoReturn

from ..error_summary import error_summary


class SparkOperatorError(ValueError):
    """A DataFrame or operator that the Spark runner cannot run, with the column or type at fault."""


class QueryFailedError(RuntimeError):
    """A Spark error met where the library runs on a user's own query (the table sink reading its
    micro-batch, ``stop_at_end_of_input`` waiting for the end): its message is one line naming the
    real cause first (``error_summary``: a source file's type mismatch, not the 550 lines of the
    sink's stack around it) and where it was met; Spark's error in full is chained (``__cause__``)."""


def raise_query_failed(error: BaseException, where: str) -> NoReturn:
    """Raise ``QueryFailedError`` for ``error`` met ``where`` (e.g. "while the table sink read the
    micro-batch"), chained to it."""
    summary = error_summary(error)
    prefix = f"{QueryFailedError.__name__}: "
    if summary.startswith(prefix):  # (the sink's, inside the query's error: said once)
        raise QueryFailedError(summary[len(prefix):]) from error
    raise QueryFailedError(f"{summary} ({where}; Spark's error in full is chained to this one)") from error
