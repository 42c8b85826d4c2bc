"""Accumulation modes, fire-only-updated panes, and retractions (including sessions merged away)."""
import warnings

from accumulations import Sum, ToList
from helpers import fmts
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.testing import TimestampedValue


def T(value, ts, key="k"):
    return TimestampedValue((key, value), ts)


EARLY_EVERY_BUNDLE = TriggerOption.at_watermark().with_early_firings_at_every(count=1)


def run_bundles(trigger, bundles, window=None, acc=None, lateness=0, final_watermark=100):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(window or TimeWindows(10), acc or Sum(), trigger=trigger, allowed_lateness=lateness)
    runner = op.local_runner()
    out = []
    for bundle in bundles:
        out += runner.add_elements(*bundle)
    out += runner.advance_watermark_to(final_watermark)
    return out


def test_accumulating_keeps_state_after_each_pane():
    out = run_bundles(EARLY_EVERY_BUNDLE.accumulating_fired_panes(), [[T(1, 1)], [T(2, 2)]])
    assert fmts(out) == ["k [0,10) 1 EARLY #0 F", "k [0,10) 3 EARLY #1", "k [0,10) 3 ON_TIME #2 L"]


def test_discarding_clears_state_after_each_pane():
    out = run_bundles(EARLY_EVERY_BUNDLE.discarding_fired_panes(), [[T(1, 1)], [T(2, 2)]])
    assert fmts(out) == ["k [0,10) 1 EARLY #0 F", "k [0,10) 2 EARLY #1", "k [0,10) 0 ON_TIME #2 L"]


def test_retracting_precedes_each_refired_pane_with_the_retraction_of_the_last():
    out = run_bundles(EARLY_EVERY_BUNDLE.accumulating_and_retracting_fired_panes(), [[T(1, 1)], [T(2, 2)]])
    assert fmts(out) == [
        "k [0,10) 1 EARLY #0 F",
        "k [0,10) -1 EARLY #1 R", "k [0,10) 3 EARLY #1",
        "k [0,10) -3 ON_TIME #2 R", "k [0,10) 3 ON_TIME #2 L",
    ]
    assert sum(r.value for r in out) == 3


def test_retracting_a_collection_repeats_the_old_value_flagged_as_retraction():
    out = run_bundles(EARLY_EVERY_BUNDLE.accumulating_and_retracting_fired_panes(), [[T("a", 1)], [T("b", 2)]],
                      acc=ToList())
    assert [(r.value, r.is_retraction) for r in out][:3] == [(["a"], False), (["a"], True), (["a", "b"], False)]


def test_fire_only_updated_panes_suppresses_unchanged_values_without_using_an_index():
    trig = EARLY_EVERY_BUNDLE.accumulating_fired_panes().fire_only_updated_panes()
    out = run_bundles(trig, [[T(1, 1)], [T(0, 2)], [T(2, 3)]])
    assert fmts(out) == ["k [0,10) 1 EARLY #0 F", "k [0,10) 3 EARLY #1"]  # ON_TIME (3) equals the last pane


def test_fire_only_updated_panes_with_retractions_emits_neither_for_unchanged_values():
    trig = EARLY_EVERY_BUNDLE.accumulating_and_retracting_fired_panes().fire_only_updated_panes()
    out = run_bundles(trig, [[T(1, 1)], [T(0, 2)]])
    assert fmts(out) == ["k [0,10) 1 EARLY #0 F"]


def test_empty_early_panes_are_never_fired_but_the_on_time_pane_is():
    trig = TriggerOption.at_watermark().with_early_firings_at_every(duration=5).discarding_fired_panes()
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=trig)
    runner = op.local_runner()
    runner.add_elements(T(1, 1))
    out = runner.advance_processing_time(5) + runner.advance_processing_time(5) + runner.advance_watermark_to(10)
    assert fmts(out) == ["k [0,10) 1 EARLY #0 F", "k [0,10) 0 ON_TIME #1 L"]


RETRACT = EARLY_EVERY_BUNDLE.accumulating_and_retracting_fired_panes()


def test_session_merge_of_two_retracts_the_fired_session_it_absorbs():
    out = run_bundles(RETRACT, [[T(1, 0)], [T(2, 5)]], window=SessionWindows(10))
    assert fmts(out) == [
        "k [0,10) 1 EARLY #0 F",
        "k [0,10) -1 EARLY #1 LR", "k [0,15) 3 EARLY #0 F",
        "k [0,15) -3 ON_TIME #1 R", "k [0,15) 3 ON_TIME #1 L",
    ]


def test_session_merge_of_three_retracts_both_fired_sessions():
    out = run_bundles(RETRACT, [[T(1, 0)], [T(2, 20)], [T(4, 8), T(8, 15)]], window=SessionWindows(10))
    # bundle 3: ts 8 -> [8,18) bridges [0,10) and nothing else yet ([20,30) starts at 20): merge -> [0,18);
    # ts 15 -> [15,25) bridges [0,18) and [20,30): merge -> [0,30).
    assert fmts(out) == [
        "k [0,10) 1 EARLY #0 F",
        "k [20,30) 2 EARLY #0 F",
        "k [0,10) -1 EARLY #1 LR",
        "k [20,30) -2 EARLY #1 LR",
        "k [0,30) 15 EARLY #0 F",
        "k [0,30) -15 ON_TIME #1 R", "k [0,30) 15 ON_TIME #1 L",
    ]


def test_session_absorbed_before_it_fired_is_not_retracted():
    out = run_bundles(RETRACT, [[T(1, 0), T(2, 5)]], window=SessionWindows(10))
    assert fmts(out) == ["k [0,15) 3 EARLY #0 F", "k [0,15) -3 ON_TIME #1 R", "k [0,15) 3 ON_TIME #1 L"]


def test_late_element_merging_into_a_fired_session_retracts_with_late_timing():
    trig = TriggerOption.at_watermark().with_late_firings_at_every(count=1).accumulating_and_retracting_fired_panes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(SessionWindows(10), Sum(), trigger=trig, allowed_lateness=100)
    runner = op.local_runner()
    runner.add_elements(T(1, 0))
    out = runner.advance_watermark_to(20)
    out += runner.add_elements(T(5, 10))  # [10,20) is late (max ts 19 <= 20) and touches, not overlaps, [0,10)
    out += runner.add_elements(T(2, 7))  # [7,17) bridges [0,10) and [10,20): both fired -> both retracted
    assert fmts(out) == [
        "k [0,10) 1 ON_TIME #0 F",
        "k [10,20) 5 LATE #0 F",
        "k [0,10) -1 LATE #1 LR", "k [10,20) -5 LATE #1 LR",
        "k [0,20) 8 LATE #0 F",
    ]
