"""State version 6 kept sessions, and windows assigned by timestamp under count or processing-time
firings or in retracting mode, as the object path's records; they now run on the columnar
session and window paths, whose records are read from the old ones key by key.  A stream run first
on the object path's records and then, on the same stored records, on a columnar path gives the
panes of one uninterrupted run."""
from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Mean, Sum
from triggers import TriggerOption
from windowed_operator import CumulativeWindows, KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.engine.columnar import Panes
from windowed_operator.state.group_batch import StoreBatch, TableEngine
from windowed_operator.state.records import KeyRecords, columnar_records
from windowed_operator.engine.columnar_windows import ColumnarWindows, supports_columnar_windows
from windowed_operator.panes import TimestampCombiner
from windowed_operator.state.fingerprint import restart_problems
from windowed_operator.state.group_batch import next_due, run_group_batch
from windowed_operator.state.group_state import GroupState
from windowed_operator.state.codec import KeyStateCodec
from windowed_operator.time import MAX_TIMESTAMP

from helpers import table_engine_of, MemoryStore, near_boundaries
from windowed_operator.engine.build import build_core

ACCS = {"sum": Sum(), "count": Count(), "mean": Mean()}
MODES = {"discarding": TriggerOption.default(), "accumulating": TriggerOption.default().accumulating_fired_panes(),
         "retracting": TriggerOption.default().accumulating_and_retracting_fired_panes()}
element = st.tuples(st.sampled_from("abcd"), near_boundaries(0, 80), st.integers(1, 9))
steps_strategy = st.lists(st.tuples(st.lists(element, max_size=8), near_boundaries(0, 100)), min_size=2, max_size=8)


def pane(key, start, end, value, timing, index, is_last, is_retraction):
    return key, int(start), int(end), round(float(value), 9), timing, int(index), bool(is_last), bool(is_retraction)


def object_path_batch(core, store, elements, watermark, now=0):
    group = GroupState(store, KeyStateCodec(), {}, "op")
    by_key: dict = {}
    for key, ts, value in elements:
        by_key.setdefault(key, []).append((ts, value, None))
    work = [(key, lambda k, state, rows=sorted(rows): core.process_batch(k, state, rows, watermark, now))
            for key, rows in by_key.items()]
    emission = run_group_batch(core, group, work, watermark, now)
    group.commit(next_due(core))
    group.save(wm=watermark)
    return Counter(pane(p.key, p.window_start, p.window_end, p.value, p.timing.value, p.index, p.is_last,
                        p.is_retraction) for p in emission.outputs)


def columnar_batch(engine, records, store, elements, watermark, count, now=0):
    group = GroupState(store, records.codec, {}, "op")
    keys = np.array([k for k, _, _ in elements], dtype=object)
    ts = np.array([t for _, t, _ in elements], dtype=np.int64)
    values = None if count else np.array([v for _, _, v in elements], dtype=np.int64)
    out = Panes()
    KeyRecords(records).run_batch(StoreBatch(group, keys.tolist(), watermark, now), TableEngine(
        lambda table: engine.process(table, keys, ts, values, watermark, out, [], lambda i: None, processing_time=now)))
    group.save(wm=watermark)
    return Counter(pane(*row) for row in zip(out.keys, out.starts, out.ends, out.values, out.timing,
                                             out.pane_index, out.is_last, out.is_retraction))


@settings(max_examples=150, deadline=None)
@given(steps=steps_strategy, split=st.integers(1, 7), acc=st.sampled_from(sorted(ACCS)),
       mode=st.sampled_from(sorted(MODES)), lateness=st.sampled_from([0, 9, 40]))
def test_object_path_records_continue_on_the_columnar_path(steps, split, acc, mode, lateness):
    op = KeyedWindowedOperator(SessionWindows(6), ACCS[acc], trigger=MODES[mode], allowed_lateness=lateness)
    _continue_across_the_switch(op, steps, split, acc == "count")


WINDOWS = {"tumbling 10": TimeWindows(10), "hopping 10/5": TimeWindows(10).slide_by(5),
           "cumulative 10/5": CumulativeWindows(10, 5)}
COUNT_TRIGGERS = {
    "early 2": TriggerOption.at_watermark().with_early_firings_at_every(count=2),
    "early 1 late 2": TriggerOption.at_watermark().with_early_firings_at_every(count=1).with_late_firings_at_every(
        count=2),
    "late 1": TriggerOption.at_watermark().with_late_firings_at_every(count=1), "default": TriggerOption.default(),
    "early 5 ms late 3 ms": TriggerOption.at_watermark().with_early_firings_at_every(duration=5)
    .with_late_firings_at_every(duration=3),
    "early 5 ms late 1": TriggerOption.at_watermark().with_early_firings_at_every(duration=5)
    .with_late_firings_at_every(count=1)}
#: Steps with processing time moving on (by 0-6 ms) before each batch.
timed_steps = st.lists(st.tuples(st.lists(element, max_size=8), near_boundaries(0, 100),
                                 st.sampled_from([0, 2, 3, 5, 6])), min_size=2, max_size=8)


@settings(max_examples=200, deadline=None)
@given(steps=timed_steps, split=st.integers(1, 7), acc=st.sampled_from(sorted(ACCS)),
       window=st.sampled_from(sorted(WINDOWS)), trigger=st.sampled_from(sorted(COUNT_TRIGGERS)),
       mode=st.sampled_from(["discarding", "accumulating", "retracting"]), lateness=st.sampled_from([0, 9, 40]))
def test_object_path_records_continue_on_the_columnar_window_path(steps, split, acc, window, trigger, mode,
                                                                  lateness):
    option = COUNT_TRIGGERS[trigger]
    option = {"discarding": option, "accumulating": option.accumulating_fired_panes(),
              "retracting": option.accumulating_and_retracting_fired_panes()}[mode]
    op = KeyedWindowedOperator(WINDOWS[window], ACCS[acc], trigger=option, allowed_lateness=lateness)
    if not supports_columnar_windows(op.window, op.accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return
    engine = table_engine_of(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    if not isinstance(engine, ColumnarWindows):
        return  # the default trigger without retractions has run on the pane table since before version 6
    _continue_across_the_switch(op, steps, split, acc == "count")


@settings(max_examples=150, deadline=None)
@given(steps=timed_steps, split=st.integers(1, 7), acc=st.sampled_from(sorted(ACCS)),
       trigger=st.sampled_from(sorted(COUNT_TRIGGERS)), mode=st.sampled_from(["accumulating", "retracting"]),
       lateness=st.sampled_from([0, 9, 40]))
def test_object_path_session_records_with_early_and_late_firings_continue(steps, split, acc, trigger, mode,
                                                                         lateness):
    """Sessions under count or processing-time firings (the object path's records in version 6)
    continue on the session table: the phase, its count and its due firing read from the trigger's
    state."""
    option = COUNT_TRIGGERS[trigger]
    option = option.accumulating_fired_panes() if mode == "accumulating" else \
        option.accumulating_and_retracting_fired_panes()
    op = KeyedWindowedOperator(SessionWindows(6), ACCS[acc], trigger=option, allowed_lateness=lateness)
    _continue_across_the_switch(op, steps, split, acc == "count")


def _continue_across_the_switch(op, steps, split, count):
    core = build_core(op)
    engine = table_engine_of(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    records = columnar_records(engine)
    steps = [*steps, ([], MAX_TIMESTAMP)]
    split = min(split, len(steps) - 1)
    uninterrupted, migrated = [], []
    store, old_store = MemoryStore(), MemoryStore()
    watermark, now = -10, 0
    for i, (elements, advance, *moved) in enumerate(steps):
        watermark = max(watermark, advance)
        now += moved[0] if moved else 0
        uninterrupted.append(object_path_batch(core, old_store, elements, watermark, now))
        if i < split:
            migrated.append(object_path_batch(core, store, elements, watermark, now))
        else:
            migrated.append(columnar_batch(engine, records, store, elements, watermark, count, now))
    assert migrated == uninterrupted
    assert not store.keys


def test_the_restart_rule_allows_exactly_this_layout_change():
    stored = {"state layout": "per-key windows"}
    assert restart_problems(stored, {"state layout": "per-key session rows"}) == []
    assert restart_problems(stored, {"state layout": "per-key window rows"}) == []
    assert restart_problems({"state layout": "per-key window rows"}, {"state layout": "per-key windows"})
    assert restart_problems({"state layout": "per-key session rows"}, {"state layout": "per-key windows"})
    assert restart_problems(stored, {"state layout": "per-key pane rows"})


@settings(max_examples=150, deadline=None)
@given(steps=steps_strategy, split=st.integers(1, 7), acc=st.sampled_from(sorted(ACCS)),
       mode=st.sampled_from(sorted(MODES)), lateness=st.sampled_from([0, 9, 40]))
def test_session_rows_written_before_count_triggers_continue(steps, split, acc, mode, lateness):
    """Session rows of the default trigger written before sessions took count triggers have no trigger
    columns (phase, count, finished): read back, the phase comes from the end-of-window hold, and the
    stream continues as if uninterrupted."""
    op = KeyedWindowedOperator(SessionWindows(6), ACCS[acc], trigger=MODES[mode], allowed_lateness=lateness)
    engine = table_engine_of(op.window, op.accumulation, op.trigger, op.allowed_lateness)
    records = columnar_records(engine)
    steps = [*steps, ([], MAX_TIMESTAMP)]
    split = min(split, len(steps) - 1)
    store, old_store = MemoryStore(), MemoryStore()
    uninterrupted, migrated = [], []
    watermark = -10
    for i, (elements, advance) in enumerate(steps):
        watermark = max(watermark, advance)
        uninterrupted.append(columnar_batch(engine, records, old_store, elements, watermark, acc == "count"))
        migrated.append(columnar_batch(engine, records, store, elements, watermark, acc == "count"))
        if i == split - 1:
            _strip_trigger_columns(store)
    assert migrated == uninterrupted


def _strip_trigger_columns(store: MemoryStore) -> None:
    """Rewrite every stored key record in the form session rows had before count triggers (state
    version 6's named fields, without the trigger's columns)."""
    import json

    from windowed_operator.state.records import stored_columns
    from windowed_operator.state.group_state import read_record

    for key, text in list(store.keys.items()):
        data, due = read_record(json.loads(text))
        columns = stored_columns(data)
        for name in ("kind", "late", "count", "closed", "fire_at"):
            columns.pop(name)
        store.keys[key] = json.dumps({"state": columns, "due": due})
