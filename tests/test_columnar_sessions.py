"""The columnar session path (default trigger, a key group's sessions as arrays) equals the core on
random streams: merges within and across bundles, late elements growing fired sessions,
retractions, expiry, with times and watermarks at and around session ends and expiries."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Max, Mean, Min, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows
from windowed_operator.engine.columnar import Panes
from windowed_operator.engine.columnar_sessions import ColumnarSessions, SessionTable, supports_columnar_sessions
from windowed_operator.panes import TimestampCombiner, WindowOverflowError
from windowed_operator.engine.key_state import KeyState
from windowed_operator.time import MAX_TIMESTAMP

from helpers import (check_next_event_time, check_next_processing_time, clocked, columnar_panes, core_run,
                     element_arrays, near_boundaries, pane_tuple)
from test_columnar_windows import advance, slow_streams, timed_trigger_options, trigger_options
from windowed_operator.engine.build import build_core

ACCS = {"sum": Sum(), "count": Count(), "min": Min(), "max": Max(), "mean": Mean()}
MODES = {"discarding": TriggerOption.default(), "accumulating": TriggerOption.default().accumulating_fired_panes(),
         "retracting": TriggerOption.default().accumulating_and_retracting_fired_panes()}

element = st.tuples(st.sampled_from("abc"), near_boundaries(-5, 90), st.integers(-20, 20))
batch = st.tuples(st.lists(element, max_size=10), near_boundaries(-10, 110), advance)
streams = st.lists(batch, min_size=1, max_size=8)


def columnar_run(op, steps):
    sessions = ColumnarSessions(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    table, panes, dropped = SessionTable(), [], []
    for elements, watermark, now in clocked(steps):
        out = Panes()
        keys, ts, values = element_arrays(elements, reads_values=not isinstance(op.accumulation, Count))
        check_next_event_time(sessions, table, watermark)
        check_next_processing_time(sessions, table, watermark, now)
        table = sessions.process(table, keys, ts, values, watermark, out, dropped, lambda i: elements[i],
                                 processing_time=now)
        panes.append(columnar_panes(out))
    assert len(table) == 0  # the end of input expired every session
    return panes, Counter(d.reason for d in dropped)


@settings(max_examples=500, deadline=None)
@given(steps=streams, acc=st.sampled_from(sorted(ACCS)), mode=st.sampled_from(sorted(MODES)),
       gap=st.sampled_from([1, 5, 10, 17]), lateness=st.sampled_from([0, 7, 30]))
def test_columnar_sessions_equal_the_core_batch_for_batch(steps, acc, mode, gap, lateness):
    op = KeyedWindowedOperator(SessionWindows(gap), ACCS[acc], trigger=MODES[mode], allowed_lateness=lateness)
    if not supports_columnar_sessions(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return  # discarding min/max keeps the object path
    assert columnar_run(op, steps) == core_run(op, steps)


@settings(max_examples=800, deadline=None)
@given(steps=streams, acc=st.sampled_from(sorted(ACCS)), trigger=trigger_options(),
       gap=st.sampled_from([1, 5, 10, 17]), lateness=st.sampled_from([0, 7, 30]))
def test_columnar_sessions_with_early_and_late_firings_equal_the_core(steps, acc, trigger, gap, lateness):
    """Early and late firings every N elements or D ms of processing time on merging sessions:
    counts summed and the earliest due time kept over merged sessions of one phase
    (``AfterWatermark.on_merge``), sessions whose trigger finished merging with nothing and dropping
    their elements as closed_window, only-updated panes."""
    op = KeyedWindowedOperator(SessionWindows(gap), ACCS[acc], trigger=trigger, allowed_lateness=lateness)
    if not supports_columnar_sessions(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return
    assert columnar_run(op, steps) == core_run(op, steps)


@settings(max_examples=400, deadline=None)
@given(steps=slow_streams, acc=st.sampled_from(["sum", "count", "mean"]), trigger=timed_trigger_options(),
       gap=st.sampled_from([1, 5, 10, 17]), lateness=st.sampled_from([0, 7, 30]))
def test_session_firings_by_processing_time_equal_the_core(steps, acc, trigger, gap, lateness):
    """Merged sessions keep the earliest due firing of the sessions of their phase."""
    op = KeyedWindowedOperator(SessionWindows(gap), ACCS[acc], trigger=trigger, allowed_lateness=lateness)
    if not supports_columnar_sessions(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return
    assert columnar_run(op, steps) == core_run(op, steps)


gap_element = st.tuples(st.sampled_from("abc"), near_boundaries(-5, 90), st.integers(-20, 20),
                        st.sampled_from([1, 2, 5, 10, 17]))
gap_streams = st.lists(st.tuples(st.lists(gap_element, max_size=10), near_boundaries(-10, 110)), min_size=1,
                       max_size=8)


@settings(max_examples=300, deadline=None)
@given(steps=gap_streams, acc=st.sampled_from(["sum", "count", "mean"]), mode=st.sampled_from(sorted(MODES)),
       lateness=st.sampled_from([0, 7, 30]))
def test_columnar_sessions_with_a_gap_per_element_equal_the_core(steps, acc, mode, lateness):
    """Each element's gap read from a column (``process(gaps=)``) against the core fed the same
    proto-sessions (what the reader makes of ``SessionWindows(gap="g")``)."""
    from windowed_operator.windows import Window

    op = KeyedWindowedOperator(SessionWindows(gap="g"), ACCS[acc], trigger=MODES[mode], allowed_lateness=lateness)
    assert supports_columnar_sessions(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW)
    core = build_core(op)
    states: dict = {}
    sessions = ColumnarSessions(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    table, watermark, dropped_core, dropped_columnar = SessionTable(), -100, 0, []
    for elements, advance in [*steps, ([], None)]:
        watermark = MAX_TIMESTAMP if advance is None else max(watermark, advance)
        by_key: dict = {}
        for key, ts, value, gap in elements:
            by_key.setdefault(key, []).append((ts, value, Window(ts, ts + gap)))
        expected = Counter()
        for key in [*by_key, *[k for k in states if k not in by_key]]:
            emission = core.process_batch(key, states.setdefault(key, KeyState()),
                                          sorted(by_key.get(key, []), key=lambda e: e[0]), watermark, 0)
            dropped_core += len(emission.dropped)
            expected.update(pane_tuple(p.key, p.window_start, p.window_end, p.value, p.timing.value, p.index,
                                       p.is_first, p.is_last, p.is_retraction) for p in emission.outputs)
        out = Panes()
        values = None if acc == "count" else np.array([v for _, _, v, _ in elements], dtype=np.int64)
        table = sessions.process(table, np.array([k for k, _, _, _ in elements], dtype=object),
                                 np.array([t for _, t, _, _ in elements], dtype=np.int64), values, watermark, out,
                                 dropped_columnar, lambda i: elements[i],
                                 gaps=np.array([g for _, _, _, g in elements], dtype=np.int64), processing_time=0)
        assert columnar_panes(out) == expected
    assert len(dropped_columnar) == dropped_core and len(table) == 0


def test_a_late_element_regrows_a_fired_session_and_retracts_it():
    """A session fires ON_TIME; a late element within allowed lateness extends it: the old pane is
    retracted, the grown session fires LATE with everything, then expires as the last pane."""
    op = KeyedWindowedOperator(SessionWindows(10), Sum(), allowed_lateness=50,
                               trigger=TriggerOption.default().accumulating_and_retracting_fired_panes())
    steps = [([("a", 0, 1), ("a", 5, 2)], 3), ([], 15), ([("a", 12, 4)], 30)]
    expected, _ = core_run(op, steps)
    got, _ = columnar_run(op, steps)
    assert got == expected
    assert got[1] == Counter([("a", 0, 15, 3, "ON_TIME", 0, True, False, False)])
    assert got[2] == Counter([("a", 0, 15, -3, "LATE", 1, False, True, True),
                              ("a", 0, 22, 7, "LATE", 0, True, False, False)])


def test_supports_only_what_it_computes():
    default = TriggerOption.default()
    assert supports_columnar_sessions(SessionWindows(5), Sum(), default, TimestampCombiner.END_OF_WINDOW)
    assert not supports_columnar_sessions(SessionWindows(5), Min(), default, TimestampCombiner.END_OF_WINDOW)
    assert supports_columnar_sessions(SessionWindows(5), Min(), default.accumulating_fired_panes(),
                                      TimestampCombiner.END_OF_WINDOW)
    assert not supports_columnar_sessions(SessionWindows(5), Sum(), default, TimestampCombiner.EARLIEST)
    early = TriggerOption.at_watermark().with_early_firings_at_every(count=2)
    assert supports_columnar_sessions(SessionWindows(5), Sum(), early, TimestampCombiner.END_OF_WINDOW)
    assert not supports_columnar_sessions(SessionWindows(5), Mean(), early, TimestampCombiner.END_OF_WINDOW)
    assert supports_columnar_sessions(SessionWindows(5), Mean(), early.accumulating_fired_panes(),
                                      TimestampCombiner.END_OF_WINDOW)
    by_time = TriggerOption.at_watermark().with_early_firings_at_every(duration=1_000)
    assert supports_columnar_sessions(SessionWindows(5), Sum(), by_time, TimestampCombiner.END_OF_WINDOW)
    from triggers import AfterCount, AfterWatermark

    custom = TriggerOption.of(AfterWatermark(early=AfterCount(2)))
    assert not supports_columnar_sessions(SessionWindows(5), Sum(), custom, TimestampCombiner.END_OF_WINDOW)
    assert supports_columnar_sessions(SessionWindows(gap="g"), Sum(), default, TimestampCombiner.END_OF_WINDOW)
    assert not supports_columnar_sessions(SessionWindows(gap=len), Sum(), default, TimestampCombiner.END_OF_WINDOW)


def test_an_overflowing_session_names_its_key_and_bounds():
    op = KeyedWindowedOperator(SessionWindows(10), Sum())
    sessions = ColumnarSessions(op.window, op.accumulation, op.trigger, 0, label="op", column="n")
    table = sessions.process(SessionTable(), np.array(["k", "k"], dtype=object), np.array([1, 2]),
                             np.array([2 ** 62, 2 ** 62]), 0, Panes(), [], lambda i: None, processing_time=0)
    with pytest.raises(WindowOverflowError, match="k"):
        sessions.on_watermark(table, 100, Panes())
