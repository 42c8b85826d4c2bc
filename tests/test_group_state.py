"""Per-key group state: a batch reads and writes the keys it touches and the keys due, and gives the
panes the core gives with every key's state in memory."""
import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Mean, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, SlidingWindows, TimeWindows
from windowed_operator.state.fingerprint import IncompatibleRestartError
from windowed_operator.state.group_batch import next_due, run_group_batch
from windowed_operator.state.group_state import GroupState
from windowed_operator.engine.key_state import KeyState
from windowed_operator.state.codec import KeyStateCodec

from helpers import MemoryStore, near_boundaries
from windowed_operator.engine.build import build_core


FINGERPRINT = {"window": "w"}
EARLY_LATE = TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
OPERATORS = {
    "tumbling sum": KeyedWindowedOperator(TimeWindows(10), Sum(), allowed_lateness=5),
    "sessions retracting": KeyedWindowedOperator(SessionWindows(7), Count(), allowed_lateness=12,
                                                 trigger=EARLY_LATE.accumulating_and_retracting_fired_panes()),
    "hopping processing time": KeyedWindowedOperator(
        TimeWindows(10).slide_by(5), Mean(),
        trigger=TriggerOption.at_watermark().with_early_firings_at_every(3).with_late_firings_at_every(2),
        allowed_lateness=6),
    "per-record sliding": KeyedWindowedOperator(SlidingWindows(8), Sum(), allowed_lateness=4),
}


def batch_of(elements):
    by_key: dict = {}
    for key, ts in elements:
        by_key.setdefault(key, []).append((ts, ts % 5 + 1, None))
    return {k: sorted(v, key=lambda e: e[0]) for k, v in by_key.items()}


def run_in_memory(core, batches):
    """The reference: every key's state in memory, every key with work due run each batch."""
    states, out = {}, []
    for rows, watermark, now in batches:
        emitted = []
        for key, elements in batch_of(rows).items():
            emitted += core.process_batch(key, states.setdefault(key, KeyState()), elements, watermark, now).outputs
        for key, state in states.items():
            if key not in batch_of(rows) and (core.event_time_work_due(state, watermark)
                                              or core.processing_time_work_due(state, now)):
                emitted += core.process_batch(key, state, [], watermark, now).outputs
        for key in [k for k, s in states.items() if s.is_empty()]:
            del states[key]
        out.append(Counter(emitted))
    return out, states


def run_on_store(core, batches, store, bucket_ms=None, sharded=None):
    """``sharded``: per batch, whether the group keeps its keys' records in shards (moving them in;
    False: as stored)."""
    out = []
    for i, (rows, watermark, now) in enumerate(batches):
        group = GroupState(store, KeyStateCodec(), FINGERPRINT, "op", sharded=sharded[i % len(sharded)] if sharded else False)
        if bucket_ms:
            for index in group.indexes.values():
                index.bucket_ms = bucket_ms
        work = [(key, lambda k, s, e=elements: core.process_batch(k, s, e, watermark, now))
                for key, elements in batch_of(rows).items()]
        emission = run_group_batch(core, group, work, watermark, now)
        group.commit(next_due(core))
        group.save(wm=watermark)
        out.append(Counter(emission.outputs))
    return out


batches = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from("abcde"), near_boundaries(0, 80)), max_size=6),
                             st.integers(0, 9), st.integers(0, 4)), max_size=12)


def stored_keys(store):
    """The keys holding a record: their own entries, and the key shards' texts."""
    from windowed_operator.state.key_shards import DOMAIN
    in_shards = [pair[0] for (domain, _, _), text in store.parts.items() if domain == DOMAIN for pair in json.loads(text)]
    assert len(in_shards) == len(set(in_shards))  # (a key in one shard only)
    return set(store.keys) | set(in_shards)


@pytest.mark.parametrize("name", sorted(OPERATORS))
@settings(max_examples=60, deadline=None)
@given(steps=batches, bucket_ms=st.sampled_from([1, 7, 10_000]),
       sharded=st.sampled_from([[False], [True], [False, True, True], [False, False, True]]))
def test_per_key_state_gives_the_panes_of_in_memory_state(name, steps, bucket_ms, sharded):
    core = build_core(OPERATORS[name])
    timeline, watermark, now = [], -3, 0
    for rows, wm_step, pt_step in steps:
        watermark += wm_step
        now += pt_step
        timeline.append((rows, watermark, now))
    timeline.append(([], 10**6, now + 10**6))  # everything due at the end
    expected, states = run_in_memory(core, timeline)
    store = MemoryStore()
    assert run_on_store(core, timeline, store, bucket_ms, sharded) == expected
    assert stored_keys(store) == set(states)  # empty keys removed


def test_a_batch_touching_one_key_reads_and_writes_only_that_key():
    core = build_core(OPERATORS["tumbling sum"])
    store = MemoryStore()
    run_on_store(core, [([(f"k{i}", i % 7) for i in range(1_000)], 0, 0)], store)  # 1,000 keys with state
    store.calls.clear()
    run_on_store(core, [([("k5", 3)], 1, 1)], store)
    assert store.calls == Counter(get_meta=1, get_key=1, put_key=1, put_meta=1)
    store.calls.clear()
    run_on_store(core, [([], 2, 2)], store)  # nothing due: the group's record only
    assert store.calls == Counter(get_meta=1, put_meta=1)
    store.calls.clear()
    run_on_store(core, [([], 10, 3)], store)  # window [0, 10) due at 10 for every key
    assert store.calls["get_key"] == 1_000 and store.calls["put_key"] == 1_000
    assert store.calls["get_part"] == 4  # 1,000 entries in parts of 256


def test_a_changed_operator_is_refused_on_load():
    store = MemoryStore()
    group = GroupState(store, KeyStateCodec(), {"window": "w", "key groups": "16"}, "op")
    group.commit(lambda s: (None, None))
    group.save()
    with pytest.raises(IncompatibleRestartError, match="key groups changed from 16 to 4"):
        GroupState(store, KeyStateCodec(), {"window": "w", "key groups": "4"}, "op")
