"""ON_TIME or LATE as Beam decides it: over the window's watermark holds (``time_rules``).

Beam Java (runners-core): ``WatermarkHold.addHolds`` sets an element hold only when the element's
output time is not before the output watermark (EARLIEST/LATEST: its timestamp; END_OF_WINDOW: the
window's max timestamp) and the window's end is not reached; ``extractAndRelease`` clears the holds
at every pane, EARLY ones included; ``AfterWatermark``'s end-of-window timer, set before the end,
holds the output watermark at the max timestamp while pending; ``PaneInfoTracker.describePane``
labels a pane ON_TIME only when the end is reached, only EARLY panes came before and the output
watermark is not after the max timestamp.  The cases below are worked out from those rules; the
property test runs the core against a brute-force model of the holds and the output watermark.
"""
from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from accumulations import Sum
from triggers import AfterAny, AfterCount, AfterProcessingTime, AfterWatermark, Repeatedly, TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimestampCombiner, TimeWindows
from windowed_operator.panes import Timing
from windowed_operator.engine.key_state import KeyState
from windowed_operator.state.codec import KeyStateCodec
from windowed_operator.testing import TimestampedValue
from windowed_operator.engine.vectorized import process_batch_arrays

from helpers import core_run, fmts, near_boundaries
from test_columnar_sessions import columnar_run as session_rows_run
from test_columnar_windows import columnar_run as window_rows_run
from windowed_operator.engine.build import build_core

EOW, EARLIEST, LATEST = TimestampCombiner.END_OF_WINDOW, TimestampCombiner.EARLIEST, TimestampCombiner.LATEST


def T(value, ts, key="k"):
    return TimestampedValue((key, value), ts)


def operator(trigger, combiner=EOW, lateness=10_000, window=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (finishing triggers with lateness warn about closed windows)
        return KeyedWindowedOperator(window or TimeWindows(10_000), Sum(), trigger=trigger,
                                     allowed_lateness=lateness, timestamp_combiner=combiner)


def count(n):
    return TriggerOption.of(Repeatedly(AfterCount(n))).discarding_fired_panes()


# -- the two cases -------------------------------------------------------------------------
def test_an_early_pane_releases_the_hold_so_the_next_pane_after_the_end_is_late():
    runner = operator(count(1)).local_runner()
    assert fmts(runner.add_elements(T(1, 1000))) == ["k [0,10000) 1 EARLY #0 F"]
    assert runner.advance_watermark_to(10_000) == []  # a count trigger sets no end-of-window timer
    late = runner.add_elements(T(2, 2000))
    assert fmts(late) == ["k [0,10000) 2 LATE #1"]  # Beam: LATE #1 [2] (was ON_TIME)
    assert late[0].timestamp == 9999


def test_an_element_behind_the_watermark_sets_no_earliest_hold_so_its_first_pane_is_late():
    runner = operator(count(2), EARLIEST).local_runner()
    runner.advance_watermark_to(5000)
    assert runner.add_elements(T(1, 1000)) == []  # behind the watermark, before the end: no hold
    assert runner.advance_watermark_to(10_000) == []
    late = runner.add_elements(T(2, 2000))
    assert fmts(late) == ["k [0,10000) 3 LATE #0 F"]  # Beam: LATE #0 [3]
    assert late[0].timestamp == 9999  # no hold: the end of the window


# -- controls ----------------------------------------------------------------------------------------
def test_an_unfired_on_time_element_still_holds_the_window_at_its_end():
    runner = operator(count(2), EARLIEST).local_runner()
    assert runner.add_elements(T(1, 1000)) == []
    assert runner.advance_watermark_to(10_000) == []
    on_time = runner.add_elements(T(2, 2000))
    assert fmts(on_time) == ["k [0,10000) 3 ON_TIME #0 F"]
    assert on_time[0].timestamp == 1000


def test_under_end_of_window_an_element_behind_the_watermark_but_before_the_end_holds():
    runner = operator(count(2)).local_runner()  # its hold is at the max timestamp, not before the watermark
    runner.advance_watermark_to(5000)
    assert runner.add_elements(T(1, 1000)) == []
    assert runner.advance_watermark_to(10_000) == []
    assert fmts(runner.add_elements(T(2, 2000))) == ["k [0,10000) 3 ON_TIME #0 F"]


def test_an_element_on_time_since_the_early_pane_holds_the_window_again():
    runner = operator(count(2)).local_runner()
    assert fmts(runner.add_elements(T(1, 1000), T(2, 1500))) == ["k [0,10000) 3 EARLY #0 F"]
    assert runner.add_elements(T(4, 3000)) == []  # before the end: a new hold
    assert runner.advance_watermark_to(10_000) == []
    assert fmts(runner.add_elements(T(8, 4000))) == ["k [0,10000) 12 ON_TIME #1"]


def test_after_watermark_fires_on_time_after_an_early_pane_its_timer_held_the_window():
    trigger = TriggerOption.at_watermark().with_early_firings_at_every(count=1).with_late_firings_at_every(count=1)
    runner = operator(trigger.accumulating_fired_panes()).local_runner()
    assert fmts(runner.add_elements(T(1, 1000))) == ["k [0,10000) 1 EARLY #0 F"]
    assert fmts(runner.advance_watermark_to(10_000)) == ["k [0,10000) 1 ON_TIME #1"]
    assert fmts(runner.add_elements(T(2, 2000))) == ["k [0,10000) 3 LATE #2"]


def test_after_watermark_in_a_window_whose_data_all_came_after_its_end_is_late():
    trigger = TriggerOption.of(AfterWatermark(early=AfterCount(1), late=AfterCount(1)))
    runner = operator(trigger.accumulating_fired_panes()).local_runner()
    runner.advance_watermark_to(10_000)
    assert fmts(runner.add_elements(T(1, 1000))) == ["k [0,10000) 1 LATE #0 F"]  # no hold, no timer
    assert runner.states["k"].windows == {} or not any(ws.timers for ws in runner.states["k"].windows.values())


def test_a_session_merge_re_places_the_end_of_window_hold_at_the_merged_end_for_later_bundles():
    runner = operator(count(3), window=SessionWindows(1000)).local_runner()
    assert runner.add_elements(T(1, 1000)) == []  # [1000, 2000) holds its end
    runner.advance_watermark_to(5000)
    # a late element's proto-session merges with it: the hold moves to 2499, behind the watermark: dropped
    assert runner.add_elements(T(2, 1500)) == []
    assert fmts(runner.add_elements(T(4, 1600))) == ["k [1000,2600) 7 LATE #0 F"]


def test_the_bundle_of_a_merge_still_reads_the_hold_it_drops():
    runner = operator(count(2), window=SessionWindows(1000)).local_runner()
    assert runner.add_elements(T(1, 1000)) == []
    runner.advance_watermark_to(5000)
    # Beam's pane reads the output watermark as the bundle before left it: held at 1999
    assert fmts(runner.add_elements(T(2, 1500))) == ["k [1000,2500) 3 ON_TIME #0 F"]


def test_a_proto_session_inside_a_session_is_a_merge_too_but_one_with_its_bounds_is_not():
    runner = operator(TriggerOption.of(Repeatedly(AfterCount(4))), window=SessionWindows(1000)).local_runner()
    assert runner.add_elements(T(1, 1000, "a"), T(2, 1400, "a"), T(1, 1000, "b")) == []
    runner.advance_watermark_to(5000)
    # [1200, 2200) inside [1000, 2400) merges: the hold is dropped; [1000, 2000) again merges nothing
    assert runner.add_elements(T(4, 1200, "a"), T(2, 1000, "b")) == []
    assert fmts(runner.add_elements(T(8, 1300, "a"), T(4, 1000, "b"))) == ["a [1000,2400) 15 LATE #0 F"]
    assert fmts(runner.add_elements(T(8, 1000, "b"))) == ["b [1000,2000) 15 ON_TIME #0 F"]


def test_a_session_merge_combines_earliest_holds():
    runner = operator(count(2), EARLIEST, window=SessionWindows(1000)).local_runner()
    assert runner.add_elements(T(1, 1000)) == []
    runner.advance_watermark_to(5000)
    on_time = runner.add_elements(T(2, 1500))
    assert fmts(on_time) == ["k [1000,2500) 3 ON_TIME #0 F"] and on_time[0].timestamp == 1000


# -- state written by version 8 ----------------------------------------------------------------------
def _after_early_pane(extra_before_end=()):
    core = build_core(operator(count(2)))
    state = KeyState()
    assert [p.timing for p in core.process_batch("k", state, [(1000, 1, None), (1500, 2, None)], 0, 0).outputs] \
        == [Timing.EARLY]
    if extra_before_end:
        core.process_batch("k", state, [(ts, 4, None) for ts in extra_before_end], 0, 0)
    return core, state


def test_a_version_8_flag_kept_across_an_early_pane_is_read_as_released():
    core, state = _after_early_pane()
    codec = KeyStateCodec()
    data = codec.to_data(state)
    [window] = data["windows"]
    assert "on_time_hold" not in window  # released by the EARLY pane
    window["on_time_hold"] = True  # what version 8 wrote: the flag survived EARLY panes
    state = codec.from_data(data)
    core.process_batch("k", state, [], 10_000, 0)
    out = core.process_batch("k", state, [(2000, 8, None), (2500, 16, None)], 10_000, 0).outputs
    assert [(p.timing, p.index) for p in out] == [(Timing.LATE, 1)]


def test_a_version_8_flag_with_elements_since_the_early_pane_is_kept():
    core, state = _after_early_pane(extra_before_end=(3000,))
    codec = KeyStateCodec()
    state = codec.from_data(codec.to_data(state))
    assert state.windows[next(iter(state.windows))].on_time_hold
    core.process_batch("k", state, [], 10_000, 0)
    out = core.process_batch("k", state, [(4000, 8, None)], 10_000, 0).outputs
    assert [(p.timing, p.index) for p in out] == [(Timing.ON_TIME, 1)]


# -- a brute-force model of the holds ------------------------------------------------------------------
TRIGGERS = {
    "count 1": (TriggerOption.of(Repeatedly(AfterCount(1))), False),
    "count 2": (TriggerOption.of(Repeatedly(AfterCount(2))), False),
    "count or time": (TriggerOption.of(Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(5)))), False),
    "early 2 late 1": (TriggerOption.at_watermark().with_early_firings_at_every(count=2)
                       .with_late_firings_at_every(count=1), True),
    "default": (TriggerOption.default(), True),
}
MODEL_WINDOWS = {"tumbling 10": (10, 10), "hopping 10/5": (10, 5)}

element = st.tuples(st.sampled_from("ab"), near_boundaries(-5, 60, periods=(5, 10), offsets=(0,),
                                                           lateness=(0, 5, 10)))
hold_step = st.one_of(st.tuples(st.just("elements"), st.lists(element, min_size=1, max_size=5)),
                      st.tuples(st.just("watermark"), near_boundaries(-5, 80, periods=(5, 10), offsets=(0,),
                                                                      lateness=(0, 5, 10))),
                      st.tuples(st.just("processing"), st.integers(1, 8)))
hold_streams = st.lists(hold_step, min_size=1, max_size=16)


class HoldModel:
    """Per window: its element holds, its end-of-window timer and its output watermark, step by step as
    Beam keeps them (the output watermark only ever moves up to the least of the input watermark, the
    holds and the pending timers; a bundle reads it as the previous step left it)."""

    def __init__(self, size, period, combiner, has_timer, lateness):
        self.size, self.period, self.combiner = size, period, combiner
        self.has_timer, self.lateness = has_timer, lateness
        self.watermark = -(10 ** 9)
        self.windows = {}  # (key, start) -> {"holds": [...], "timer": bool, "output": int, "panes": [...]}

    def windows_of(self, ts):
        return [s for s in range(ts - self.size - self.period, ts + 1)
                if s % self.period == 0 and s <= ts < s + self.size]

    def _settle(self):
        for w in self.windows.values():
            held = w["holds"] + ([w["max"]] if w["timer"] else [])
            w["output"] = max(w["output"], min([self.watermark, *held]))

    def advance(self, watermark):
        self.watermark = max(self.watermark, watermark)
        self._settle()

    def add(self, key, ts):
        for start in self.windows_of(ts):
            max_ts = start + self.size - 1
            if max_ts + self.lateness < self.watermark:
                continue  # expired: dropped
            w = self.windows.setdefault((key, start), {"holds": [], "timer": False, "output": self.watermark,
                                                       "panes": [], "max": max_ts})
            hold = max_ts if self.combiner == EOW else ts
            if hold >= w["output"] and max_ts >= self.watermark:
                w["holds"].append(hold)
            if self.has_timer and max_ts >= self.watermark:
                w["timer"] = True

    def expected(self, key, start):
        w = self.windows[(key, start)]
        if w["output"] > w["max"] or any(t != Timing.EARLY for t in w["panes"]):
            return Timing.LATE
        return Timing.EARLY if self.watermark <= w["max"] else Timing.ON_TIME

    def fired(self, key, start, timing):
        w = self.windows[(key, start)]
        w["panes"].append(timing)
        w["holds"] = []  # extractAndRelease

    def end_step(self, watermark_step):
        for (key, start), w in list(self.windows.items()):
            if watermark_step and w["max"] < self.watermark:
                w["timer"] = False  # it fired
            if w["max"] + self.lateness < self.watermark:
                del self.windows[(key, start)]
        self._settle()


@settings(max_examples=400, deadline=None)
@given(steps=hold_streams, window=st.sampled_from(sorted(MODEL_WINDOWS)), trigger=st.sampled_from(sorted(TRIGGERS)),
       combiner=st.sampled_from([EOW, EARLIEST, LATEST]), lateness=st.sampled_from([0, 5, 10, 30]),
       discarding=st.booleans())
def test_pane_timing_equals_a_brute_force_model_of_the_holds(steps, window, trigger, combiner, lateness, discarding):
    size, period = MODEL_WINDOWS[window]
    option, has_timer = TRIGGERS[trigger]
    option = option.discarding_fired_panes() if discarding else option.accumulating_fired_panes()
    core = build_core(operator(option, combiner, lateness, TimeWindows(size).slide_by(period) if period != size
                    else TimeWindows(size)))
    model = HoldModel(size, period, combiner, has_timer, lateness)
    states, now, watermark = defaultdict(KeyState), 0, -(10 ** 9)
    for kind, payload in [*steps, ("watermark", 10 ** 6)]:
        by_key = defaultdict(list)
        if kind == "watermark":
            watermark = max(watermark, payload)
            model.advance(watermark)
        elif kind == "processing":
            now += payload
        else:
            for key, ts in payload:
                by_key[key].append((ts, 1, None))
                model.add(key, ts)
        outputs = []
        for key in sorted({*states, *by_key}):
            outputs += core.process_batch(key, states[key], by_key[key], watermark, now).outputs
        for pane in outputs:
            assert pane.timing == model.expected(pane.key, pane.window_start), (pane, kind)
            model.fired(pane.key, pane.window_start, pane.timing)
        model.end_step(kind == "watermark")


class SessionHoldModel:
    """Per key, its sessions (gap ``gap``) with their holds and output watermarks, merged per bundle as
    Beam does: a group of two or more distinct overlapping windows is a merge, whose result takes the
    least of its sources' output watermarks (a proto-session's: the watermark), their EARLIEST/LATEST
    holds, and an END_OF_WINDOW hold only if its end is not reached; it starts its own panes."""

    def __init__(self, gap, combiner, lateness):
        self.gap, self.combiner, self.lateness = gap, combiner, lateness
        self.watermark = -(10 ** 9)
        self.sessions = defaultdict(dict)  # key -> (start, end) -> {"holds", "output", "panes"}

    def _settle(self):
        for sessions in self.sessions.values():
            for (start, end), w in sessions.items():
                w["output"] = max(w["output"], min([self.watermark, *w["holds"]]))

    def advance(self, watermark):
        self.watermark = max(self.watermark, watermark)
        self._settle()

    def add_bundle(self, key, stamps):
        sessions = self.sessions[key]
        protos = sorted({(ts, ts + self.gap) for ts in stamps if ts + self.gap - 1 + self.lateness >= self.watermark})
        groups = []
        for window in sorted({*sessions, *protos}):
            if groups and window[0] < groups[-1][1]:
                groups[-1] = (groups[-1][0], max(groups[-1][1], window[1]), groups[-1][2] + [window])
            else:
                groups.append((window[0], window[1], [window]))
        for start, end, members in groups:
            if len(members) < 2:
                sessions.setdefault(members[0], {"holds": [], "output": self.watermark, "panes": []})
                continue
            sources = [sessions.pop(m) for m in members if m in sessions]
            result = sessions.get((start, end)) if len(sources) == 1 and (start, end) in members else None
            if result is None:
                result = {"holds": [], "output": min([self.watermark, *(w["output"] for w in sources)]),
                          "panes": []}
                if self.combiner != EOW:
                    result["holds"] = [h for w in sources for h in w["holds"]]
            if self.combiner == EOW:
                result["holds"] = [end - 1] if end - 1 >= self.watermark else []
            sessions[(start, end)] = result
        for ts in stamps:
            if ts + self.gap - 1 + self.lateness < self.watermark:
                continue
            [(start, end)] = [w for w in sessions if w[0] <= ts < w[1]]
            w = sessions[(start, end)]
            hold = end - 1 if self.combiner == EOW else ts
            if hold >= w["output"] and end - 1 >= self.watermark:
                w["holds"].append(hold)

    def expected(self, key, start, end):
        w = self.sessions[key][(start, end)]
        if w["output"] > end - 1 or any(t != Timing.EARLY for t in w["panes"]):
            return Timing.LATE
        return Timing.EARLY if self.watermark <= end - 1 else Timing.ON_TIME

    def fired(self, key, start, end, timing):
        w = self.sessions[key][(start, end)]
        w["panes"].append(timing)
        w["holds"] = []

    def end_step(self):
        for sessions in self.sessions.values():
            for window in [w for w in sessions if w[1] - 1 + self.lateness < self.watermark]:
                del sessions[window]
        self._settle()


session_element = st.tuples(st.sampled_from("ab"), near_boundaries(0, 16, periods=(4,), offsets=(0,),
                                                                   lateness=(0, 4)))
session_step = st.one_of(st.tuples(st.just("elements"), st.lists(session_element, min_size=1, max_size=3)),
                         st.tuples(st.just("watermark"), near_boundaries(0, 30, periods=(4,), offsets=(0,),
                                                                         lateness=(0, 4, 10))))


@settings(max_examples=400, deadline=None)
@given(steps=st.lists(session_step, min_size=1, max_size=14), n=st.sampled_from([2, 3]),
       combiner=st.sampled_from([EOW, EARLIEST, LATEST]), lateness=st.sampled_from([0, 4, 10, 30]),
       discarding=st.booleans())
@example(steps=[("elements", [("a", 0)]), ("watermark", 5), ("elements", [("a", 1)]), ("elements", [("a", 1)])],
         n=3, combiner=EOW, lateness=4, discarding=False)  # a merge drops the hold for the next bundle
def test_session_pane_timing_equals_a_brute_force_model_of_the_holds(steps, n, combiner, lateness, discarding):
    option = TriggerOption.of(Repeatedly(AfterCount(n)))
    option = option.discarding_fired_panes() if discarding else option.accumulating_fired_panes()
    core = build_core(operator(option, combiner, lateness, SessionWindows(4)))
    model = SessionHoldModel(4, combiner, lateness)
    states, watermark = defaultdict(KeyState), -(10 ** 9)
    for kind, payload in [*steps, ("watermark", 10 ** 6)]:
        by_key = defaultdict(list)
        if kind == "watermark":
            watermark = max(watermark, payload)
            model.advance(watermark)
        else:
            for key, ts in payload:
                by_key[key].append((ts, 1, None))
            for key, items in by_key.items():
                model.add_bundle(key, [ts for ts, _, _ in items])
        outputs = []
        for key in sorted({*states, *by_key}):
            outputs += core.process_batch(key, states[key], by_key[key], watermark, 0).outputs
        for pane in outputs:
            assert pane.timing == model.expected(pane.key, pane.window_start, pane.window_end), (pane, kind)
            model.fired(pane.key, pane.window_start, pane.window_end, pane.timing)
        model.end_step()


# -- the array and columnar paths equal the object path on streams drawn to hit the rule -------------------
def _batches(draw_ts):
    """Batches ``(elements, watermark, processing-time advance)`` around the end of [0, 10) and [10, 20)."""
    return st.lists(st.tuples(st.lists(st.tuples(st.sampled_from("ab"), draw_ts, st.integers(1, 5)), max_size=4),
                              draw_ts, st.sampled_from([0, 1, 5])), min_size=1, max_size=8)


edge_times = st.one_of(st.sampled_from([0, 1, 4, 5, 8, 9, 10, 11, 14, 15, 19, 20, 21, 25, 29, 30, 31]),
                       st.integers(-2, 45))
edge_streams = _batches(edge_times)


@settings(max_examples=300, deadline=None)
@given(steps=edge_streams, trigger=st.sampled_from(["count 1", "count 2", "count or time", "early 2 late 1"]),
       combiner=st.sampled_from([EOW, EARLIEST, LATEST]), lateness=st.sampled_from([0, 10, 30]),
       hopping=st.booleans())
def test_the_array_path_equals_the_object_path_where_holds_decide_the_timing(steps, trigger, combiner, lateness,
                                                                             hopping):
    window = TimeWindows(10).slide_by(5) if hopping else TimeWindows(10)
    op = operator(TRIGGERS[trigger][0].discarding_fired_panes(), combiner, lateness, window)
    plain_core, fast_core = build_core(op), build_core(op)
    plain_states, fast_states = defaultdict(KeyState), defaultdict(KeyState)
    watermark, now = -100, 0
    for elements, mark, tick in [*steps, ([], 10 ** 6, 0)]:
        watermark, now = max(watermark, mark), now + tick
        for key in sorted({"a", "b"}):
            mine = [(ts, v) for k, ts, v in elements if k == key]
            plain = plain_core.process_batch(key, plain_states[key], [(ts, v, None) for ts, v in mine], watermark, now)
            stamps, values = (np.array([row[i] for row in mine], dtype=np.int64) for i in (0, 1))
            fast = process_batch_arrays(fast_core, key, fast_states[key], stamps, values, watermark, now,
                                        lambda i: mine[i])
            assert fast.outputs == plain.outputs
            assert fast_states[key] == plain_states[key]


@settings(max_examples=300, deadline=None)
@given(steps=edge_streams, early=st.sampled_from([1, 2]), late=st.sampled_from([None, 1]),
       mode=st.sampled_from(["discarding", "accumulating", "retracting"]), lateness=st.sampled_from([0, 10, 30]),
       hopping=st.booleans())
def test_the_columnar_windows_equal_the_object_path_after_early_panes(steps, early, late, mode, lateness, hopping):
    option = TriggerOption.at_watermark().with_early_firings_at_every(count=early)
    if late is not None:
        option = option.with_late_firings_at_every(count=late)
    option = {"discarding": option.discarding_fired_panes(), "accumulating": option.accumulating_fired_panes(),
              "retracting": option.accumulating_and_retracting_fired_panes()}[mode]
    op = operator(option, EOW, lateness, TimeWindows(10).slide_by(5) if hopping else TimeWindows(10))
    assert window_rows_run(op, steps) == core_run(op, steps)


@settings(max_examples=300, deadline=None)
@given(steps=edge_streams, early=st.sampled_from([1, 2]), mode=st.sampled_from(["accumulating", "retracting"]),
       lateness=st.sampled_from([0, 10, 30]))
def test_the_columnar_sessions_equal_the_object_path_after_early_panes(steps, early, mode, lateness):
    option = TriggerOption.at_watermark().with_early_firings_at_every(count=early).with_late_firings_at_every(count=1)
    option = option.accumulating_fired_panes() if mode == "accumulating" else \
        option.accumulating_and_retracting_fired_panes()
    op = operator(option, EOW, lateness, SessionWindows(4))
    assert session_rows_run(op, steps) == core_run(op, steps)
