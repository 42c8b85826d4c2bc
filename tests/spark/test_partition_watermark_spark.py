"""Per-partition watermarks on Spark (``bounded_disorder(delay, idle_timeout, partition=...)``) equal the
local runner on the same batches under a controlled clock: heartbeats carry each partition's largest
event time to every key group, which keeps the tracker in its meta record across a restart.

One keyed run goes through a lagging partition (its rows land on time, where one watermark for the
input drops them), a null partition (a dead letter), a restart, an idle partition left out of the
minimum and its return (it holds the watermark back again without moving it back); a merge keeps
each input's partitions.  Each query costs 10-20 s: the cases share queries."""
import json
from collections import Counter

import pytest

from accumulations import Cogroup, Count, Sum
from windowed_operator import (KeyedWindowedMergeOperator, KeyedWindowedOperator, TimeWindows, WindowedOperator,
                               bounded_disorder)
from windowed_operator.merge_operator import InputOptions
from windowed_operator.panes import DropReason
from windowed_operator.runners.chain import ChainRunner
from windowed_operator.spark import FileClock
from windowed_operator.spark.base.errors import SparkOperatorError
from windowed_operator.spark.base.progress import batch_progress

from .harness import BASE, _collector, _wait_for, _wait_for_file, local_panes, spark_panes, write_batch_file

pytestmark = pytest.mark.spark

SCHEMA = "user string, amount bigint, ts bigint, part int"
RIGHT_SCHEMA = "user string, page string, ts bigint, part int"
T = 1_000_000  # processing time of the first batch
DELAY, IDLE = 1_000, 20_000


def row(user, ts, part):
    return {"user": user, "amount": 1, "ts": BASE + ts, "part": part}


STEPS = [  # (processing time, rows; None: a batch without data)
    (T, [row("a", 1_000, 0), row("b", 500, 1)]),
    (T + 1_000, [row("a", 30_000, 0), row("b", 2_000, 1)]),  # partition 1 lags 28 s behind partition 0
    (T + 2_000, [row("a", 31_000, 0), row("b", 5_000, 1),  # behind one watermark (29 s): on time here
                 row("c", 5_000, None)]),  # a null partition: a dead letter
    # -- the query restarts here (RESTART) --
    (T + 3_000, [row("a", 32_000, 0), row("b", 12_000, 1)]),  # [0, 10 s) closes at 11 s
    (T + 10_000, [row("a", 40_000, 0)]),  # partition 1 quiet for 7 s: still holds the watermark at 11 s
    (T + 24_000, [row("a", 45_000, 0)]),  # quiet for 21 s: idle, partition 0's 39 s rules
    (T + 25_000, [row("b", 14_000, 1), row("b", 46_500, 1)]),  # back: 14 s is behind (dropped), 45.5 s holds
    (T + 26_000, [row("a", 60_000, 0)]),  # partition 0 at 59 s; partition 1 holds it at 45.5 s
    (T + 27_000, None),
]
RESTART = 3


def counting(watermark):
    return KeyedWindowedOperator(TimeWindows(10_000), Count(), key="user", timestamp="ts", watermark=watermark,
                                 on_bad_element="dead_letter", name="counts")


PARTITIONED = bounded_disorder(DELAY, idle_timeout=IDLE, partition="part")


def run_steps(runner, steps):
    """Each step's processing time, then its rows (one input's, or a merge's two)."""
    for now, *rows in steps:
        runner.advance_processing_time(now - runner.processing_time)
        if len(rows) == 1 and rows[0]:
            runner.add_elements(*rows[0])
        elif len(rows) == 2 and rows[0] is not None:
            runner.add_elements_from_both(rows[0], rows[1])
    return runner


def run_local(op, steps=STEPS):
    return run_steps(op.local_runner(processing_time=steps[0][0]), steps)


def write_file(path, rows, index):
    write_batch_file(path, rows, index)  # (visible whole: the query is running)


def drive(start, clock, steps, write, first_file=0, progress=None):
    """Each step: the clock set to its time, its files written and read, then two whole batches at
    that time; the query stopped at the end (``start()``: the query; ``progress``: a list that gets
    its batches' progress)."""
    query = start()
    try:
        files = first_file
        for step in steps:
            clock.set(step[0])
            if write(files, step):
                _wait_for_file(query, files)
                files += 1
            done = query.lastProgress["batchId"] if query.lastProgress else -1
            _wait_for(lambda done=done: query.lastProgress is not None and query.lastProgress["batchId"] >= done + 2)
            if progress is not None:
                progress.extend(json.loads(p.json) for p in query.recentProgress)
    finally:
        query.stop()
    return files


def run_spark(spark, op, workdir, restart_at=None, progress=None, steps=STEPS):
    source, store = workdir / "in", {}
    source.mkdir(parents=True)
    clock = FileClock(str(workdir / "clock"))
    clock.set(steps[0][0])

    def start():
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        return (op.apply(df, clock=clock).writeStream.foreachBatch(_collector(store))
                .option("checkpointLocation", str(workdir / "checkpoint"))
                .trigger(processingTime="100 milliseconds").start())

    def write(index, step):
        if step[1]:
            write_file(source / f"batch-{index:05d}.json", step[1], index)
        return bool(step[1])

    cut = restart_at if restart_at is not None else len(steps)
    files = drive(start, clock, steps[:cut], write, progress=progress)
    if cut < len(steps):
        drive(start, clock, steps[cut:], write, files, progress)
    return store


def dead_letters(store):
    return Counter((r["reason"], r.get("key")) for rows in store.values() for r in rows
                   if r.get("record_type") == "dead_letter")


def test_a_lagging_partition_lands_on_time_through_a_restart_idleness_and_its_return(spark, tmp_path):
    op = counting(PARTITIONED)
    runner = run_local(op)
    plain = run_local(counting(bounded_disorder(DELAY, idle_timeout=IDLE)))
    # one watermark for the input drops the lagging partition's rows; per partition only the one that
    # came back behind the watermark it had left is late
    assert plain.dropped_counts["expired"] == 4 and runner.dropped_counts["expired"] == 1
    assert sum(p.value for p in runner.outputs if p.key == "b") == 4  # (46.5 s waits in its window)
    assert [(d.reason, d.key) for d in runner.dead_letters] == [(DropReason.INVALID_PARTITION, "c")]
    assert runner.watermark == BASE + 45_500
    assert runner.tracker.partitions is not None
    assert runner.tracker.partitions.holding_back(runner.processing_time) == (1, 13_500)

    progress: list = []
    store = run_spark(spark, op, tmp_path / "partitioned", restart_at=RESTART, progress=progress)
    assert spark_panes(store) == local_panes(runner)
    assert dead_letters(store) == Counter({("invalid_partition", "c"): 1})
    # the progress shows the operator's watermark and the partition holding it back, with its lag
    held = {(b.operator_watermark_ms - BASE, b.held_back_by, b.held_back_lag_ms)
            for b in map(batch_progress, progress) if b.operator_watermark_ms is not None}
    assert {(4_000, "1", 26_000), (11_000, "1", 20_000), (45_500, "1", 13_500)} <= held
    assert (39_000, "0", 0) in held  # partition 1 idle: partition 0 alone holds it


STOP = 600_000  # a query stopped for 10 minutes, 30 times the idle timeout
BACKLOG = [  # (processing time, rows): the last two written before the query is stopped
    (T, [row("a", 1_000, 0), row("b", 500, 1)]),
    (T + 1_000, [row("a", 8_000, 0), row("b", 6_000, 1)]),
    # -- stopped here for STOP ms; what follows is the backlog it reads when it comes back --
    (T + 2_000, [row("a", 9_500, 0), row("b", 7_000, 1)]),  # on time in an uninterrupted run (5 s)
    (T + 3_000, [row("a", 12_000, 0), row("b", 9_000, 1)]),
    (T + 4_000, [row("b", 11_000, 1)]),  # the watermark reaches 10 s: [0, 10 s) closes
    (T + 5_000, None),
]


@pytest.mark.parametrize("watermark", [PARTITIONED], ids=["partition"])  # (one watermark: test_partition_state)
def test_a_stop_longer_than_the_idle_timeout_turns_no_backlog_late(spark, tmp_path, watermark):
    """Idleness is time the query ran while an input brought nothing: the time a query was stopped is
    none (``GroupTimers.reading_time``), so a restart after a stop 30 times the idle timeout gives the
    panes of an uninterrupted run (the local runner's over the same steps), where counting the stop
    as quiet time turns the backlog late."""
    op = counting(watermark)
    uninterrupted = run_local(op, BACKLOG)
    assert uninterrupted.dropped_counts["expired"] == 0
    assert {(p.key, p.window_start - BASE, p.value) for p in uninterrupted.outputs} == {("a", 0, 3), ("b", 0, 4)}
    # the stop as quiet time of a running query (the local runner's advance_processing_time): rows go late
    as_quiet = run_local(op, [*BACKLOG[:2], *[(now + STOP, rows) for now, rows in BACKLOG[2:]]])
    assert as_quiet.dropped_counts["expired"] > 0
    restarted = [*BACKLOG[:2], *[(now + STOP, rows) for now, rows in BACKLOG[2:]]]
    store = run_spark(spark, op, tmp_path, restart_at=2, steps=restarted)
    assert spark_panes(store) == local_panes(uninterrupted)


def test_without_partition_spark_drops_the_lagging_rows_as_the_local_runner_does(spark, tmp_path):
    plain = counting(bounded_disorder(DELAY, idle_timeout=IDLE))
    runner = run_local(plain)
    store = run_spark(spark, plain, tmp_path / "plain")
    assert spark_panes(store) == local_panes(runner)
    assert sum(p[3] for p in spark_panes(store) if p[0] == "b") == 3  # 5 s, 12 s, 14 s dropped as late


def test_a_non_keyed_operator_computes_the_same_watermark(spark, tmp_path):
    from windowed_operator import WindowedOperator

    op = WindowedOperator(TimeWindows(10_000), Count(), timestamp="ts", watermark=PARTITIONED,
                          on_bad_element="dead_letter", name="all")
    runner = run_local(op, STEPS[:4])
    assert runner.dropped_counts["expired"] == 0 and runner.watermark == BASE + 11_000
    store = run_spark(spark, op, tmp_path, steps=STEPS[:4])
    assert spark_panes(store) == local_panes(runner)
    assert dead_letters(store) == Counter({("invalid_partition", None): 1})


# -- a merge whose inputs each have partitions ------------------------------------------------------------
def side_row(user, ts, part, field="amount", value=1):
    return {"user": user, field: value, "ts": BASE + ts, "part": part}


MERGE_STEPS = [  # (processing time, left rows, right rows)
    (T, [side_row("a", 1_000, 0), side_row("a", 1_500, 1)], [side_row("a", 2_000, 0, "page", "p")]),
    (T + 1_000, [side_row("a", 30_000, 0), side_row("a", 2_500, 1)],  # the left's partition 1 lags
     [side_row("a", 31_000, 0, "page", "q"), side_row("b", 3_000, 1, "page", "r")]),  # and the right's
    (T + 2_000, [side_row("a", 6_000, 1)], [side_row("b", 7_000, 1, "page", "s")]),  # on time: 1.5 s
    (T + 3_000, [side_row("a", 25_000, 1)], [side_row("b", 24_000, 1, "page", "t")]),  # both pass 20 s
    (T + 4_000, [], []),
]


def merge_operator():
    return KeyedWindowedMergeOperator(TimeWindows(10_000), Cogroup(), key="user", timestamp="ts",
                                      watermark=bounded_disorder(DELAY, partition="part"),
                                      left=InputOptions(value="amount"), right=InputOptions(value="page"))


def run_spark_merge(spark, op, workdir):
    store, clock = {}, FileClock(str(workdir / "clock"))
    clock.set(MERGE_STEPS[0][0])
    for side in ("left", "right"):
        (workdir / side).mkdir(parents=True)

    def start():
        left = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "left"))
        right = spark.readStream.schema(RIGHT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "right"))
        return (op.apply(left, right, clock=clock).writeStream.foreachBatch(_collector(store))
                .option("checkpointLocation", str(workdir / "checkpoint"))
                .trigger(processingTime="100 milliseconds").start())

    def write(index, step):
        if not step[1] and not step[2]:
            return False
        for side, rows in (("left", step[1]), ("right", step[2])):
            write_file(workdir / side / f"batch-{index:05d}.json", rows, index)
        return True

    drive(start, clock, MERGE_STEPS, write)
    return store


def test_a_merge_keeps_each_inputs_partitions_on_spark_as_locally(spark, tmp_path):
    from .test_merge_spark import local_rows, spark_rows

    op = merge_operator()
    runner = run_local(op, MERGE_STEPS)
    assert runner.dropped_counts["expired"] == 0
    assert {(p.key, p.window_start - BASE, p.timing.value) for p in runner.outputs} == {
        ("a", 0, "ON_TIME"), ("b", 0, "ON_TIME")}
    assert runner.watermark == BASE + 23_000  # left: min(29 s, 24 s); right: min(30 s, 23 s)
    assert spark_rows(run_spark_merge(spark, op, tmp_path)) == local_rows(runner)


def test_a_missing_partition_column_is_refused(spark, tmp_path):
    (tmp_path / "in").mkdir()
    df = spark.readStream.schema("user string, amount bigint, ts bigint").json(str(tmp_path / "in"))
    with pytest.raises(SparkOperatorError, match=r"^operator 'counts': watermark=bounded_disorder\(\.\.\., "
                                                 r"partition='part'\) names a column that is not in the DataFrame"):
        counting(PARTITIONED).apply(df)
    partitioned_df = spark.readStream.schema(SCHEMA).json(str(tmp_path / "in"))
    second = KeyedWindowedOperator(TimeWindows(60_000), Count(), name="per minute")
    with pytest.raises(SparkOperatorError, match="time_mode 'EventTime' cannot be given to a stage after a "
                                                 "per-partition watermark"):
        counting(PARTITIONED).then(second).apply(partitioned_df, time_mode="EventTime")


# -- chains whose first stage has partitions: later stages follow its watermark, handed on as rows ------
def chain_runner(*operators, processing_time=T):
    return ChainRunner([op.local_runner(processing_time=processing_time) for op in operators])


def run_local_chain(chain, steps=STEPS):
    return run_steps(chain_runner(*chain.operators, processing_time=steps[0][0]), steps)


def three_stages():
    """Counts per user and 10 s (partitioned), summed per user over 30 s windows, totalled."""
    return counting(PARTITIONED).then(KeyedWindowedOperator(TimeWindows(30_000), Sum(), name="per user")).then(
        WindowedOperator(None, Sum(), name="total"))


#: ... then a quiet input: idle for 34 s, the watermark moves on with processing time, with no row to carry it.
CHAIN_STEPS = [*STEPS, (T + 60_000, None)]


def test_a_chain_after_a_partitioned_stage_follows_its_watermark_through_a_restart(spark, tmp_path):
    chain = three_stages()
    runner = run_local_chain(chain, STEPS)
    counts, per_user, total = runner.runners
    assert counts.dropped_counts["expired"] == 1  # (only the row that came back behind the watermark)
    assert not per_user.dropped_counts and not total.dropped_counts
    assert sum(p.value for p in total.outputs) == 8  # (the windows closed by 45.5 s)
    plain = run_local_chain(counting(bounded_disorder(DELAY, idle_timeout=IDLE)).then(
        KeyedWindowedOperator(TimeWindows(30_000), Sum())).then(WindowedOperator(None, Sum())))
    assert sum(p.value for p in plain.outputs) == 6  # (one watermark for the input: the lagging rows dropped)
    assert per_user.watermark == total.watermark == counts.watermark == BASE + 45_500
    runner = run_local_chain(chain, CHAIN_STEPS)
    assert sum(p.value for p in runner.outputs) == 12 and runner.runners[2].watermark == BASE + 73_000

    progress: list = []
    store = run_spark(spark, chain, tmp_path, restart_at=RESTART, progress=progress, steps=CHAIN_STEPS)
    assert spark_panes(store) == local_panes(runner)
    side_rows = Counter((r["record_type"], r["reason"], r["stage"]) for rows in store.values() for r in rows
                        if r.get("record_type") != "pane")
    assert side_rows == Counter({("dead_letter", "invalid_partition", 0): 1})  # (the total has no key)
    # the output stage reports the watermark it ran at: the first stage's
    marks = {b.operator_watermark_ms - BASE for b in map(batch_progress, progress)
             if b.operator_watermark_ms is not None and b.operator_watermark_ms > BASE}
    assert {11_000, 39_000, 45_500, 73_000} <= marks


def test_a_chain_after_a_partitioned_merge_follows_its_watermark(spark, tmp_path):
    chain = merge_operator().then(KeyedWindowedOperator(None, Count(), name="per key"))
    runner = run_local_chain(chain, MERGE_STEPS)
    assert {(p.key, p.window_start - BASE) for p in runner.outputs} == {("a", 0), ("b", 0)}
    assert not runner.runners[1].dropped_counts
    store = run_spark_merge(spark, chain, tmp_path)
    assert spark_panes(store) == local_panes(runner)


def test_a_pipeline_file_chaining_a_partitioned_operator_plans_the_same_chain(spark, tmp_path):
    """Pipelines apply each operator to its input's frame: the operator after the partitioned one
    follows its watermark rows, as ``then()`` does (the chain's panes are the test above's)."""
    from windowed_operator.pipeline import parse_pipeline
    from windowed_operator.spark.driver.feed import feed_of
    from windowed_operator.spark.pipeline_run import build_frames

    from test_partition_watermark import lagging_pipeline

    text = lagging_pipeline("{bounded_disorder: 10s, partition: part, idle_timeout: 5m}").replace(
        "sinks:\n  - {input: counts, memory: {query_name: counts}}",
        "  - {name: total, input: counts, accumulation: {sum: {}}}\nsinks:\n  - {input: total, memory: {query_name: total}}")
    pipeline = parse_pipeline(text)
    assert [spec.name for spec in pipeline.operators] == ["counts", "total"]
    frames = build_frames(spark, pipeline, tmp_path)
    counts, total = feed_of(frames["counts"]), feed_of(frames["total"])
    assert counts is not None and total is not None
    assert counts.handing_on_watermark is not None and not counts.watermark_rows  # (planned again for the next)
    assert total.watermark_rows and total.time_mode == "ProcessingTime"
