"""The end of input is an explicit marker row; far-future event times are bad elements that move
no watermark; drops show in the query's progress (observed metrics)."""
import json

import pytest

from accumulations import Count, Sum
from triggers import TriggerOption
from windowed_operator import FixedLagWatermark, KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.spark import END_OF_INPUT
from windowed_operator.spark.base.errors import SparkOperatorError

from .harness import (BASE, END_COLUMN, MARKED_SCHEMA, local_panes, run_local_like_spark, run_spark, spark_panes,
                      write_batches)
from .test_restart_and_errors import PATHS

pytestmark = pytest.mark.spark

DELAY = 2_000
#: A row from a broken producer (year 2255 and later), then an on-time row: before the fix the first
#: was taken as the end of input, the watermark jumped, and the second was dropped as late.
FAR_FUTURE = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}],
              [{"user": "a", "amount": 100, "ts": END_OF_INPUT + 5}, {"user": "b", "amount": 7, "ts": BASE + 1_500}],
              [{"user": "a", "amount": 3, "ts": BASE + 3_000}]]


def _op(trigger, **kw):
    return KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts", trigger=trigger,
                                 watermark=bounded_disorder(DELAY), **kw)


@pytest.mark.parametrize("path", ["element", "array", "columnar"])
def test_a_far_future_row_is_a_dead_letter_and_moves_no_watermark(spark, tmp_path, path):
    options, trigger = PATHS[path]
    op = _op(trigger, on_bad_element="dead_letter")
    store = run_spark(spark, op, FAR_FUTURE, tmp_path, **options)
    rows = [r for b in store.values() for r in b]
    assert spark_panes(store) == local_panes(run_local_like_spark(op, FAR_FUTURE, DELAY))
    assert sorted((r["key"], r["value"], r["timing"]) for r in rows if r["record_type"] == "pane") == [
        ("a", 4, "ON_TIME"), ("b", 7, "ON_TIME")]
    dead = [r for r in rows if r["record_type"] == "dead_letter"]
    assert [(d["reason"], json.loads(d["element"])["ts"]) for d in dead] == [("invalid_timestamp", END_OF_INPUT + 5)]
    assert not [r for r in rows if r["record_type"] == "late"]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_far_future_row_fails_the_query_when_bad_elements_raise(spark, tmp_path, path):
    options, trigger = PATHS[path]
    with pytest.raises(Exception, match=rf"invalid_timestamp\): event time {END_OF_INPUT + 5} is at or after "
                                        r"END_OF_INPUT"):
        run_spark(spark, _op(trigger), FAR_FUTURE, tmp_path, **options)


def test_without_a_marker_column_no_row_ends_the_input(spark, tmp_path):
    """The marker file is read as data (its row has no key): windows close only by the watermark."""
    op = _op(TriggerOption.default(), on_bad_element="dead_letter")
    store = run_spark(spark, op, [[{"user": "a", "amount": 1, "ts": BASE + 1_000}]], tmp_path, end_of_input=None)
    rows = [r for b in store.values() for r in b]
    assert [r["record_type"] for r in rows] == ["dead_letter"]  # the marker row: no key; the window never closes


def test_the_marker_works_under_an_upstream_watermark(spark, tmp_path):
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}], [{"user": "a", "amount": 2, "ts": BASE + 2_000}]]
    source = tmp_path / "in"
    write_batches(source, batches)
    df = (spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
          .selectExpr("*", "timestamp_millis(ts) as event_time").withWatermark("event_time", "1 hour"))
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="event_time")
    out = op.apply(df.drop("ts"), end_of_input=END_COLUMN)
    query = (out.writeStream.format("memory").queryName("upstream_marker")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.sql("select key, value, timing from upstream_marker").collect()
    assert [(r["key"], r["value"], r["timing"]) for r in rows] == [("a", 3, "ON_TIME")]


def test_a_marker_column_that_is_missing_or_a_fixed_lag_watermark_is_refused(spark, tmp_path):
    source = tmp_path / "in"
    write_batches(source, [[{"user": "a", "amount": 1, "ts": BASE}]])
    df = spark.readStream.schema(MARKED_SCHEMA).json(str(source))
    with pytest.raises(SparkOperatorError, match="end_of_input column 'done' is not in the DataFrame"):
        _op(TriggerOption.default()).apply(df, end_of_input="done")
    lagging = KeyedWindowedOperator(TimeWindows(10_000), Count(), key="user", timestamp="ts", watermark=FixedLagWatermark(lag=1))
    with pytest.raises(SparkOperatorError, match="end_of_input needs an event-time watermark"):
        lagging.apply(df, end_of_input=END_COLUMN)


@pytest.mark.parametrize("path", ["element", "columnar", "preaggregated"])
def test_late_drops_and_bad_rows_are_in_the_querys_observed_metrics(spark, tmp_path, path):
    """Without a late-data output the drops are still counted in the progress of the batch."""
    options, trigger = PATHS[path]
    op = _op(trigger, name="spend")
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}], [{"user": "b", "amount": 2, "ts": BASE + 30_000}],
               [{"user": "a", "amount": 5, "ts": BASE + 2_000}, {"user": "c", "amount": 5, "ts": BASE + 3_000}]]
    source = tmp_path / "in"
    write_batches(source, batches)
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = (op.apply(df, end_of_input=END_COLUMN, **options).writeStream.format("memory")
             .queryName(f"observed_{path}").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    progress = [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]
    metrics = [p.get("observedMetrics", {}).get("windowed_operator spend") for p in progress]
    late = sum(m["late_rows_dropped"] for m in metrics if m)
    panes = sum(m["panes"] for m in metrics if m)
    assert late == 2 and panes == 2
    assert spark.sql(f"select count(*) as n from observed_{path}").collect()[0]["n"] == 2


@pytest.mark.parametrize("path", ["element", "columnar"])
def test_rows_beyond_max_future_skew_are_dead_letters_and_move_no_watermark(spark, tmp_path, path):
    """Checked against the batch's time (Spark's current_timestamp): a row two days ahead of the wall
    clock is a dead letter; the rows after it are still on time."""
    import time

    options, trigger = PATHS[path]
    ahead = int(time.time() * 1000) + 2 * 86_400_000
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}],
               [{"user": "a", "amount": 100, "ts": ahead}, {"user": "b", "amount": 7, "ts": BASE + 1_500}],
               [{"user": "a", "amount": 3, "ts": BASE + 3_000}]]
    op = _op(trigger, on_bad_element="dead_letter", max_future_skew=86_400_000)
    rows = [r for b in run_spark(spark, op, batches, tmp_path, **options).values() for r in b]
    assert sorted((r["key"], r["value"], r["timing"]) for r in rows if r["record_type"] == "pane") == [
        ("a", 4, "ON_TIME"), ("b", 7, "ON_TIME")]
    dead = [r for r in rows if r["record_type"] == "dead_letter"]
    assert [(d["reason"], json.loads(d["element"])["ts"]) for d in dead] == [("invalid_timestamp", ahead)]
