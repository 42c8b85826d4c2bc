"""Windows close when a stream goes quiet: with ``idle_timeout`` on an event-time watermark, after
that much processing time without any input the watermark advances with processing time from where
event time left it (``watermarks.idle_advanced``), and returns to event time when input resumes;
what then arrives behind it is late by the ordinary rules, never lost silently."""
from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from accumulations import Cogroup, Count, Sum
from triggers import TriggerOption
from windowed_operator import (KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows, TimeWindows,
                               Timing, bounded_disorder, upstream_watermark)
from windowed_operator.pipeline import PipelineError, parse_pipeline
from windowed_operator.testing import TimestampedValue as TV
from windowed_operator.time import END_OF_INPUT, MIN_TIMESTAMP
from windowed_operator.watermarks import BoundedDisorderWatermark, UpstreamWatermark, idle_advanced

from helpers import near_boundaries


def test_the_rule_at_its_boundary():
    assert idle_advanced(100, last_input=1_000, idle_timeout=500, now=1_500) == 100  # quiet for exactly the timeout
    assert idle_advanced(100, last_input=1_000, idle_timeout=500, now=1_501) == 101
    assert idle_advanced(100, last_input=1_000, idle_timeout=500, now=9_500) == 8_100
    assert idle_advanced(100, last_input=None, idle_timeout=500, now=9_500) == 100  # no input yet: nothing to close
    assert idle_advanced(MIN_TIMESTAMP, last_input=0, idle_timeout=5, now=10**9) == MIN_TIMESTAMP
    assert idle_advanced(100, last_input=0, idle_timeout=None, now=10**9) == 100
    assert idle_advanced(10**12, last_input=0, idle_timeout=1, now=10**13) == END_OF_INPUT - 1


# -- the watermark against a model, and the panes against an explicitly driven runner -----------------------
DISORDER, TIMEOUT = 5, 20
step = st.one_of(
    st.tuples(st.just("elements"), st.lists(st.tuples(st.sampled_from("ab"), near_boundaries(0, 120)),
                                            min_size=1, max_size=4)),
    st.tuples(st.just("processing"), st.one_of(st.integers(1, 30), st.sampled_from([TIMEOUT - 1, TIMEOUT,
                                                                                     TIMEOUT + 1]))))
streams = st.lists(step, min_size=1, max_size=16)


def model_watermarks(stream):
    """After each step: the bounded-disorder watermark, or once quiet for TIMEOUT, that watermark
    plus the processing time since it went quiet; never backwards."""
    now, last_input, max_ts, current, out = 0, None, None, MIN_TIMESTAMP, []
    for kind, payload in stream:
        if kind == "elements":
            last_input = now
            max_ts = max([ts for _, ts in payload] + ([max_ts] if max_ts is not None else []))
        else:
            now += payload
        event = max_ts - DISORDER if max_ts is not None else MIN_TIMESTAMP
        candidate = event
        if last_input is not None and max_ts is not None and now > last_input + TIMEOUT:
            candidate = event + (now - last_input - TIMEOUT)
        current = max(current, candidate)
        out.append(current)
    return out


def operator(watermark, trigger=TriggerOption.default(), **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(SessionWindows(7), Count(), trigger=trigger, allowed_lateness=3,
                                     watermark=watermark, **kwargs)


@settings(max_examples=300, deadline=None)
@given(stream=streams, trigger=st.sampled_from(["default", "early_late"]))
def test_idle_runner_equals_a_runner_driven_by_the_model_watermark(stream, trigger):
    option = TriggerOption.default() if trigger == "default" else \
        TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1) \
        .accumulating_and_retracting_fired_panes()
    idle = operator(bounded_disorder(DISORDER, idle_timeout=TIMEOUT), option).local_runner()
    driven = operator(upstream_watermark(), option).local_runner()
    marks = model_watermarks(stream)
    for (kind, payload), mark in zip(stream, marks):
        if kind == "elements":
            elements = [TV((key, 1), ts) for key, ts in payload]
            made, driven_made = idle.add_elements(*elements), driven.add_elements(*elements)
        else:
            made, driven_made = idle.advance_processing_time(payload), driven.advance_processing_time(payload)
        assert made == driven_made + driven.advance_watermark_to(mark)  # (the idle runner moves its own)
        assert idle.watermark == mark
    assert idle.finish() == driven.finish()
    assert idle.dropped_counts == driven.dropped_counts


# -- what a user sees ---------------------------------------------------------------------------------------
def test_the_last_session_of_the_night_closes_and_what_comes_late_is_late():
    op = KeyedWindowedOperator(SessionWindows(30_000), Count(), key="user", timestamp="ts", allowed_lateness=10_000,
                               watermark=bounded_disorder(10_000, idle_timeout=60_000), late_data_output=True)
    runner = op.local_runner(processing_time=1_000_000)
    runner.add_elements({"user": "ann", "ts": 0}, {"user": "ann", "ts": 20_000})
    assert runner.watermark == 10_000
    assert runner.advance_processing_time(60_000) == []  # quiet for exactly the timeout: event time still rules
    assert runner.advance_processing_time(39_999) == []  # watermark 49,999: the session's end (50,000) not reached
    [pane] = runner.advance_processing_time(1)
    assert (pane.window_start, pane.window_end, pane.value, pane.timing) == (0, 50_000, 2, Timing.ON_TIME)
    runner.advance_processing_time(10_000)  # watermark 60,000: past the session's expiry (49,999 + 10,000)
    assert runner.watermark == 60_000 and runner.states == {}
    # Input resumes behind the advanced watermark: late by the ordinary rules, on the late-data output.
    runner.add_elements({"user": "ann", "ts": 5_000}, {"user": "bob", "ts": 90_000})
    assert [(d.reason.value, d.element["ts"]) for d in runner.late_data] == [("expired", 5_000)]
    assert runner.watermark == 80_000  # event time rules again: 90,000 - 10,000
    runner.advance_processing_time(30_000)  # not quiet long enough yet: held
    assert runner.watermark == 80_000


def test_upstream_watermarks_go_quiet_too():
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), allowed_lateness=0, watermark=upstream_watermark(idle_timeout=5))
    runner = op.local_runner()
    runner.add_elements(TV(("k", 3), 4))
    runner.advance_watermark_to(2)
    runner.advance_processing_time(5)
    assert runner.watermark == 2  # quiet for exactly the timeout (the input and the watermark moved at 0)
    assert runner.advance_processing_time(7) == [] and runner.watermark == 9
    [pane] = runner.advance_processing_time(1)
    assert (pane.window_end, pane.value, runner.watermark) == (10, 3, 10)


def test_a_merges_inputs_both_quiet_advance_the_watermark():
    op = KeyedWindowedMergeOperator(TimeWindows(10), Cogroup(), watermark=bounded_disorder(2, idle_timeout=10))
    runner = op.local_runner()
    runner.add_elements("left", TV(("k", 1), 3))
    runner.add_elements("right", TV(("k", 2), 5))
    assert runner.watermark == 1  # the minimum of the inputs' 1 and 3
    assert runner.advance_processing_time(10) == []
    assert runner.advance_processing_time(8) == [] and runner.watermark == 9  # both quiet: 1 + 8 and 3 + 8
    [pane] = runner.advance_processing_time(1)
    assert pane.value == {"left": [1], "right": [2]} and runner.watermark == 10


def test_options_and_pipeline_files():
    assert bounded_disorder(10, idle_timeout="1m") == BoundedDisorderWatermark(max_disorder=10, idle_timeout=60_000)
    with pytest.raises(ValidationError, match="greater than 0"):
        UpstreamWatermark(idle_timeout=0)
    text = """\
name: quiet
trigger_interval: 1s
sources:
  clicks: {memory: {schema: "user string, ts bigint", rows: [{user: a, ts: 1}]}}
operators:
  - {name: sessions, input: clicks, key: user, timestamp: ts, window: {sessions: {gap: 30s}},
     accumulation: {count: {}}, watermark: {bounded_disorder: 10s, idle_timeout: 1m}}
sinks:
  - {input: sessions, console: {}}
"""
    op = parse_pipeline(text).build_operators()["sessions"]
    assert op.watermark == BoundedDisorderWatermark(max_disorder=10_000, idle_timeout=60_000)
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text.replace("{bounded_disorder: 10s, idle_timeout: 1m}", "{fixed_lag: 10s, idle_timeout: 1m}"))
    assert "idle_timeout applies to event-time watermarks" in str(info.value.issues[0])
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text.replace("trigger_interval: 1s\n", ""))
    assert [str(i) for i in info.value.issues] == [
        "line 6: operators[0].watermark.idle_timeout: an idle timeout needs trigger_interval: quiet time passes only "
        "in micro-batches without data, which Spark runs with a processingTime trigger (under the default "
        "availableNow the query would never end)"]


def test_a_merge_in_a_pipeline_file_takes_an_idle_timeout():
    text = """\
name: joined
trigger_interval: 1s
sources:
  views: {memory: {schema: "ad string, ts bigint", rows: [{ad: a, ts: 1}]}}
  clicks: {memory: {schema: "ad string, ts bigint", rows: [{ad: a, ts: 2}]}}
operators:
  - {name: j, left: views, right: clicks, key: ad, timestamp: ts, window: {tumbling: {size: 1m}},
     accumulation: {cogroup: {}}, idle_timeout: 30s, watermark: {bounded_disorder: 5s}}
sinks:
  - {input: j, console: {}}
"""
    assert parse_pipeline(text).build_operators()["j"].idle_timeout == 30_000
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text.replace("trigger_interval: 1s\n", ""))
    assert "operators[0].idle_timeout: an idle timeout needs trigger_interval" in str(info.value.issues[0])
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text.replace("left: views, right: clicks", "input: views").replace("cogroup: {}", "count: {}"))
    assert "idle_timeout is a merge operator's" in str(info.value.issues[0])
