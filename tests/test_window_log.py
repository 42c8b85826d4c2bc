"""The window log gives the panes and drops of the per-key layout, reading state only for the windows
that fire."""
import json
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import InnerJoin, Mean, Sum, ToList
from accumulations.merge import SidedAccumulation, SidedValues
from triggers import TriggerOption
from windowed_operator import CumulativeWindows, GlobalWindow, TimeWindows
from windowed_operator.engine.core import WindowedCore
from windowed_operator.state.group_batch import GroupBatch, KeyEngine, StoreBatch, next_due, run_group_steps
from windowed_operator.state.group_state import GroupState
from windowed_operator.panes import TimestampCombiner
from windowed_operator.state.codec import KeyStateCodec
from windowed_operator.time import MAX_TIMESTAMP
from windowed_operator.engine.vectorized import process_batch_arrays
from windowed_operator.windows.base import Window
from windowed_operator.engine.range_ops import factorize
from windowed_operator.state.window_log import (DOMAIN, META, ArrayElements, Partial, WindowLog)

from helpers import MemoryStore, near_boundaries


def window_log_batch(log, meta, work, watermark, arrays=None):
    """The window log's batch (``WindowLog.run_batch``) on a bare record (a log reads only the
    group's record): the panes fired, the elements' panes and drops, when the group next has work."""
    result = log.run_batch(StoreBatch(SimpleNamespace(meta=meta), [], watermark, 0),
                           KeyEngine(log.core, GroupBatch(work=list(work)), arrays))
    fired, _, added = result.by_phase
    return fired, added, result.due

WINDOWS = {"tumbling": TimeWindows(10), "hopping": TimeWindows(10).slide_by(4),
           "cumulative": CumulativeWindows(20, 5), "global": GlobalWindow()}
ACCUMULATIONS = {"sum": Sum(), "mean": Mean(), "list": ToList(), "join": SidedAccumulation(inner=InnerJoin())}
TRIGGERS = {"default": TriggerOption.default(), "at watermark": TriggerOption.at_watermark(),
            "at watermark, retracting": TriggerOption.at_watermark().accumulating_and_retracting_fired_panes()}

batches = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(["a", "b", 3, ("t", 1), None]),
                                                near_boundaries(0, 60), st.integers(-9, 9)), max_size=8),
                             st.integers(0, 12)), max_size=10)


def value_of(accumulation, v):
    """A join's inputs are mostly records of one shape (stored by column), some of another or not records."""
    if isinstance(accumulation, SidedAccumulation):
        payload = {"v": v} if v > -6 else {"w": (v, None), "v": float("inf")} if v > -9 else ("t", v)
        return ("left" if v % 2 else "right", payload)
    return v


def element_work(core, rows):
    """Each key's elements in time order, as the Spark processor's element path hands them over."""
    by_key: dict = {}
    for key, ts, v in rows:
        by_key.setdefault(key, []).append((ts, value_of(core.accumulation, v), None))
    work = []
    for key, elements in by_key.items():
        elements.sort(key=lambda e: e[0])
        work.append((key, lambda k, state, watermark, elements=elements: core.process_batch(k, state, elements,
                                                                                             watermark, 0)))
    return work


def array_work(core, rows):
    """The same elements on the array path (numbers folded per window at once)."""
    work = []
    for key in dict.fromkeys(k for k, _, _ in rows):
        mine = sorted((ts, v) for k, ts, v in rows if k == key)
        ts = np.array([t for t, _ in mine], dtype=np.int64)
        values = np.array([v for _, v in mine], dtype=np.int64)
        work.append((key, lambda k, state, watermark, ts=ts, values=values: process_batch_arrays(
            core, k, state, ts, values, watermark, 0, lambda j: None)))
    return work


def batch_arrays(core, rows):
    """The same elements as one batch of arrays for every key (``WindowLog.add_arrays``)."""
    keys = np.empty(len(rows), dtype=object)
    keys[:] = [k for k, _, _ in rows]
    codes, uniques = factorize(keys)
    ts = np.array([t for _, t, _ in rows], dtype=np.int64)
    read = [value_of(core.accumulation, v) for _, _, v in rows]
    if isinstance(core.accumulation, SidedAccumulation):
        payloads = np.empty(len(rows), dtype=object)
        payloads[:] = [p for _, p in read]
        values = SidedValues(np.array([side == "left" for side, _ in read], dtype=bool), payloads)
    else:
        values = np.array(read, dtype=np.int64)
    return ArrayElements(uniques.tolist(), codes, ts, values, lambda i: read[i])


def at(work, watermark):
    return [(key, lambda k, state, run=run: run(k, state, watermark)) for key, run in work]


def panes(records):
    return sorted((repr(r.key), r.window_start, r.window_end, repr(r.value), r.timing, r.index, r.is_first, r.is_last,
                   r.is_retraction, r.timestamp) for r in records)


def drops(dropped):
    return sorted((d.reason, repr(d.key), d.timestamp, repr(d.element), d.watermark) for d in dropped)


def cores(window, accumulation, trigger, combiner):
    return [WindowedCore(WINDOWS[window], ACCUMULATIONS[accumulation], TRIGGERS[trigger], 0, combiner)
            for _ in range(2)]


@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("accumulation", sorted(ACCUMULATIONS))
@settings(max_examples=40, deadline=None)
@given(steps=batches, trigger=st.sampled_from(sorted(TRIGGERS)), combiner=st.sampled_from(list(TimestampCombiner)),
       form=st.sampled_from(["elements", "arrays", "batch"]), compact_parts=st.sampled_from([1, 2, 32]))
def test_the_window_log_gives_the_panes_of_the_per_key_layout(window, accumulation, steps, trigger, combiner, form,
                                                               compact_parts):
    """Batches with watermarks at and around window boundaries, elements on the element path, the
    array path key by key, or as one batch of arrays (against the element path), buckets folded
    after 1, 2 or 32 parts: each batch gives the per-key layout's panes and drops, and the store is
    empty once input ends."""
    reference, core = cores(window, accumulation, trigger, combiner)
    arrays = form == "arrays" and accumulation in ("sum", "mean")
    batch = form == "batch" and accumulation in ("sum", "mean", "join")
    store = MemoryStore()
    log, meta = WindowLog(core, store=store), {}
    keyed = MemoryStore()
    watermark = -3
    with mock.patch("windowed_operator.state.part_log.COMPACT_PARTS", compact_parts):
        for rows, step in [*steps, ([], MAX_TIMESTAMP)]:
            watermark = min(watermark + step, MAX_TIMESTAMP)
            work = (array_work if arrays else element_work)(reference, rows)
            group = GroupState(keyed, KeyStateCodec(), {}, "op")
            expected = run_group_steps(reference, group, GroupBatch(work=at(work, watermark)), watermark, 0)
            group.commit(next_due(reference))
            group.save(wm=watermark)
            if batch:
                fired, added, due = window_log_batch(log, meta, [], watermark, batch_arrays(core, rows))
            else:
                work = (array_work if arrays else element_work)(core, rows)
                fired, added, due = window_log_batch(log, meta, at(work, watermark), watermark)
            meta["wm"] = watermark
            assert panes(fired.outputs + added.outputs) == panes(expected.merged().outputs)
            assert drops(fired.dropped + added.dropped) == drops(expected.merged().dropped)
            held = dict(meta[META])
            assert sorted(store.parts) == sorted((DOMAIN, b, p) for b, n in held.items() for p in range(n))
            assert due == (min(held) if held else None)
            assert max(held.values(), default=0) <= compact_parts
    assert not store.parts and not keyed.keys


def test_elements_are_written_without_reading_and_a_window_is_read_when_it_fires():
    core = WindowedCore(TimeWindows(10), SidedAccumulation(inner=InnerJoin()), TriggerOption.default())
    store = MemoryStore()
    log, meta = WindowLog(core, store=store), {"wm": 0}

    def batch(ts, watermark, side):
        work = [(f"k{i}", lambda k, state, i=i: core.process_batch(k, state, [(ts, (side, {"id": i}), None)],
                                                                    watermark, 0)) for i in range(1000)]
        fired, added, due = window_log_batch(log, meta, work, watermark)
        meta["wm"] = watermark
        return fired.outputs, due

    assert batch(3, 1, "left") == ([], 10)  # the window [0, 10) is due at watermark 10
    assert batch(7, 2, "right") == ([], 10)
    assert dict(store.calls) == {"put_text": 2}  # two batches of 1,000 keys: one part each, nothing read
    assert list(store.parts) == [(DOMAIN, 10, 0), (DOMAIN, 10, 1)]
    out, due = batch(12, 10, "left")
    assert due == 20 and len(out) == 1000
    assert {r.key: r.value for r in out}["k7"] == [({"id": 7}, {"id": 7})]
    # the fired window is read (2 parts) and removed; the new window's rows are one new part
    assert store.calls["get_text"] == 2 and store.calls["remove_text"] == 2 and store.calls["put_text"] == 3
    assert list(store.parts) == [(DOMAIN, 20, 0)]



def test_a_bucket_holds_every_window_due_at_its_time_and_keeps_the_order_partials_were_written():
    core = WindowedCore(CumulativeWindows(20, 5), ToList(), TriggerOption.default())
    log = WindowLog(core)
    w = Window(0, 10)
    rows = log.build([(10, log.part_text([("a", w, Partial([1, 2], 2)), ("b", w, Partial([3], 1))])),
                      (10, log.part_text([("a", w, Partial([4], 1))]))], 0)
    assert {(k, w): (p.acc, p.count) for (k, w), p in rows.partials.items()} == {
        ("a", (0, 10)): ([1, 2, 4], 3), ("b", (0, 10)): ([3], 1)}


def test_a_joins_inputs_are_stored_by_column_and_parts_of_state_version_7_still_read():
    """A join's parts keep its inputs by column (``record_columns``); version 7 wrote each
    accumulator by value, and a checkpoint may still hold such parts beside new ones."""
    log = WindowLog(WindowedCore(TimeWindows(10), SidedAccumulation(inner=InnerJoin()), TriggerOption.default()))
    w = Window(0, 10)
    person, auction = {"id": 1, "name": "Ann"}, {"seller": 1, "reserve": 9}
    text = log.part_text([(1, w, Partial(([person], [auction]), 2)), (2, w, Partial(([], [auction]), 1))])
    stored = json.loads(text)
    assert "a" not in stored and stored["x"]["L"] == {"f": ["id", "name"], "c": [[1], ["Ann"]], "n": 1}
    codec = KeyStateCodec()
    version_7 = json.dumps({"k": [1], "s": [0], "e": [10], "a": [codec.value(([person], []))], "n": [1]})
    rows = log.build([(10, version_7), (10, text)], 0)
    assert {key: (p.acc, p.count) for (key, _), p in rows.partials.items()} == {
        1: (([person, person], [auction]), 3), 2: (([], [auction]), 1)}
    assert not WindowLog(WindowedCore(TimeWindows(10), ToList(), TriggerOption.default())).keeps_inputs


@settings(max_examples=60, deadline=None)
@given(steps=batches, switch=st.lists(st.booleans(), min_size=11, max_size=11), lateness=st.sampled_from([1, 5, 12]),
       accumulation=st.sampled_from(["sum", "join"]), trigger=st.sampled_from(sorted(TRIGGERS)))
def test_moving_per_key_windows_into_the_window_log_keeps_every_pane(steps, switch, lateness, accumulation,
                                                                    trigger):
    """Before any batch the group may move into the window log, as a restart that lowers allowed
    lateness to 0 does (nothing moves back: raising it is refused); late data arrives while windows
    are held per key.  Each batch gives the panes of a group that stayed per key under the same
    lateness change, and no state is left once input ends."""
    from windowed_operator.state.transitions import key_windows_to_window_log

    def core(late):
        return WindowedCore(WINDOWS["hopping"], ACCUMULATIONS[accumulation], TRIGGERS[trigger], late)

    reference_store, store = MemoryStore(), MemoryStore()
    watermark, on_log = -3, False
    for (rows, step), flip in zip([*steps, ([], MAX_TIMESTAMP)], switch):
        watermark = min(watermark + step, MAX_TIMESTAMP)
        flip = flip and not on_log
        on_log = on_log or flip
        now = core(0 if on_log else lateness)
        group = GroupState(reference_store, KeyStateCodec(), {}, "op")
        expected = run_group_steps(now, group, GroupBatch(work=at(element_work(now, rows), watermark)), watermark, 0)
        group.commit(next_due(now))
        group.save(wm=watermark)

        group = GroupState(store, KeyStateCodec(), {}, "op")
        work = at(element_work(now, rows), watermark)
        if on_log:
            log = WindowLog(now, store=store)
            got = key_windows_to_window_log(group, log, store, watermark, 0) if flip else None
            fired, added, _ = window_log_batch(log, group.meta, work, watermark)
            outputs = (got.outputs if got else []) + fired.outputs + added.outputs
        else:
            outputs = run_group_steps(now, group, GroupBatch(work=work), watermark, 0).merged().outputs
            group.commit(next_due(now))
        group.save(wm=watermark)
        assert panes(outputs) == panes(expected.merged().outputs)
    assert not store.keys and not [p for p in store.parts if p[0] == DOMAIN]
