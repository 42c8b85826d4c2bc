"""Moving keys between key groups (``windowed_operator.state.rekey``), without a JVM: per-key state
written by the group's own store (records in key shards or in entries of their own, with the due
index), moved from G groups to K, reads back in every new group as exactly its own keys' records,
each due when it was; the logs' parts and row shards are cut by key and renumbered.  On Spark, every
stored layout restarts equal to an uninterrupted run after a rescale (``tests/spark/test_state_versions.py``,
``tests/spark/test_repartition.py``)."""
import json
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from windowed_operator.state.group_state import GroupState
from windowed_operator.state.rekey import StoredGroup, TextStore, rekey
from windowed_operator.time import MAX_TIMESTAMP

FINGERPRINT = {"state version": "8", "key groups": "16", "state layout": "per-key windows in key shards"}


class GroupStore(TextStore):
    """A group's record and keys' own entries beside the texts."""

    def __init__(self, stored: StoredGroup | None = None) -> None:
        super().__init__()
        self.meta = json.dumps(stored.meta) if stored else None
        self.keys = dict(stored.keys) if stored else {}
        if stored:
            self.texts.update(stored.parts)

    def get_meta(self):
        return self.meta

    def put_meta(self, text):
        self.meta = text

    def get_keys(self, keys):
        return [self.keys.get(key) for key in keys]

    def put_keys(self, items):
        self.keys.update(items)

    def remove_keys(self, keys):
        for key in keys:
            del self.keys[key]

    def all_keys(self):
        return list(self.keys)


class ListCodec:
    def new(self):
        return []

    def is_empty(self, state):
        return not state

    def to_data(self, state):
        return state

    def from_data(self, data):
        return data


def bucket_of(key, count: int) -> int:
    return zlib.crc32(repr(key).encode()) % count


def group_of_keys(store: GroupStore, fingerprint: dict) -> GroupState:
    return GroupState(store, ListCodec(), fingerprint, "test", sharded=True)


keys = st.sets(st.one_of(st.text("abcxyz", max_size=4), st.integers(-50, 50), st.tuples(st.integers(0, 3), st.text("ab", max_size=2))),
               max_size=40)


@settings(max_examples=60, deadline=None)
@given(keys=keys, old_count=st.integers(1, 4), new_count=st.integers(1, 9), sharded=st.booleans(),
       due_base=st.integers(0, 100_000))
def test_per_key_records_and_their_due_times_move_to_the_keys_new_groups(keys, old_count, new_count, sharded, due_base):
    keys = sorted(keys, key=repr)
    due = {key: due_base + 1_000 * i for i, key in enumerate(keys)}
    stores = {}
    for key in keys:
        stores.setdefault(bucket_of(key, old_count), GroupStore())
    for old, store in stores.items():
        group = GroupState(store, ListCodec(), FINGERPRINT, "test", sharded=sharded)
        for key in keys:
            if bucket_of(key, old_count) == old:
                group.touch(key).extend([str(key), due[key]])
        group.commit(lambda state: (state[1], None))
        group.save(wm=due_base - 5 * old, timer=due_base + old)
    stored = {old: StoredGroup(json.loads(s.meta), dict(s.texts), dict(s.keys)) for old, s in stores.items()}

    moved = rekey(stored, lambda key: bucket_of(key, new_count), old_count, new_count)

    assert set(moved) <= set(range(new_count))
    if new_count % old_count == 0:  # (a split: every new group of an old one holding state has a record)
        assert set(moved) == {g for g in range(new_count) if g % old_count in stored}
    fingerprint = {**FINGERPRINT, "key groups": str(new_count)}
    found = {}
    for g, new in moved.items():
        assert new.meta["fingerprint"] == fingerprint
        assert new.meta["wm"] == max(stored[s].meta["wm"] for s in new.sources)
        assert new.meta["timer"] == min(stored[s].meta["timer"] for s in new.sources)
        group = group_of_keys(GroupStore(new), fingerprint)
        held = group.due_keys(MAX_TIMESTAMP, None)
        for key in held:
            assert bucket_of(key, new_count) == g, (key, g)
            assert group.key(key) == [str(key), due[key]]
            found[key] = g
        assert group.next_event_time() is None, "every entry taken"
        if sharded or any("key_shards" in stored[s].meta for s in new.sources):
            assert not new.keys and new.meta["key_shards"]["held"] == len(held)
    assert sorted(found, key=repr) == keys, "every key once"


def test_pane_log_window_log_and_row_shard_parts_are_cut_by_key_and_renumbered():
    from windowed_operator.engine.columnar_triggers import RowTable
    from windowed_operator.state.row_columns_text import rows_text, table_of

    import numpy as np

    from windowed_operator.state.pane_log import part_rows, part_text
    from windowed_operator.state.codec import KeyStateCodec

    encode = KeyStateCodec().value

    # a bucket of version 10 (panes 100 and 110) and one of version 9 (the pane at 120, lists)
    panes = {("panes", 100, 0): part_text(np.array([100, 110, 110]), np.array([0, 1, 2]),
                                          np.array(["a", "b", "c"], dtype=object), [np.array([1, 2, 3])], encode),
             ("panes", 100, 1): part_text(np.array([100]), np.array([0]), np.array(["a"], dtype=object),
                                          [np.array([4])], encode),
             ("panes", 120, 0): json.dumps({"keys": ["c", "b"], "acc": [[5, 6]]})}
    windows = {("windows", 200, 0): json.dumps({"k": ["a", "b"], "s": [0, 0], "e": [10, 10], "n": [1, 2],
                                                "x": {"l": [1, 0], "r": [0, 2], "L": {"v": [5]}, "R": {"v": [6, 7]}}})}
    table = RowTable(keys=np.array(["a", "a", "c"], dtype=object), starts=np.array([0, 20, 0]),
                     ends=np.array([10, 30, 10]), acc=[np.array([1, 2, 3])], pending=np.array([1, 1, 1]),
                     hold=np.array([False] * 3), nonspeculative=np.array([0, 0, 0]), index=np.array([0, 0, 0]),
                     last=np.array([None] * 3, dtype=object), late=np.array([False] * 3), count=np.array([1, 1, 1]),
                     fire_at=np.array([-1, -1, -1]), closed=np.array([False] * 3), watermark=0)
    rows = {("rows", 0, 0): f"[10,null,{rows_text(table, 'windows')}]"}
    group_of = {"a": 0, "b": 1, "c": 1}.__getitem__
    meta = {"fingerprint": FINGERPRINT, "wm": 0, "pane_log": [[100, 2], [120, 1]], "event_index": [],
            "processing_index": []}
    moved = rekey({0: StoredGroup(dict(meta), panes)}, group_of, 1, 2)
    # (each bucket with the earliest pane of the rows that reached the group, where it is not the bucket)
    assert moved[0].meta["pane_log"] == [[100, 2]] and moved[1].meta["pane_log"] == [[100, 1, 110], [120, 1]]

    def cut_rows(group, bucket, part):
        cut = part_rows(moved[group].parts[("panes", bucket, part)], bucket)
        return [(cut.keys[c], s, *a) for c, s, *a in zip(cut.codes.tolist(), cut.starts.tolist(),
                                                          *[a.tolist() for a in cut.acc])]
    assert cut_rows(0, 100, 0) == [("a", 100, 1)] and cut_rows(0, 100, 1) == [("a", 100, 4)]
    assert cut_rows(1, 100, 0) == [("b", 110, 2), ("c", 110, 3)]
    assert cut_rows(1, 120, 0) == [("c", 120, 5), ("b", 120, 6)]

    meta = {"fingerprint": FINGERPRINT, "wm": 0, "window_log": [[200, 1]], "event_index": [], "processing_index": []}
    moved = rekey({0: StoredGroup(dict(meta), windows)}, group_of, 1, 2)
    assert json.loads(moved[0].parts[("windows", 200, 0)])["x"] == {"l": [1], "r": [0], "L": {"v": [5]},
                                                                    "R": {"v": []}}
    assert json.loads(moved[1].parts[("windows", 200, 0)])["x"]["R"] == {"v": [6, 7]}

    meta = {"fingerprint": FINGERPRINT, "wm": 0, "row_shards": {"shards": 1, "held": 2, "touched": None},
            "event_index": [[0, 1, 10]], "processing_index": []}
    moved = rekey({0: StoredGroup(dict(meta), rows)}, group_of, 1, 2)
    for g, expected_keys in ((0, ["a", "a"]), (1, ["c"])):
        due_event, _, data = json.loads(moved[g].parts[("rows", 0, 0)])
        assert due_event == 10
        assert table_of(json.dumps(data), 0)[1].keys.tolist() == expected_keys
        assert moved[g].meta["row_shards"]["held"] == len(set(expected_keys))
        assert moved[g].meta["event_index"] == [[0, 1, 10]], "the shard entered under its due time"
