"""The columnar path (default trigger, whole key groups as arrays) equals the core on random streams."""
from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Max, Mean, Min, Sum
from triggers import TriggerOption
from windowed_operator import CumulativeWindows, GlobalWindow, KeyedWindowedOperator, TimeWindows
from windowed_operator.engine.columnar import ColumnarCore, PaneTable, Panes, supports_columnar
from windowed_operator.panes import TimestampCombiner
from windowed_operator.engine.key_state import KeyState
from windowed_operator.time import MAX_TIMESTAMP

from helpers import check_next_event_time, near_boundaries
from windowed_operator.engine.build import build_core

WINDOWS = {"tumbling": TimeWindows(10), "hopping": TimeWindows(10).slide_by(5),
           "uneven": TimeWindows(9, offset=2).slide_by(4), "cumulative": CumulativeWindows(20, 5),
           "global": GlobalWindow()}
ACCS = {"sum": Sum(), "count": Count(), "min": Min(), "max": Max(), "mean": Mean()}
MODES = {"discarding": TriggerOption.default(), "accumulating": TriggerOption.default().accumulating_fired_panes()}

element = st.tuples(st.sampled_from("abc"), near_boundaries(-5, 90), st.integers(-20, 20))
# watermarks (and timestamps) often land at, just before or just after window ends and expiries
batch = st.tuples(st.lists(element, max_size=10), near_boundaries(-10, 100))
streams = st.lists(batch, min_size=1, max_size=8)


def core_run(op, steps):
    core = build_core(op)
    states: dict = {}
    watermark, panes, dropped = -100, Counter(), 0
    for elements, advance in [*steps, ([], None)]:
        watermark = MAX_TIMESTAMP if advance is None else max(watermark, advance)
        by_key: dict = {}
        for key, ts, value in elements:
            by_key.setdefault(key, []).append((ts, value, None))
        for key in [*by_key, *[k for k in states if k not in by_key]]:
            state = states.setdefault(key, KeyState())
            emission = core.process_batch(key, state, by_key.get(key, []), watermark, 0)
            dropped += len(emission.dropped)
            panes.update((p.key, p.window_start, p.window_end, p.value, p.timing.value, p.index, p.is_first, p.is_last)
                         for p in emission.outputs)
    return panes, dropped


def preaggregate(form, layout, elements):
    """What the Spark runner's pre-aggregation sends: per chunk of rows, one partial per (key, pane)
    (two chunks, so a (key, pane) can come twice), folded here by brute force."""
    fold = {"sum": sum, "min": min, "max": max}
    rows = []
    for chunk in (elements[::2], elements[1::2]):
        groups: dict = {}
        for key, ts, value in chunk:
            pane = int(layout.pane_start(np.array([ts], dtype=np.int64))[0])
            groups.setdefault((key, pane), []).append(value)
        for (key, pane), values in groups.items():
            rows.append((key, pane, len(values), [fold[name](values) for name in form.partial_aggregates]))
    keys = np.array([r[0] for r in rows], dtype=object)
    panes = np.array([r[1] for r in rows], dtype=np.int64)
    counts = np.array([r[2] for r in rows], dtype=np.int64)
    aggregates = [np.array([r[3][i] for r in rows], dtype=np.int64) for i in range(len(form.partial_aggregates))]
    return keys, panes, counts, aggregates


def columnar_run(op, steps, partials=False):
    columnar = ColumnarCore(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    table, watermark, panes, dropped = PaneTable(), -100, Counter(), []
    for elements, advance in [*steps, ([], None)]:
        watermark = MAX_TIMESTAMP if advance is None else max(watermark, advance)
        out = Panes()
        keys = np.array([k for k, _, _ in elements], dtype=object)
        ts = np.array([t for _, t, _ in elements], dtype=np.int64)
        values = np.array([v for _, _, v in elements], dtype=np.int64)
        check_next_event_time(columnar, table, watermark)
        if partials:
            table, n = columnar.process_partials(table, *preaggregate(columnar.form, columnar.layout, elements),
                                                 watermark, out, processing_time=0)
            dropped += [None] * n
        else:
            table = columnar.process(table, keys, ts, values, watermark, out, dropped, lambda i: elements[i],
                                    processing_time=0)
        panes.update(zip(out.keys, out.starts, out.ends, out.values, out.timing, out.pane_index, out.is_first,
                         out.is_last))
    assert len(table) == 0
    return panes, len(dropped)


@settings(max_examples=400, deadline=None)
@given(steps=streams, window=st.sampled_from(sorted(WINDOWS)), acc=st.sampled_from(sorted(ACCS)),
       mode=st.sampled_from(sorted(MODES)), lateness=st.sampled_from([0, 7, 30]))
def test_columnar_path_equals_the_core(steps, window, acc, mode, lateness):
    op = KeyedWindowedOperator(WINDOWS[window], ACCS[acc], trigger=MODES[mode], allowed_lateness=lateness)
    if not supports_columnar(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return  # discarding min/max keeps the object path
    expected = core_run(op, steps)
    assert columnar_run(op, steps) == expected
    assert columnar_run(op, steps, partials=True) == expected  # pre-aggregated upstream per (key, pane)
