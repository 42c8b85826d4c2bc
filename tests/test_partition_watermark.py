"""Per-partition watermarks (``bounded_disorder(delay, partition=..., idle_timeout=...)``): the
minimum over the partitions that are not idle of their largest event time minus the delay; an idle
partition is left out until it sends again, then rejoins without moving the watermark back
(``watermarks.PartitionWatermarks``).  The tracker against a brute-force model, the local runner
(one input, merges, chains, test streams) against the same model, pipeline files and bad input."""
from __future__ import annotations

import json
import textwrap
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from accumulations import Cogroup, Count, Sum
from triggers import TriggerOption
from windowed_operator import (KeyedWindowedMergeOperator, KeyedWindowedOperator, TimeWindows, WindowedOperator,
                               bounded_disorder)
from windowed_operator.chain import Chain
from windowed_operator.elements import BadElementError
from windowed_operator.state.fingerprint import restart_problems, state_fingerprint
from windowed_operator.panes import DropReason
from windowed_operator.pipeline import PipelineError, parse_pipeline
from windowed_operator.pipeline.local_run import run_pipeline_locally
from windowed_operator.testing import TestStream, TwoInputTestStream
from windowed_operator.testing import TimestampedValue as TV
from windowed_operator.time import END_OF_INPUT, MAX_TIMESTAMP, MIN_TIMESTAMP
from windowed_operator.watermarks import BoundedDisorderWatermark, PartitionWatermarks, WatermarkTracker

from helpers import near_boundaries

DELAY, TIMEOUT = 5, 20


# -- the brute-force model ------------------------------------------------------------------------------
def model_watermarks(steps, delay=DELAY, timeout=TIMEOUT):
    """After each step, from the whole history: every partition's largest event time minus ``delay``;
    the minimum over those whose last element is less than ``timeout`` ago, or the largest when none
    is; once no element at all came for more than ``timeout``, plus the processing time since; the
    largest such value at any step so far (never back)."""
    now, history, candidates, out = 0, [], [], []  # history: (partition, event time, processing time)
    for kind, payload in steps:
        if kind == "elements":
            history += [(partition, ts, now) for partition, ts in payload]
        else:
            now += payload
        partitions = {p for p, _, _ in history}
        if not partitions:
            candidates.append(MIN_TIMESTAMP)
        else:
            mark = {p: max(ts for q, ts, _ in history if q == p) - delay for p in partitions}
            last = {p: max(at for q, _, at in history if q == p) for p in partitions}
            awake = [mark[p] for p in partitions if timeout is None or now - last[p] < timeout]
            event = max(MIN_TIMESTAMP, min(awake) if awake else max(mark.values()))
            quiet_for = now - max(last.values()) - (timeout if timeout is not None else 0)
            if timeout is not None and quiet_for > 0 and event > MIN_TIMESTAMP:
                event = min(event + quiet_for, END_OF_INPUT - 1)
            candidates.append(event)
        out.append(max(candidates))
    return out


times = near_boundaries(0, 200, periods=(DELAY, TIMEOUT, 10), lateness=(0, DELAY, TIMEOUT))
step = st.one_of(
    st.tuples(st.just("elements"), st.lists(st.tuples(st.sampled_from("abc"), times), min_size=1, max_size=4)),
    st.tuples(st.just("processing"), st.one_of(st.integers(1, 30), st.sampled_from(
        [TIMEOUT - 1, TIMEOUT, TIMEOUT + 1, 1, 2]))))
streams = st.lists(step, min_size=1, max_size=18)


def tracker_watermarks(steps, timeout=TIMEOUT):
    tracker, now, out = PartitionWatermarks(DELAY, timeout), 0, []
    for kind, payload in steps:
        if kind == "elements":
            for partition, ts in payload:
                tracker.observe(partition, ts, now)
        else:
            now += payload
        out.append(tracker.compute(now))
    return out


@settings(max_examples=400, deadline=None)
@given(stream=streams, timeout=st.sampled_from([TIMEOUT, None]))
def test_the_tracker_equals_the_model_and_never_goes_back(stream, timeout):
    marks = tracker_watermarks(stream, timeout)
    assert marks == model_watermarks(stream, timeout=timeout)
    assert marks == sorted(marks)


@settings(max_examples=200, deadline=None)
@given(stream=streams, cut=st.integers(0, 18))
def test_a_snapshot_through_json_continues_as_the_uninterrupted_tracker(stream, cut):
    tracker, restored, now = PartitionWatermarks(DELAY, TIMEOUT), None, 0
    for i, (kind, payload) in enumerate(stream):
        if i == cut:
            restored = PartitionWatermarks.restore(DELAY, TIMEOUT, json.loads(json.dumps(tracker.snapshot())))
        if kind == "elements":
            for partition, ts in payload:
                tracker.observe(partition, ts, now)
                if restored is not None:
                    restored.observe(partition, ts, now)
        else:
            now += payload
        mark = tracker.compute(now)
        if restored is not None:
            assert restored.compute(now) == mark
            assert restored.snapshot() == tracker.snapshot()


@settings(max_examples=200, deadline=None)
@given(stream=streams)
def test_one_partition_is_the_watermark_without_partitions(stream):
    """The rule reduces to the existing one: with every element in one partition, the watermark is
    plain ``bounded_disorder(delay, idle_timeout)``'s (``idle_advanced`` included)."""
    one = WatermarkTracker(bounded_disorder(DELAY, TIMEOUT, partition="p"))
    plain = WatermarkTracker(bounded_disorder(DELAY, TIMEOUT))
    now = 0
    for kind, payload in stream:
        if kind == "elements":
            for tracker in (one, plain):
                tracker.note_input(now)
                for _, ts in payload:
                    tracker.observe_event_time(ts, "only", now)
        else:
            now += payload
        assert one.compute(now) == plain.compute(now)


def test_the_rule_at_its_boundaries():
    t = PartitionWatermarks(DELAY, TIMEOUT)
    assert t.compute(0) == MIN_TIMESTAMP and t.holding_back(0) is None  # nothing seen
    t.observe("a", 100, 0)
    t.observe("b", 40, 0)
    assert t.compute(0) == 35 and t.holding_back(0) == ("b", 60)  # the minimum: b holds it back 60 ms
    t.observe("a", 130, 10)
    assert t.compute(TIMEOUT - 1) == 35  # b quiet for one ms less than the timeout: still counts
    assert t.compute(TIMEOUT) == 125 and t.holding_back(TIMEOUT) == ("a", 0)  # quiet for exactly it: idle
    t.observe("b", 60, TIMEOUT + 1)  # b rejoins behind the watermark: it does not move back...
    assert t.compute(TIMEOUT + 1) == 125 and t.holding_back(TIMEOUT + 1) == ("b", 70)
    t.observe("b", 140, TIMEOUT + 2)  # ...and holds it until its own passes it
    assert t.compute(TIMEOUT + 2) == 125
    t.observe("a", 200, TIMEOUT + 3)
    assert t.compute(TIMEOUT + 3) == 135
    # every partition quiet: the largest, then advancing with processing time after the timeout
    assert t.compute(TIMEOUT + 3 + TIMEOUT) == 195
    assert t.compute(TIMEOUT + 3 + TIMEOUT + 7) == 202
    assert t.snapshot() == {"watermark": 202, "partitions": [["a", 200, TIMEOUT + 3], ["b", 140, TIMEOUT + 2]]}


def test_a_restart_keeps_the_watermark_and_a_new_partition_starts_from_it():
    stored = PartitionWatermarks(DELAY, None)
    stored.observe(0, 1_000, 0)
    stored.compute(0)
    restored = PartitionWatermarks.restore(DELAY, None, json.loads(json.dumps(stored.snapshot())))
    restored.observe(7, 10, 5)  # first seen after the restart, far behind
    assert restored.compute(5) == 995  # it joins at the restored watermark: nothing moves back
    restored.observe(0, 2_000, 6)
    assert restored.compute(6) == 995  # and the watermark waits there until partition 7 passes it
    restored.observe(7, 1_500, 7)
    assert restored.compute(7) == 1_495
    # partition values keep their form through plain data (a tuple stored as a list)
    tuples = PartitionWatermarks(DELAY)
    tuples.observe(("topic", 3), 50, 0)
    assert list(PartitionWatermarks.restore(DELAY, None, json.loads(json.dumps(tuples.snapshot()))).partitions) \
        == [("topic", 3)]


# -- the local runner ------------------------------------------------------------------------------------
def counting(watermark, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(TimeWindows(10), Count(), key="k", timestamp="ts", watermark=watermark,
                                     late_data_output=True, **kwargs)


@settings(max_examples=200, deadline=None)
@given(stream=streams, timeout=st.sampled_from([TIMEOUT, None]))
def test_the_local_runner_follows_the_model(stream, timeout):
    runner = counting(bounded_disorder(DELAY, timeout, partition="part")).local_runner()
    marks = model_watermarks(stream, timeout=timeout)
    for (kind, payload), mark in zip(stream, marks):
        if kind == "elements":
            runner.add_elements(*[{"k": p, "ts": ts, "part": p} for p, ts in payload])
        else:
            runner.advance_processing_time(payload)
        assert runner.watermark == mark


def lagging_stream(minutes=10, lag=5):
    """Partition 0 is on time; partition 1's consumer is ``lag`` minutes behind.  Each bundle (one
    minute of processing time) carries one minute of each, two rows per partition."""
    rows = []
    for minute in range(minutes):
        fast, slow = (minute + lag) * 60_000, minute * 60_000
        rows.append([{"k": "fast", "ts": fast + s, "part": 0} for s in (0, 30_000)]
                    + [{"k": "slow", "ts": slow + s, "part": 1} for s in (0, 30_000)])
    return rows


def run_lagging(watermark):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(TimeWindows(60_000), Count(), key="k", timestamp="ts", watermark=watermark,
                                   late_data_output=True)
    runner = op.local_runner()
    for bundle in lagging_stream():
        runner.add_elements(*bundle)
        runner.advance_processing_time(60_000)
    runner.finish()
    return runner


def test_a_lagging_partition_is_dropped_with_one_watermark_and_on_time_with_partitions():
    plain = run_lagging(bounded_disorder(10_000))
    assert dict(plain.dropped_counts) == {"expired": 18}  # the slow partition's rows after its first minute
    assert {d.element["part"] for d in plain.late_data} == {1}
    per_partition = run_lagging(bounded_disorder(10_000, partition="part"))
    assert dict(per_partition.dropped_counts) == {}
    assert sum(p.value for p in per_partition.outputs) == 40
    assert {p.timing.value for p in per_partition.outputs} == {"ON_TIME"}
    assert per_partition.tracker.partitions is not None
    assert per_partition.tracker.partitions.holding_back(per_partition.processing_time) == (1, 300_000)


def test_an_idle_partition_stops_holding_the_watermark_back_and_rejoins_without_moving_it_back():
    runner = counting(bounded_disorder(DELAY, 100, partition="part")).local_runner()
    runner.add_elements({"k": "a", "ts": 50, "part": "a"}, {"k": "b", "ts": 20, "part": "b"})
    assert runner.watermark == 15
    runner.advance_processing_time(60)
    runner.add_elements({"k": "a", "ts": 90, "part": "a"})
    runner.advance_processing_time(39)
    assert runner.watermark == 15  # b sent nothing for 99 ms: it still holds the watermark
    runner.advance_processing_time(1)
    assert runner.watermark == 85  # 100 ms: b is idle, a alone decides
    runner.add_elements({"k": "b", "ts": 30, "part": "b"}, {"k": "b", "ts": 86, "part": "b"})
    assert runner.watermark == 85  # b rejoins behind: the watermark stays...
    assert [(d.element["ts"], d.reason.value) for d in runner.late_data] == [(30, "expired")]  # ...30 is late
    runner.add_elements({"k": "a", "ts": 300, "part": "a"})
    assert runner.watermark == 85  # ...and waits for b (its 86 landed on time)
    runner.add_elements({"k": "b", "ts": 200, "part": "b"})
    assert runner.watermark == 195
    without_timeout = counting(bounded_disorder(DELAY, partition="part")).local_runner()
    without_timeout.add_elements({"k": "a", "ts": 50, "part": "a"}, {"k": "b", "ts": 20, "part": "b"})
    without_timeout.advance_processing_time(10**6)
    without_timeout.add_elements({"k": "a", "ts": 900, "part": "a"})
    assert without_timeout.watermark == 15  # no idle_timeout: a silent partition holds it until the end


def test_a_test_stream_names_each_bundles_partition():
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), watermark=bounded_disorder(DELAY, partition="part"),
                               late_data_output=True)
    stream = (TestStream()
              .add_elements(TV(("k", 10), 10), partition=1)
              .add_elements(TV(("k", 1), 100), TV(("k", 2), 104), partition=0)
              .add_elements(TV(("k", 20), 11), partition=1)  # on time: partition 1 holds the watermark back
              .add_elements(TV(("k", 30), 300), partition=0))
    runner = op.local_runner()
    panes = runner.run(stream, finish=False)
    assert runner.watermark == 6 and panes == [] and not runner.late_data
    assert [(p.window_start, p.value) for p in runner.finish()] == [(10, 30), (100, 3), (300, 30)]
    with pytest.raises(ValueError, match="names its partition, but the operator's watermark is not per partition"):
        KeyedWindowedOperator(TimeWindows(10), Sum(), watermark=bounded_disorder(DELAY)).run_local(
            TestStream().add_elements(TV(("k", 1), 1), partition=0))


def test_a_merge_keeps_each_inputs_partitions():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedMergeOperator(TimeWindows(10), Cogroup(), key="k", timestamp="ts",
                                        watermark=bounded_disorder(DELAY, partition="part"), late_data_output=True)
    runner = op.local_runner()
    runner.add_elements("left", {"k": "x", "ts": 100, "part": 0}, {"k": "x", "ts": 40, "part": 1})
    runner.add_elements("right", {"k": "x", "ts": 90, "part": 0}, {"k": "x", "ts": 60, "part": 1})
    assert runner.watermark == 35  # min(left: min(95, 35), right: min(85, 55))
    runner.add_elements("left", {"k": "x", "ts": 80, "part": 1})  # left's partition 1, not right's, moves on
    assert runner.watermark == 55
    runner.add_elements("right", {"k": "x", "ts": 70, "part": 1}, {"k": "x", "ts": 52, "part": 0})
    assert runner.watermark == 65 and not runner.late_data  # right's 52 was on time in its own partition 0
    stream = (TwoInputTestStream().add_elements("left", TV({"k": "y", "ts": 0}, 0), partition="p")
              .add_elements("right", TV({"k": "y", "ts": 0}, 0), partition="q"))
    assert len(op.run_local(stream)) == 1


def test_a_chain_takes_the_watermark_its_first_stage_computes():
    first = KeyedWindowedOperator(TimeWindows(10), Count(), key="k", timestamp="ts",
                                  watermark=bounded_disorder(DELAY, partition="part"))
    second = WindowedOperator(None, Sum())
    runner = first.then(second).local_runner()
    runner.add_elements({"k": "a", "ts": 100, "part": 0}, {"k": "b", "ts": 3, "part": 1})
    runner.add_elements({"k": "b", "ts": 8, "part": 1}, {"k": "b", "ts": 16, "part": 1})
    assert [runner.runners[0].watermark, runner.runners[1].watermark] == [11, 11]
    assert [(p.window_start, p.value) for p in runner.runners[1].outputs] == [(0, 2)]  # b's [0, 10) on time
    with pytest.raises(ValueError, match="only the first stage computes per-partition watermarks"):
        Chain(operators=[first, WindowedOperator(None, Sum(), watermark=bounded_disorder(0, partition="part"))])


# -- bad input -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row,detail", [
    ({"k": "a", "ts": 1, "part": None}, "partition 'part' is null (None): a null partition is a bad element"),
    ({"k": "a", "ts": 1, "part": float("nan")}, "partition 'part' is null (nan)"),
    ({"k": "a", "ts": 1}, "no partition field 'part'"),
    ({"k": "a", "ts": 1, "part": [1]}, "partition 'part' value [1] is not hashable"),
])
def test_a_null_missing_or_unhashable_partition_is_a_bad_element(row, detail):
    with pytest.raises(BadElementError, match=r"invalid_partition\): " + detail.replace("(", r"\(").replace(
            ")", r"\)").replace("[", r"\[").replace("]", r"\]")) as info:
        counting(bounded_disorder(DELAY, partition="part")).local_runner().add_elements(row)
    assert info.value.key == "a"
    runner = counting(bounded_disorder(DELAY, partition="part"), on_bad_element="dead_letter").local_runner()
    runner.add_elements(row, {"k": "a", "ts": 100, "part": 0})
    assert [(d.reason, d.element) for d in runner.dead_letters] == [(DropReason.INVALID_PARTITION, row)]
    assert runner.watermark == 95  # the bad row moved no partition; the good one was counted
    assert [p.value for p in runner.finish()] == [1]


@pytest.mark.parametrize("kwargs,field", [({"partition": ""}, "partition"), ({"partition": 3}, "partition"),
                                          ({"partition": "p", "idle_timeout": 0}, "idle_timeout")])
def test_bad_options_name_the_field(kwargs, field):
    with pytest.raises(ValidationError, match=field):
        BoundedDisorderWatermark(max_disorder=5, **kwargs)


# -- fingerprint ----------------------------------------------------------------------------------------
def fingerprint(watermark):
    op = KeyedWindowedOperator(TimeWindows(10), Count(), key="k", timestamp="ts", watermark=watermark)
    return state_fingerprint(op, key_groups=4, layout="per-key windows", time_mode="EventTime", state_version=8)


def test_the_fingerprint_without_partition_is_unchanged_and_adding_or_removing_it_is_a_safe_restart():
    assert fingerprint(bounded_disorder(5, 10))["watermark"] == \
        "BoundedDisorderWatermark(kind='bounded_disorder', max_disorder=5, idle_timeout=10)"
    assert fingerprint(bounded_disorder(5, partition="p"))["watermark"] == \
        "BoundedDisorderWatermark(kind='bounded_disorder', max_disorder=5, idle_timeout=None, partition='p')"
    plain, partitioned = fingerprint(bounded_disorder(5)), fingerprint(bounded_disorder(5, partition="p"))
    assert plain != partitioned
    assert restart_problems(plain, partitioned) == [] and restart_problems(partitioned, plain) == []


# -- pipeline files --------------------------------------------------------------------------------------
def lagging_pipeline(watermark: str) -> str:
    rows = [row for bundle in lagging_stream() for row in bundle]
    return textwrap.dedent(f"""\
        name: lagging
        trigger_interval: 1m
        sources:
          readings:
            memory: {{schema: "k string, ts bigint, part int", rows_per_batch: 4, rows: {json.dumps(rows)}}}
        operators:
          - name: counts
            input: readings
            key: k
            timestamp: ts
            window: {{tumbling: {{size: 1m}}}}
            accumulation: {{count: {{}}}}
            late_data_output: true
            watermark: {watermark}
        sinks:
          - {{input: counts, memory: {{query_name: counts}}}}
        """)


def test_run_local_drops_the_lagging_partition_only_without_partition(capsys):
    plain = run_pipeline_locally(parse_pipeline(lagging_pipeline("{bounded_disorder: 10s}")))
    assert plain.totals["counts"].late_rows_dropped == 18
    text = lagging_pipeline("{bounded_disorder: 10s, partition: part, idle_timeout: 5m}")
    per_partition = run_pipeline_locally(parse_pipeline(text))
    assert per_partition.totals["counts"].late_rows_dropped == 0
    assert sum(p.value for p in per_partition.panes("counts")) == 40
    assert parse_pipeline(text).build_operators()["counts"].watermark == bounded_disorder(10_000, 300_000, "part")


def pipeline_issues(text: str) -> list[str]:
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text)
    return [str(issue) for issue in info.value.issues]


@pytest.mark.parametrize("watermark,expected", [
    ("{bounded_disorder: 10s, partition: shard}",
     "operators[0].watermark.partition: column 'shard' is not in 'readings' (columns: k, ts, part)"),
    ("{upstream: 10s, partition: part}",
     "operators[0].watermark: partition ('part') applies to a bounded_disorder watermark"),
    ("{bounded_disorder: 10s, partition: ''}", "operators[0].watermark.partition: String should have at least 1"),
])
def test_validate_names_a_bad_partition(watermark, expected):
    issues = pipeline_issues(lagging_pipeline(watermark))
    assert len(issues) == 1 and expected in issues[0], issues


def test_the_validate_command_names_the_bad_partition(tmp_path, capsys):
    from windowed_operator.cli import main

    path = tmp_path / "p.yaml"
    path.write_text(lagging_pipeline("{bounded_disorder: 10s, partition: shard}"))
    assert main(["validate", str(path)]) == 1
    assert "operators[0].watermark.partition: column 'shard' is not in 'readings'" in capsys.readouterr().err
    path.write_text(lagging_pipeline("{bounded_disorder: 10s, partition: part}"))
    assert main(["validate", str(path)]) == 0


def test_the_end_of_input_still_closes_every_partition():
    runner = counting(bounded_disorder(DELAY, partition="part")).local_runner()
    runner.add_elements({"k": "a", "ts": 50, "part": 0}, {"k": "b", "ts": 3, "part": 1})
    runner.finish()
    assert runner.watermark == MAX_TIMESTAMP and len(runner.outputs) == 2


def test_every_trigger_sees_the_partitioned_watermark():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(TimeWindows(10), Count(), key="k", timestamp="ts",
                                   trigger=TriggerOption.at_watermark().with_late_firings_at_every(count=1),
                                   allowed_lateness=100, watermark=bounded_disorder(DELAY, partition="part"))
    runner = op.local_runner()
    runner.add_elements({"k": "a", "ts": 1, "part": 0}, {"k": "a", "ts": 2, "part": 1})
    runner.add_elements({"k": "a", "ts": 40, "part": 0})
    assert runner.outputs == []  # partition 1 at 2 - 5 holds [0, 10) open
    runner.add_elements({"k": "a", "ts": 30, "part": 1})
    assert [(p.window_start, p.value, p.timing.value) for p in runner.outputs] == [(0, 2, "ON_TIME")]
