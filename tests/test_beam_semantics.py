"""Beam Java's time rules and bundle semantics, case by case, in milliseconds.

Each case was worked out from Beam Java's runner core (ReduceFnRunner, AfterWatermark's
endOfWindowReached, LateDataUtils, PaneInfoTracker, WatermarkHold), not from this implementation:
the end of a window is reached once the watermark is *after* its max timestamp (``watermark >=
end``); a window expires once ``max_timestamp + allowed_lateness`` is *before* the watermark;
sessions merge per bundle; a session whose trigger finished merges with nothing; elements behind
the watermark set no hold for the EARLIEST/LATEST output timestamp.
"""
from __future__ import annotations

import warnings
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accumulations import Sum, ToList
from helpers import near_boundaries
from triggers import AfterCount, AfterEach, AfterProcessingTime, AfterWatermark, Repeatedly, TriggerOption
from windowed_operator import (CumulativeWindows, GlobalWindow, KeyedWindowedOperator, SessionWindows, SlidingWindows,
                               TimestampCombiner, TimeWindows)
from windowed_operator import time_rules
from windowed_operator.engine import window_families
from windowed_operator.testing import TimestampedValue
from windowed_operator.time import END_OF_GLOBAL_WINDOW, MAX_TIMESTAMP


def T(value, ts, key="k"):
    return TimestampedValue((key, value), ts)


def op(window, acc=None, trigger=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # finishing triggers with lateness warn about closed windows
        return KeyedWindowedOperator(window, acc or ToList(), trigger=trigger or TriggerOption.default(), **kw)


def panes(records):
    """``[start,end) value TIMING #index`` + F(irst) L(ast) R(etraction); list values sorted."""
    out = []
    for r in records:
        value = sorted(r.value) if isinstance(r.value, list) else r.value
        flags = ("F" if r.is_first else "") + ("L" if r.is_last else "") + ("R" if r.is_retraction else "")
        out.append(f"[{r.window_start},{r.window_end}) {value} {r.timing.value} #{r.index} {flags}".rstrip())
    return out


# -- 1. the end of a window is reached when the watermark is after its max timestamp -------------
def test_watermark_at_the_max_timestamp_neither_fires_nor_expires_the_window():
    runner = op(TimeWindows(10_000), trigger=TriggerOption.default().accumulating_fired_panes()).local_runner()
    runner.add_elements(T(1, 1000))
    assert runner.advance_watermark_to(9999) == []
    assert runner.add_elements(T(2, 5000)) == []  # not expired: 9999 is not after 9999 + 0
    assert panes(runner.finish()) == ["[0,10000) [1, 2] ON_TIME #0 FL"]
    assert runner.dropped_counts == {}


def test_watermark_at_max_timestamp_plus_lateness_keeps_the_window_open_for_late_data():
    runner = op(TimeWindows(10_000), trigger=TriggerOption.default().accumulating_fired_panes(),
                allowed_lateness=5000).local_runner()
    runner.add_elements(T(1, 1000))
    assert panes(runner.advance_watermark_to(14_999)) == ["[0,10000) [1] ON_TIME #0 F"]
    assert panes(runner.add_elements(T(2, 5000))) == ["[0,10000) [1, 2] LATE #1"]
    assert runner.dropped_counts == {}


def test_an_element_at_the_watermark_is_on_time_and_fires_early_then_an_empty_on_time_pane():
    trigger = TriggerOption.of(AfterWatermark(early=AfterCount(1))).discarding_fired_panes()
    runner = op(TimeWindows(10_000), trigger=trigger, allowed_lateness=5000).local_runner()
    runner.advance_watermark_to(9999)
    assert panes(runner.add_elements(T(1, 9999))) == ["[0,10000) [1] EARLY #0 F"]
    assert panes(runner.advance_watermark_to(10_000)) == ["[0,10000) [] ON_TIME #1 L"]


def test_the_rules_module_agrees_with_its_due_times():
    for max_ts in (-1, 0, 9999):
        for lateness in (0, 1, 5000):
            for watermark in range(max_ts - 2, max_ts + lateness + 3):
                assert time_rules.is_end_reached(max_ts, watermark) == time_rules.is_timer_due(
                    time_rules.end_of_window_due(max_ts), watermark) == (watermark > max_ts)
                assert time_rules.is_expired(max_ts, lateness, watermark) == time_rules.is_timer_due(
                    time_rules.expiry_due(max_ts, lateness), watermark) == (watermark > max_ts + lateness)
                assert (max_ts <= time_rules.latest_max_timestamp_reached(watermark)) == (watermark > max_ts)
                assert (max_ts <= time_rules.latest_max_timestamp_expired(watermark, lateness)) == (
                    watermark > max_ts + lateness)
    assert time_rules.is_expired(END_OF_GLOBAL_WINDOW, 10**12, MAX_TIMESTAMP)  # end of input expires everything


# Every window family: (option, element, window it fires; element whose last window expires, that window)
FAMILIES = {
    "tumbling": (TimeWindows(10_000), 1000, (0, 10_000), 1000, (0, 10_000)),
    "hopping": (TimeWindows(10_000).slide_by(5000), 7000, (0, 10_000), 7000, (5000, 15_000)),
    "cumulative": (CumulativeWindows(10_000, 5000), 1000, (0, 5000), 1000, (0, 10_000)),
    "sessions": (SessionWindows(5000), 1000, (1000, 6000), 1000, (1000, 6000)),
    "per_record": (SlidingWindows(5000), 8000, (3000, 8001), 8000, (8000, 13_001)),
    "global": (GlobalWindow(), 1000, (GlobalWindow().assign(0)[0].start, END_OF_GLOBAL_WINDOW + 1), None, None),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_end_of_window_boundary_for_every_family(family):
    option, ts, (start, end), _, _ = FAMILIES[family]
    runner = op(option).local_runner()
    runner.add_elements(T(1, ts))
    assert [r for r in runner.advance_watermark_to(end - 1) if (r.window_start, r.window_end) == (start, end)] == []
    fired = [r for r in runner.advance_watermark_to(end) if (r.window_start, r.window_end) == (start, end)]
    assert panes(fired) == [f"[{start},{end}) [1] ON_TIME #0 FL"]


@pytest.mark.parametrize("lateness", [0, 5000])
@pytest.mark.parametrize("family", sorted(f for f in FAMILIES if FAMILIES[f][3] is not None))
def test_expiry_boundary_for_every_family(family, lateness):
    option, _, _, ts, (_, end) = FAMILIES[family]
    max_ts = end - 1
    runner = op(option, allowed_lateness=lateness, late_data_output=True).local_runner()
    runner.add_elements(T(1, ts))
    runner.advance_watermark_to(max_ts + lateness)
    runner.add_elements(T(2, ts))  # the element's last window has not expired: kept
    assert runner.dropped_counts == {}
    runner.advance_watermark_to(max_ts + lateness + 1)
    assert runner.states == {}  # purged once max_timestamp + lateness is before the watermark
    runner.add_elements(T(3, ts))
    assert runner.dropped_counts == {"expired": 1} and [d.element for d in runner.late_data] == [("k", 3)]  # (the element as it arrived)


# -- 2. sessions merge per bundle -----------------------------------------------------------------
def test_bundle_merge_then_after_each_fires_on_the_merged_session():
    trigger = TriggerOption.of(AfterEach(AfterCount(1), AfterCount(2))).accumulating_fired_panes()
    for bundle in ([T(2, 6000), T(3, 10_000)], [T(3, 10_000), T(2, 6000)]):
        runner = op(SessionWindows(5000), trigger=trigger).local_runner()
        assert panes(runner.add_elements(T(1, 14_000))) == ["[14000,19000) [1] EARLY #0 F"]
        assert panes(runner.add_elements(*bundle)) == ["[6000,19000) [1, 2, 3] EARLY #0 FL"]


def test_bundle_merge_with_late_count_and_earliest_timestamp():
    trigger = TriggerOption.of(AfterWatermark(late=AfterCount(3))).discarding_fired_panes()
    runner = op(SessionWindows(10_000), trigger=trigger, allowed_lateness=50_000,
                timestamp_combiner=TimestampCombiner.EARLIEST).local_runner()
    runner.add_elements(T(1, 0))
    fired = runner.advance_watermark_to(30_000)
    assert panes(fired) == ["[0,10000) [1] ON_TIME #0 F"] and fired[0].timestamp == 0
    assert runner.add_elements(T(2, 12_000), T(3, 5000)) == []
    fired = runner.add_elements(T(4, 6000))
    assert panes(fired) == ["[0,22000) [2, 3, 4] LATE #0 F"]
    assert fired[0].timestamp == 21_999  # every element came behind the watermark: no hold


# -- 3. a session whose trigger has finished takes part in no merge -------------------------------
def test_a_finished_session_is_not_a_merge_candidate():
    runner = op(SessionWindows(10_000), trigger=AfterCount(2)).local_runner()
    assert panes(runner.add_elements(T(1, 0), T(2, 1000))) == ["[0,11000) [1, 2] EARLY #0 FL"]
    assert runner.add_elements(T(3, 15_000)) == []
    assert panes(runner.add_elements(T(4, 9000))) == ["[9000,25000) [3, 4] EARLY #0 FL"]
    assert runner.add_elements(T(5, 16_000)) == []
    assert panes(runner.finish()) == ["[16000,26000) [5] ON_TIME #0 FL"]
    assert runner.dropped_counts == {}


def test_an_element_whose_session_is_exactly_a_finished_one_is_dropped_as_closed():
    runner = op(SessionWindows(10_000), trigger=AfterCount(2), late_data_output=True).local_runner()
    assert panes(runner.add_elements(T(1, 0), T(2, 0))) == ["[0,10000) [1, 2] EARLY #0 FL"]
    assert runner.add_elements(T(3, 0)) == []  # proto-session [0,10000) is the finished session itself
    assert runner.dropped_counts == {"closed_window": 1} and [d.element for d in runner.late_data] == [("k", 3)]
    assert runner.add_elements(T(4, 1)) == []  # [1,10001) overlaps it but starts a live session
    assert panes(runner.finish()) == ["[1,10001) [4] ON_TIME #0 FL"]


# -- 5. EARLIEST/LATEST leave out elements that arrived behind the watermark ---------------------
@pytest.mark.parametrize("combiner,expected", [(TimestampCombiner.EARLIEST, 5000), (TimestampCombiner.LATEST, 6000)])
def test_elements_behind_the_watermark_hold_no_output_timestamp(combiner, expected):
    runner = op(TimeWindows(10_000), timestamp_combiner=combiner).local_runner()
    runner.advance_watermark_to(5000)
    runner.add_elements(T(1, 2000), T(2, 5000), T(3, 6000), T(4, 4999))  # 2000 and 4999 are behind
    [pane] = runner.advance_watermark_to(10_000)
    assert pane.timestamp == expected


def test_a_pane_of_only_late_elements_carries_the_end_of_window():
    runner = op(TimeWindows(10_000), timestamp_combiner=TimestampCombiner.EARLIEST).local_runner()
    runner.advance_watermark_to(5000)
    runner.add_elements(T(1, 1000))
    [pane] = runner.advance_watermark_to(10_000)
    assert pane.timestamp == 9999


# -- the pane order of a bundle does not depend on the order of its elements ---------------------
TRIGGERS = {
    "after_each": TriggerOption.of(AfterEach(AfterCount(1), AfterCount(2))),
    "late_count": TriggerOption.of(AfterWatermark(early=AfterCount(2), late=AfterCount(3))),
    "count_finishes": TriggerOption.of(AfterCount(2)),
    "repeated_time": TriggerOption.of(Repeatedly(AfterProcessingTime(5))),
    "default": TriggerOption.default(),
}
session_element = st.tuples(st.sampled_from("ab"), st.integers(1, 9), near_boundaries(0, 80))
session_step = st.one_of(
    st.tuples(st.just("elements"), st.lists(session_element, min_size=1, max_size=6), st.randoms()),
    st.tuples(st.just("watermark"), near_boundaries(0, 100), st.none()),
    st.tuples(st.just("processing"), st.integers(1, 6), st.none()),
)


def run_sessions(option, steps, shuffle):
    runner = option.local_runner()
    for kind, arg, rnd in steps:
        if kind == "elements":
            items = list(arg)
            if shuffle:
                rnd.shuffle(items)
            runner.add_elements(*[T(v, ts, key) for key, v, ts in items])
        elif kind == "watermark":
            runner.advance_watermark_to(arg)
        else:
            runner.advance_processing_time(arg)
    runner.finish()
    by_key = defaultdict(list)
    for record in runner.outputs:
        by_key[record.key].append(record)  # keys are visited in order of first appearance: compare per key
    return dict(by_key), runner.dropped_counts


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(session_step, min_size=1, max_size=10), trigger=st.sampled_from(sorted(TRIGGERS)),
       mode=st.sampled_from(["accumulating", "discarding", "accumulating_and_retracting"]),
       lateness=st.sampled_from([0, 7, 30]),
       combiner=st.sampled_from(list(TimestampCombiner)))
def test_session_panes_do_not_depend_on_the_order_of_elements_in_a_bundle(steps, trigger, mode, lateness, combiner):
    option = op(SessionWindows(5), Sum(), TRIGGERS[trigger]._with(mode=mode), allowed_lateness=lateness,
                timestamp_combiner=combiner)
    assert run_sessions(option, steps, shuffle=False) == run_sessions(option, steps, shuffle=True)


def test_the_order_property_catches_a_per_element_merge(monkeypatch):
    """Merging element by element (the old rule) makes the issue's case depend on bundle order."""
    bundle_merge = window_families.add_to_sessions

    def per_element(core, key, state, elements, watermark, processing_time, emission, origin_of):
        touched = {}
        for element in elements:
            touched.update(bundle_merge(core, key, state, [element], watermark, processing_time, emission, origin_of))
        return touched

    trigger = TriggerOption.of(AfterEach(AfterCount(1), AfterCount(2))).accumulating_fired_panes()
    option = op(SessionWindows(5000), Sum(), trigger)

    def run(bundle):
        steps = [("elements", [("a", 1, 14_000)], None), ("elements", bundle, None)]
        return [panes(records) for records in run_sessions(option, steps, shuffle=False)[0].values()]

    forward, backward = [("a", 2, 6000), ("a", 3, 10_000)], [("a", 3, 10_000), ("a", 2, 6000)]
    assert run(forward) == run(backward) == [["[14000,19000) 1 EARLY #0 F", "[6000,19000) 6 EARLY #0 FL"]]
    monkeypatch.setattr(window_families, "add_to_sessions", per_element)
    assert run(forward) != run(backward)
