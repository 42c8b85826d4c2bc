"""Property-based tests: the core against a brute-force model that recomputes every window from its elements.

The model knows nothing of triggers or state: it replays the stream, keeps the watermark, decides
for each element (from the definitions in DESIGN.md) whether it was dropped and which windows it
reaches, and sums each window's elements.  Whatever trigger fires the panes, the panes must add
up to that sum: the last pane in accumulating mode, the sum of panes in discarding mode, and panes
minus retractions in accumulating-and-retracting mode (where a session merged away nets to zero).
"""
from __future__ import annotations

import warnings
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accumulations import Sum
from triggers import AfterCount, AfterProcessingTime, AfterAny, Repeatedly, TriggerOption
from windowed_operator import (CumulativeWindows, GlobalWindow, KeyedWindowedOperator, SessionWindows, SlidingWindows,
                               TimeWindows, Timing)
from windowed_operator.testing import TimestampedValue
from windowed_operator.time import END_OF_GLOBAL_WINDOW, MIN_TIMESTAMP

from helpers import near_boundaries, stream_of

KEYS = ["a", "b", "c"]

element = st.tuples(st.sampled_from(KEYS), st.integers(1, 9), near_boundaries(0, 80))
step = st.one_of(
    st.tuples(st.just("elements"), st.lists(element, min_size=1, max_size=6)),
    # watermarks (and timestamps) often land at, just before or just after window ends and expiries
    st.tuples(st.just("watermark"), near_boundaries(0, 100)),
    st.tuples(st.just("processing"), st.integers(1, 20)),
)
streams = st.lists(step, min_size=1, max_size=14)

WINDOWS = {
    "tumbling": TimeWindows(10),
    "hopping": TimeWindows(10).slide_by(5),
    "hopping_uneven": TimeWindows(9, offset=2).slide_by(4),
    "cumulative": CumulativeWindows(20, 5),
    "global": GlobalWindow(),
    "per_record": SlidingWindows(6),
    "sessions": SessionWindows(5),
}
TRIGGERS = {
    "default": TriggerOption.default(),
    "early_count_late_count": TriggerOption.at_watermark().with_early_firings_at_every(count=2)
    .with_late_firings_at_every(count=1),
    "early_time_late_time": TriggerOption.at_watermark().with_early_firings_at_every(duration=7)
    .with_late_firings_at_every(duration=3),
    "repeated_count": TriggerOption.of(Repeatedly(AfterCount(2))),
    "repeated_any": TriggerOption.of(Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(5)))),
}
MODES = ["accumulating", "discarding", "accumulating_and_retracting"]


def model_windows(option, ts):
    """Every window containing ts, enumerated from the definitions (not from ``assign``)."""
    if isinstance(option, GlobalWindow):
        return [(MIN_TIMESTAMP, END_OF_GLOBAL_WINDOW + 1)]
    if isinstance(option, CumulativeWindows):
        return [(s, s + k * option.step) for s in range(ts - 2 * option.max_size, ts + 1)
                if (s - option.offset) % option.max_size == 0
                for k in range(1, option.max_size // option.step + 1) if s <= ts < s + k * option.step]
    period = option.period or option.size
    return [(s, s + option.size) for s in range(ts - option.size - period, ts + 1)
            if (s - option.offset) % period == 0 and s <= ts < s + option.size]


def sessions_of(timestamped, gap):
    """Sessions by the sweep definition: sorted elements whose proto-sessions overlap chain together."""
    result = []
    for ts, value in sorted(timestamped):
        if result and ts < result[-1][1]:
            start, end, total = result[-1]
            result[-1] = (start, max(end, ts + gap), total + value)
        else:
            result.append((ts, ts + gap, value))
    return {(s, e): total for s, e, total in result}


def expired(max_timestamp, lateness, watermark):
    """Beam's LateDataUtils, written out: max_timestamp + allowed_lateness is before the watermark."""
    return max_timestamp + lateness < watermark


def brute_force(option, lateness, stream):
    """(key, window) -> final sum, and the number of dropped elements."""
    watermark = MIN_TIMESTAMP
    totals = defaultdict(int)
    accepted = defaultdict(list)
    per_record_windows = set()
    dropped = 0
    for kind, payload in stream:
        if kind == "watermark":
            watermark = max(watermark, payload)
            continue
        if kind != "elements":
            continue
        for key, value, ts in payload:
            if isinstance(option, SessionWindows):
                if expired(ts + option.min_gap - 1, lateness, watermark):  # the proto-session
                    dropped += 1
                else:
                    accepted[key].append((ts, value))
            elif isinstance(option, SlidingWindows):
                if expired(ts + option.size, lateness, watermark):  # the last window that can cover ts
                    dropped += 1
                    continue
                accepted[key].append((ts, value, watermark))
                if not expired(ts, lateness, watermark):  # its own window [ts - size, ts]
                    per_record_windows.add((key, (ts - option.size, ts + 1)))
            else:
                alive = [w for w in model_windows(option, ts) if not expired(w[1] - 1, lateness, watermark)]
                if not alive:
                    dropped += 1
                for w in alive:
                    totals[(key, w)] += value
    if isinstance(option, SessionWindows):
        for key, items in accepted.items():
            for window, total in sessions_of(items, option.min_gap).items():
                totals[(key, window)] = total
    if isinstance(option, SlidingWindows):
        for key, window in per_record_windows:
            totals[(key, window)] = sum(v for ts, v, wm in accepted[key]
                                        if window[0] <= ts < window[1] and not expired(window[1] - 1, lateness, wm))
    return dict(totals), dropped


def run_core(option, trigger, lateness, stream):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(option, Sum(), trigger=trigger, allowed_lateness=lateness)
    runner = op.local_runner()
    return runner.run(stream_of(stream, lambda k, v, ts: TimestampedValue((k, v), ts))), runner


def check_pane_structure(outputs):
    by_window = defaultdict(list)
    for r in outputs:
        by_window[(r.key, r.window_start, r.window_end)].append(r)
    for records in by_window.values():
        panes = [r for r in records if not r.is_retraction]
        assert [p.index for p in panes] == list(range(len(panes)))
        assert [p.is_first for p in panes] == [i == 0 for i in range(len(panes))]
        assert not any(p.is_last for p in panes[:-1])
        timings = [p.timing for p in panes]
        order = {Timing.EARLY: 0, Timing.ON_TIME: 1, Timing.LATE: 2}
        assert [order[t] for t in timings] == sorted(order[t] for t in timings)
        assert timings.count(Timing.ON_TIME) <= 1
    return by_window


def check_against_model(window_name, trigger_name, mode, lateness, stream):
    option = WINDOWS[window_name]
    if window_name == "sessions":
        lateness = 1_000  # see module docstring of brute_force: no purge-then-merge
    trigger = TRIGGERS[trigger_name]._with(mode=mode)
    outputs, runner = run_core(option, trigger, lateness, stream)
    expected, dropped = brute_force(option, lateness, stream)
    assert sum(runner.dropped_counts.values()) == dropped
    by_window = check_pane_structure(outputs)
    if mode == "discarding":
        # inputs are positive, so a zero pane is an empty one: only the ON_TIME pane may be empty
        assert all(r.value != 0 for r in outputs if r.timing != Timing.ON_TIME)
    produced = {}
    for (key, start, end), records in by_window.items():
        if mode == "accumulating":
            produced[(key, (start, end))] = [r for r in records if not r.is_retraction][-1].value
        else:
            produced[(key, (start, end))] = sum(r.value for r in records)
    if window_name == "sessions" and mode == "accumulating":
        produced = {k: v for k, v in produced.items() if k in expected}  # merged-away sessions keep early panes
    if window_name == "sessions" and mode == "discarding":
        # a merged-away session's panes were part of the final session's total
        regrouped = defaultdict(int)
        for (key, (start, end)), value in produced.items():
            [final] = [w for k, w in expected if k == key and w[0] <= start and end <= w[1]]
            regrouped[(key, final)] += value
        produced = dict(regrouped)
    if mode == "accumulating_and_retracting":
        produced = {k: v for k, v in produced.items() if v != 0 or k in expected}
    assert produced == expected
    assert runner.states == {}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window_name=st.sampled_from(sorted(WINDOWS)), trigger_name=st.sampled_from(sorted(TRIGGERS)),
       mode=st.sampled_from(MODES), lateness=st.sampled_from([0, 5, 30]), stream=streams)
def test_core_equals_brute_force_model(window_name, trigger_name, mode, lateness, stream):
    check_against_model(window_name, trigger_name, mode, lateness, stream)


@settings(max_examples=150, deadline=None)
@given(window_name=st.sampled_from(["sessions", "hopping", "per_record"]), trigger_name=st.sampled_from(sorted(TRIGGERS)),
       lateness=st.sampled_from([0, 5, 30]), stream=streams)
def test_retracting_mode_panes_minus_retractions_equal_final_value(window_name, trigger_name, lateness, stream):
    check_against_model(window_name, trigger_name, "accumulating_and_retracting", lateness, stream)


@settings(max_examples=40, deadline=None)
@given(stream=streams, trigger_name=st.sampled_from(sorted(TRIGGERS)))
def test_sessions_are_disjoint_and_cover_their_elements(stream, trigger_name):
    outputs, _ = run_core(SessionWindows(5), TRIGGERS[trigger_name], 1_000, stream)
    final = {}
    for r in outputs:
        if r.is_last:
            final.setdefault(r.key, []).append((r.window_start, r.window_end))
    for windows in final.values():
        windows.sort()
        assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))
