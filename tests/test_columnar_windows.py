"""The columnar window path (count triggers on windows assigned by timestamp, a key group's windows as
arrays) equals the core on random streams: early and late firings every N elements, finished
triggers dropping elements as closed_window, the three accumulation modes, only-updated panes,
garbage collection at expiry, with times and watermarks at and around window ends and expiries;
and fed partials folded per (key, pane), it equals itself fed their elements."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Max, Mean, Min, Sum
from triggers import TriggerOption
from triggers.option import AccumulationMode
from windowed_operator import CumulativeWindows, GlobalWindow, KeyedWindowedOperator, TimeWindows
from windowed_operator.engine.columnar import Panes
from windowed_operator.engine.columnar_triggers import Every, RowTrigger, row_trigger
from windowed_operator.engine.columnar_windows import ColumnarWindows, WindowTable, supports_columnar_windows
from windowed_operator.panes import DropReason, TimestampCombiner
from windowed_operator.engine.key_state import KeyState
from windowed_operator.time import MAX_TIMESTAMP

from helpers import (check_next_event_time, check_next_processing_time, clocked, columnar_panes, core_run,
                     element_arrays, near_boundaries)

ACCS = {"sum": Sum(), "count": Count(), "min": Min(), "max": Max(), "mean": Mean()}
WINDOWS = {"tumbling 10": TimeWindows(10), "tumbling 5+2": TimeWindows(5, offset=2),
           "hopping 10/5": TimeWindows(10).slide_by(5), "hopping 9/6": TimeWindows(9).slide_by(6),
           "cumulative 10/5": CumulativeWindows(10, 5), "global": GlobalWindow()}

element = st.tuples(st.sampled_from("abc"), near_boundaries(-5, 90), st.integers(-3, 3))
#: How far processing time moves on before a batch: often not at all, often around the delays below.
advance = st.sampled_from([0, 0, 1, 4, 5, 6, 11, 12, 13, 30])
batch = st.tuples(st.lists(element, max_size=10), near_boundaries(-10, 110), advance)
streams = st.lists(batch, min_size=1, max_size=8)
#: Firings every N elements, or D ms of processing time after the first element since the last pane.
FIRINGS = [{"count": 1}, {"count": 2}, {"count": 3}, {"duration": 5}, {"duration": 12}]


@st.composite
def trigger_options(draw):
    kind = draw(st.sampled_from(["default", "at_watermark"]))
    option = TriggerOption.default() if kind == "default" else TriggerOption.at_watermark()
    if kind == "at_watermark":
        early = draw(st.sampled_from([None, *FIRINGS]))
        late = draw(st.sampled_from([None, *FIRINGS[:2], *FIRINGS[3:]]))
        if early is not None:
            option = option.with_early_firings_at_every(**early)
        if late is not None:
            option = option.with_late_firings_at_every(**late)
    mode = draw(st.sampled_from(["discarding", "accumulating", "retracting"]))
    if mode == "accumulating":
        option = option.accumulating_fired_panes()
    elif mode == "retracting":
        option = option.accumulating_and_retracting_fired_panes()
    if draw(st.booleans()):
        option = option.fire_only_updated_panes()
    return option


def columnar_run(op, steps, partials=False):
    windows = ColumnarWindows(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    table, panes, dropped = WindowTable(), [], []
    n_dropped = 0
    for elements, watermark, now in clocked(steps):
        out = Panes()
        keys, ts, values = element_arrays(elements, reads_values=not isinstance(op.accumulation, Count))
        check_next_event_time(windows, table, watermark)
        check_next_processing_time(windows, table, watermark, now)
        if partials:
            table, lost = windows.process_partials(table, *_fold_per_pane(op, keys, ts, values), watermark, out,
                                                   processing_time=now)
            n_dropped += lost
        else:
            table = windows.process(table, keys, ts, values, watermark, out, dropped, lambda i: elements[i],
                                    processing_time=now)
        finished = table.closed
        assert not table.pending[finished].any() and not any(c[finished].any() for c in table.acc), \
            "a window whose trigger finished holds nothing"
        panes.append(columnar_panes(out))
    assert len(table) == 0  # the end of input expired every window
    return panes, (n_dropped if partials else Counter(d.reason for d in dropped))


def _fold_per_pane(op, keys, ts, values):
    """What the scan stage's pre-aggregation sends: one row per (key, pane), repeated per key split in two."""
    layout = op.window.pane_layout()
    panes = layout.pane_start(ts) if len(ts) else ts
    rows: dict = {}
    for i, (key, pane) in enumerate(zip(keys.tolist(), panes.tolist())):
        part = rows.setdefault((key, pane, i % 2), [0, []])
        part[0] += 1
        part[1].append(values[i] if values is not None else 0)
    items = list(rows.items())
    keys_out = np.array([k for (k, _, _), _ in items], dtype=object)
    panes_out = np.array([p for (_, p, _), _ in items], dtype=np.int64)
    counts = np.array([c for _, (c, _) in items], dtype=np.int64)
    kind = {Sum: "sum", Count: None, Min: "min", Max: "max", Mean: "sum"}[type(op.accumulation)]
    fold = {"sum": sum, "min": min, "max": max}
    aggregates = [np.array([fold[kind](v) for _, (_, v) in items], dtype=np.int64)] if kind else []
    return keys_out, panes_out, counts, aggregates


@settings(max_examples=600, deadline=None)
@given(steps=streams, acc=st.sampled_from(sorted(ACCS)), window=st.sampled_from(sorted(WINDOWS)),
       trigger=trigger_options(), lateness=st.sampled_from([0, 7, 30]))
def test_columnar_windows_equal_the_core_batch_for_batch(steps, acc, window, trigger, lateness):
    op = KeyedWindowedOperator(WINDOWS[window], ACCS[acc], trigger=trigger, allowed_lateness=lateness)
    if not supports_columnar_windows(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return  # discarding min/max, and discarding mean with early firings, keep the object path
    assert columnar_run(op, steps) == core_run(op, steps)


def _slow(steps):
    """Steps whose second item is how far the watermark moves on, as steps with the watermark itself."""
    watermark, out = -10, []
    for elements, step, moved in steps:
        watermark += step
        out.append((elements, watermark, moved))
    return out


#: Streams where the watermark creeps (0-8 ms a batch), so that windows stay open across many
#: batches and processing time, not the watermark, decides most panes.
slow_streams = st.lists(st.tuples(st.lists(element, max_size=6), st.integers(0, 8), advance), min_size=1,
                        max_size=12).map(_slow)


@st.composite
def timed_trigger_options(draw):
    """``AfterWatermark`` with at least one firing by processing time."""
    early = draw(st.sampled_from([None, {"duration": 5}, {"duration": 12}, {"count": 2}]))
    late = draw(st.sampled_from([None, {"duration": 5}, {"duration": 1}, {"count": 1}]))
    if not any(f is not None and "duration" in f for f in (early, late)):
        early = {"duration": 5}
    option = TriggerOption.at_watermark()
    if early is not None:
        option = option.with_early_firings_at_every(**early)
    if late is not None:
        option = option.with_late_firings_at_every(**late)
    option = option._with(mode=draw(st.sampled_from(list(AccumulationMode))))
    return option.fire_only_updated_panes() if draw(st.booleans()) else option


@settings(max_examples=400, deadline=None)
@given(steps=slow_streams, acc=st.sampled_from(["sum", "count", "mean"]), window=st.sampled_from(sorted(WINDOWS)),
       trigger=timed_trigger_options(), lateness=st.sampled_from([0, 7, 30]))
def test_firings_by_processing_time_equal_the_core(steps, acc, window, trigger, lateness):
    """A firing is due ``delay`` after the first element since the phase's last pane, later
    elements leaving it; a pane (also the ON_TIME one) clears it; due firings run before the
    batch's elements, after the watermark's."""
    op = KeyedWindowedOperator(WINDOWS[window], ACCS[acc], trigger=trigger, allowed_lateness=lateness)
    if not supports_columnar_windows(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return
    assert columnar_run(op, steps) == core_run(op, steps)


@settings(max_examples=300, deadline=None)
@given(steps=streams, acc=st.sampled_from(["sum", "count", "mean", "max"]),
       window=st.sampled_from(["tumbling 10", "hopping 10/5", "cumulative 10/5"]), trigger=trigger_options(),
       lateness=st.sampled_from([0, 7, 30]))
def test_partials_folded_per_pane_give_the_panes_of_their_elements(steps, acc, window, trigger, lateness):
    """Pre-aggregated rows (one per key and pane, counting their elements) fire the same panes; the
    elements they drop are the elements' drops."""
    op = KeyedWindowedOperator(WINDOWS[window], ACCS[acc], trigger=trigger, allowed_lateness=lateness)
    if not supports_columnar_windows(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return
    panes, dropped = columnar_run(op, steps)
    folded, lost = columnar_run(op, steps, partials=True)
    assert folded == panes and lost == sum(dropped.values())


def test_watermark_triggers_are_recognized_and_custom_ones_are_not():
    assert row_trigger(TriggerOption.default()) == RowTrigger(early=None, late=Every(count=1))
    early = TriggerOption.at_watermark().with_early_firings_at_every(count=100)
    assert row_trigger(early) == RowTrigger(early=Every(count=100), late=None)
    timed = TriggerOption.at_watermark().with_early_firings_at_every("1s").with_late_firings_at_every(count=2)
    assert row_trigger(timed) == RowTrigger(early=Every(delay=1_000), late=Every(count=2))
    assert row_trigger(timed).uses_processing_time and not row_trigger(early).uses_processing_time
    from triggers import AfterCount, AfterWatermark, Repeatedly

    assert row_trigger(TriggerOption.of(Repeatedly(AfterCount(2)))) is None
    assert row_trigger(TriggerOption.of(AfterWatermark(early=AfterCount(2)))) is None


def test_a_finished_window_drops_its_late_elements_as_closed_until_it_expires():
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), allowed_lateness=20,
                               trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=2))
    steps = [([("a", 1, 1), ("a", 2, 2), ("a", 3, 3)], 0), ([("a", 4, 4)], 10), ([("a", 5, 5)], 29),
             ([("a", 6, 6)], 30)]
    panes, dropped = columnar_run(op, steps)
    assert (panes, dropped) == core_run(op, steps)
    assert dropped == Counter({DropReason.CLOSED_WINDOW: 2, DropReason.EXPIRED: 1})
    assert [sorted(p) for p in panes[:2]] == [[("a", 0, 10, 6, "EARLY", 0, True, False, False)],
                                              [("a", 0, 10, 0, "ON_TIME", 1, False, True, False)]]  # (discarding)


def test_an_integer_overflow_names_the_window():
    from windowed_operator.panes import WindowOverflowError

    op = KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=TriggerOption.at_watermark()
                               .with_early_firings_at_every(count=2).accumulating_fired_panes())
    with pytest.raises(WindowOverflowError, match=r"\[0, 10\)"):
        columnar_run(op, [([("a", 1, 2 ** 62), ("a", 2, 2 ** 62)], 0)])


def test_an_accumulator_past_int64_read_back_from_its_record_still_raises_at_firing():
    """A sum past int64 is held exactly (Python integers) until the window fires; stored as a record
    and read back (where numpy would make it a uint64) it still raises, naming its window."""
    import json

    from windowed_operator.state.records import WindowRecords
    from windowed_operator.panes import WindowOverflowError

    op = KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=TriggerOption.at_watermark()
                               .with_early_firings_at_every(count=100))
    windows = ColumnarWindows(op.window, op.accumulation, op.trigger, 0)
    records = WindowRecords(windows)
    table = windows.process(WindowTable(), np.array(["a"] * 3, dtype=object), np.array([1, 2, 3]),
                            np.array([2 ** 62] * 3), 0, Panes(), [], lambda i: None, processing_time=0)
    data = json.loads(json.dumps(records.codec.to_data(records.split(table, ["a"])["a"])))
    table = records.build(["a"], [records.codec.from_data(data)], 0)
    with pytest.raises(WindowOverflowError, match=r"\[0, 10\)"):
        windows.on_watermark(table, 10, Panes())
