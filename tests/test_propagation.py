"""Window propagation: an operator with no window option keeps the windows its input records carry."""
from accumulations import Count, Max, Sum
from helpers import fmts
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, WindowedOperator
from windowed_operator.testing import TestStream, TimestampedValue


def T(value, ts, key):
    return TimestampedValue((key, value), ts)


def test_downstream_without_window_option_keeps_upstream_windows():
    per_user = KeyedWindowedOperator(TimeWindows(10), Sum())
    busiest = WindowedOperator(None, Max())
    stream = (TestStream().add_elements(T(1, 1, "a"), T(5, 2, "b"), T(2, 12, "a"))
              .advance_watermark_to(9).advance_watermark_to(19))
    out = per_user.then(busiest).run_local(stream)
    assert fmts(out) == ["[0,10) 5 ON_TIME #0 FL", "[10,20) 2 ON_TIME #0 FL"]


def test_keyed_downstream_uses_the_upstream_key_by_default():
    counts = KeyedWindowedOperator(TimeWindows(10), Count())
    again = KeyedWindowedOperator(None, Sum())
    out = counts.then(again).run_local(TestStream().add_elements(T("x", 1, "a"), T("y", 2, "a"), T("z", 3, "b")))
    assert sorted(fmts(out)) == ["a [0,10) 2 ON_TIME #0 FL", "b [0,10) 1 ON_TIME #0 FL"]


def test_retractions_flow_downstream_and_cancel_in_a_sum():
    trig = TriggerOption.at_watermark().with_early_firings_at_every(count=1).accumulating_and_retracting_fired_panes()
    per_user = KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=trig)
    total = WindowedOperator(None, Sum())
    stream = TestStream().add_elements(T(1, 1, "a")).add_elements(T(2, 2, "a")).add_elements(T(4, 3, "b"))
    out = per_user.then(total).run_local(stream)
    assert [r.value for r in out] == [7]  # 1 + (-1 + 3) + (-3 + 3) + 4 + (-4 + 4)
