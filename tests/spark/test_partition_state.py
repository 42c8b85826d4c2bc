"""A key group's per-partition watermark in the worker (``GroupTimers``) without a JVM: the heartbeats'
per-partition maxima observed after the batch's watermark, the tracker kept in the group's meta
record as plain data (a restart reads it back through JSON), a restart that removes ``partition=``
forgetting it and one that adds it starting from the group's watermark."""
import json

import pandas as pd

from accumulations import Count
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.spark.plan.paths import Paths
from windowed_operator.spark.plan import build_plan
from windowed_operator.spark.scan.heartbeat import BEAT_COLUMN
from windowed_operator.spark.worker.timers import GroupTimers
from windowed_operator.time import MIN_TIMESTAMP

DELAY, IDLE = 10, 100


class SparkClock:
    """Spark's watermark as a processor sees it: far ahead of every partition's (0: none yet)."""

    def __init__(self, watermark: int = 0) -> None:
        self.watermark = watermark

    def getCurrentWatermarkInMs(self) -> int:
        return self.watermark


def timers(watermark):
    op = KeyedWindowedOperator(TimeWindows(100), Count(), key="user", timestamp="ts", watermark=watermark)
    plan = build_plan(op, Paths(), time_mode="ProcessingTime", value_type="bigint", key_type="string",
                      key_column="user", time_column="ts", heartbeats=True)
    return GroupTimers(plan, store=None)


def batch(*beats):
    """A group's rows: one data row (a null partition), then a heartbeat per (partition, largest time)."""
    rows = [{"user": "a", "ts": 1, "part": None, BEAT_COLUMN: None}]
    rows += [{"user": None, "ts": ts, "part": part, BEAT_COLUMN: 0} for part, ts in beats]
    return pd.DataFrame(rows)


def step(group_timers, meta, now, *beats):
    """One batch: its watermark (before its own heartbeats count), then its heartbeats noted."""
    frame, seen = group_timers.split_beats(batch(*beats) if beats else None, meta)
    watermark = group_timers.watermark(SparkClock(1_000_000), meta, now)
    group_timers.note_input(meta, seen, now)
    meta["wm"] = watermark
    return watermark, frame


def test_each_partition_counts_from_the_next_batch_and_survives_a_restart_through_json():
    partitioned = timers(bounded_disorder(DELAY, idle_timeout=IDLE, partition="part"))
    meta: dict = {}
    watermark, rows = step(partitioned, meta, 0, (0, 500), (1, 100))
    assert watermark == MIN_TIMESTAMP and len(rows) == 1 and BEAT_COLUMN not in rows.columns
    assert step(partitioned, meta, 10, (0, 600))[0] == 90  # partition 1 holds it back (Spark's is far ahead)
    assert partitioned.holding_back(meta, 10) == ("", 1, 500)
    meta = json.loads(json.dumps(meta))  # (the meta record is JSON in the state store)
    assert step(partitioned, meta, 50, (0, 600))[0] == 90
    assert step(partitioned, meta, 110)[0] == 590  # partition 1 quiet for 100 ms: idle (0 for 60 ms: not)
    assert step(partitioned, meta, 111, (1, 120), (2, 300))[0] == 590
    assert step(partitioned, meta, 112)[0] == 590  # 1 and 2 rejoin behind: the watermark waits, never back
    assert partitioned.holding_back(meta, 112) == ("", 1, 480)


def test_removing_partition_forgets_the_trackers_and_adding_it_starts_from_the_groups_watermark():
    meta: dict = {}
    partitioned = timers(bounded_disorder(DELAY, partition="part"))
    step(partitioned, meta, 0, (0, 500), (1, 100))
    assert step(partitioned, meta, 1)[0] == 90 and "parts" in meta
    plain = timers(bounded_disorder(DELAY))
    assert step(plain, meta, 2)[0] == 1_000_000  # Spark's own, as without partition= from the start
    assert "parts" not in meta
    readded = {"wm": 400}  # a checkpoint written without partition=
    assert step(partitioned, readded, 3, (0, 200))[0] == 400
    assert step(partitioned, readded, 4)[0] == 400  # partition 0 at 190: the watermark waits at 400
    assert readded["parts"]["watermark"] == 400


def test_heartbeats_carry_each_inputs_partitions_largest_event_time_in_range_to_every_group():
    import pyarrow as pa

    from windowed_operator.spark.scan.heartbeat import Heartbeats, split_beats
    from windowed_operator.time import END_OF_INPUT

    rows = pa.record_batch({"user": ["a", "b", "c", "d", "e"], "ts": [5, 9, 7, None, END_OF_INPUT],
                            "part": [0, 1, None, 1, 0]})
    out = list(Heartbeats((0, 1), time_column="ts", partition_column="part")([rows]))
    frame = pa.Table.from_batches(out).to_pandas()
    # 2 beats per group, one per partition (the input's own beat is left out: its partitions' say it had
    # rows, and a null in the integer partition column would make the frame's column float)
    assert sorted(frame[BEAT_COLUMN].dropna().astype(int).tolist()) == [0, 0, 1, 1]
    data, seen, parts = split_beats(frame, None, "ts", "part")
    # a null partition (c) counts as input, for no partition; null and out-of-range times count for none
    assert len(data) == 5 and seen == {"": None} and parts == {("", 0): 5, ("", 1): 9}
    plain = pa.record_batch({"user": ["a"], "amount": [2 ** 62 + 1], "ts": [5]})
    beaten = pa.Table.from_batches(list(Heartbeats((0, 1))([plain]))).to_pandas()  # (an idle timeout's beats)
    assert beaten["amount"].dtype == "int64" and beaten["amount"].iloc[0] == 2 ** 62 + 1  # no float, no rounding
    only_bad = pa.record_batch({"user": ["c"], "ts": [7], "part": pa.array([None], pa.int64())})
    frame = pa.Table.from_batches(list(Heartbeats((0, 1), time_column="ts", partition_column="part")([only_bad]))).to_pandas()
    assert split_beats(frame, None, "ts", "part")[1:] == ({"": None}, {})  # input, no partition's
    merged = pa.record_batch({"side": ["left", "left", "right"], "ts": [5, 9, 7], "part": ["0", "1", "0"]})
    out = list(Heartbeats((0,), "side", "ts", "part")([merged]))
    _, seen, parts = split_beats(pa.Table.from_batches(out).to_pandas(), "side", "ts", "part")
    assert seen == {"left": 9, "right": 7} and parts == {("left", "0"): 5, ("left", "1"): 9, ("right", "0"): 7}


def test_a_later_stage_takes_the_upstreams_watermark_rows_in_their_batch_never_back_through_json():
    """A chained stage after a per-partition watermark: the upstream's watermark rows (its count rows)
    become one heartbeat per key group carrying the largest, which the group takes in the same batch
    (after its panes, as the local chain advances a stage after taking its upstream's panes), never
    moving back, kept in the meta record; Spark's own watermark, far ahead, is not read."""
    import pyarrow as pa

    from windowed_operator.spark.plan import WATERMARK_COLUMN
    from windowed_operator.spark.scan.heartbeat import WatermarkBeats

    upstream = KeyedWindowedOperator(TimeWindows(100), Count(), key="user", timestamp="ts",
                                     watermark=bounded_disorder(DELAY, partition="part"))
    later = KeyedWindowedOperator(None, Count())
    plan = build_plan(later, Paths(), time_mode="ProcessingTime", value_type="bigint", key_type="string",
                      key_column="key", upstream=upstream, heartbeats=True, upstream_watermark_rows=True,
                      hands_on_watermark=True)
    assert plan.reports_watermark and plan.wakes_every_batch and plan.partition_column is None
    group_timers = GroupTimers(plan, store=None)
    beats = WatermarkBeats((0, 1, 2), WATERMARK_COLUMN)

    def rows_of(*batches):  # the upstream's pane rows and watermark rows, through the beats
        out = list(beats([pa.record_batch({"key": keys, "value": values, WATERMARK_COLUMN: marks},
                                          schema=pa.schema([("key", pa.string()), ("value", pa.int64()),
                                                            (WATERMARK_COLUMN, pa.int64())]))
                          for keys, values, marks in batches]))
        return pa.Table.from_batches(out).to_pandas() if out else None

    frame = rows_of((["a", None], [1, None], [None, 40]), ([None, "b"], [None, 2], [90, None]))
    assert sorted(frame[BEAT_COLUMN].dropna().astype(int).tolist()) == [0, 1, 2]  # one beat per group: the largest
    assert frame.loc[frame[BEAT_COLUMN].notna(), WATERMARK_COLUMN].tolist() == [90, 90, 90]
    meta: dict = {}
    rows, _ = group_timers.split_beats(frame[frame[BEAT_COLUMN].isin([1]) | frame[BEAT_COLUMN].isna()], meta)
    assert rows["key"].tolist() == ["a", "b"] and list(rows.columns) == ["key", "value"]
    assert group_timers.watermark(SparkClock(1_000_000), meta, 0) == 90  # (in this batch; Spark's ignored)
    meta["wm"] = 90
    meta = json.loads(json.dumps(meta))  # (a restart reads the meta record back)
    rows, _ = group_timers.split_beats(rows_of(([None], [None], [60])), meta)
    assert rows is None and group_timers.watermark(SparkClock(1_000_000), meta, 1) == 90  # never back
    rows, _ = group_timers.split_beats(None, meta)  # (a batch without the upstream's rows: it stays)
    assert group_timers.watermark(SparkClock(1_000_000), meta, 2) == 90
    group_timers.split_beats(rows_of(([None], [None], [150])), meta)
    assert group_timers.watermark(SparkClock(1_000_000), meta, 3) == 150


def test_idleness_is_measured_on_a_clock_that_stops_with_the_query(monkeypatch):
    """Without ``partition=`` too (the Spark restart test runs the partitioned form): a group's quiet time
    leaves out the time between its last call of one run of the query and its first of the next
    (``GroupTimers.reading_time``), and an input with rows in a batch is not idle in it (``touch``)."""
    from windowed_operator.spark.worker import timers as worker_timers

    idle = 20_000
    op = KeyedWindowedOperator(TimeWindows(10_000), Count(), key="user", timestamp="ts",
                               watermark=bounded_disorder(DELAY, idle_timeout=idle))
    plan = build_plan(op, Paths(), time_mode="ProcessingTime", value_type="bigint", key_type="string",
                      key_column="user", heartbeats=True)
    group_timers = GroupTimers(plan, store=None)
    meta: dict = {}
    run = ["run-1"]
    monkeypatch.setattr(worker_timers, "query_run", lambda: run[0])
    spark_watermark = SparkClock(5_000)
    with_rows = ({"": None}, {})
    assert group_timers.watermark(spark_watermark, meta, 1_000, with_rows) == 5_000
    group_timers.note_input(meta, with_rows, 1_000)
    assert group_timers.watermark(spark_watermark, meta, 2_000) == 5_000  # quiet 1 s, in run 1
    run[0] = "run-2"  # stopped for 10 minutes: quiet since 1,000 on the reading clock, 1 s of it read
    assert group_timers.watermark(spark_watermark, meta, 602_000) == 5_000
    assert meta["paused"] == 600_000
    # quiet for longer than the timeout while the query runs: the watermark advances with the time read
    assert group_timers.watermark(spark_watermark, meta, 602_000 + idle + 500) == 5_000 + 1_500
    # a batch with rows after a long quiet: the input is not idle in it, event time rules (the group's
    # saved watermark, meta "wm", keeps what was reached: never back)
    assert group_timers.watermark(spark_watermark, meta, 602_000 + idle + 60_000, with_rows) == 5_000
