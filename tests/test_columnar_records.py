"""The columnar paths on per-key records give the panes of one whole-group table (panes and sessions)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Mean, Sum
from triggers import TriggerOption
from windowed_operator import CumulativeWindows, SessionWindows, TimeWindows
from windowed_operator.columnar import ColumnarCore, PaneTable, Panes
from windowed_operator.columnar_records import columnar_records, run_columnar_batch
from windowed_operator.columnar_sessions import ColumnarSessions, SessionTable
from windowed_operator.group_state import GroupState

from helpers import MemoryStore, near_boundaries

CASES = {
    "tumbling sum": (TimeWindows(10), Sum(), TriggerOption.default(), 5),
    "hopping mean accumulating": (TimeWindows(10).slide_by(5), Mean(), TriggerOption.default().accumulating_fired_panes(), 7),
    "cumulative count": (CumulativeWindows(20, 5), Count(), TriggerOption.default(), 0),
    "sessions sum": (SessionWindows(7), Sum(), TriggerOption.default(), 5),
    "sessions mean retracting": (SessionWindows(4), Mean(),
                                 TriggerOption.default().accumulating_and_retracting_fired_panes(), 9),
}


def panes_of(out: Panes):
    return sorted(zip(*[np.asarray(c).tolist() for c in (out.keys, out.starts, out.ends, out.values, out.timing,
                                                          out.pane_index, out.is_last, out.is_retraction)]))


batches = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from("abcdef"), near_boundaries(0, 80),
                                                st.integers(1, 9)), max_size=8),
                             st.integers(0, 9)), max_size=10)


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=80, deadline=None)
@given(steps=batches)
def test_per_key_pane_rows_give_the_panes_of_the_whole_table(name, steps):
    window, acc, trigger, lateness = CASES[name]
    if isinstance(window, SessionWindows):
        core, whole = ColumnarSessions(window, acc, trigger, lateness), SessionTable()
    else:
        core, whole = ColumnarCore(window, acc, trigger, lateness), PaneTable()
    records = columnar_records(core)
    store, watermark = MemoryStore(), -3
    for rows, step in [*steps, ([], 10 ** 6)]:
        watermark += step
        keys = np.array([k for k, _, _ in rows], dtype=object)
        ts = np.array([t for _, t, _ in rows], dtype=np.int64)
        values = None if isinstance(acc, Count) else np.array([v for _, _, v in rows], dtype=np.int64)
        expected, got = Panes(), Panes()
        whole = core.process(whole, keys, ts, values, watermark, expected, [], lambda i: None)
        group = GroupState(store, records.codec, {}, "op")
        run_columnar_batch(records, group, keys.tolist(), watermark,
                           lambda table: core.process(table, keys, ts, values, watermark, got, [], lambda i: None))
        group.save(wm=watermark)
        assert panes_of(got) == panes_of(expected)
    assert not store.keys  # every window expired: every key removed
