"""Allowed lateness edges (exactly at the expiry boundary) and the three watermark sources."""
import pytest

from accumulations import Count, Sum
from helpers import fmts
from triggers import TriggerOption
from windowed_operator import (KeyedWindowedOperator, SessionWindows, SlidingWindows, TimeWindows, bounded_disorder,
                               fixed_watermark)
from windowed_operator.testing import TimestampedValue
from windowed_operator.watermarks import UpstreamWatermark, WatermarkTracker


def T(value, ts, key="k"):
    return TimestampedValue((key, value), ts)


LATE_EVERY_BUNDLE = TriggerOption.at_watermark().with_late_firings_at_every(count=1)


@pytest.mark.parametrize("watermark,accepted", [(13, True), (14, True), (15, False)])
def test_element_is_accepted_until_the_watermark_passes_max_timestamp_plus_lateness(watermark, accepted):
    runner = KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=LATE_EVERY_BUNDLE, allowed_lateness=5,
                                   late_data_output=True).local_runner()
    runner.add_elements(T(1, 0))
    runner.advance_watermark_to(watermark)
    out = runner.add_elements(T(7, 9))
    if accepted:
        assert fmts(out) == ["k [0,10) 7 LATE #1"]
        assert runner.dropped_counts == {}
    else:
        assert out == [] and runner.dropped_counts == {"expired": 1}
        assert runner.late_data[0].element == ("k", 7) and runner.late_data[0].watermark == watermark


def test_state_is_purged_exactly_at_expiry():
    runner = KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=LATE_EVERY_BUNDLE,
                                   allowed_lateness=5).local_runner()
    runner.add_elements(T(1, 0))
    runner.advance_watermark_to(14)  # max timestamp 9 + lateness 5 is not before the watermark
    assert "k" in runner.states
    runner.advance_watermark_to(15)
    assert runner.states == {}


def test_zero_lateness_drops_elements_of_windows_the_watermark_has_passed():
    runner = KeyedWindowedOperator(TimeWindows(10), Count()).local_runner()
    runner.advance_watermark_to(9)
    assert runner.add_elements(T("w", 9)) == []  # at the watermark: on time
    runner.advance_watermark_to(10)
    assert fmts(runner.add_elements(T("x", 9), T("y", 10))) == []
    assert runner.dropped_counts == {"expired": 1}
    assert fmts(runner.finish()) == ["k [10,20) 1 ON_TIME #0 FL"]


def test_element_is_dropped_only_when_all_its_windows_expired():
    runner = KeyedWindowedOperator(TimeWindows(10).slide_by(5), Count()).local_runner()
    runner.advance_watermark_to(10)  # [0,10) expired, [5,15) alive
    out = runner.add_elements(T("x", 7)) + runner.finish()
    assert fmts(out) == ["k [5,15) 1 ON_TIME #0 FL"] and runner.dropped_counts == {}


def test_session_lateness_is_judged_on_the_proto_session():
    runner = KeyedWindowedOperator(SessionWindows(10), Count(), allowed_lateness=2).local_runner()
    runner.advance_watermark_to(20)
    runner.add_elements(T("x", 8))  # [8,18): max ts 17 + 2 < 20: expired
    runner.add_elements(T("y", 12))  # [12,22): max ts 21 + 2 >= 20: accepted
    assert runner.dropped_counts == {"expired": 1}


def test_per_record_window_element_is_kept_for_later_windows_until_the_last_one_expires():
    op = KeyedWindowedOperator(SlidingWindows(10), Sum())
    runner = op.local_runner()
    runner.advance_watermark_to(15)
    out = runner.add_elements(T(1, 8))  # own window [−2,8] expired, but windows up to 18 may still come
    assert out == [] and runner.dropped_counts == {}
    out = runner.add_elements(T(2, 16)) + runner.finish()
    assert fmts(out) == ["k [6,17) 3 ON_TIME #0 FL"]
    runner2 = op.local_runner()
    runner2.advance_watermark_to(18)  # the last window that can cover 8 ends at 18: not yet passed
    runner2.add_elements(T(1, 8))
    assert runner2.dropped_counts == {}
    runner2.advance_watermark_to(19)
    runner2.add_elements(T(1, 8))
    assert runner2.dropped_counts == {"expired": 1}


def test_fixed_lag_watermark_follows_processing_time():
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), watermark=fixed_watermark(5))
    runner = op.local_runner(processing_time=0)
    runner.add_elements(T(1, 3))
    assert runner.advance_processing_time(14) == []  # watermark 9
    assert fmts(runner.advance_processing_time(1)) == ["k [0,10) 1 ON_TIME #0 FL"]  # watermark 10
    assert runner.watermark == 10


def test_fixed_lag_watermark_ignores_upstream_watermark_records():
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), watermark=fixed_watermark(5))
    runner = op.local_runner()
    runner.add_elements(T(1, 3))
    assert runner.advance_watermark_to(100) == []


def test_bounded_disorder_watermark_trails_the_largest_event_time():
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), watermark=bounded_disorder(5))
    runner = op.local_runner()
    assert runner.add_elements(T(1, 3), T(1, 12)) == []  # watermark 7
    assert runner.add_elements(T(1, 14)) == []  # watermark 9
    assert fmts(runner.add_elements(T(1, 15))) == ["k [0,10) 1 ON_TIME #0 FL"]  # watermark 10
    assert fmts(runner.add_elements(T(5, 4))) == []  # late and expired
    assert runner.dropped_counts == {"expired": 1}
    assert runner.add_elements(T(1, 1)) == [] and runner.watermark == 10  # never moves backwards


def test_watermark_never_moves_backwards():
    tracker = WatermarkTracker(UpstreamWatermark())
    tracker.observe_upstream(10)
    assert tracker.compute(0) == 10
    tracker.observe_upstream(5)
    assert tracker.compute(0) == 10


def test_runner_ignores_a_watermark_that_goes_backwards():
    runner = KeyedWindowedOperator(TimeWindows(10), Sum()).local_runner()
    runner.advance_watermark_to(50)
    runner.advance_watermark_to(5)
    assert runner.watermark == 50
