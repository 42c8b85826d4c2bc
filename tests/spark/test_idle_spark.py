"""An idle timeout on Spark equals the local runner: batches with data, then batches without any (the
clock moving on), in which the watermark advances with processing time and the last sessions close;
then input resumes with a late row and an on-time one."""
import warnings

import pytest

from accumulations import Count
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder
from windowed_operator.spark import FileClock
from windowed_operator.time import MIN_TIMESTAMP

from .harness import (BASE, MARKED_SCHEMA, _collector, _local_runner, _wait_for, _wait_for_file, local_panes,
                      spark_panes, write_batch_file)
from .test_equivalence import DELAY, EARLY_LATE_COUNTS

pytestmark = pytest.mark.spark

T = 1_000_000  # processing time of the first batch
IDLE = 10_000
STEPS = [  # (processing time, rows or None for a batch without data)
    (T, [{"user": "a", "amount": 1, "ts": BASE}, {"user": "a", "amount": 1, "ts": BASE + 1_000},
         {"user": "b", "amount": 1, "ts": BASE + 500}]),
    (T + 1_000, [{"user": "a", "amount": 1, "ts": BASE + 3_000}, {"user": "b", "amount": 1, "ts": BASE + 6_000}]),
    (T + 5_000, None),  # quiet, not for long enough
    (T + 12_000, None),  # quiet since T + 11,000: watermark BASE + 3,000 + 1,000
    (T + 16_000, None),  # BASE + 8,000: a's [BASE, BASE + 7 s) and b's first session close
    (T + 17_000, [{"user": "a", "amount": 1, "ts": BASE + 2_000},  # behind the advanced watermark: LATE
                  {"user": "c", "amount": 1, "ts": BASE + 20_000}]),
    (T + 19_000, None),  # event time again: BASE + 17,000
    (T + 40_000, None),  # quiet since T + 27,000: BASE + 30,000, c's session closes
]


def operator(trigger, window=SessionWindows(4_000)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(window, Count(), trigger=trigger, allowed_lateness=5_000,
                                     key="user", timestamp="ts", watermark=bounded_disorder(DELAY, idle_timeout=IDLE))


def run_local(op):
    runner = _local_runner(op, STEPS[0][0])
    watermark, max_ts = MIN_TIMESTAMP, None
    for now, rows in STEPS:
        if watermark > MIN_TIMESTAMP:
            runner.advance_watermark_to(watermark)  # Spark's, from the batches before this one
        runner.advance_processing_time(now - runner.processing_time)
        if rows:
            runner.add_elements(*rows)
            max_ts = max([r["ts"] for r in rows] + ([max_ts] if max_ts is not None else []))
            watermark = max(watermark, max_ts - DELAY)
    return runner


def run_spark(spark, op, workdir):
    source, store = workdir / "in", {}
    source.mkdir(parents=True)
    clock = FileClock(str(workdir / "clock"))
    clock.set(STEPS[0][0])
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = (op.apply(df, clock=clock).writeStream.foreachBatch(_collector(store))
             .option("checkpointLocation", str(workdir / "checkpoint")).trigger(processingTime="100 milliseconds")
             .start())
    def write(index: int, step: tuple) -> bool:
        if step[1]:
            write_file(source / f"batch-{index:05d}.json", step[1], index)
        return bool(step[1])

    drive(query, clock, STEPS, write)
    return store


def write_file(path, rows: list[dict], index: int) -> None:
    write_batch_file(path, rows, index)  # (visible whole: the query is running)


def drive(query, clock, steps, write) -> None:
    """Each step: the clock set to its time, its files written (``write(file index, step)`` says
    whether it wrote any) and read, then two whole batches at that time (a batch running when the
    clock moved may straddle it); the query stopped at the end."""
    try:
        files = 0
        for step in steps:
            clock.set(step[0])
            if write(files, step):
                _wait_for_file(query, files)
                files += 1
            done = query.lastProgress["batchId"] if query.lastProgress else -1
            _wait_for(lambda: query.lastProgress is not None and query.lastProgress["batchId"] >= done + 2)
    finally:
        query.stop()


@pytest.mark.parametrize("trigger", ["default", "early-late"])
def test_quiet_streams_close_their_windows_on_spark_as_locally(spark, tmp_path, trigger):
    option = TriggerOption.default() if trigger == "default" else \
        EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes()
    op = operator(option)
    runner = run_local(op)
    expected = local_panes(runner)
    closed = {(p[0], p[1] - BASE, p[2] - BASE) for p in expected if p[4] in ("ON_TIME", "LATE")}
    assert closed == {("a", 0, 7_000), ("b", 500, 4_500), ("b", 6_000, 10_000), ("c", 20_000, 24_000)}
    assert any(p[0] == "a" and p[4] == "LATE" for p in expected)  # the row behind the advanced watermark
    assert runner.watermark == BASE + 30_000
    assert spark_panes(run_spark(spark, op, tmp_path)) == expected


def test_pre_aggregated_windows_close_on_quiet_streams_too(spark, tmp_path):
    """Tumbling Count under the default trigger: partials folded before the shuffle, heartbeats after."""
    op = operator(TriggerOption.default(), window=TimeWindows(5_000))
    expected = local_panes(run_local(op))
    assert {(p[1] - BASE, p[4]) for p in expected} >= {(0, "ON_TIME"), (0, "LATE"), (5_000, "ON_TIME"),
                                                       (20_000, "ON_TIME")}
    assert spark_panes(run_spark(spark, op, tmp_path)) == expected


# -- a merge whose right input goes silent, then resumes --------------------------------------------------
MERGE_IDLE, QUIET = 10_000, 20_000
MERGE_STEPS = [  # (processing time, left rows, right rows); None, None: a batch without data
    (T, [{"user": "a", "amount": 1, "ts": BASE + 1_000}], [{"user": "a", "page": "p", "ts": BASE + 2_000}]),
    (T + 1_000, [{"user": "a", "amount": 2, "ts": BASE + 6_000}], [{"user": "b", "page": "q", "ts": BASE + 3_000}]),
    (T + 2_000, [{"user": "a", "amount": 3, "ts": BASE + 12_000}], []),  # the right input goes silent
    (T + 6_000, [{"user": "b", "amount": 4, "ts": BASE + 16_000}], []),
    (T + 12_000, [{"user": "a", "amount": 5, "ts": BASE + 21_000}], []),  # right idle: the left's 18 s rules
    (T + 13_000, [], [{"user": "a", "page": "late", "ts": BASE + 14_000},  # behind: a LATE pane
                      {"user": "b", "page": "r", "ts": BASE + 20_000}]),
    (T + 40_000, None, None),  # both quiet: both idle, each advancing with processing time
]


def merge_operator():
    from accumulations import Cogroup
    from windowed_operator import KeyedWindowedMergeOperator
    from windowed_operator.merge_operator import InputOptions

    return KeyedWindowedMergeOperator(TimeWindows(5_000), Cogroup(), allowed_lateness=5_000, key="user",
                                      timestamp="ts", idle_timeout=MERGE_IDLE,
                                      watermark=bounded_disorder(DELAY, idle_timeout=QUIET),
                                      left=InputOptions(value="amount"), right=InputOptions(value="page"))


def run_local_merge(op):
    runner = op.local_runner(processing_time=MERGE_STEPS[0][0])
    for now, left, right in MERGE_STEPS:
        runner.advance_processing_time(now - runner.processing_time)
        if left or right:
            runner.add_elements_from_both(left, right)
    return runner


def run_spark_merge(spark, op, workdir):
    from .harness import MARKED_RIGHT_SCHEMA

    store, clock = {}, FileClock(str(workdir / "clock"))
    clock.set(MERGE_STEPS[0][0])
    for side in ("left", "right"):
        (workdir / side).mkdir(parents=True)
    left = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "left"))
    right = spark.readStream.schema(MARKED_RIGHT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "right"))
    query = (op.apply(left, right, clock=clock).writeStream.foreachBatch(_collector(store))
             .option("checkpointLocation", str(workdir / "checkpoint")).trigger(processingTime="100 milliseconds")
             .start())
    def write(index: int, step: tuple) -> bool:
        if step[1] is None:
            return False
        for side, rows in (("left", step[1]), ("right", step[2])):
            write_file(workdir / side / f"batch-{index:05d}.json", rows, index)
        return True

    drive(query, clock, MERGE_STEPS, write)
    return store


def test_a_silent_input_of_a_merge_stops_holding_the_watermark_back_on_spark(spark, tmp_path):
    from .test_merge_spark import local_rows, spark_rows

    op = merge_operator()
    runner = run_local_merge(op)
    fired = {(p.window_start - BASE, p.timing.value) for p in runner.outputs}
    assert {(0, "ON_TIME"), (5_000, "ON_TIME"), (10_000, "ON_TIME"), (10_000, "LATE"), (15_000, "ON_TIME"),
            (20_000, "ON_TIME")} <= fired
    assert runner.watermark == BASE + 26_000  # both idle: the largest of 18 s + 8 s and 17 s + 7 s
    assert spark_rows(run_spark_merge(spark, op, tmp_path)) == local_rows(runner)
