"""Per-batch progress of streaming queries, exact and printed once per completed micro-batch.

Polling ``query.lastProgress`` repeats a batch until the next one completes and misses batches that
complete between two polls; Spark's StreamingQueryListener sees every completed batch exactly once.
The figures come from the batch's own progress: input rows, and the windowed operators' observed
counts (panes, late rows dropped, bad rows), which count what the operator produced rather than
what the sink wrote (a sink row may be a late-data or dead-letter record, and foreachBatch sinks
report no rows at all).
"""
from __future__ import annotations

import datetime as dt
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, TextIO

from pyspark.sql.streaming import StreamingQueryListener

from ...runners.totals import Totals
from ...time import END_OF_INPUT_WATERMARK, time_text

#: The prefix of a windowed operator's entries in ``observedMetrics`` (``driver.stage.observation_name``;
#: ``batch_progress`` reads them), and the count of end-of-input marker rows an input's entry holds
#: (``driver.inputs.drop_end_of_input``: a marker row is no input row of the batch's line).
OBSERVATION_PREFIX = "windowed_operator "
MARKER_ROWS = "end_of_input_rows"



@dataclass(frozen=True)
class BatchProgress:
    """One completed micro-batch of one query."""

    query: str
    batch_id: int
    input_rows: int
    #: Pane rows (retractions included) the query's windowed operators emitted in this batch.
    panes: int
    late_rows_dropped: int
    bad_rows: int
    #: Spark's event-time watermark of the batch (epoch ms), None before it has one.
    watermark_ms: Optional[int]
    duration_ms: int
    #: Under a per-partition watermark (``bounded_disorder(partition=...)``): the operator's own
    #: watermark of the batch (Spark's runs ahead of it), the partition holding it back (after its
    #: input's name in a merge) and its lag behind the most advanced partition, in ms.
    operator_watermark_ms: Optional[int] = None
    held_back_by: Optional[str] = None
    held_back_lag_ms: Optional[int] = None

    @property
    def input_ended(self) -> bool:
        """Whether the input had ended by this batch: its watermark is the end-of-input marker's
        (``apply(end_of_input=...)``), so this batch closed every window and emitted the last panes."""
        return ended(self.watermark_ms)


def ended(watermark_ms: Optional[int]) -> bool:
    """Whether a batch's watermark is the end-of-input marker's, less a watermark delay (at most
    ``time.MAX_END_OF_INPUT_DELAY``): no data row reaches it."""
    return watermark_ms is not None and watermark_ms >= END_OF_INPUT_WATERMARK


def _watermark_ms(text: Optional[str]) -> Optional[int]:
    if not text:
        return None
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000)


def batch_progress(progress: Any, output_operators: Optional[Mapping[str, str]] = None) -> BatchProgress:
    """A completed batch's figures from a ``StreamingQueryProgress`` or its dict/JSON form.

    Late and bad rows are summed over the query's windowed operators; panes are those of the
    operator whose panes the query writes (``output_operators``: query name -> its observation
    name, for chains: the earlier stages' panes feed the next stage, not the sink), else summed."""
    data: Mapping[str, Any] = progress if isinstance(progress, Mapping) else json.loads(progress.json)
    query = data.get("name") or str(data.get("id"))
    observations = {name: metrics for name, metrics in (data.get("observedMetrics") or {}).items()
                    if name.startswith(OBSERVATION_PREFIX)}
    observed = list(observations.values())

    def total(field: str, among: list = observed) -> int:  # a metric is a Row in a progress object, a dict in JSON
        return sum(int((m.asDict() if hasattr(m, "asDict") else m).get(field) or 0) for m in among)

    output = (output_operators or {}).get(query)
    panes = total("panes", [observations[output]]) if output in observations else total("panes")
    held = _held_back([observations[output]] if output in observations else observed, observed)
    return BatchProgress(query=query, batch_id=int(data["batchId"]),
                         input_rows=int(data.get("numInputRows") or 0) - total(MARKER_ROWS), panes=panes,
                         late_rows_dropped=total("late_rows_dropped"), bad_rows=total("bad_rows"),
                         watermark_ms=_watermark_ms((data.get("eventTime") or {}).get("watermark")),
                         duration_ms=int((data.get("durationMs") or {}).get("triggerExecution") or 0), **held)


def _held_back(observed: list, every: list) -> dict[str, Any]:
    """The per-partition watermark's figures of the first operator that reports them (``operator_watermark_ms``,
    ``held_back_by``, ``held_back_lag_ms``; none in a batch where no key group ran).  A later stage of a
    chain reports the watermark it follows, its first stage's: the partition holding it back is that
    stage's (the first among ``every`` operator of the query that names one)."""
    def as_dict(metrics: Any) -> dict:
        return metrics.asDict() if hasattr(metrics, "asDict") else dict(metrics)

    for found in map(as_dict, observed):
        if found.get("watermark_ms") is not None:
            if found.get("held_back_by") is None:
                found = {**found, **next((dict(held_back_by=other["held_back_by"],
                                               held_back_lag_ms=other.get("held_back_lag_ms"))
                                          for other in map(as_dict, every) if other.get("held_back_by") is not None),
                                         {})}
            lag = found.get("held_back_lag_ms")
            return {"operator_watermark_ms": int(found["watermark_ms"]), "held_back_by": found.get("held_back_by"),
                    "held_back_lag_ms": int(lag) if lag is not None else None}
    return {}


def format_watermark(ms: Optional[int]) -> str:
    """Spark reports "no watermark yet" as 1970-01-01 and the end-of-input marker's as 2255-03-14
    (less the watermark's delay): neither is a time a reader should see."""
    if ms is None or ms <= 0:
        return "none yet"
    if ended(ms):  # the marker's time minus the watermark's delay
        return "end of input"
    return time_text(ms)


def batch_line(batch: BatchProgress, totals: Totals) -> str:
    """One batch's line; under a per-partition watermark the operator's own watermark (Spark's runs
    ahead of it) and the partition holding it back, with its lag."""
    bad = f", {batch.bad_rows} bad rows" if batch.bad_rows else ""
    watermark = format_watermark(batch.watermark_ms)
    if batch.operator_watermark_ms is not None:
        watermark = format_watermark(batch.operator_watermark_ms)
        if batch.held_back_by is not None and batch.held_back_lag_ms is not None:
            watermark += f" held back by partition {batch.held_back_by} ({batch.held_back_lag_ms / 1000:g} s behind)"
    return (f"{batch.query}: batch {batch.batch_id}: {batch.input_rows} rows in, {batch.panes} panes out "
            f"({totals.panes} so far), {batch.late_rows_dropped} late rows dropped{bad}, watermark "
            f"{watermark} ({batch.duration_ms / 1000:.1f} s)")


class ProgressPrinter(StreamingQueryListener):
    """Prints one line per completed batch of the queries it is told about (all, without names).

    Register with ``spark.streams.addListener``; Spark calls it on its listener thread, after the
    batch committed.  ``wait_for_end`` lets the caller print totals only after the last batch's
    event has arrived (events reach listeners asynchronously, after the query may have stopped)."""

    def __init__(self, out: TextIO, names: Optional[Iterable[str]] = None,
                 prefix: Callable[[], str] = lambda: "", output_operators: Optional[Mapping[str, str]] = None) -> None:
        self.out = out
        self.output_operators = dict(output_operators or {})  # see batch_progress
        self.names = set(names) if names is not None else None
        self.prefix = prefix
        self.totals: dict[str, Totals] = {}
        self._ended: set[str] = set()
        #: Names of the queries whose input has ended (a completed batch at the end-of-input watermark).
        self.input_ended: set[str] = set()
        #: Per query, the watermark (ms) each batch ran with (the pane timeline's watermark line).
        self.watermarks: dict[str, dict[int, Optional[int]]] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def _wanted(self, name: Optional[str]) -> bool:
        return self.names is None or name in self.names

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            batch = batch_progress(event.progress, self.output_operators)
        except Exception as exc:  # noqa: BLE001 - Spark would log it where nobody looks
            print(f"(progress of a batch could not be read: {type(exc).__name__}: {exc})", file=self.out, flush=True)
            return
        if not self._wanted(batch.query):
            return
        with self._lock:
            if batch.input_ended:
                self.input_ended.add(batch.query)
            self.watermarks.setdefault(batch.query, {})[batch.batch_id] = (
                batch.watermark_ms if batch.watermark_ms and batch.watermark_ms > 0 else None)
            totals = self.totals.setdefault(batch.query, Totals(input_rows=0))
            totals.add(batch.panes, batch.late_rows_dropped, batch.bad_rows, batch.input_rows)
            print(self.prefix() + batch_line(batch, totals), file=self.out, flush=True)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        with self._changed:
            self._ended.add(str(event.id))
            self._changed.notify_all()

    def wait_for_end(self, query_ids: Iterable[str], timeout: float = 10.0) -> bool:
        """True once every query's termination event arrived (so all its batch events did)."""
        wanted = {str(q) for q in query_ids}
        deadline = time.monotonic() + timeout
        with self._changed:
            while not wanted <= self._ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True


def await_queries(queries: list[Any], printer: ProgressPrinter, until: Callable[[], bool] = lambda: False) -> None:
    """Until every query has ended and ``printer`` has seen its last batch, or ``until()`` is true (a
    stop asked for: the queries are left to the caller).  A query whose input has ended (a completed
    batch at the end-of-input watermark: its last panes are written) is stopped, so that a query
    with a ``processingTime`` trigger, which Spark would run forever, ends too.  Polls rather than
    blocking in ``awaitTermination``, so that a signal handler's request (``until``) is seen within
    a poll; the first query to fail stops the others and its error is raised."""
    while any(q.isActive for q in queries):
        if until():
            return
        if any(not q.isActive and q.exception() is not None for q in queries):
            break
        for query in queries:
            if query.isActive and query.name in printer.input_ended:
                query.stop()
        time.sleep(0.2)
    failed = next((q for q in queries if q.exception() is not None), None)
    if failed is not None:
        for query in queries:
            query.stop()
        raise failed.exception()
    printer.wait_for_end(q.id for q in queries)


def stop_at_end_of_input(query: Any, timeout: Optional[float] = None, poll: float = 0.2) -> bool:
    """Wait until ``query`` has completed a batch at the end of its input, then stop it; return True.

    The input ends at a row of the ``end_of_input`` column given to ``apply()``; the batch after it
    runs at the end-of-input watermark, closes every window and writes the last panes, and the query
    is stopped once that batch has committed.  Use it instead of ``query.processAllAvailable()``,
    which never returns for a query with a ``processingTime`` trigger (processing-time firings,
    idle timeouts: Spark runs batches without data for as long as the query runs).  Returns False
    when ``timeout`` seconds pass first (the query keeps running); a failed query raises ``QueryFailedError``
    (one line naming the cause; Spark's error chained).
    A query that ends by itself (``availableNow``) returns True once it has."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if any(ended(_watermark_ms((p.get("eventTime") or {}).get("watermark"))) for p in
               (json.loads(progress.json) for progress in query.recentProgress)):
            query.stop()
            return True
        if not query.isActive:
            error = query.exception()
            if error is not None:
                from .errors import raise_query_failed

                raise_query_failed(error, "the query failed while stop_at_end_of_input waited for the end of its input")
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(poll)


def print_progress(spark: Any, names: Optional[Iterable[str]] = None, out: Optional[TextIO] = None) -> ProgressPrinter:
    """Print the CLI's line per completed micro-batch for the session's queries named ``names``
    (their ``queryName``; all queries when None) to ``out`` (stdout): rows in, panes out, late rows
    dropped, bad rows, the watermark ("end of input" once the input has ended).  Returns the
    listener: ``spark.streams.removeListener(printer)`` stops it; ``printer.totals`` holds the sums
    per query, ``printer.input_ended`` the queries whose input has ended.

        printer = print_progress(spark, ["sessions"])
        query = panes.writeStream.queryName("sessions")...start()
    """
    import sys

    printer = ProgressPrinter(out if out is not None else sys.stdout, names=names)
    spark.streams.addListener(printer)
    return printer
