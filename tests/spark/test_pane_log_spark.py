"""The pane log on Spark: the default trigger with no allowed lateness keeps its rows by pane, gives
the local runner's panes, and a restart that lowers allowed lateness to none, or turns the log off, moves
the state across layouts."""
import json
from collections import Counter

import pytest

from accumulations import Sum
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder

from .harness import (BASE, END_COLUMN, MARKED_SCHEMA, local_panes, pane_tuple, release_batches, run_local_like_spark,
                      run_spark, spark_panes, write_batches)

pytestmark = pytest.mark.spark

DELAY = 2_000


def hopping_sum(lateness=0, **kw):
    return KeyedWindowedOperator(TimeWindows(10_000).slide_by(5_000), Sum("amount"), key="user", timestamp="ts",
                                 watermark=bounded_disorder(DELAY), allowed_lateness=lateness, **kw)


def rows(*items):
    return [{"user": user, "amount": amount, "ts": BASE + at} for user, amount, at in items]


# several batches add to the same panes; late rows (behind the watermark, some windows expired);
# a row a millisecond before a window end and one at it
BATCHES = [
    rows(("a", 1, 1_000), ("b", 2, 4_999), ("c", 3, 5_000)),
    rows(("a", 4, 2_000), ("b", 5, 9_999), ("d", 6, 10_000)),
    rows(("a", 7, 3_000), ("c", 8, 14_000), ("b", 9, 12_001)),  # a at 3,000: behind the watermark, in time
    rows(("d", 1, 16_000), ("a", 2, 21_000), ("c", 3, 9_000), ("a", 1, 2_000)),  # a at 2,000: too late
    rows(("b", 4, 31_000), ("a", 5, 29_999)),
]


def pane_parts(spark, checkpoint):
    from windowed_operator.spark.worker.group_store import DUE_STATE

    df = spark.read.format("statestore").option("stateVarName", DUE_STATE).load(str(checkpoint))
    return [(r["user_map_key"]["bucket"], r["user_map_key"]["part"]) for r in df.collect()
            if r["user_map_key"]["domain"] == "panes"]


def key_records(spark, checkpoint):
    from windowed_operator.spark.inspect import key_records as records

    return records(spark, str(checkpoint)).collect()


def check_log_run(spark, tmp_path, op, log_parts):
    """``op`` (on a log: ``log_parts`` reads its parts) gives the local runner's panes and late data;
    the same batches without the end of input leave its parts and no key records.  Returns the
    parts and that checkpoint."""
    expected = local_panes(run_local_like_spark(op, BATCHES, DELAY))
    store = run_spark(spark, op, BATCHES, tmp_path / "ended")
    assert spark_panes(store) == expected
    late = [r for rows_ in store.values() for r in rows_ if r.get("record_type") == "late"]
    assert [json.loads(r["element"])["ts"] - BASE for r in late] == [2_000]  # every window over it had expired

    write_batches(tmp_path / "open" / "in", BATCHES, flush=False)
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "open" / "in"))
    checkpoint = tmp_path / "open" / "checkpoint"
    query = (op.apply(df, end_of_input=END_COLUMN).writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    parts = log_parts(spark, checkpoint)
    assert parts and not key_records(spark, checkpoint)
    return parts, checkpoint


def test_the_pane_log_gives_the_local_runners_panes_and_keeps_no_key_records(spark, tmp_path):
    parts, checkpoint = check_log_run(spark, tmp_path, hopping_sum(late_data_output=True), pane_parts)
    # the buckets (10 s of panes each, a window's length) of the panes still under open windows
    assert {bucket for bucket, _ in parts} >= {BASE + 20_000, BASE + 30_000}
    from windowed_operator.spark.inspect import describe_checkpoint

    lines = list(describe_checkpoint(spark, str(checkpoint), key="b"))
    assert lines[0].endswith("1 key(s) with state:") and lines[1].startswith("the pane log:")
    assert "panes from 2023-11-14 22:13:50.000 (part 0): 1 row(s)" in lines  # BASE + 30 s
    assert "  'b': pane from 2023-11-14 22:13:50.000, acc=[4]" in lines


def _file_sink(store):
    def write(batch_df, batch_id):
        store[batch_id] = [r.asDict() for r in batch_df.selectExpr(
            "*", "unix_millis(window_start) as ws", "unix_millis(window_end) as we", "unix_millis(timestamp) as ts_ms")
            .drop("window_start", "window_end", "timestamp").collect()]
    return write


def check_restarts_between_layouts(spark, tmp_path, make_op, log_parts):
    """Per key (lateness 5 s) -> the log (lateness lowered to none) on one checkpoint, run on to the
    end: the values are one run's, and between the restarts the state is in the layout the options
    choose (``log_parts``: the log's parts in a checkpoint).  Nothing moves back: raising the
    lateness is refused, and the setting that turned the logs off went."""

    in_order = [rows(("a", 1, 1_000), ("b", 2, 2_000), ("a", 3, 11_000)),
                rows(("b", 4, 12_000), ("c", 5, 23_000)),
                rows(("a", 6, 24_000), ("b", 7, 35_000)),
                rows(("c", 8, 41_000), ("a", 9, 47_000))]
    source, checkpoint, store = tmp_path / "in", tmp_path / "checkpoint", {}
    staged = write_batches(tmp_path / "staging", in_order)

    def run(op, upto):
        release_batches(tmp_path / "staging", source, upto)
        df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        out = op.apply(df, end_of_input=END_COLUMN)
        query = (out.writeStream.foreachBatch(_file_sink(store))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination()

    source.mkdir()
    run(make_op(lateness=5_000), 1)
    assert key_records(spark, checkpoint) and not log_parts(spark, checkpoint)
    run(make_op(lateness=0), 3)
    assert log_parts(spark, checkpoint) and not key_records(spark, checkpoint)
    run(make_op(lateness=0), len(staged))
    assert not key_records(spark, checkpoint)

    def values(panes):  # (is_last follows the lateness in force when a window fired)
        return Counter((p[0], p[1], p[2], p[3], p[4]) for p, n in panes.items() for _ in range(n))

    got = Counter(pane_tuple(r) for rows_ in store.values() for r in rows_ if r.get("record_type", "pane") == "pane")
    assert values(got) == values(local_panes(run_local_like_spark(make_op(), in_order, DELAY)))


def test_a_restart_that_changes_the_layout_moves_the_state_between_layouts(spark, tmp_path):
    check_restarts_between_layouts(spark, tmp_path, hopping_sum, pane_parts)
