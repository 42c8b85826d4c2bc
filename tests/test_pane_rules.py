"""The pane rules (``engine.pane_rules``) are one expression for one pane and for many: evaluated on
Python scalars (the object engine) and on numpy arrays (the table engines) they agree, and they are
Beam's rules, checked against a plain statement of them with watermarks at and around the window's end."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from accumulations import InnerJoin, Sum
from accumulations.merge import SidedAccumulation
from windowed_operator.engine.pane_rules import (TIMINGS, TIMING_VALUES, absorbed_timing_code, check_output,
                                                 check_outputs, emitted, every_value_a_result, results, timing_code)
from windowed_operator.panes import Timing, WindowOverflowError
from windowed_operator.windows.base import Window

END = 10_000  # a window's max timestamp
panes = st.tuples(st.integers(END - 3, END + 3),  # the watermark the pane fires at
                  st.integers(0, 2),  # the non-speculative index (panes fired after the end)
                  st.booleans())  # the window held its output watermark at its end


def beam_timing(watermark: int, nonspeculative: int, held: bool) -> Timing:
    """Beam's PaneInfoTracker, as stated: EARLY until the watermark passes the end; then ON_TIME for
    the first such pane of a window that held the output watermark; LATE otherwise."""
    if watermark <= END:
        return Timing.EARLY
    return Timing.ON_TIME if nonspeculative == 0 and held else Timing.LATE


@given(st.lists(panes, min_size=1, max_size=20))
def test_the_timing_of_one_pane_and_of_many_is_beams(fired):
    one = [TIMINGS[timing_code(END, wm, n, held)] for wm, n, held in fired]
    assert one == [beam_timing(wm, n, held) for wm, n, held in fired]
    watermarks, indexes, holds = (np.array(column) for column in zip(*fired))
    for watermark in set(watermarks.tolist()):  # (the table engines fire many windows at one watermark)
        at = watermarks == watermark
        many = TIMING_VALUES[timing_code(np.full(at.sum(), END), watermark, indexes[at], holds[at])]
        assert many.tolist() == [t.value for t, a in zip(one, at) if a]


@given(st.integers(END - 3, END + 3))
def test_an_absorbed_session_retracts_early_before_its_end_and_late_after(watermark):
    expected = Timing.LATE if watermark > END else Timing.EARLY
    assert TIMINGS[absorbed_timing_code(END, watermark)] is expected
    assert TIMING_VALUES[absorbed_timing_code(np.array([END]), watermark)].tolist() == [expected.value]


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=20), st.booleans())
def test_suppression_is_one_rule_for_one_pane_and_many(firings, only_updated):
    """A re-fired unchanged pane is suppressed under only-updated panes; a value that is no result never
    shows."""
    one = [bool(emitted(refired, unchanged, only_updated, result)) for refired, unchanged, result in firings]
    assert one == [result and not (only_updated and refired and unchanged) for refired, unchanged, result in firings]
    refired, unchanged, result = (np.array(column) for column in zip(*firings))
    many = np.broadcast_to(emitted(refired, unchanged, only_updated, result), (len(firings),))
    assert many.tolist() == one


def test_a_join_without_a_pair_is_no_result_on_every_engine():
    join = SidedAccumulation(inner=InnerJoin())  # (what the core folds a join with)
    assert not every_value_a_result(join) and every_value_a_result(Sum())
    assert results(Sum(), np.array([1, 2])) is True
    assert results(join, [[], [("a", "b")]]).tolist() == [False, True]


@pytest.mark.parametrize("value", [2 ** 63, -(2 ** 63) - 1])
def test_an_output_outside_int64_names_its_window_on_every_engine(value):
    window = Window(0, 10)
    with pytest.raises(WindowOverflowError, match="0"):
        check_output(value, "op", "v", "k", window)
    values = np.array([1, value], dtype=object)
    with pytest.raises(WindowOverflowError) as raised:
        check_outputs(values, "op", "v", lambda i: ["a", "b"][i], lambda i: window)
    assert raised.value.key == "b"
    assert check_output(2 ** 63 - 1, "op", "v", "k", window) == 2 ** 63 - 1
