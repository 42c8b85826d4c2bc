"""The pane log gives the panes of one whole-group table, reading state only for the panes that fire."""
import datetime as dt
import json
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Max, Mean, Min, Sum
from triggers import TriggerOption
from windowed_operator import CumulativeWindows, TimeWindows
from windowed_operator.engine.columnar import PaneTable, Panes
from windowed_operator.engine.range_ops import factorize
from windowed_operator.state.codec import KeyStateCodec
from windowed_operator.state.pane_log import DOMAIN, META, PaneLog, part_text
from windowed_operator.state.group_batch import StoreBatch, TableEngine
from windowed_operator.state.part_log import held_buckets, run_part_log
from windowed_operator.state.records import _encoded
from windowed_operator.time import MAX_TIMESTAMP

from helpers import table_engine_of, MemoryStore, near_boundaries



def panes_of(out: Panes):
    """The panes as rows, in an order keys of mixed types allow."""
    return sorted(zip(*[np.asarray(c).tolist() for c in (out.keys, out.starts, out.ends, out.values, out.timing,
                                                          out.pane_index, out.is_last, out.is_retraction)]), key=repr)


CASES = {
    "tumbling sum": (TimeWindows(10), Sum()),
    "hopping mean": (TimeWindows(10).slide_by(5), Mean()),
    "hopping count, offset": (TimeWindows(9, offset=2).slide_by(3), Count()),
    "cumulative min": (CumulativeWindows(20, 5), Min()),
    "tumbling max, accumulating": (TimeWindows(6), Max()),
}

batches = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(["a", "b", 3, 4, ("t", 1), None]),
                                                near_boundaries(0, 80), st.integers(-9, 9)), max_size=8),
                             st.integers(0, 12)), max_size=12)


def engine_of(name):
    window, acc = CASES[name]
    trigger = TriggerOption.default().accumulating_fired_panes() if "accumulating" in name else TriggerOption.default()
    return table_engine_of(window, acc, trigger, 0), acc


class Version9PaneLog(PaneLog):
    """The pane log as state version 9 wrote it: a bucket per pane, its parts' rows as lists of keys
    and accumulator values (``{"keys", "acc"}``), the group's record ``[pane start, parts]``."""

    def bucket_of(self, starts):
        return starts

    def texts_by_bucket(self, table):
        encode = KeyStateCodec().value
        out = {}
        for start in np.unique(table.starts).tolist():
            mine = table.starts == start
            out[start] = (json.dumps({"keys": _encoded(encode, table.keys[mine].tolist()),
                                      "acc": [_encoded(encode, c[mine].tolist()) for c in table.acc]}), start)
        return out


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=200, deadline=None)
@given(steps=batches, partials=st.booleans(), compact_parts=st.sampled_from([1, 2, 32]),
       upgrade=st.integers(0, 13), spans=st.lists(st.sampled_from([1, 2, 512]), min_size=13, max_size=13))
def test_the_pane_log_gives_the_panes_of_the_whole_table(name, steps, partials, compact_parts, upgrade, spans):
    """Batches with watermarks at and around window boundaries; elements as rows or as partials
    folded upstream per (key, pane); panes folded after 1, 2 or 32 parts; the first ``upgrade``
    batches written as state version 9 wrote them (a bucket per pane, lists), the rest by this
    version beside them; each batch with buckets of at most 1, 2 or 512 panes (a release may change
    it: buckets written under another stay right).  The store is empty once input ends."""
    with mock.patch("windowed_operator.state.part_log.COMPACT_PARTS", compact_parts):
        _check_against_the_whole_table(name, steps, partials, compact_parts, upgrade, spans)


def _check_against_the_whole_table(name, steps, partials, compact_parts, upgrade=0, spans=None):
    engine, acc = engine_of(name)
    store, meta = MemoryStore(), {}
    whole, watermark = PaneTable(), -3
    for batch, (rows, step) in enumerate([*steps, ([], MAX_TIMESTAMP)]):
        log = Version9PaneLog(engine) if batch < upgrade else PaneLog(engine)
        watermark = min(watermark + step, MAX_TIMESTAMP)
        keys = np.empty(len(rows), dtype=object)
        keys[:] = [k for k, _, _ in rows]
        ts = np.array([t for _, t, _ in rows], dtype=np.int64)
        values = None if isinstance(acc, Count) else np.array([v for _, _, v in rows], dtype=np.int64)
        expected, got = Panes(), Panes()
        whole = engine.process(whole, keys, ts, values, watermark, expected, [], lambda i: None, processing_time=0)

        def run(table):
            if partials:  # one partial per row (rows may repeat a (key, pane), as upstream folds may)
                aggregates = [values] * len(engine.form.partial_aggregates)
                return engine.process_partials(table, keys, engine.layout.pane_start(ts),
                                               np.ones(len(ts), dtype=np.int64), aggregates, watermark, got,
                                               processing_time=0)[0]
            return engine.process(table, keys, ts, values, watermark, got, [], lambda i: None, processing_time=0)

        with mock.patch("windowed_operator.state.pane_log.BUCKET_PANES", spans[batch] if spans else 512):
            due = run_part_log(log, store, meta, watermark, run)
        meta["wm"] = watermark
        assert panes_of(got) == panes_of(expected)
        assert due == engine.next_event_time(whole)
        held = held_buckets(log, meta)
        assert sorted(store.parts) == sorted((DOMAIN, s, p) for s, h in held.items() for p in range(h.parts))
        assert max((h.parts for h in held.values()), default=0) <= compact_parts
        for bucket, h in held.items():  # (a bucket's least is its earliest pane: when it is due)
            assert h.least == min(log.build([(bucket, text) for (_, b, _), text in store.parts.items() if b == bucket],
                                            watermark).starts)
    assert not store.parts and meta[META] == []


def test_elements_are_written_without_reading_and_a_pane_is_read_when_its_windows_fire():
    engine, _ = engine_of("tumbling sum")
    log, store, meta = PaneLog(engine), MemoryStore(), {"wm": 0}
    keys = np.array([f"k{i}" for i in range(1000)], dtype=object)

    def batch(ts, watermark, out):
        def run(table):
            return engine.process(table, keys, np.full(len(keys), ts, dtype=np.int64), np.ones(len(keys), dtype=np.int64),
                                  watermark, out, [], lambda i: None, processing_time=0)
        due = run_part_log(log, store, meta, watermark, run)
        meta["wm"] = watermark
        return due

    out = Panes()
    assert batch(3, 1, out) == 10  # the window [0, 10) is due at watermark 10
    assert batch(7, 2, out) == 10
    assert dict(store.calls) == {"put_text": 2}  # two batches of 1,000 keys: one part each, nothing read
    assert [p for p in store.parts] == [(DOMAIN, 0, 0), (DOMAIN, 0, 1)]
    assert batch(12, 10, out) == 20
    assert len(out) == 1000 and set(np.asarray(out.values).tolist()) == {2}
    # the fired pane is read (2 parts) and removed; the new pane's rows are one new part
    assert store.calls["get_text"] == 2 and store.calls["remove_text"] == 2 and store.calls["put_text"] == 3
    assert list(store.parts) == [(DOMAIN, 10, 0)]


def test_keys_of_any_stored_type_come_back_equal():
    engine, _ = engine_of("tumbling sum")
    log, store, meta = PaneLog(engine), MemoryStore(), {"wm": 0}
    keys = np.empty(6, dtype=object)
    keys[:] = ["x", 7, 2 ** 70, ("a", 1), dt.datetime(2026, 1, 2, 3, 4, 5), None]

    def batch(watermark, out, n):
        def run(table):
            return engine.process(table, keys[:n], np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) * 1.5,
                                  watermark, out, [], lambda i: None, processing_time=0)
        run_part_log(log, store, meta, watermark, run)
        meta["wm"] = watermark

    out = Panes()
    batch(1, out, 6)
    batch(2, out, 6)  # a second part of the same pane, folded with the first when the window fires
    batch(10, out, 0)
    assert dict(zip(np.asarray(out.keys).tolist(), np.asarray(out.values).tolist())) == {
        "x": 0.0, 7: 3.0, 2 ** 70: 6.0, ("a", 1): 9.0, dt.datetime(2026, 1, 2, 3, 4, 5): 12.0, None: 15.0}


def _text(rows):
    """A part's text of (key, pane start, sum, count) rows."""
    keys = np.empty(len(rows), dtype=object)
    keys[:] = [k for k, *_ in rows]
    codes, uniques = factorize(keys)
    return part_text(np.array([s for _, s, *_ in rows], dtype=np.int64), codes, uniques,
                     [np.array([r[2] for r in rows]), np.array([r[3] for r in rows], dtype=np.int64)],
                     KeyStateCodec().value)


def test_a_key_in_several_parts_of_a_pane_is_one_row_once_read():
    """Parts of either form (state version 9's: one pane's rows as lists) fold into one row per (key, pane)."""
    engine, _ = engine_of("hopping mean")
    log = PaneLog(engine)
    parts = [(0, _text([("a", 0, 1.0, 1), ("b", 0, 2.0, 1), ("a", 5, 7.0, 1)])),
             (0, _text([("b", 0, 3.0, 1), ("a", 0, 4.0, 2)])),
             (5, json.dumps({"keys": ["a", "c"], "acc": [[0.5, 9.0], [1, 1]]}))]  # (version 9: the pane at 5)
    table = log.build(parts, 0)
    rows = sorted(zip(table.keys.tolist(), table.starts.tolist(), *[c.tolist() for c in table.acc]))
    assert rows == [("a", 0, 5.0, 3), ("a", 5, 7.5, 2), ("b", 0, 5.0, 2), ("c", 5, 9.0, 1)]


def test_a_window_reads_a_bucket_or_two_whatever_its_panes():
    """Hopping windows of 10 panes: a bucket holds 10 panes, so each watermark step reads the one or two
    buckets under the windows that fire, not a text per pane; a bucket is due with its earliest pane."""
    engine, _ = engine_of("hopping mean")  # (TimeWindows(10).slide_by(5): panes of 5, buckets of 10)
    engine.layout = TimeWindows(100).slide_by(10).pane_layout()
    log, store, meta = PaneLog(engine), MemoryStore(), {"wm": -1}
    keys = np.array(["a", "b", "c"], dtype=object)
    out = Panes()
    for watermark in range(0, 400, 10):  # every pane of [0, 400) gets rows, the watermark 10 behind
        ts = np.full(3, watermark + 5, dtype=np.int64)

        def run(table):
            return engine.process(table, keys, ts, np.ones(3, dtype=np.int64), watermark, out, [], lambda i: None,
                                  processing_time=0)
        before = store.calls["get_text"]
        run_part_log(log, store, meta, watermark, run)
        meta["wm"] = watermark
        read = {b for (_, b, _) in store.parts}  # (buckets are starts aligned to 100)
        assert all(b % 100 == 0 for b in read)
        assert store.calls["get_text"] - before <= 2 * 2  # (two buckets at most, of up to two parts each)
    assert len(out) == 3 * 39


@settings(max_examples=60, deadline=None)
@given(steps=batches, switch=st.lists(st.booleans(), min_size=13, max_size=13))
def test_moving_per_key_records_into_the_pane_log_keeps_every_pane(steps, switch):
    """Before any batch the group may move into the pane log (a restart lowering allowed lateness to
    none, here without late data, so the panes are the same; nothing moves back: raising it is
    refused): the move keeps all rows."""
    from windowed_operator.state.records import KeyRecords, columnar_records
    from windowed_operator.state.group_state import GroupState
    from windowed_operator.state.transitions import key_records_to_pane_log

    engine, acc = engine_of("hopping mean")
    store = MemoryStore()
    log, records = PaneLog(engine, store), columnar_records(engine)
    whole, watermark, on_log = PaneTable(), -3, False
    for (rows, step), flip in zip([*steps, ([], MAX_TIMESTAMP)], switch):
        watermark = min(watermark + step, MAX_TIMESTAMP)
        keys = np.empty(len(rows), dtype=object)
        keys[:] = [k for k, _, _ in rows]
        ts = np.array([t for _, t, _ in rows], dtype=np.int64)
        values = np.array([v for _, _, v in rows], dtype=np.int64)
        expected, got = Panes(), Panes()
        whole = engine.process(whole, keys, ts, values, watermark, expected, [], lambda i: None, processing_time=0)

        def run(table):
            return engine.process(table, keys, ts, values, watermark, got, [], lambda i: None, processing_time=0)

        group = GroupState(store, records.codec, {}, "op")
        if flip and not on_log:
            on_log = True
            key_records_to_pane_log(group, log, store)
        if on_log:
            log.run_batch(StoreBatch(group, [], watermark, 0), TableEngine(run))
        else:
            KeyRecords(records).run_batch(StoreBatch(group, keys.tolist(), watermark, 0), TableEngine(run))
        group.save(wm=watermark)
        assert panes_of(got) == panes_of(expected)
    assert not store.keys and not [p for p in store.parts if p[0] == DOMAIN]


def test_a_bucket_holds_at_most_bucket_panes_panes():
    """A window of 2,000 panes keeps them in buckets of 512 (a text stays within a few hundred panes'
    rows); a window of 60 in one bucket; tumbling windows a bucket each."""
    from windowed_operator.state.pane_log import BUCKET_PANES

    engine, _ = engine_of("hopping mean")
    starts = np.arange(0, 4_000, dtype=np.int64)
    for window, span in ((TimeWindows(2_000).slide_by(1), BUCKET_PANES), (TimeWindows(60).slide_by(1), 60),
                         (TimeWindows(10), 10)):
        engine.layout = window.pane_layout()
        buckets = PaneLog(engine).bucket_of(starts)
        assert set(np.diff(np.unique(buckets)).tolist()) == {span} and (buckets <= starts).all()
        assert (starts - buckets < span).all()
