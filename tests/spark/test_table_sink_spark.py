"""The table sink under Spark (``foreachBatch``): a Spark run's table equals the local runner's for
the same batches, late-data rows mixed into the panes are skipped, and the batches are recorded
under the streaming query's id."""
from __future__ import annotations

import random
import warnings

import pytest
import sqlalchemy as sa

from accumulations import Count, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder
from windowed_operator.sinks import PROGRESS_TABLE, TableSink

from .harness import BASE, END_COLUMN, MARKED_SCHEMA, run_local_like_spark, write_batches

pytestmark = pytest.mark.spark

DELAY = 3_000


def make_batches(seed: int, n_batches: int = 5, per_batch: int = 8) -> list[list[dict]]:
    rng = random.Random(seed)
    return [[{"user": rng.choice("abc"), "amount": rng.randint(1, 9), "ts": BASE + 6_000 * (b + 1) - rng.randint(0, 16_000)}
             for _ in range(per_batch)] for b in range(n_batches)]


def sessions_operator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(
            SessionWindows(2_500), Sum("amount"), key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
            trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
            .accumulating_and_retracting_fired_panes(), allowed_lateness=1_000, late_data_output=True)


def counts_operator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(
            TimeWindows(5_000), Count(), key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
            trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=2).discarding_fired_panes())


def table(sink: TableSink) -> list[tuple]:
    return [tuple(r.values()) for r in sink.rows()]


@pytest.mark.parametrize("make_operator, mode", [(sessions_operator, "upsert"), (counts_operator, "add")])
def test_spark_table_equals_local_table(spark, tmp_path, make_operator, mode):
    op = make_operator()
    batches = make_batches(7)
    source = tmp_path / "in"
    write_batches(source, batches)
    spark_sink = TableSink(str(tmp_path / "spark.db"), "results", mode=mode, operator=op, columns=["timing", "pane_index"])
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = (op.apply(df, end_of_input=END_COLUMN).writeStream.foreachBatch(spark_sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()

    runner = run_local_like_spark(op, batches, DELAY)
    local_sink = TableSink(str(tmp_path / "local.db"), "results", mode=mode, operator=op,
                           columns=["timing", "pane_index"])
    local_sink(runner.outputs, 0)
    assert table(spark_sink) == table(local_sink)
    assert len(table(local_sink)) > 3
    if mode == "upsert":
        assert runner.late_data, "the stream should have late rows (their records are in Spark's pane frames)"
        assert any(p.is_retraction and p.is_last for p in runner.outputs), "the stream should merge sessions"
    with spark_sink.engine.connect() as conn:  # (the progress is the query's, by its id)
        progress = conn.execute(sa.text(f"SELECT query_id, batch_id FROM {PROGRESS_TABLE}")).all()
    assert progress == [(str(query.id), query.lastProgress["batchId"])]


def test_a_pipeline_files_table_sink_gets_the_same_table_on_spark_and_run_local(spark, tmp_path):
    """`run --local` and Spark produce the same table from one pipeline file (sessions in retracting
    mode with merges, late data and dead letters mixed into the panes)."""
    import io
    import sqlite3

    from test_pipeline_table_sink import write_pipeline

    from windowed_operator.pipeline import load_pipeline
    from windowed_operator.pipeline.local_run import run_pipeline_locally
    from windowed_operator.spark.pipeline_run import run_pipeline

    sink = "{url: 'sqlite:///results.db', table: sessions, columns: [timing, pane_index, is_last]}"
    local_dir, spark_dir = tmp_path / "local", tmp_path / "spark"
    for directory in (local_dir, spark_dir):
        write_pipeline(directory, sink)
    run_pipeline_locally(load_pipeline(local_dir / "pipeline.yaml"), out=io.StringIO())
    run_pipeline(load_pipeline(spark_dir / "pipeline.yaml"), spark=spark, workdir=tmp_path / "work", out=io.StringIO())

    def rows(directory):
        with sqlite3.connect(directory / "results.db") as db:
            return db.execute("SELECT key, window_start, window_end, value, timing, pane_index, is_last "
                              "FROM sessions ORDER BY key, window_start").fetchall()

    assert rows(spark_dir) == rows(local_dir) and len(rows(local_dir)) == 3

    def settled(directory):  # (both recorded their watermark: the end of input settled every row)
        with sqlite3.connect(directory / "results.db") as db:
            return db.execute("SELECT count(*) FROM sessions_status WHERE settled").fetchone()[0]

    assert settled(spark_dir) == settled(local_dir) == 3


def test_a_bad_source_file_is_named_in_the_first_line_not_as_the_sink_s_error(spark, tmp_path):
    """A parquet file of the user's whose column has another type than the stream's schema fails the
    query inside the sink's read of the micro-batch (``df.toArrow()``): the error a user's own job
    gets (``stop_at_end_of_input``) is one line naming the file's type mismatch first, and the sink's
    error inside the query's says the same; Spark's error in full is chained."""
    import pandas as pd

    from windowed_operator.spark import stop_at_end_of_input
    from windowed_operator.spark.base.errors import QueryFailedError

    source = tmp_path / "in"
    source.mkdir()
    pd.DataFrame({"user": ["a"], "amount": ["seven"], "ts": [BASE]}).to_parquet(source / "bad.parquet")
    df = spark.readStream.schema("user string, amount bigint, ts bigint").parquet(str(source))
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                               watermark=bounded_disorder(DELAY))
    query = (op.apply(df).writeStream.foreachBatch(TableSink(f"sqlite:///{tmp_path / 'out.db'}", "totals"))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    with pytest.raises(QueryFailedError) as caught:
        stop_at_end_of_input(query, timeout=600)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("[FAILED_READ_FILE"), message
    assert "amount" in message and "met while the table sink read its micro-batch" in message
    assert caught.value.__cause__ is not None and "Traceback" in str(caught.value.__cause__)


def test_a_stop_while_the_sink_reads_its_batch_is_one_short_line_spark_takes_for_a_stop(spark):
    """``query.stop()`` interrupts the stream thread; if that lands in the table sink's read of a
    micro-batch, the read fails with the interrupted call's error, thousands of characters of Java
    trace.  Spark decides whether a ``foreachBatch`` function's error was the stop with a regular
    expression that recurses once per character of the message (``StreamExecution.PROXY_ERROR``), so
    that message overflowed the stream thread's stack: ``java.lang.StackOverflowError`` printed after
    a stop (4 stops out of 4, a partitioned query with an idle timeout, running a batch every 100 ms).
    The sink now raises ``QueryStoppedError``, one short line, which Spark's own check takes for a stop;
    here that check is run in the JVM on both forms of the proxy's message."""
    import traceback

    from windowed_operator.spark.base.errors import raise_query_failed, raise_query_stopped

    class Py4JJavaError(Exception):  # (what df.toArrow() raises when its thread was interrupted)
        pass

    Py4JJavaError.__module__, Py4JJavaError.__qualname__ = "py4j.protocol", "Py4JJavaError"  # (as printed)

    interrupted = Py4JJavaError(
        "An error occurred while calling o1571.getResult.\n: org.apache.spark.SparkException: Exception thrown in "
        "awaitResult: \n" + "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)\n"
        * 400 + "Caused by: java.lang.InterruptedException\n")

    def proxy_message(raise_for) -> str:
        try:
            raise_for(interrupted, "while the table sink read its micro-batch")
        except Exception:  # noqa: BLE001 - formatted as py4j hands it to the JVM
            return "An exception was raised by the Python Proxy. Return Message: " + traceback.format_exc()
        raise AssertionError("nothing raised")

    from windowed_operator.spark.base.errors import QueryStoppedError
    from windowed_operator.spark.base.table_sink import read_spark_batch

    class Batch:  # (a micro-batch whose read the stop interrupted)
        def toArrow(self):
            raise interrupted

    with pytest.raises(QueryStoppedError):
        read_spark_batch(Batch())
    jvm = spark.sparkContext._jvm
    stream_execution = jvm.org.apache.spark.sql.execution.streaming.runtime.StreamExecution
    context = spark.sparkContext._jsc.sc()
    short = proxy_message(raise_query_stopped)
    assert len(short) < 2_000 and "QueryStoppedError" in short
    assert stream_execution.isInterruptionException(jvm.py4j.Py4JException(short), context)
    with pytest.raises(Exception, match="StackOverflowError"):  # (the sink's error before: the full trace chained)
        stream_execution.isInterruptionException(jvm.py4j.Py4JException(proxy_message(raise_query_failed)), context)


@pytest.mark.parametrize("make_operator, mode", [(sessions_operator, "upsert"), (counts_operator, "add")])
def test_completeness_on_spark_settles_only_final_rows(spark, tmp_path, make_operator, mode):
    """``with_watermark``'s frame into the sink: each batch records the watermark its key groups ran
    at; every row the status view calls settled after any batch is the row the table ends with, the
    end of input settles every row, and rows settle before the end (the check is not vacuous).  The
    table itself equals the one of the plain output."""
    from table_sink_model import check_status, ms

    from windowed_operator.spark import with_watermark

    op = make_operator()
    batches = make_batches(11, n_batches=6)
    source = tmp_path / "in"
    write_batches(source, batches)
    sink = TableSink(str(tmp_path / "spark.db"), "results", mode=mode, operator=op,
                     columns=["timing", "pane_index", "is_last", "batch_id"])
    statuses, marks = [], []

    def recorded(batch, batch_id):
        sink(batch, batch_id)
        statuses.append((batch_id, sink.status_rows()))
        marks.append(sink.progress()["watermark"])

    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = (with_watermark(op.apply(df, end_of_input=END_COLUMN)).writeStream.foreachBatch(recorded)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    final = {(r["key"], ms(r["window_start"]), ms(r["window_end"])):
             (r["value"], r["timing"], r["pane_index"], r["is_last"], r["batch_id"]) for r in sink.rows()}
    check_status(statuses, final, stale_merged=False)
    known = [m for m in marks if m is not None]
    assert known == sorted(known) and known[-1].year == 9999  # (never back; the end of input)
    assert any(row["settled"] for _, rows in statuses[:-1] for row in rows), "no row settled before the end"

    runner = run_local_like_spark(op, batches, DELAY)
    local_sink = TableSink(str(tmp_path / "local.db"), "results", mode=mode, operator=op,
                           columns=["timing", "pane_index"])
    local_sink(runner.outputs, 0)
    assert [tuple(v for k, v in r.items() if k not in ("is_last", "batch_id")) for r in sink.rows()] == \
        table(local_sink)
