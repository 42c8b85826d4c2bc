"""Session and window rows in row shards give the panes of one whole-group table, as per-key records
do; a restart moves a group between the two layouts either way without losing a row."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Mean, Sum
from triggers import TriggerOption
from windowed_operator import SessionWindows, TimeWindows
from windowed_operator.engine.columnar import Panes
from windowed_operator.engine.columnar_panes import object_array
from windowed_operator.state.group_batch import Moved, StoreBatch, TableEngine
from windowed_operator.state.records import KeyRecords, columnar_records
from windowed_operator.engine.columnar_triggers import RowTable
from windowed_operator.state.group_state import GroupState
from windowed_operator.state.row_shards import DOMAIN, META, MIN_KEYS_PER_SHARD, ROW_KEY_US, RowShards, RowShardStore
from windowed_operator.state.transitions import key_records_to_row_shards

from helpers import table_engine_of, MemoryStore, near_boundaries

TIMED = TriggerOption.at_watermark().with_early_firings_at_every(duration=5)
CASES = {
    "sessions sum": (SessionWindows(7), Sum(), TriggerOption.default(), 5),
    "sessions mean retracting": (SessionWindows(4), Mean(),
                                 TriggerOption.default().accumulating_and_retracting_fired_panes(), 9),
    "sessions sum, early every 5 ms, late every 2": (SessionWindows(6), Sum(),
                                                      TIMED.with_late_firings_at_every(count=2), 15),
    "sessions count, early every 3 elements": (
        SessionWindows(5), Count(), TriggerOption.at_watermark().with_early_firings_at_every(count=3), 0),
    "tumbling sum, early every 5 ms": (TimeWindows(10), Sum(), TIMED, 5),
    "hopping count, late every 4 ms, retracting": (
        TimeWindows(10).slide_by(5), Count(),
        TriggerOption.at_watermark().with_late_firings_at_every(duration=4).accumulating_and_retracting_fired_panes(), 20),
}
KEYS = ["a", "b", "c", 1, 2, 3, -(2 ** 63), 2 ** 63 - 1, "é\n\"", ("t", 1), "k0000001", "k0000002"]


def panes_of(out: Panes):
    return sorted(zip(*[np.asarray(c).tolist() for c in (out.keys, out.starts, out.ends, out.values, out.timing,
                                                          out.pane_index, out.is_last, out.is_retraction)]),
                  key=repr)


batches = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(KEYS), near_boundaries(0, 80), st.integers(1, 9)),
                                      max_size=10),
                             st.integers(0, 9), st.sampled_from([0, 1, 3, 5, 6]),
                             st.sampled_from(["rows", "rows", "keys", "key shards"])), max_size=10)


def one_batch(layout, engine, records, store, rows, watermark, now, got, model=(MIN_KEYS_PER_SHARD, ROW_KEY_US),
              counting=False):
    """One batch in ``layout`` ("rows": row shards; "keys"/"key shards": per-key records, as a
    checkpoint written before row shards holds them), moving the group's per-key records into row
    shards first (as the processor does on a restart)."""
    keys = object_array([k for k, _, _ in rows])
    ts = np.array([t for _, t, _ in rows], dtype=np.int64)
    values = None if counting else np.array([v for _, _, v in rows], dtype=np.int64)
    group = GroupState(store, records.codec, {}, "op", sharded=layout == "key shards")
    batch_keys = list(dict.fromkeys(keys.tolist()))

    def run(table):
        table = engine.on_processing_time(engine.on_watermark(table, watermark, got), now, got)
        return engine.process(table, keys, ts, values, watermark, got, [], lambda i: None, processing_time=now)

    if layout == "rows":
        shards = RowShardStore(store, engine, records.codec.kind, min_keys=model[0], key_us=model[1])
        moved = key_records_to_row_shards(group, records) if META not in group.meta and group.meta else None
        shards.run_batch(StoreBatch(group, batch_keys, watermark, now, Moved(rows=moved)), TableEngine(run))
    else:
        assert META not in group.meta, "nothing moves out of row shards"
        KeyRecords(records).run_batch(StoreBatch(group, batch_keys, watermark, now), TableEngine(run))
    group.save(wm=watermark)
    return values


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("model", [(MIN_KEYS_PER_SHARD, ROW_KEY_US), (64, ROW_KEY_US), (0.5, 1000.0)],
                         ids=["as sized", "64 keys a shard", "many shards"])
@settings(max_examples=60, deadline=None)
@given(steps=batches)
def test_row_shards_give_the_panes_of_the_whole_table(name, model, steps):
    """Shards read for the batch's keys or because the due indexes hold them give every pane the
    whole table gives, with the group moving from key records (with or without key shards) into row
    shards at any batch; at the end every row expired and nothing is stored."""
    window, acc, trigger, lateness = CASES[name]
    engine = table_engine_of(window, acc, trigger, lateness)
    records = columnar_records(engine)
    whole, store, watermark, now = RowTable(), MemoryStore(), -3, 0
    in_rows = False
    for rows, step, advance, layout in [*steps, ([], 10 ** 6, 0, "rows")]:
        in_rows = in_rows or layout == "rows"
        layout = "rows" if in_rows else layout
        watermark += step
        now += advance
        expected, got = Panes(), Panes()
        values = one_batch(layout, engine, records, store, rows, watermark, now, got, model, isinstance(acc, Count))
        keys = object_array([k for k, _, _ in rows])
        whole = engine.process(whole, keys, np.array([t for _, t, _ in rows], dtype=np.int64), values, watermark,
                               expected, [], lambda i: None, processing_time=now)
        assert panes_of(got) == panes_of(expected)
    assert not store.keys and not [place for place in store.parts if place[0] == DOMAIN]
    assert json.loads(store.meta)[META]["held"] == 0


def test_a_batch_touching_one_key_of_many_reads_one_shard():
    """A new group starts in one shard; the first batch that comes back to one key of many reads it
    once and spreads the rows at about a key a shard; from then on a batch coming back to one key
    reads one shard of a key or two, not every row: the calls and bytes follow the keys touched."""
    window, acc, trigger, lateness = CASES["sessions sum, early every 5 ms, late every 2"]
    engine = table_engine_of(window, acc, trigger, lateness)
    records = columnar_records(engine)
    store = MemoryStore()
    many = [(f"user{i}", 10, 1) for i in range(4096)]
    one_batch("rows", engine, records, store, many, 0, 0, Panes())
    meta = json.loads(store.meta)[META]
    assert meta["held"] == 4096 and meta["shards"] == 1 and meta["touched"] is None
    one_batch("rows", engine, records, store, [("user3", 11, 1)], 1, 1, Panes())
    meta = json.loads(store.meta)[META]
    assert meta["held"] == 4096 and meta["shards"] == 4096 and meta["touched"] == 1.0
    store.calls.clear()
    one_batch("rows", engine, records, store, [("user7", 11, 1)], 2, 2, Panes())
    assert store.calls["get_text"] == 1 and store.calls["put_text"] == 1
    shard = [text for (domain, _, _), text in store.parts.items() if domain == DOMAIN and '"user7"' in text]
    assert len(shard) == 1 and len(json.loads(shard[0])[2][1]) <= 4


def test_a_shard_holds_at_most_its_share_of_keys(monkeypatch):
    """However many keys a group holds, no shard is sized for more than ``MAX_KEYS_PER_SHARD``."""
    import windowed_operator.state.row_shards as row_shards

    monkeypatch.setattr(row_shards, "MAX_KEYS_PER_SHARD", 100)
    window, acc, trigger, lateness = CASES["sessions count, early every 3 elements"]
    engine = table_engine_of(window, acc, trigger, lateness)
    records = columnar_records(engine)
    store = MemoryStore()
    one_batch("rows", engine, records, store, [(f"u{i}", 10, 1) for i in range(1000)], 0, 0, Panes(), counting=True)
    assert json.loads(store.meta)[META]["shards"] == 16
    texts = [json.loads(text) for (domain, _, _), text in store.parts.items() if domain == DOMAIN]
    assert sum(len(t[2][1]) for t in texts) == 1000 and max(len(t[2][1]) for t in texts) < 100
