"""Window assignment and merging, one family at a time."""
from datetime import timedelta

import pytest
from pydantic import ValidationError

from windowed_operator.time import END_OF_GLOBAL_WINDOW, MIN_TIMESTAMP
from windowed_operator.windows import (CumulativeWindows, GlobalWindow, SessionWindows, SlidingWindows, TimeWindows,
                                       Window)


def test_window_is_half_open_and_max_timestamp_is_end_minus_one():
    w = Window(0, 10)
    assert w.max_timestamp == 9
    assert w.contains(0) and w.contains(9) and not w.contains(10)


def test_global_window_spans_all_time():
    [w] = GlobalWindow().assign(123)
    assert w.start == MIN_TIMESTAMP and w.max_timestamp == END_OF_GLOBAL_WINDOW


@pytest.mark.parametrize("ts,expected", [(0, (0, 10)), (9, (0, 10)), (10, (10, 20)), (-1, (-10, 0))])
def test_tumbling(ts, expected):
    assert TimeWindows(10).assign(ts) == [Window(*expected)]


def test_tumbling_with_offset_and_timedelta():
    assert TimeWindows(timedelta(seconds=10), 3_000).assign(2_999) == [Window(-7_000, 3_000)]
    assert TimeWindows(10_000, offset=3_000).assign(3_000) == [Window(3_000, 13_000)]


def test_hopping_windows_cover_every_containing_window():
    assert TimeWindows(10).slide_by(5).assign(12) == [Window(5, 15), Window(10, 20)]
    assert TimeWindows(10).slide_by(3).assign(12) == [Window(3, 13), Window(6, 16), Window(9, 19), Window(12, 22)]
    assert TimeWindows(10).slide_by(10).assign(12) == TimeWindows(10).assign(12)


def test_hopping_with_period_not_dividing_size_matches_definition():
    option = TimeWindows(7, offset=1).slide_by(3)
    for ts in range(-20, 20):
        expected = [Window(s, s + 7) for s in range(-40, 40) if s % 3 == 1 % 3 and s <= ts < s + 7]
        assert option.assign(ts) == expected


def test_session_proto_window_and_merge_rules():
    option = SessionWindows(10)
    assert option.assign(5) == [Window(5, 15)]
    active = [Window(0, 10), Window(20, 30), Window(40, 50)]
    assert option.merge_windows([*active, Window(2, 8)]) == [([Window(0, 10), Window(2, 8)], Window(0, 10))]  # inside
    assert option.merge_windows([*active, Window(12, 22)]) == [
        ([Window(12, 22), Window(20, 30)], Window(12, 30))]  # extends one
    assert option.merge_windows([*active, Window(5, 25)]) == [
        ([Window(0, 10), Window(5, 25), Window(20, 30)], Window(0, 30))]  # bridges two
    assert option.merge_windows([*active, Window(10, 20)]) == []  # touching is not overlapping
    # A bundle's proto-sessions merge with each other and the active sessions at once.
    assert option.merge_windows([*active, Window(32, 42), Window(25, 35), Window(60, 70)]) == [
        ([Window(20, 30), Window(25, 35), Window(32, 42), Window(40, 50)], Window(20, 50))]


def test_per_record_sliding_window_is_closed_interval():
    [w] = SlidingWindows(5).assign(10)
    assert w == Window(5, 11) and w.contains(5) and w.contains(10) and not w.contains(11)


def test_cumulative_windows():
    assert CumulativeWindows(10, 2).assign(13) == [Window(10, 14), Window(10, 16), Window(10, 18), Window(10, 20)]
    assert CumulativeWindows(10, 2).assign(10) == [Window(10, 12 + 2 * k) for k in range(0, 5)]
    assert CumulativeWindows(10, 2).assign(19) == [Window(10, 20)]


@pytest.mark.parametrize("make,field", [
    (lambda: TimeWindows(-1), "size"),
    (lambda: TimeWindows(0), "size"),
    (lambda: TimeWindows(10).slide_by(11), "period"),
    (lambda: TimeWindows(10).slide_by(0), "period"),
    (lambda: SessionWindows(-5), "min_gap"),
    (lambda: SlidingWindows(-1), "size"),
    (lambda: CumulativeWindows(10, 3), "step"),
    (lambda: CumulativeWindows(10, 20), "step"),
    (lambda: CumulativeWindows(0, 1), "max_size"),
])
def test_bad_window_configuration_names_the_field(make, field):
    with pytest.raises(ValidationError) as info:
        make()
    assert info.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize("window", [TimeWindows(10), TimeWindows(10, offset=3).slide_by(5), TimeWindows(9, offset=2)
                                    .slide_by(4), TimeWindows(60_000).slide_by(1_000), CumulativeWindows(20, 5),
                                    CumulativeWindows(21, 7, offset=4), GlobalWindow()],
                         ids=lambda w: w.describe())
def test_pane_layout_reproduces_assign(window):
    """Every window is a union of panes: the windows covering a timestamp's pane are the ones assign() gives."""
    import numpy as np

    layout = window.pane_layout()
    ts = np.arange(-130, 130, dtype=np.int64)
    if isinstance(window, TimeWindows) and window.size > 1000:
        ts = ts * 997
    panes = layout.pane_start(ts)
    lo, hi = layout.end_range(panes)
    for t, p, first, last in zip(ts.tolist(), panes.tolist(), lo.tolist(), hi.tolist()):
        assert p <= t < p + layout.pane or isinstance(window, GlobalWindow)
        ends = np.arange(first, last + 1, layout.step, dtype=np.int64)
        got = list(zip(layout.window_start(ends).tolist(), ends.tolist()))
        assert got == [tuple(w) for w in window.assign(t)], t
        assert all(layout.align_up(e) == e == layout.align_down(e) for e in ends.tolist())
