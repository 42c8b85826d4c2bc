"""The Nexmark queries on Spark: ours (the operators of ``queries.py`` applied to streaming
DataFrames) and native PySpark where Spark can express the query (append mode: each window's final
result once the watermark passes it)."""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from pyspark import cloudpickle

from . import queries
from .generator import END_OF_INPUT, SPARK_SCHEMA
from .queries import AUCTION_COLUMNS, BID_COLUMNS, PERSON_COLUMNS, Pane, QueryConfig, operator

# the queries' callables run on Spark's Python workers, which cannot import this package
cloudpickle.register_pickle_by_value(queries)

#: The marker column of the event files' last row (``generator.write_files(end_marker=True)``).
END_COLUMN = "end_of_input"
#: Queries native Spark can express (q12 fires on processing time; q11's early firings are not
#: expressible, its final counts are: native ``session_window``).
NATIVE = ("q5", "q5r", "q7", "q8", "q11")
#: Queries whose operators run in Spark's processing-time mode: timers are always pending there, so
#: such a query needs a processing-time trigger (``availableNow`` would never end).
PROCESSING_TIME = ("q12",)


def source(spark: Any, directory: Path, fmt: str = "parquet") -> Any:
    reader = spark.readStream.schema(f"{SPARK_SCHEMA}, {END_COLUMN} boolean").option("maxFilesPerTrigger", 1)
    return reader.parquet(str(directory)) if fmt == "parquet" else reader.json(str(directory))


def _kind(df: Any, column: str, columns: list[str]) -> Any:
    from pyspark.sql import functions as F

    return df.where(F.col(column).isNotNull() | F.col(END_COLUMN)).select(*columns, END_COLUMN)


@contextmanager
def library_setting(spark: Any, conf: str, value: str) -> Iterator[None]:
    """``conf`` set to ``value`` while the block applies an operator: the library reads its settings
    when an operator is applied, so the session is left as it was once the plan is built."""
    spark.conf.set(conf, value)
    try:
        yield
    finally:
        spark.conf.unset(conf)


def ours(query: str, config: QueryConfig, events: Any, **options: Any) -> Any:
    """Our panes of ``query`` over the streaming DataFrame of all events."""
    op = operator(query, config)
    if query == "q8":
        return op.apply(_kind(events, "name", PERSON_COLUMNS), _kind(events, "itemName", AUCTION_COLUMNS),
                        end_of_input=END_COLUMN, **options)
    return op.apply(_kind(events, "auction", BID_COLUMNS), end_of_input=END_COLUMN, **options)


def native(query: str, config: QueryConfig, events: Any) -> Optional[Any]:
    """Native Spark's final results of ``query`` (append mode), or None where Spark cannot express it."""
    from pyspark.sql import functions as F

    delay = f"{config.max_disorder_ms} milliseconds"
    # The watermark is taken over every row (the end-of-input row included) before keeping a kind;
    # a filter that names only other columns would be pushed below withWatermark (Spark's optimizer
    # does) and hide the end-of-input row from it, so each filter names the event-time column too.
    timed = events.withColumn("t", F.timestamp_millis("dateTime")).withWatermark("t", delay)
    bids = timed.where(_kept("auction", "t"))
    size, period = f"{config.window_ms} milliseconds", f"{config.period_ms} milliseconds"
    if query == "q5":
        counts = bids.groupBy(F.window("t", size, period), "auction").agg(F.count("*").alias("num"))
        per_window = counts.groupBy(F.window_time("window").alias("wt")).agg(
            F.max("num").alias("top"), F.collect_list(F.struct("auction", "num")).alias("counts"))
        # window_time is the window's end - 1 us: its start in ms is that, truncated, + 1 - size
        return per_window.select((F.unix_millis("wt") + 1 - config.window_ms).alias("start"),
                                 F.filter("counts", lambda c: c["num"] == F.col("top")).alias("hot"))
    if query == "q5r":
        return bids.groupBy(F.window("t", size, period)).agg(F.count("*").alias("num")).select(
            F.unix_millis("window.start").alias("start"), "num")
    if query == "q7":
        return bids.groupBy(F.window("t", size)).agg(
            F.max("price").alias("top"), F.collect_list(F.struct(*BID_COLUMNS)).alias("bids")).select(
            F.unix_millis("window.start").alias("start"),
            F.filter("bids", lambda b: b["price"] == F.col("top")).alias("highest"))
    if query == "q8":
        persons = timed.where(_kept("name", "t")).select(
            F.window("t", size).alias("pw"), F.col("id"), F.col("name"))
        auctions = (events.withColumn("at", F.timestamp_millis("dateTime")).withWatermark("at", delay)
                    .where(_kept("itemName", "at"))
                    .select(F.window("at", size).alias("aw"), F.col("seller"), F.col("reserve")))
        joined = persons.join(auctions, (F.col("pw") == F.col("aw")) & (F.col("id") == F.col("seller")))
        return joined.select(F.unix_millis("pw.start").alias("start"), "id", "name", "reserve")
    if query == "q11":
        sessions = bids.groupBy(F.session_window("t", f"{config.session_gap_ms} milliseconds"), "bidder").agg(
            F.count("*").alias("num"))
        return sessions.select("bidder", F.unix_millis("session_window.start").alias("start"),
                               F.unix_millis("session_window.end").alias("end"), "num")
    return None


def _kept(column: str, event_time: str) -> Any:
    """``column IS NOT NULL`` as one predicate that also names the event-time column (see ``native``)."""
    from pyspark.sql import functions as F

    return F.when(F.col(event_time).isNotNull(), F.col(column).isNotNull()).otherwise(F.lit(False))


def check_final(query: str, native: bool, rows: list[Any], events: Any, config: QueryConfig, label: str) -> None:
    """A run's final result against the brute-force model over all ``events``: an AssertionError
    naming ``label`` where they differ."""
    expected = queries.model(query, events.persons, events.auctions, events.bids, config,
                             touching_sessions_merge=native and query == "q11")
    got = native_result(query, rows) if native else queries.final_result(query, ours_panes(rows, query))
    if got != expected:
        raise AssertionError(f"{label}: the result differs from the model")


def prepared(events: int, name: str) -> tuple[Path, Any, Any, QueryConfig]:
    """A benchmark's stream and session: a work directory holding ``events`` Nexmark events as ten
    parquet micro-batches (``work / "events"``), the events, a local[2] session, the queries' config."""
    import tempfile

    from windowed_operator.spark import local_session

    from .generator import NexmarkConfig, generate, write_files

    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    stream = NexmarkConfig(events=events)
    generated = generate(stream)
    write_files(generated, work / "events", -(-events // 10), fmt="parquet", end_marker=True)
    spark = local_session(app_name=name, shuffle_partitions=2, spark_log=str(work / "spark.log"))
    return work, generated, spark, QueryConfig(max_disorder_ms=stream.max_disorder_ms)


#: How rows reach ours' stateful processor (``handoff``): pyspark's own regrouping, a tuple per row;
#: packed in the scan stage (``packed_input``); slices of Arrow batches (``sliced_handoff``, a local
#: session's default).
HANDOFFS = ("row by row", "packed", "sliced")


@contextmanager
def handoff(spark: Any, name: str) -> Iterator[None]:
    """Operators applied in the block take their rows the ``name`` way (one of ``HANDOFFS``)."""
    from windowed_operator.spark.base.handoff import PACK_CONF, row_by_row

    if name not in HANDOFFS:
        raise ValueError(f"handoff must be one of {HANDOFFS}, not {name!r}")
    if name == "row by row":
        with row_by_row(spark):
            yield
    else:
        with library_setting(spark, PACK_CONF, str(name == "packed").lower()):
            yield


def ours_panes(rows: list[dict], query: str) -> list[Pane]:
    """Our output rows (``window_start``/``window_end`` as epoch ms; null for the global window) as panes."""
    return [Pane(r.get("key"), _ms(r["ws"]), _ms(r["we"]), r["value"], bool(r["is_retraction"]))
            for r in rows if r.get("record_type", "pane") == "pane"]


def _ms(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def native_result(query: str, rows: list[Any]) -> set:
    """Native Spark's final results in the shape of ``queries.model``'s."""
    from .queries import _multiset

    if query == "q5":
        return {(int(r["start"]), int(c["auction"]), int(c["num"])) for r in rows for c in r["hot"]}
    if query == "q5r":
        return {(int(r["start"]), int(r["num"])) for r in rows}
    if query == "q7":
        return {(int(r["start"]), int(b["auction"]), int(b["bidder"]), int(b["price"]), int(b["dateTime"]))
                for r in rows for b in r["highest"]}
    if query == "q8":
        return _multiset((int(r["start"]), int(r["id"]), r["name"], int(r["reserve"])) for r in rows)
    if query == "q11":
        return {(int(r["bidder"]), int(r["start"]), int(r["end"]), int(r["num"])) for r in rows}
    raise ValueError(f"native Spark cannot express {query}")


@dataclass
class Run:
    seconds: float
    #: Every output row, times as epoch ms (``ws``/``we`` for the window).
    rows: list
    #: Each micro-batch's progress as a dict, in order.
    progress: list


def end_watermark(query: str, config: QueryConfig) -> Optional[int]:
    """For a query in processing-time mode, the watermark its end-of-input row brings (the row's
    time less the watermark's delay): the batch that runs at it emits every remaining pane (each
    window's end is reached) and is the last one with output.  None for the others, which
    ``availableNow`` ends."""
    return END_OF_INPUT - config.max_disorder_ms if query in PROCESSING_TIME else None


def run_to_end(out: Any, checkpoint: Path, until_watermark: Optional[int] = None, timeout: float = 600.0) -> Run:
    """The query ``out`` to the end of its input, collecting its rows: ``availableNow``, or, given
    ``until_watermark`` (``end_watermark``: a query in processing-time mode, where Spark always
    has timers pending and availableNow would not end), Spark's default trigger (the next batch as
    soon as one ends, as availableNow runs them) stopped once a batch run at that watermark is
    done."""
    rows: list = []

    def collect(batch_df: Any, batch_id: int) -> None:
        columns = [c for c in batch_df.columns if c not in ("window_start", "window_end", "timestamp")]
        if "window_start" in batch_df.columns:
            batch_df = batch_df.selectExpr(*columns, "unix_millis(window_start) as ws", "unix_millis(window_end) as we")
        # (as Arrow: the sink's Python objects are the harness's cost, not the engines'; ``collect()``'s
        # Rows took about a second of the driver's CPU per q8 run, ours' wider pane rows more than native's)
        rows.extend(batch_df.toArrow().to_pylist())

    writer = out.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
    start = time.perf_counter()
    if until_watermark is None:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:
        query = writer.start()
        try:
            _wait(lambda: _ran_at(query, until_watermark), timeout)
        finally:
            query.stop()
    seconds = time.perf_counter() - start
    return Run(seconds, rows, _progress(query))


def _ran_at(query: Any, watermark: int) -> bool:
    """Whether a batch run at ``watermark`` or later is done (every completed batch's progress is
    looked at: several may complete between two polls)."""
    if query.exception() is not None:
        raise RuntimeError(f"the Spark query failed: {query.exception()}")
    for progress in _progress(query):
        seen = (progress.get("eventTime") or {}).get("watermark")
        if seen is not None and _epoch_ms(seen) >= watermark:
            return True
    return False


def _progress(query: Any) -> list[dict]:
    """The query's recent batches' progress, each as a dict (pyspark gives objects or dicts)."""
    return [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]


def _epoch_ms(iso: str) -> int:
    """Spark's progress time (``2015-07-15T00:00:18.972Z``) as epoch milliseconds."""
    from datetime import datetime

    return round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def _wait(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the Spark query made no progress in time")
        time.sleep(0.05)
