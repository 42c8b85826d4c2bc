"""A query knows when its input has ended, and stops there; a session that cannot run the operator is
refused before the query starts."""
import io
import json
import textwrap
import threading
from collections import Counter

import pytest

from accumulations import Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.pipeline import parse_pipeline
from windowed_operator.spark import END_OF_INPUT, print_progress, stop_at_end_of_input
from windowed_operator.spark.base.progress import batch_progress
from windowed_operator.spark.base.session import ROCKSDB_PROVIDER, SessionSettingsError
from windowed_operator.testing import TestStream

from .harness import BASE, END_COLUMN, MARKED_SCHEMA, write_batches

pytestmark = pytest.mark.spark

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROWS = [{"user": u, "amount": a, "ts": BASE + t} for u, a, t in
        [("a", 1, 0), ("b", 2, 1_000), ("a", 3, 12_000), ("a", 4, 5_000), ("b", 5, 31_000)]]


def _op():
    return KeyedWindowedOperator(
        TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts", watermark=bounded_disorder(20_000),
        trigger=TriggerOption.at_watermark().with_early_firings_at_every(500).accumulating_fired_panes())


def test_a_session_without_rocksdb_is_refused_before_the_query_starts_naming_the_key(spark, tmp_path):
    write_batches(tmp_path / "in", [ROWS[:2]])
    df = spark.readStream.schema(MARKED_SCHEMA).json(str(tmp_path / "in"))
    spark.conf.set(PROVIDER, HDFS)
    try:
        with pytest.raises(SessionSettingsError) as info:
            _op().apply(df, end_of_input=END_COLUMN)
    finally:
        spark.conf.set(PROVIDER, ROCKSDB_PROVIDER)
    message = str(info.value)
    assert f"{PROVIDER} is {HDFS!r}, needs {ROCKSDB_PROVIDER!r}" in message and "RocksDB" in message


def test_a_processing_time_query_is_stopped_once_its_last_panes_are_written(spark, tmp_path):
    """processAllAvailable() would never return: the query runs in ProcessingTime mode."""
    write_batches(tmp_path / "in", [ROWS[:2], ROWS[2:]])
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    out = io.StringIO()
    printer = print_progress(spark, ["ended_pt"], out=out)
    try:
        query = (_op().apply(df, end_of_input=END_COLUMN).writeStream.format("memory").queryName("ended_pt")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(processingTime="200 milliseconds").start())
        assert stop_at_end_of_input(query, timeout=300)
        assert not query.isActive
        assert printer.wait_for_end([query.id], timeout=300)  # (a deadline against a hang only)
    finally:
        spark.streams.removeListener(printer)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("ended_pt: batch 0: 2 rows in, ") and "watermark end of input" in lines[-1]
    assert printer.input_ended == {"ended_pt"} and printer.totals["ended_pt"].input_rows == len(ROWS)
    # Batches 0-2 read the three files (the marker last); batch 3, the first at the end-of-input
    # watermark, writes the last panes.  The query is stopped after it, at the first poll that sees
    # it: batches without data may complete in between (more of them on a slow machine), each at
    # the end of input too, reading nothing and writing no pane.
    last = [batch_progress(p) for p in query.recentProgress]
    ended = [b.input_ended for b in last]
    read = [json.loads(p.json)["numInputRows"] for p in query.recentProgress]  # (Spark's count: the marker too)
    assert [b.batch_id for b in last[:4]] == [0, 1, 2, 3] and ended[:4] == [False, False, False, True]
    assert read[:4] == [2, 3, 1, 0] and last[3].panes > 0
    assert all(ended[3:]) and not any(read[4:]) and all(b.panes == 0 for b in last[4:])
    rows = spark.sql("select key, unix_millis(window_start) as ws, value, timing, is_last from ended_pt").collect()
    finals = Counter((r["key"], r["ws"], r["value"]) for r in rows if r["is_last"])
    assert finals == Counter({("a", BASE, 5): 1, ("a", BASE + 10_000, 3): 1, ("b", BASE, 2): 1,
                              ("b", BASE + 30_000, 5): 1})


def test_run_ends_a_processing_time_pipeline_after_its_last_panes(spark, tmp_path):
    rows = [*ROWS, {"end_of_input": True, "ts": END_OF_INPUT}]
    text = textwrap.dedent(f"""
        name: spend
        checkpoint: {tmp_path / "checkpoints"}
        trigger_interval: 200ms
        sources:
          payments:
            memory:
              schema: "user string, amount bigint, ts bigint, end_of_input boolean"
              end_of_input: end_of_input
              rows_per_batch: 2
              rows: {rows!r}
        operators:
          - name: spend
            input: payments
            key: user
            timestamp: ts
            window: {{tumbling: {{size: 10s}}}}
            trigger: {{kind: at_watermark, early: {{duration: 500ms}}, mode: accumulating}}
            accumulation: {{sum: {{field: amount}}}}
            watermark: {{bounded_disorder: 20s}}
        sinks:
          - {{input: spend, memory: {{query_name: spend_pt}}}}
    """)
    from windowed_operator.spark.pipeline_run import run_pipeline

    pipeline = parse_pipeline(text)
    out = io.StringIO()
    done = threading.Event()
    runner = threading.Thread(target=lambda: (run_pipeline(pipeline, spark=spark, workdir=tmp_path / "w", out=out),
                                              done.set()), daemon=True)
    runner.start()
    runner.join(timeout=300)
    assert done.is_set(), f"run did not end after its input did:\n{out.getvalue()}"
    lines = out.getvalue().splitlines()
    assert "watermark end of input" in [line for line in lines if ": batch " in line][-1]
    sunk = spark.sql("select key, unix_millis(window_start) as ws, value from spend_pt where is_last").collect()
    local = pipeline.build_operators()["spend"].run_local(TestStream().add_elements(ROWS))
    assert Counter((r["key"], r["ws"], r["value"]) for r in sunk) == \
        Counter((p.key, p.window_start, p.value) for p in local if p.is_last)


def test_the_spark_log_goes_to_a_directory_made_for_it(tmp_path):
    """``local_session(spark_log=...)`` into a directory that does not exist yet: made, not a bare
    FileNotFoundError (no JVM starts here: the redirection alone)."""
    import os

    from windowed_operator.spark.base.session import jvm_stderr_to

    path = tmp_path / "logs" / "today" / "spark.log"
    with jvm_stderr_to(str(path)):
        os.write(2, b"to the log\n")
    assert path.read_text() == "to the log\n"
