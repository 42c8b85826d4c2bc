"""Sessions whose gap is each element's (``SessionWindows(gap=...)``): the proto-session is
``[ts, ts + gap(element))`` and merging is as for a fixed gap (the merged session ends at the
largest end).  Checked against a brute-force sweep with per-element gaps, and against the fixed-gap
operator when every element carries the same gap; bad gaps are bad elements naming field and value."""
from __future__ import annotations

import re
import warnings
from collections import defaultdict
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from accumulations import Sum
from windowed_operator import KeyedWindowedOperator, SessionWindows, Timing
from windowed_operator.elements import BadElementError
from windowed_operator.panes import DropReason
from windowed_operator.pipeline import PipelineError, parse_pipeline
from windowed_operator.testing import TestStream
from windowed_operator.windows.session_windows import GapError, read_gap

from helpers import near_boundaries, stream_of
from test_properties import MODES, TRIGGERS, check_pane_structure, expired

KEYS = ["a", "b"]


# -- reading a gap ----------------------------------------------------------------------------------
@pytest.mark.parametrize("raw,ms", [
    (1, 1), (30_000, 30_000), (np.int64(7), 7), (2.0, 2), (2.5, 3), (timedelta(seconds=3), 3_000),
    (pd.Timedelta(milliseconds=1500), 1_500), (np.timedelta64(4, "s"), 4_000), ("10s", 10_000),
    ("10 seconds", 10_000), ("1 minute", 60_000), ("250ms", 250),
])
def test_gap_values_read_as_milliseconds(raw, ms):
    assert read_gap(raw) == ms


@pytest.mark.parametrize("raw,words", [
    (None, "is null"), (float("nan"), "is null"), (pd.NaT, "is null"), (0, "0 is not positive"),
    (-5, "-5 is not positive"), ("0s", "'0s' (0 ms) is not positive"), (True, "boolean"),
    ("soon", "'soon' is not a duration"), (float("inf"), "not finite"), ([1], "is not a duration"),
])
def test_bad_gap_values_are_named(raw, words):
    with pytest.raises(GapError, match=re.escape(words)):
        read_gap(raw)


def test_the_option_takes_exactly_one_gap_and_says_how():
    assert SessionWindows(10) == SessionWindows(min_gap=10) and not SessionWindows(10).dynamic
    assert SessionWindows(gap="g").dynamic and repr(SessionWindows(10)) == "SessionWindows(min_gap=10)"
    for kwargs, words in [({}, "exactly one of min_gap"), ({"min_gap": 5, "gap": "g"}, "got min_gap=5 and gap='g'"),
                          ({"gap": "10s"}, "write SessionWindows('10s')"), ({"gap": 10}, "is a fixed gap"),
                          ({"gap": 3.5}, "is a fixed gap"), ({"gap": ""}, "names no field"),
                          ({"gap": object()}, "is not a field name, a callable or a Spark column")]:
        with pytest.raises(ValidationError, match=re.escape(words)):
            SessionWindows(**kwargs)
    with pytest.raises(TypeError, match="assigned from the element"):
        SessionWindows(gap="g").assign(0)


# -- against a brute-force model ------------------------------------------------------------------
element = st.tuples(st.sampled_from(KEYS), st.integers(1, 9), near_boundaries(0, 80),
                    st.one_of(st.integers(1, 12), st.sampled_from([1, 2, 5, 10])))
step = st.one_of(
    st.tuples(st.just("elements"), st.lists(element, min_size=1, max_size=6)),
    st.tuples(st.just("watermark"), near_boundaries(0, 100)),
    st.tuples(st.just("processing"), st.integers(1, 20)),
)
streams = st.lists(step, min_size=1, max_size=14)


def sessions_of(items):
    """The sweep: elements sorted by time chain while each starts before the running end, which is the
    largest ``ts + gap`` so far (a short gap after a long one does not shorten the session)."""
    result = []
    for ts, gap, value in sorted(items):
        if result and ts < result[-1][1]:
            start, end, total = result[-1]
            result[-1] = (start, max(end, ts + gap), total + value)
        else:
            result.append((ts, ts + gap, value))
    return {(s, e): total for s, e, total in result}


def brute_force(lateness, stream):
    """(key, session) -> final sum, and the elements dropped (an element whose own proto-session
    expired; with a lateness no watermark of the stream reaches, no session is purged before a merge)."""
    watermark, accepted, dropped = -(2 ** 62), defaultdict(list), 0
    for kind, payload in stream:
        if kind == "watermark":
            watermark = max(watermark, payload)
        elif kind == "elements":
            for key, value, ts, gap in payload:
                if expired(ts + gap - 1, lateness, watermark):
                    dropped += 1
                else:
                    accepted[key].append((ts, gap, value))
    totals = {(key, window): total for key, items in accepted.items()
              for window, total in sessions_of(items).items()}
    return totals, dropped


def run(option, trigger, lateness, stream, gap_of=lambda gap: gap):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(option, Sum("v"), key="k", timestamp="t", trigger=trigger,
                                   allowed_lateness=lateness)
    runner = op.local_runner()
    return runner.run(stream_of(stream, lambda k, v, ts, gap: {"k": k, "v": v, "t": ts, "g": gap_of(gap)})), runner


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trigger_name=st.sampled_from(sorted(TRIGGERS)), mode=st.sampled_from(MODES), stream=streams)
def test_sessions_with_element_gaps_equal_the_sweep(trigger_name, mode, stream):
    lateness = 1_000
    outputs, runner = run(SessionWindows(gap="g"), TRIGGERS[trigger_name]._with(mode=mode), lateness, stream)
    expected, dropped = brute_force(lateness, stream)
    assert sum(runner.dropped_counts.values()) == dropped
    by_window = check_pane_structure(outputs)
    produced: dict = defaultdict(int)
    for (key, start, end), records in by_window.items():
        if mode == "accumulating":
            if (key, (start, end)) in expected:  # merged-away sessions keep their early panes
                produced[(key, (start, end))] = [r for r in records if not r.is_retraction][-1].value
        elif mode == "discarding":  # a merged-away session's panes are part of its final session's total
            [final] = [w for k, w in expected if k == key and w[0] <= start and end <= w[1]]
            produced[(key, final)] += sum(r.value for r in records)
        elif sum(r.value for r in records) or (key, (start, end)) in expected:
            produced[(key, (start, end))] = sum(r.value for r in records)
    assert dict(produced) == expected
    assert runner.states == {}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trigger_name=st.sampled_from(sorted(TRIGGERS)), mode=st.sampled_from(MODES),
       lateness=st.sampled_from([0, 5, 30]), gap=st.sampled_from([1, 5, 10]), stream=streams)
def test_one_gap_for_every_element_is_the_fixed_gap_operator(trigger_name, mode, lateness, gap, stream):
    """Pane for pane, drops included, at every lateness (purges before merges too)."""
    trigger = TRIGGERS[trigger_name]._with(mode=mode)
    fixed, fixed_runner = run(SessionWindows(gap), trigger, lateness, stream)
    dynamic, dynamic_runner = run(SessionWindows(gap="g"), trigger, lateness, stream, gap_of=lambda _: f"{gap}ms")
    assert dynamic == fixed
    assert dynamic_runner.dropped_counts == fixed_runner.dropped_counts


def test_a_short_gap_after_a_long_one_does_not_shorten_the_session():
    op = KeyedWindowedOperator(SessionWindows(gap=lambda e: e["g"]), Sum("v"), key="k", timestamp="t")
    panes = op.run_local(TestStream().add_elements(
        {"k": "a", "t": 0, "v": 1, "g": 100}, {"k": "a", "t": 50, "v": 2, "g": 10},
        {"k": "a", "t": 105, "v": 4, "g": 1}, {"k": "a", "t": 99, "v": 8, "g": 5}).advance_watermark_to_infinity())
    assert [(p.window_start, p.window_end, p.value, p.timing) for p in panes] == [
        (0, 104, 11, Timing.ON_TIME), (105, 106, 4, Timing.ON_TIME)]


# -- bad gaps -----------------------------------------------------------------------------------------
BAD_GAPS = [({"g": -5}, "the session gap -5 is not positive: a session must contain its element (field 'g')"),
            ({"g": None}, "the session gap is null (None) (field 'g')"),
            ({}, "no gap field 'g'"),
            ({"g": "later"}, "the session gap 'later' is not a duration")]


@pytest.mark.parametrize("extra,detail", BAD_GAPS)
def test_a_bad_gap_raises_naming_field_and_value_before_any_state_changes(extra, detail):
    op = KeyedWindowedOperator(SessionWindows(gap="g"), Sum("v"), key="k", timestamp="t")
    runner = op.local_runner()
    runner.add_elements({"k": "a", "t": 0, "v": 1, "g": 10})
    before = runner.states["a"].windows.copy()
    with pytest.raises(BadElementError) as info:
        runner.add_elements({"k": "a", "t": 3, "v": 2, **extra})
    assert info.value.reason == DropReason.INVALID_GAP and info.value.key == "a"
    assert detail in str(info.value) and "element={" in str(info.value)
    assert runner.states["a"].windows == before


def test_bad_gaps_are_dead_letters_and_the_good_elements_still_count():
    op = KeyedWindowedOperator(SessionWindows(gap="g"), Sum("v"), key="k", timestamp="t",
                               on_bad_element="dead_letter")
    runner = op.local_runner()
    bad = [{"k": "a", "t": 3, "v": 2, **extra} for extra, _ in BAD_GAPS]
    panes = runner.run(TestStream().add_elements({"k": "a", "t": 0, "v": 1, "g": 10}, *bad)
                       .advance_watermark_to_infinity())
    assert [(p.window_start, p.window_end, p.value) for p in panes] == [(0, 10, 1)]
    assert [(d.reason, d.element, d.detail) for d in runner.dead_letters] == [
        (DropReason.INVALID_GAP, element, detail if detail != "the session gap 'later' is not a duration"
         else runner.dead_letters[3].detail) for element, (_, detail) in zip(bad, BAD_GAPS)]
    assert runner.dead_letters[3].detail.startswith(BAD_GAPS[3][1])


def test_a_failing_gap_callable_is_a_bad_element():
    op = KeyedWindowedOperator(SessionWindows(gap=lambda e: e["missing"]), Sum("v"), key="k", timestamp="t")
    with pytest.raises(BadElementError, match=r"invalid_gap\): gap extractor raised KeyError\('missing'\)"):
        op.run_local(TestStream().add_elements({"k": "a", "t": 0, "v": 1}))


# -- pipeline files ---------------------------------------------------------------------------------------
PIPELINE = """\
name: gaps
sources:
  clicks:
    memory: {schema: "user string, ts bigint, gap_ms bigint", rows: [{user: a, ts: 1, gap_ms: 5}]}
operators:
  - name: sessions
    input: clicks
    key: user
    timestamp: ts
    window: {sessions: {gap_field: gap_ms}}
    accumulation: {count: {}}
sinks:
  - {input: sessions, console: {}}
"""


def test_pipeline_files_read_a_gap_field():
    op = parse_pipeline(PIPELINE).build_operators()["sessions"]
    assert op.window == SessionWindows(gap="gap_ms")


def test_pipeline_files_check_the_gap_field_and_take_one_gap():
    with pytest.raises(PipelineError) as info:
        parse_pipeline(PIPELINE.replace("gap_field: gap_ms", "gap_field: gap"))
    assert [str(i) for i in info.value.issues] == [
        "line 10: operators[0].window.sessions.gap_field: column 'gap' is not in 'clicks' (columns: user, ts, gap_ms)"]
    with pytest.raises(PipelineError) as info:
        parse_pipeline(PIPELINE.replace("gap_field: gap_ms", "gap_field: gap_ms, gap: 10s"))
    assert "operators[0].window: sessions: give exactly one of gap, gap_field; got gap, gap_field" in str(info.value.issues[0])


def test_merge_operators_read_each_sides_gap():
    from accumulations.merge import Cogroup
    from windowed_operator import KeyedWindowedMergeOperator
    from windowed_operator.testing import TimestampedValue as TV, TwoInputTestStream

    op = KeyedWindowedMergeOperator(SessionWindows(gap=lambda pair: 20 if pair[1] == "long" else 3), Cogroup())
    stream = (TwoInputTestStream().add_elements("left", TV(("a", "long"), 0), TV(("a", "short"), 30))
              .add_elements("right", TV(("a", "short"), 15), TV(("a", "short"), 32)))
    assert [(p.window_start, p.window_end, p.value) for p in op.run_local(stream)] == [
        (0, 20, {"left": ["long"], "right": ["short"]}), (30, 35, {"left": ["short"], "right": ["short"]})]
