"""Sessions fed chains (``session_chains``: a bundle's elements folded per key into runs whose
proto-sessions overlap one after the other) equal the core fed the same elements one by one: the
panes batch by batch and the elements dropped, with times and watermarks at and around session ends
and expiries, so that chains reaching back past the allowed lateness are split."""
from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Max, Mean, Min, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows
from windowed_operator.engine.columnar import Panes, columnar_form
from windowed_operator.engine.columnar_sessions import ColumnarSessions, SessionTable, supports_columnar_sessions
from windowed_operator.panes import TimestampCombiner
from windowed_operator.engine.range_ops import factorize
from windowed_operator.engine.session_chains import chain_aggregates, chain_runs

from helpers import clocked, columnar_panes, core_run, element_arrays, near_boundaries
from test_columnar_windows import advance, trigger_options

ACCS = {"sum": Sum(), "count": Count(), "min": Min(), "max": Max(), "mean": Mean()}

# two keys and up to 14 elements a batch: several elements of a key within a gap make chains
element = st.tuples(st.sampled_from("ab"), near_boundaries(-5, 70), st.integers(-20, 20))
streams = st.lists(st.tuples(st.lists(element, max_size=14), near_boundaries(-10, 90), advance), min_size=1,
                   max_size=8)


def chains_of(elements, gap, form, reads_values):
    """A batch's elements as ``process_chains`` takes them: keys, first and last times, counts,
    partial aggregates, and each chain's elements (times and values sorted by time)."""
    keys, ts, values = element_arrays(elements, reads_values)
    codes, uniques = factorize(keys)
    runs = chain_runs(codes, ts, gap)
    ends = runs.last
    sorted_ts = ts[runs.order]
    sorted_values = values[runs.order] if values is not None else None
    aggregates = chain_aggregates(runs, values, form.partial_aggregates) if values is not None else []

    def elements_of(i):
        lo, hi = runs.first[i], ends[i] + 1
        return sorted_ts[lo:hi], sorted_values[lo:hi] if sorted_values is not None else None

    return (uniques[codes[runs.order][runs.first]], sorted_ts[runs.first], sorted_ts[ends], runs.counts, aggregates,
            elements_of)


def chains_run(op, steps):
    sessions = ColumnarSessions(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    form = columnar_form(op.accumulation)
    reads_values = not isinstance(op.accumulation, Count)
    table, panes, dropped = SessionTable(), [], 0
    for elements, watermark, now in clocked(steps):
        out = Panes()
        keys, firsts, lasts, counts, aggregates, elements_of = chains_of(elements, int(op.window.min_gap), form,
                                                                         reads_values)
        table, n = sessions.process_chains(table, keys, firsts, lasts, counts, aggregates, watermark, out,
                                           elements_of, processing_time=now)
        dropped += n
        panes.append(columnar_panes(out))
    assert len(table) == 0  # the end of input expired every session
    return panes, dropped


@settings(max_examples=800, deadline=None)
@given(steps=streams, acc=st.sampled_from(sorted(ACCS)), trigger=trigger_options(),
       gap=st.sampled_from([1, 5, 10, 17]), lateness=st.sampled_from([0, 7, 30]))
def test_chains_equal_the_core_fed_their_elements(steps, acc, trigger, gap, lateness):
    op = KeyedWindowedOperator(SessionWindows(gap), ACCS[acc], trigger=trigger, allowed_lateness=lateness)
    if not supports_columnar_sessions(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return
    expected_panes, expected_drops = core_run(op, steps)
    assert chains_run(op, steps) == (expected_panes, sum(expected_drops.values()))


def test_a_chain_reaching_back_past_the_lateness_drops_its_expired_elements_only():
    """Elements at 0, 4, 8 and 12 are one chain (gap 5); at watermark 9 with no lateness the first
    two have expired ([0, 5) and [4, 9) end before it) and are dropped; 8 and 12 make the session
    [8, 17)."""
    op = KeyedWindowedOperator(SessionWindows(5), Sum(), allowed_lateness=0)
    steps = [([("a", 0, 1), ("a", 4, 2), ("a", 8, 4), ("a", 12, 8)], 9)]
    got = chains_run(op, steps)
    assert got == (core_run(op, steps)[0], 2)
    assert got[0][1] == Counter([("a", 8, 17, 12, "ON_TIME", 0, True, True, False)])


def test_a_chain_of_several_times_is_a_merge_and_one_of_a_single_time_is_not():
    """A new session whose end the watermark has already reached, under ``AfterWatermark`` alone:
    made of proto-sessions with one set of bounds it is a new session, which fires in the same batch;
    made of several it is a merge, which ``AfterWatermark.on_merge`` leaves to fire at the next
    watermark step (here the end of input)."""
    op = KeyedWindowedOperator(SessionWindows(5), Count(), trigger=TriggerOption.at_watermark(), allowed_lateness=7)
    same = [([("b", 0, 0), ("b", 0, 0)], 6)]
    assert chains_run(op, same) == (core_run(op, same)[0], 0)
    assert chains_run(op, same)[0] == [Counter([("b", 0, 5, 2, "LATE", 0, True, True, False)]), Counter()]
    several = [([("b", 0, 0), ("b", 1, 0)], 6)]
    assert chains_run(op, several) == (core_run(op, several)[0], 0)
    assert chains_run(op, several)[0] == [Counter(), Counter([("b", 0, 6, 2, "LATE", 0, True, True, False)])]


def test_chain_runs_break_where_proto_sessions_only_touch():
    codes = np.array([0, 0, 0, 1, 0], dtype=np.int64)
    ts = np.array([0, 9, 4, 5, 14], dtype=np.int64)
    runs = chain_runs(codes, ts, 5)
    # key 0: 0, 4 (4 < 0 + 5), then 9 (9 - 4 = 5: touching, a new chain), 14 (touching again); key 1: 5
    assert ts[runs.order].tolist() == [0, 4, 9, 14, 5]
    assert runs.first.tolist() == [0, 2, 3, 4]
    assert runs.counts.tolist() == [2, 1, 1, 1]
