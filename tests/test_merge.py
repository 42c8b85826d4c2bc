"""Windowed merge operators in the local runner: join/cogroup outputs, the two-input watermark,
idleness, retractions from late elements of either side, sessions across sides, propagation."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from accumulations import Count, Sum
from accumulations.merge import Cogroup, FullOuterJoin, InnerJoin, LeftOuterJoin
from helpers import fmts
from triggers import TriggerOption
from windowed_operator import (KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows, TimeWindows,
                               WindowedMergeOperator)
from windowed_operator.merge_operator import InputOptions
from windowed_operator.testing import TimestampedValue as TV, TwoInputTestStream

RETRACTING = TriggerOption.at_watermark().with_late_firings_at_every(count=1).accumulating_and_retracting_fired_panes()


def keyed(acc, window=None, **kw):
    return KeyedWindowedMergeOperator(window or TimeWindows(10), acc, **kw)


def both_at(stream, t):
    return stream.advance_watermark_to("left", t).advance_watermark_to("right", t)


# -- accumulations ---------------------------------------------------------------------------------
def test_inner_join_pairs_every_left_with_every_right_of_the_window_and_key():
    stream = (TwoInputTestStream()
              .add_elements("left", TV(("a", "l1"), 1), TV(("a", "l2"), 2), TV(("b", "l3"), 3), TV(("a", "l4"), 12))
              .add_elements("right", TV(("a", "r1"), 4), TV(("b", "r2"), 15), TV(("a", "r3"), 18)))
    out = keyed(InnerJoin()).run_local(stream)
    assert fmts(out) == [
        "a [0,10) [('l1', 'r1'), ('l2', 'r1')] ON_TIME #0 FL",
        "a [10,20) [('l4', 'r3')] ON_TIME #0 FL",
    ]  # (b's windows, each with one side only, have no pair: no pane, as SQL emits no row)


def test_join_function_and_outer_joins_with_explicit_null_sides():
    stream = (TwoInputTestStream().add_elements("left", TV(("a", 1), 1), TV(("a", 2), 2), TV(("b", 5), 3))
              .add_elements("right", TV(("a", 10), 4), TV(("c", 7), 5)))
    add = keyed(InnerJoin(lambda left, right: left + right)).run_local(stream)
    assert [(r.key, r.value) for r in add] == [("a", [11, 12])]
    left_outer = keyed(LeftOuterJoin()).run_local(stream)
    assert [(r.key, r.value) for r in left_outer] == [("a", [(1, 10), (2, 10)]), ("b", [(5, None)])]
    full = keyed(FullOuterJoin()).run_local(stream)
    assert [(r.key, r.value) for r in full] == [("a", [(1, 10), (2, 10)]), ("b", [(5, None)]), ("c", [(None, 7)])]


def test_cogroup_groups_each_window_by_side_with_extractors_per_input():
    op = WindowedMergeOperator(TimeWindows(10), Cogroup(), timestamp="ts",
                               left=InputOptions(value="clicks"), right=InputOptions(value="views"))
    stream = (TwoInputTestStream().add_elements("left", {"ts": 1, "clicks": 3}, {"ts": 11, "clicks": 1})
              .add_elements("right", {"ts": 2, "views": 30}, {"ts": 4, "views": 10}))
    assert [(r.window_start, r.value) for r in op.run_local(stream)] == [
        (0, {"left": [3], "right": [30, 10]}), (10, {"left": [1], "right": []})]


def test_keys_come_from_each_input_own_field():
    op = keyed(InnerJoin(), timestamp="ts", left=InputOptions(key="user"), right=InputOptions(key="uid"))
    stream = (TwoInputTestStream().add_elements("left", {"user": "u", "ts": 1})
              .add_elements("right", {"uid": "u", "ts": 2}, {"uid": "v", "ts": 3}))
    out = op.run_local(stream)
    assert [(r.key, len(r.value)) for r in out] == [("u", 1)]


def test_an_inner_join_emits_no_pane_for_a_window_without_pairs_and_counts_none():
    """Early panes of a window where one side has not arrived yet emit nothing; the first pane
    with pairs is the window's first (index 0), and retractions only follow emitted panes."""
    from triggers import TriggerOption

    trigger = TriggerOption.at_watermark().with_early_firings_at_every(count=1).accumulating_and_retracting_fired_panes()
    runner = keyed(InnerJoin(), trigger=trigger).local_runner()
    assert runner.add_elements("left", TV(("a", "l1"), 1)) == []  # an early firing, no pair yet
    assert runner.add_elements("left", TV(("a", "l2"), 2)) == []
    out = runner.add_elements("right", TV(("a", "r1"), 3))
    assert fmts(out) == ["a [0,10) [('l1', 'r1'), ('l2', 'r1')] EARLY #0 F"]
    out = runner.advance_watermark_to("left", 10) + runner.advance_watermark_to("right", 10)
    assert fmts(out) == ["a [0,10) [('l1', 'r1'), ('l2', 'r1')] ON_TIME #1 R",
                         "a [0,10) [('l1', 'r1'), ('l2', 'r1')] ON_TIME #1 L"]
    cogrouped = keyed(Cogroup()).run_local(TwoInputTestStream().add_elements("left", TV(("a", "l"), 1)))
    assert [r.value for r in cogrouped] == [{"left": ["l"], "right": []}]  # (a cogroup's pane has both sides)


# -- watermark -------------------------------------------------------------------------------------
def test_the_slower_input_holds_firing_back():
    runner = keyed(InnerJoin()).local_runner()
    runner.add_elements("left", TV(("a", "l"), 1))
    runner.add_elements("right", TV(("a", "r"), 2))
    assert runner.advance_watermark_to("left", 50) == []  # right still at the beginning of time
    assert runner.watermark < 0
    assert runner.advance_watermark_to("right", 9) == []
    out = runner.advance_watermark_to("right", 10)
    assert fmts(out) == ["a [0,10) [('l', 'r')] ON_TIME #0 FL"]
    assert runner.watermark == 10


def test_an_input_that_sent_nothing_holds_the_watermark_until_marked_idle():
    runner = keyed(Cogroup()).local_runner()
    runner.add_elements("left", TV(("a", "l"), 1))
    assert runner.advance_watermark_to("left", 100) == []
    out = runner.mark_idle("right")
    assert fmts(out) == ["a [0,10) {'left': ['l'], 'right': []} ON_TIME #0 FL"]
    assert runner.watermark == 100
    # The idle input wakes up behind the watermark: its element is late and dropped (no lateness).
    runner.add_elements("right", TV(("a", "r"), 5))
    assert runner.dropped_counts["expired"] == 1
    # ... and holds the watermark again from where it is (the watermark never moves back).
    runner.advance_watermark_to("left", 200)
    assert runner.watermark == 100


def test_idle_timeout_releases_the_watermark_after_silence_in_processing_time():
    op = keyed(Cogroup(), idle_timeout=5_000)
    runner = op.local_runner()
    runner.add_elements("left", TV(("a", "l"), 1))
    assert runner.advance_processing_time(3_000) == []
    runner.advance_watermark_to("left", 50)  # the left input is active at 3 s, the right silent since 0
    assert runner.advance_processing_time(1_999) == []
    out = runner.advance_processing_time(1)
    assert fmts(out) == ["a [0,10) {'left': ['l'], 'right': []} ON_TIME #0 FL"]
    assert runner.watermark == 50


def test_idleness_does_not_release_an_input_that_keeps_sending():
    runner = keyed(InnerJoin(), idle_timeout=5_000).local_runner()
    for _ in range(4):
        runner.advance_processing_time(3_000)
        runner.add_elements("right", TV(("a", "r"), 3))
        runner.add_elements("left", TV(("a", "l"), 4))
        runner.advance_watermark_to("left", 40)
    assert runner.outputs == []
    runner.advance_watermark_to("right", 10)
    assert len(runner.outputs) == 1 and len(runner.outputs[0].value) == 4 * 4


def test_downstream_sees_the_merged_watermark_in_a_chain():
    join = keyed(InnerJoin(lambda click, view: 1), window=TimeWindows(10))
    count = KeyedWindowedOperator(None, Sum(), value=lambda pairs: len(pairs))
    runner = join.then(count).local_runner()
    runner.add_elements("left", TV(("a", "c"), 1))
    runner.add_elements("right", TV(("a", "v"), 2), TV(("a", "v2"), 3))
    assert runner.advance_watermark_to("left", 30) == []
    assert runner.runners[1].watermark < 0
    out = runner.advance_watermark_to("right", 30)
    assert fmts(out) == ["a [0,10) 2 ON_TIME #0 FL"]
    assert runner.runners[1].watermark == 30


# -- retractions -----------------------------------------------------------------------------------
@pytest.mark.parametrize("late_side", ["left", "right"])
def test_a_late_element_of_either_side_retracts_the_fired_join(late_side):
    op = keyed(InnerJoin(), trigger=RETRACTING, allowed_lateness=100)
    stream = both_at(TwoInputTestStream().add_elements("left", TV(("a", "l1"), 1))
                     .add_elements("right", TV(("a", "r1"), 2)), 20)
    late = "l2" if late_side == "left" else "r2"
    stream.add_elements(late_side, TV(("a", late), 3))
    out = op.run_local(stream, finish=False)
    pairs = [("l1", "r1"), ("l2", "r1")] if late_side == "left" else [("l1", "r1"), ("l1", "r2")]
    assert fmts(out) == [
        "a [0,10) [('l1', 'r1')] ON_TIME #0 F",
        "a [0,10) [('l1', 'r1')] LATE #1 R",
        f"a [0,10) {pairs!r} LATE #1",
    ]


def test_sessions_merge_across_both_inputs_and_retract():
    op = keyed(Cogroup(), window=SessionWindows(7),
               trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=1)
               .accumulating_and_retracting_fired_panes())
    stream = (TwoInputTestStream().add_elements("left", TV(("a", "x"), 0))
              .add_elements("right", TV(("a", "y"), 12))
              .add_elements("right", TV(("a", "z"), 6)))
    out = op.run_local(stream)
    assert fmts(out) == [
        "a [0,7) {'left': ['x'], 'right': []} EARLY #0 F",
        "a [12,19) {'left': [], 'right': ['y']} EARLY #0 F",
        "a [0,7) {'left': ['x'], 'right': []} EARLY #1 LR",  # both sessions merged away: retracted, last
        "a [12,19) {'left': [], 'right': ['y']} EARLY #1 LR",
        "a [0,19) {'left': ['x'], 'right': ['y', 'z']} EARLY #0 F",
        "a [0,19) {'left': ['x'], 'right': ['y', 'z']} ON_TIME #1 R",
        "a [0,19) {'left': ['x'], 'right': ['y', 'z']} ON_TIME #1 L",
    ]


# -- errors ----------------------------------------------------------------------------------------
def test_bad_sides_and_options_are_named():
    runner = keyed(InnerJoin()).local_runner()
    with pytest.raises(ValueError, match="side must be 'left' or 'right', got 'middle'"):
        runner.add_elements("middle", TV(("a", 1), 1))
    with pytest.raises(ValueError, match="side must be"):
        TwoInputTestStream().add_elements("up", 1)
    with pytest.raises(ValidationError, match="idle_timeout"):
        keyed(InnerJoin(), idle_timeout=0)
    with pytest.raises(ValidationError, match="accumulation"):
        KeyedWindowedMergeOperator(TimeWindows(10), Count())


def test_a_bad_element_of_one_side_changes_nothing():
    runner = keyed(InnerJoin()).local_runner()
    with pytest.raises(ValueError, match="missing_key"):
        runner.add_elements_from_both([TV(("a", 1), 1)], [TV("no key", 2)])
    assert runner.states == {}


@settings(max_examples=60, deadline=None)
@given(inputs=st.lists(st.tuples(st.booleans(), st.integers(-5, 5)), max_size=12),
       cuts=st.lists(st.integers(0, 12), max_size=4),
       join=st.sampled_from([InnerJoin(), LeftOuterJoin(), FullOuterJoin(), Cogroup()]))
def test_a_join_folds_segments_of_sided_arrays_as_it_accumulates_inputs_one_by_one(inputs, cuts, join):
    """The array path's fold of a merge: each segment's inputs kept per side in order, as
    ``accumulate1``/``accumulate2`` keep them; a segment may have inputs of one side or none."""
    import numpy as np

    from accumulations.merge import SidedAccumulation, SidedValues

    sided = SidedAccumulation(inner=join)
    assert sided.supports_fold_array()
    payloads = np.empty(len(inputs), dtype=object)
    payloads[:] = [{"v": v} for _, v in inputs]
    values = SidedValues(np.array([left for left, _ in inputs], dtype=bool), payloads)
    starts = np.array(sorted({0, *(c for c in cuts if c < len(inputs))}), dtype=np.int64)
    bounds = [*starts.tolist(), len(inputs)]
    expected = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        acc = sided.default_accumulated_value()
        for left, v in inputs[lo:hi]:
            acc = sided.accumulate(acc, ("left" if left else "right", {"v": v}))
        expected.append(acc)
    assert sided.fold_segments(values, starts) == expected
    whole = sided.default_accumulated_value()
    for segment in expected:
        whole = sided.merge(whole, segment)
    assert sided.fold_array(values) == whole


def test_a_join_that_keeps_its_inputs_its_own_way_has_no_array_form():
    from accumulations.merge import SidedAccumulation

    class Deduplicated(InnerJoin):
        def accumulate1(self, accumulated, left):
            if left not in accumulated[0]:
                accumulated[0].append(left)
            return accumulated

    assert not SidedAccumulation(inner=Deduplicated()).supports_fold_array()
    assert SidedAccumulation(inner=InnerJoin()).supports_fold_array()
