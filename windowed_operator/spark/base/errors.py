"""The Spark runner's refusals, and the one-line form of a failure met on a user's own query."""
from __future__ import annotations

from typing import NoReturn

from ...error_summary import error_summary


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


#: The JVM's exceptions that mean a thread was interrupted (Spark's ``StreamExecution.IO_EXCEPTION_NAMES``).
_INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                  "java.nio.channels.ClosedByInterruptException")
#: How a Python ``foreachBatch`` function's interrupted py4j call begins, for Spark's check.
_PY4J_CALL = "py4j.protocol.Py4JJavaError: An error occurred while calling"


class QueryStoppedError(RuntimeError):
    """``query.stop()`` interrupted the library's work inside a micro-batch (the table sink reading
    it).  Its message is short and says so in the form Spark recognizes as a stop: the interrupted
    call's own error, thousands of characters long, made Spark's check (a regular expression matched
    one character per stack frame) overflow the stream thread's stack, and print
    ``java.lang.StackOverflowError`` after a stop that lost nothing."""


def interrupted(error: BaseException) -> bool:
    """Whether ``error`` is a py4j call interrupted by a stop of the query."""
    return any(name in str(error) for name in _INTERRUPTIONS)


def raise_query_stopped(error: BaseException, where: str) -> NoReturn:
    """Raise ``QueryStoppedError`` for the interrupted ``error`` met ``where`` (its trace is left out:
    it is what made Spark's check overflow)."""
    name = next(name for name in _INTERRUPTIONS if name in str(error))
    raise QueryStoppedError(f"{_PY4J_CALL} the JVM {where}: {name} (the query was stopped)") from None
