"""The due index finds the keys with work due by reading only due buckets, never every key."""
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from windowed_operator.state.due_index import DueIndex

from helpers import MemoryStore


operations = st.lists(st.one_of(
    st.tuples(st.just("enter"), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 200)), max_size=12)),
    st.tuples(st.just("take"), st.integers(0, 220)),
    st.tuples(st.just("reload"), st.none())), max_size=25)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_index_returns_exactly_the_keys_with_an_entry_due(ops):
    store = MemoryStore()
    index = DueIndex("event", store, bucket_ms=20, part_size=3)
    model: list[tuple[int, int]] = []
    for op, arg in ops:
        if op == "enter":
            for key, due in arg:
                index.enter(key, due)
                model.append((key, due))
            index.flush()
        elif op == "take":
            expected = {k for k, due in model if due <= arg}
            model = [(k, due) for k, due in model if due > arg]
            assert index.take_due(arg) == expected
        else:  # the bookkeeping record round trip, as across micro-batches
            index = DueIndex.from_record("event", store, index.to_record(), bucket_ms=20, part_size=3)
        assert index.earliest() == min((due for _, due in model), default=None)
        assert all(len(entries) <= 3 for entries in store.parts.values())
        stored = sorted(e for entries in store.parts.values() for e in entries)
        assert stored == sorted(model)


def test_entering_and_taking_cost_follows_the_keys_touched_and_due_not_the_keys_held():
    store = MemoryStore()
    index = DueIndex("event", store, bucket_ms=1_000, part_size=256)
    for key in range(100_000):  # a large state: keys due over 100 s
        index.enter(key, key)
    index.flush()
    held = dict(store.calls)
    store.calls.clear()
    for key in range(5):  # five keys touched, all due in one bucket far ahead
        index.enter(key, 500_000)
    index.flush()
    assert store.calls == Counter(put_parts=1, put_part=1)  # a new bucket: one part written
    store.calls.clear()
    index.enter(7, 500_001)
    index.flush()
    assert store.calls == Counter(get_parts=1, get_part=1, put_parts=1, put_part=1)  # its last part read, rewritten
    store.calls.clear()
    assert index.take_due(1_499) == set(range(1_500))  # two buckets due, keys 0..1499
    assert store.calls["get_part"] == 8  # the parts of buckets 0 and 1 only (1,000 keys each: 4 parts of 256)
    assert store.calls["get_parts"] == 1  # in one call (a round trip to a remote store)
    assert held["put_part"] > 390


def test_a_batch_touching_many_buckets_makes_one_call_per_kind_of_access():
    """The calls follow the batch, not its buckets: a remote store answers each in one round trip."""
    store = MemoryStore()
    index = DueIndex("event", store, bucket_ms=100, part_size=4)
    for key in range(500):  # 50 buckets of 10 keys: 3 parts each
        index.enter(key, key * 10)
    index.flush()
    assert (store.calls["get_parts"], store.calls["put_parts"], store.calls["put_part"]) == (0, 1, 150)
    store.calls.clear()
    for key in range(500, 1_000):  # the same 50 buckets again: each one's last part read and rewritten
        index.enter(key, (key - 500) * 10 + 5)
    index.flush()
    assert (store.calls["get_parts"], store.calls["get_part"], store.calls["put_parts"]) == (1, 50, 1)
    store.calls.clear()
    assert index.take_due(2_499) == set(range(250)) | set(range(500, 750))  # 25 buckets due
    assert (store.calls["get_parts"], store.calls["put_parts"], store.calls["remove_parts"]) == (1, 0, 1)
    assert store.calls["get_part"] == store.calls["remove_part"] == 25 * 5
    store.calls.clear()
    assert index.take_due(2_505) == {250, 750}  # two keys of a bucket: the rest written back over its parts
    assert (store.calls["get_parts"], store.calls["put_parts"], store.calls["remove_parts"]) == (1, 1, 0)
    assert sorted(e for entries in store.parts.values() for e in entries) == sorted(
        [(k, k * 10) for k in range(251, 500)] + [(k, (k - 500) * 10 + 5) for k in range(751, 1_000)])
