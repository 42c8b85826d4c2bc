"""Transcripts of Beam's documented behaviour, each written from the Beam model (programming guide,
trigger documentation, PaneInfo and AfterWatermark semantics), not from this implementation.

Notation (see helpers.fmt): ``key [start,end) value TIMING #index`` with F first, L last, R retraction.
Windows are 10 ms unless a scenario says otherwise; T(v, ts) is an element (key "k", value v).
"""
import warnings

import pytest

from accumulations import Sum, ToList
from helpers import fmts
from triggers import (AfterAll, AfterAny, AfterCount, AfterEach, AfterProcessingTime, AfterWatermark, OrFinally,
                      Repeatedly, TriggerOption)
from windowed_operator import (GlobalWindow, KeyedWindowedOperator, SessionWindows, TimestampCombiner, TimeWindows,
                               WindowedOperator)
from windowed_operator.testing import TestStream, TimestampedValue


def T(value, ts, key="k"):
    return TimestampedValue((key, value), ts)


def keyed(window=None, acc=None, trigger=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(window or TimeWindows(10), acc or Sum(),
                                     trigger=trigger or TriggerOption.default(), **kw)


# 1 ---------------------------------------------------------------------------------------------
def test_01_default_trigger_fires_one_on_time_pane_when_the_watermark_passes_the_window():
    runner = keyed().local_runner()
    assert runner.add_elements(T(1, 1), T(2, 5)) == []
    assert fmts(runner.advance_watermark_to(9)) == []  # at the max timestamp: not yet past it
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 3 ON_TIME #0 FL"]  # lateness 0: last pane


# 2 ---------------------------------------------------------------------------------------------
def test_02_default_trigger_fires_a_late_pane_for_every_late_bundle_within_allowed_lateness():
    runner = keyed(allowed_lateness=20).local_runner()
    runner.add_elements(T(1, 1))
    assert fmts(runner.advance_watermark_to(12)) == ["k [0,10) 1 ON_TIME #0 F"]
    assert fmts(runner.add_elements(T(5, 3))) == ["k [0,10) 5 LATE #1"]  # discarding is Beam's default mode
    assert fmts(runner.add_elements(T(7, 4), T(1, 2))) == ["k [0,10) 8 LATE #2"]  # one pane per bundle


# 3 ---------------------------------------------------------------------------------------------
def test_03_elements_beyond_allowed_lateness_are_dropped_and_counted():
    runner = keyed(allowed_lateness=5, late_data_output=True).local_runner()
    runner.add_elements(T(1, 1))
    runner.advance_watermark_to(14)  # 9 + 5 is not before the watermark: the window is still live
    assert fmts(runner.add_elements(T(4, 2))) == ["k [0,10) 4 LATE #1"]
    runner.advance_watermark_to(15)  # window [0,10) expires once 9 + 5 < watermark
    assert runner.add_elements(T(2, 3)) == []
    assert runner.dropped_counts == {"expired": 1}
    assert [(d.key, d.element, d.timestamp) for d in runner.late_data] == [("k", ("k", 2), 3)]


# 4 ---------------------------------------------------------------------------------------------
def test_04_after_watermark_alone_finishes_and_drops_late_data_as_closed_window():
    runner = keyed(trigger=TriggerOption.at_watermark(), allowed_lateness=100).local_runner()
    runner.add_elements(T(1, 1))
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 1 ON_TIME #0 FL"]
    assert runner.add_elements(T(2, 2)) == []
    assert runner.dropped_counts == {"closed_window": 1}


# 5 ---------------------------------------------------------------------------------------------
def test_05_early_count_firings_then_on_time_in_accumulating_mode():
    trig = TriggerOption.at_watermark().with_early_firings_at_every(count=2).accumulating_fired_panes()
    runner = keyed(trigger=trig).local_runner()
    assert fmts(runner.add_elements(T(1, 1))) == []
    assert fmts(runner.add_elements(T(2, 2))) == ["k [0,10) 3 EARLY #0 F"]
    assert fmts(runner.add_elements(T(3, 3), T(4, 4), T(5, 5))) == ["k [0,10) 15 EARLY #1"]  # once per bundle
    assert fmts(runner.advance_watermark_to(20)) == ["k [0,10) 15 ON_TIME #2 L"]


# 6 ---------------------------------------------------------------------------------------------
def test_06_early_processing_time_firings_count_from_the_first_element_of_the_pane():
    trig = TriggerOption.at_watermark().with_early_firings_at_every(duration=100).discarding_fired_panes()
    runner = keyed(trigger=trig).local_runner()
    runner.add_elements(T(1, 1))
    assert runner.advance_processing_time(99) == []
    runner.add_elements(T(2, 2))
    assert fmts(runner.advance_processing_time(1)) == ["k [0,10) 3 EARLY #0 F"]
    assert runner.advance_processing_time(500) == []  # no new element, no new timer
    runner.add_elements(T(4, 3))
    assert fmts(runner.advance_processing_time(100)) == ["k [0,10) 4 EARLY #1"]


# 7 ---------------------------------------------------------------------------------------------
def test_07_late_count_firings_after_the_on_time_pane():
    trig = TriggerOption.at_watermark().with_late_firings_at_every(count=1).accumulating_fired_panes()
    runner = keyed(trigger=trig, allowed_lateness=50).local_runner()
    runner.add_elements(T(1, 1))
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 1 ON_TIME #0 F"]
    assert fmts(runner.add_elements(T(2, 2))) == ["k [0,10) 3 LATE #1"]
    assert fmts(runner.advance_watermark_to(60)) == []  # nothing new: no final pane at expiry (9 + 50 < 60)
    assert runner.states == {}


# 8 ---------------------------------------------------------------------------------------------
def test_08_repeated_count_trigger_in_the_global_window_fires_once_per_bundle():
    op = keyed(window=GlobalWindow(), trigger=Repeatedly(AfterCount(2)))
    runner = op.local_runner()
    assert runner.add_elements(T(1, 1)) == []
    out = runner.add_elements(T(1, 2), T(1, 3), T(1, 4))
    # discarding (Beam's default mode): the unfired first element is still in the pane
    assert [(r.value, r.timing.value, r.index) for r in out] == [(4, "EARLY", 0)]
    assert runner.add_elements(T(1, 5)) == []
    assert [(r.value, r.index) for r in runner.add_elements(T(1, 6))] == [(2, 1)]


# 9 ---------------------------------------------------------------------------------------------
def test_09_a_count_trigger_that_is_not_repeated_fires_once_and_closes_the_window():
    runner = keyed(window=GlobalWindow(), trigger=AfterCount(2)).local_runner()
    out = runner.add_elements(T(1, 1), T(2, 2))
    assert [(r.value, r.is_last) for r in out] == [(3, True)]
    assert runner.add_elements(T(4, 3)) == []
    assert runner.dropped_counts == {"closed_window": 1}


# 10 --------------------------------------------------------------------------------------------
def test_10_after_each_runs_its_triggers_in_sequence():
    runner = keyed(window=GlobalWindow(), trigger=AfterEach(AfterCount(2), AfterCount(3))).local_runner()
    assert [r.value for r in runner.add_elements(T(1, 1), T(1, 2))] == [2]
    assert runner.add_elements(T(1, 3), T(1, 4)) == []
    out = runner.add_elements(T(1, 5))
    assert [(r.value, r.index, r.is_last) for r in out] == [(3, 1, True)]


# 11 --------------------------------------------------------------------------------------------
def test_11_after_any_fires_on_the_first_ready_child():
    trig = Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(1_000)))
    runner = keyed(window=GlobalWindow(), trigger=trig).local_runner()
    runner.add_elements(T(1, 1))
    assert [r.value for r in runner.advance_processing_time(1_000)] == [1]  # time won
    assert [r.value for r in runner.add_elements(T(1, 2), T(1, 3), T(1, 4))] == [3]  # count won
    assert runner.advance_processing_time(5_000) == []  # both children were reset by Repeatedly


# 12 --------------------------------------------------------------------------------------------
def test_12_after_all_waits_for_every_child():
    trig = AfterAll(AfterCount(2), AfterProcessingTime(1_000))
    runner = keyed(window=GlobalWindow(), trigger=trig).local_runner()
    runner.add_elements(T(1, 1), T(1, 2))
    assert runner.advance_processing_time(999) == []
    out = runner.advance_processing_time(1)
    assert [(r.value, r.is_last) for r in out] == [(2, True)]


# 13 --------------------------------------------------------------------------------------------
def test_13_orfinally_fires_like_its_main_trigger_until_the_final_one_fires():
    trig = Repeatedly(AfterCount(1)).orfinally(AfterCount(3))
    assert isinstance(trig, OrFinally)
    runner = keyed(window=GlobalWindow(), trigger=trig).local_runner()
    assert [(r.value, r.is_last) for r in runner.add_elements(T(1, 1))] == [(1, False)]
    assert [(r.value, r.is_last) for r in runner.add_elements(T(1, 2))] == [(1, False)]
    assert [(r.value, r.is_last) for r in runner.add_elements(T(1, 3))] == [(1, True)]
    assert runner.add_elements(T(1, 4)) == [] and runner.dropped_counts == {"closed_window": 1}


# 14 --------------------------------------------------------------------------------------------
def test_14_sessions_merge_when_an_element_bridges_them():
    runner = keyed(window=SessionWindows(10), acc=ToList()).local_runner()
    runner.add_elements(T("a", 0), T("b", 30))
    runner.add_elements(T("c", 15))  # [15,25) overlaps [0,10)? no; [30,40)? no -> alone
    runner.add_elements(T("d", 8))  # [8,18) bridges [0,10) and [15,25)
    out = runner.advance_watermark_to(100)  # merged lists concatenate in window order, then the new element
    assert fmts(out) == ["k [0,25) ['a', 'c', 'd'] ON_TIME #0 FL", "k [30,40) ['b'] ON_TIME #0 FL"]


# 15 --------------------------------------------------------------------------------------------
def test_15_hopping_windows_each_fire_on_time_at_their_own_end():
    runner = keyed(window=TimeWindows(10).slide_by(5)).local_runner()
    runner.add_elements(T(1, 7))
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 1 ON_TIME #0 FL"]
    assert fmts(runner.advance_watermark_to(14)) == []
    assert fmts(runner.advance_watermark_to(15)) == ["k [5,15) 1 ON_TIME #0 FL"]


# 16 --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("combiner,expected", [
    (TimestampCombiner.END_OF_WINDOW, 9), (TimestampCombiner.EARLIEST, 2), (TimestampCombiner.LATEST, 6)])
def test_16_timestamp_combiner_sets_the_pane_timestamp(combiner, expected):
    out = keyed(timestamp_combiner=combiner).run_local(TestStream().add_elements(T(1, 6), T(1, 2), T(1, 4)))
    assert [r.timestamp for r in out] == [expected]


# 17 --------------------------------------------------------------------------------------------
def test_17_on_time_pane_fires_even_when_empty_after_a_discarding_early_pane():
    # Beam's OnTimeBehavior.FIRE_ALWAYS: the ON_TIME pane is emitted although nothing arrived since
    # the early pane; in discarding mode its value is the empty aggregate.
    trig = TriggerOption.at_watermark().with_early_firings_at_every(count=1).discarding_fired_panes()
    runner = keyed(trigger=trig).local_runner()
    assert fmts(runner.add_elements(T(4, 1))) == ["k [0,10) 4 EARLY #0 F"]
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 0 ON_TIME #1 L"]


# 18 --------------------------------------------------------------------------------------------
def test_18_pane_indices_and_timing_progress_early_on_time_late():
    trig = (TriggerOption.at_watermark().with_early_firings_at_every(count=1)
            .with_late_firings_at_every(count=1).accumulating_fired_panes())
    runner = keyed(trigger=trig, allowed_lateness=10).local_runner()
    out = runner.add_elements(T(1, 1)) + runner.add_elements(T(1, 2)) + runner.advance_watermark_to(10)
    out += runner.add_elements(T(1, 3)) + runner.advance_watermark_to(19)
    assert fmts(out) == ["k [0,10) 1 EARLY #0 F", "k [0,10) 2 EARLY #1", "k [0,10) 2 ON_TIME #2",
                         "k [0,10) 3 LATE #3"]


# 19 --------------------------------------------------------------------------------------------
def test_19_global_window_fires_at_the_end_of_input():
    op = WindowedOperator(GlobalWindow(), Sum())
    out = op.run_local(TestStream().add_elements(TimestampedValue(1, 5), TimestampedValue(2, 7)))
    assert [(r.key, r.value, r.timing.value, r.is_last) for r in out] == [(None, 3, "ON_TIME", True)]


# 20 --------------------------------------------------------------------------------------------
def test_20_a_watermark_jump_fires_every_passed_window_in_event_time_order():
    runner = keyed().local_runner()
    runner.add_elements(T(3, 25), T(1, 5), T(2, 15))
    assert fmts(runner.advance_watermark_to(100)) == [
        "k [0,10) 1 ON_TIME #0 FL", "k [10,20) 2 ON_TIME #0 FL", "k [20,30) 3 ON_TIME #0 FL"]


# 21 --------------------------------------------------------------------------------------------
def test_21_a_late_element_for_an_unfired_window_gets_a_late_pane_not_an_on_time_one():
    # The window was never fired (no element when the watermark passed); the late element's pane
    # fires from the bundle, which Beam marks LATE.
    runner = keyed(allowed_lateness=100).local_runner()
    runner.advance_watermark_to(50)
    assert fmts(runner.add_elements(T(1, 3))) == ["k [0,10) 1 LATE #0 F"]


# 22 --------------------------------------------------------------------------------------------
def test_22_repeated_processing_time_trigger_does_not_fire_without_new_elements():
    runner = keyed(window=GlobalWindow(), trigger=Repeatedly(AfterProcessingTime(10))).local_runner()
    runner.add_elements(T(1, 1))
    assert [r.value for r in runner.advance_processing_time(10)] == [1]
    assert runner.advance_processing_time(100) == []
    runner.add_elements(T(2, 2))
    assert [r.value for r in runner.advance_processing_time(10)] == [2]


# 23 --------------------------------------------------------------------------------------------
def test_23_expiry_fires_a_final_pane_for_data_the_trigger_has_not_fired():
    # Beam's ClosingBehavior.FIRE_IF_NON_EMPTY: garbage collection emits what is left, marked last.
    runner = keyed(trigger=Repeatedly(AfterCount(3))).local_runner()
    runner.add_elements(T(1, 1), T(1, 2))
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 2 ON_TIME #0 FL"]


# 24 --------------------------------------------------------------------------------------------
def test_24_session_early_firings_restart_pane_indices_in_the_merged_window():
    trig = TriggerOption.at_watermark().with_early_firings_at_every(count=1).accumulating_fired_panes()
    runner = keyed(window=SessionWindows(10), trigger=trig).local_runner()
    assert fmts(runner.add_elements(T(1, 0))) == ["k [0,10) 1 EARLY #0 F"]
    assert fmts(runner.add_elements(T(2, 5))) == ["k [0,15) 3 EARLY #0 F"]  # a new (merged) window


# 25 --------------------------------------------------------------------------------------------
def test_25_after_watermark_with_late_firings_is_last_only_at_expiry():
    trig = TriggerOption.at_watermark().with_late_firings_at_every(count=1)
    runner = keyed(trigger=trig, allowed_lateness=10).local_runner()
    runner.add_elements(T(1, 1))
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 1 ON_TIME #0 F"]
    assert fmts(runner.add_elements(T(5, 2))) == ["k [0,10) 5 LATE #1"]
    assert fmts(runner.advance_watermark_to(20)) == []


# 26 --------------------------------------------------------------------------------------------
def test_26_default_trigger_emits_nothing_more_at_expiry_when_no_late_data_came():
    runner = keyed(allowed_lateness=20).local_runner()
    runner.add_elements(T(1, 1))
    assert fmts(runner.advance_watermark_to(10)) == ["k [0,10) 1 ON_TIME #0 F"]
    assert runner.advance_watermark_to(100) == []
    assert runner.states == {}
