"""The columnar paths on per-key records give the panes of one whole-group table (panes, sessions, windows)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Mean, Sum
from triggers import TriggerOption
from windowed_operator import CumulativeWindows, SessionWindows, TimeWindows
from windowed_operator.engine.columnar import ColumnarCore, PaneTable, Panes
from windowed_operator.state.group_batch import StoreBatch, TableEngine
from windowed_operator.state.records import KeyRecords, columnar_records
from windowed_operator.engine.columnar_triggers import RowTable
from windowed_operator.state.group_state import GroupState

from helpers import table_engine_of, MemoryStore, near_boundaries

TIMED = TriggerOption.at_watermark().with_early_firings_at_every(duration=5)
CASES = {
    "tumbling sum": (TimeWindows(10), Sum(), TriggerOption.default(), 5),
    "hopping mean accumulating": (TimeWindows(10).slide_by(5), Mean(), TriggerOption.default().accumulating_fired_panes(), 7),
    "cumulative count": (CumulativeWindows(20, 5), Count(), TriggerOption.default(), 0),
    "sessions sum": (SessionWindows(7), Sum(), TriggerOption.default(), 5),
    "sessions mean retracting": (SessionWindows(4), Mean(),
                                 TriggerOption.default().accumulating_and_retracting_fired_panes(), 9),
    "tumbling sum, early every 5 ms": (TimeWindows(10), Sum(), TIMED, 5),
    "hopping count, late every 4 ms, retracting": (
        TimeWindows(10).slide_by(5), Count(),
        TriggerOption.at_watermark().with_late_firings_at_every(duration=4).accumulating_and_retracting_fired_panes(), 20),
    "sessions sum, early every 5 ms, late every 2": (SessionWindows(6), Sum(),
                                                      TIMED.with_late_firings_at_every(count=2), 15),
}


def panes_of(out: Panes):
    return sorted(zip(*[np.asarray(c).tolist() for c in (out.keys, out.starts, out.ends, out.values, out.timing,
                                                          out.pane_index, out.is_last, out.is_retraction)]))


batches = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from("abcdef"), near_boundaries(0, 80),
                                                st.integers(1, 9)), max_size=8),
                             st.integers(0, 9), st.sampled_from([0, 1, 3, 5, 6])), max_size=10)


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=80, deadline=None)
@given(steps=batches)
def test_per_key_records_give_the_panes_of_the_whole_table(name, steps):
    """Keys a batch does not touch are loaded when their event-time or processing-time work is due
    (the group's due indexes), and give the panes they would give in one table of every key."""
    window, acc, trigger, lateness = CASES[name]
    engine = table_engine_of(window, acc, trigger, lateness)
    whole = PaneTable() if isinstance(engine, ColumnarCore) else RowTable()
    records = columnar_records(engine)
    store, watermark, now = MemoryStore(), -3, 0
    for rows, step, advance in [*steps, ([], 10 ** 6, 0)]:
        watermark += step
        now += advance
        keys = np.array([k for k, _, _ in rows], dtype=object)
        ts = np.array([t for _, t, _ in rows], dtype=np.int64)
        values = None if isinstance(acc, Count) else np.array([v for _, _, v in rows], dtype=np.int64)
        expected, got = Panes(), Panes()
        whole = engine.process(whole, keys, ts, values, watermark, expected, [], lambda i: None, processing_time=now)
        group = GroupState(store, records.codec, {}, "op")

        def run(table):
            table = engine.on_processing_time(engine.on_watermark(table, watermark, got), now, got)
            return engine.process(table, keys, ts, values, watermark, got, [], lambda i: None, processing_time=now)

        KeyRecords(records).run_batch(StoreBatch(group, keys.tolist(), watermark, now), TableEngine(run))
        group.save(wm=watermark)
        assert panes_of(got) == panes_of(expected)
    assert not store.keys  # every window expired: every key removed


def test_a_stored_column_of_sequences_keeps_one_value_per_row():
    """Lists or tuples in a stored column stay one object a row: numpy alone makes equal-length ones
    a second dimension and refuses ragged ones."""
    from windowed_operator.state.records import _column, _joined

    for values in ([[1, 2], [3, 4]], [(1, "x"), (3, "y")], [[1, 2], [3]], [[], [1]]):
        column = _column(values)
        assert column.shape == (len(values),) and column.dtype == object and column.tolist() == values
    assert _column([1, 2]).dtype == np.int64 and _column([1.5, 2.0]).dtype == np.float64
    assert _column([2 ** 64, 1]).dtype == object and _column([1.0, 2]).dtype == object
    joined = _joined([_column([[1, 2]]), _column([3, 4])])
    assert joined.tolist() == [[1, 2], 3, 4] and joined.shape == (3,)
