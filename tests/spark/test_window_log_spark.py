"""The window log on Spark: the object path under the default trigger with no allowed lateness keeps
its windows' accumulators by window, gives the local runner's panes, and a restart that changes
allowed lateness moves the state across layouts."""
import json
from collections import Counter

import pytest

from accumulations import ToList
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder

from .harness import (BASE, END_COLUMN, MARKED_SCHEMA, local_panes, pane_tuple, run_local_like_spark, run_spark,
                      spark_panes, write_batches)
from .test_pane_log_spark import BATCHES, DELAY, _file_sink, key_records, rows

pytestmark = pytest.mark.spark


def hopping_list(lateness=0, **kw):
    return KeyedWindowedOperator(TimeWindows(10_000).slide_by(5_000), ToList("amount"), key="user", timestamp="ts",
                                 watermark=bounded_disorder(DELAY), allowed_lateness=lateness, **kw)


def window_parts(spark, checkpoint):
    from windowed_operator.spark.inspect import window_log_parts

    return [(r["due"], r["part"]) for r in window_log_parts(spark, str(checkpoint)).collect()]


def _run(spark, op, source, checkpoint, sink=None):
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    writer = op.apply(df, end_of_input=END_COLUMN).writeStream
    writer = writer.foreachBatch(sink) if sink is not None else writer.format("noop")
    writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination()


def test_the_window_log_gives_the_local_runners_panes_and_keeps_no_key_records(spark, tmp_path):
    op = hopping_list(late_data_output=True)
    expected = local_panes(run_local_like_spark(op, BATCHES, DELAY))
    store = run_spark(spark, op, BATCHES, tmp_path / "ended")
    assert spark_panes(store) == expected
    late = [r for rows_ in store.values() for r in rows_ if r.get("record_type") == "late"]
    assert [json.loads(r["element"])["ts"] - BASE for r in late] == [2_000]  # every window over it had expired

    # the same batches without the end of input: the state is the windows' parts, no key records
    write_batches(tmp_path / "open" / "in", BATCHES, flush=False)
    checkpoint = tmp_path / "open" / "checkpoint"
    _run(spark, op, tmp_path / "open" / "in", checkpoint)
    parts = window_parts(spark, checkpoint)
    assert parts and not key_records(spark, checkpoint)
    assert {due for due, _ in parts} >= {BASE + 35_000, BASE + 40_000}  # windows still open, by their expiry
    from windowed_operator.spark.inspect import describe_checkpoint

    lines = list(describe_checkpoint(spark, str(checkpoint), key="b"))
    assert lines[0].endswith("0 key(s) with state:") and lines[1].startswith("the window log:")
    assert "  'b': [30000, 40000) acc=[4] elements=1".replace("30000", str(BASE + 30_000)).replace(
        "40000", str(BASE + 40_000)) in lines


def test_a_restart_that_changes_allowed_lateness_moves_the_state_between_layouts(spark, tmp_path):
    """Per key (lateness 5 s) -> window log (none) -> per key (5 s) on one checkpoint: the values are
    one run's, and between the restarts the state is in the layout the options choose."""
    in_order = [rows(("a", 1, 1_000), ("b", 2, 2_000), ("a", 3, 11_000)),
                rows(("b", 4, 12_000), ("c", 5, 23_000)),
                rows(("a", 6, 24_000), ("b", 7, 35_000)),
                rows(("c", 8, 41_000), ("a", 9, 47_000))]
    source, checkpoint, store = tmp_path / "in", tmp_path / "checkpoint", {}
    staged = write_batches(tmp_path / "staging", in_order)

    def run(op, upto):
        for i in range(upto):
            name = f"batch-{i:05d}.json"
            if (tmp_path / "staging" / name).exists():
                (tmp_path / "staging" / name).replace(source / name)
        _run(spark, op, source, checkpoint, _file_sink(store))

    source.mkdir()
    run(hopping_list(lateness=5_000), 1)
    assert key_records(spark, checkpoint) and not window_parts(spark, checkpoint)
    run(hopping_list(lateness=0), 3)
    assert window_parts(spark, checkpoint) and not key_records(spark, checkpoint)
    run(hopping_list(lateness=5_000), len(staged))
    assert not window_parts(spark, checkpoint)

    def values(panes):  # (is_last follows the lateness in force when a window fired)
        return Counter((p[0], p[1], p[2], p[3], p[4]) for p, n in panes.items() for _ in range(n))

    got = Counter(pane_tuple(r) for rows_ in store.values() for r in rows_ if r.get("record_type", "pane") == "pane")
    assert values(got) == values(local_panes(run_local_like_spark(hopping_list(), in_order, DELAY)))
