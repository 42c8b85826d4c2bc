"""Per-record sliding windows (KIP-450) and cumulative windows (Flink CUMULATE) through the operator."""
from accumulations import Sum, ToList
from helpers import fmts
from triggers import TriggerOption
from windowed_operator import CumulativeWindows, KeyedWindowedOperator, SlidingWindows
from windowed_operator.testing import TestStream, TimestampedValue


def T(value, ts, key="k"):
    return TimestampedValue((key, value), ts)


def test_each_element_defines_its_window_covering_earlier_elements_inclusively():
    out = KeyedWindowedOperator(SlidingWindows(5), ToList()).run_local(
        TestStream().add_elements(T("a", 0), T("b", 5), T("c", 11)))
    assert fmts(out) == ["k [-5,1) ['a'] ON_TIME #0 FL", "k [0,6) ['a', 'b'] ON_TIME #0 FL",
                         "k [6,12) ['c'] ON_TIME #0 FL"]


def test_an_out_of_order_element_updates_later_windows_and_gets_its_own():
    trig = TriggerOption.at_watermark().with_early_firings_at_every(count=1).accumulating_fired_panes()
    runner = KeyedWindowedOperator(SlidingWindows(10), Sum(), trigger=trig).local_runner()
    assert fmts(runner.add_elements(T(1, 20))) == ["k [10,21) 1 EARLY #0 F"]
    out = runner.add_elements(T(2, 15))
    assert fmts(out) == ["k [5,16) 2 EARLY #0 F", "k [10,21) 3 EARLY #1"]
    out = runner.add_elements(T(4, 30))  # [20,30] includes ts 20
    assert fmts(out) == ["k [20,31) 5 EARLY #0 F"]


def test_elements_with_the_same_timestamp_share_one_window():
    out = KeyedWindowedOperator(SlidingWindows(3), Sum()).run_local(
        TestStream().add_elements(T(1, 5), T(2, 5)).add_elements(T(4, 5)))
    assert fmts(out) == ["k [2,6) 7 ON_TIME #0 FL"]


def test_buffer_is_purged_once_no_window_can_use_an_element():
    runner = KeyedWindowedOperator(SlidingWindows(10), Sum()).local_runner()
    runner.add_elements(T(1, 0), T(1, 5))
    runner.advance_watermark_to(10)  # 0's last window [0,10] has not passed yet
    assert list(runner.states["k"].buffer.times) == [0, 5]
    runner.advance_watermark_to(11)
    assert list(runner.states["k"].buffer.times) == [5]
    runner.advance_watermark_to(16)
    assert "k" not in runner.states


def test_cumulative_windows_grow_by_step_and_restart_at_max_size():
    out = KeyedWindowedOperator(CumulativeWindows(10, 5), Sum()).run_local(
        TestStream().add_elements(T(1, 1), T(2, 6), T(4, 12)))
    assert fmts(out) == ["k [0,5) 1 ON_TIME #0 FL", "k [0,10) 3 ON_TIME #0 FL", "k [10,15) 4 ON_TIME #0 FL",
                         "k [10,20) 4 ON_TIME #0 FL"]
