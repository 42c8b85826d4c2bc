"""A key group's state, read and written key by key: what a micro-batch touches, nothing more.

A runner groups keys into a few *key groups* (one call of user code per group and batch).  Inside a
group every key's state is its own record, read only when the batch has rows for the key or the due
index (``due_index``) says it has work due, and written only when it changed; the records are kept
many keys to a stored text (``key_shards``: as many texts as the group's batches make cheapest) or
each in its own entry (``GroupStore.get_keys``), and a restart may move them either way.  The
group's own small record holds the bookkeeping: the fingerprint of the operator that wrote the state
(checked on load, ``fingerprint``), the watermark last applied, the runner's timer, and the due
indexes' bucket lists.  So the calls a batch makes follow the keys it touches and the keys due,
never the keys held, and a worker never holds more than those keys' state.

Stored records are data: a key's record is ``[event-time due, processing-time due, <the key's state
as data>]``, the due times under which the index holds the key.  A list by position, not an object
of named fields: a batch that comes back to most keys writes every record it read, and names
repeated in each of them were half their bytes and half their encoding time (state version 7;
version 6's ``{"state": ..., "due": [...]}`` is read as well, and rewritten when its key is
written).  What the state is depends on the execution path: the object path's windows
(``state_codec.KeyStateCodec``), or the columnar paths' rows (``records``); a
``StateCodec`` turns it into data and back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Optional, Protocol, Union

from ..time import MAX_TIMESTAMP
from ..time_rules import is_timer_due
from . import legacy
from .due_index import DueIndex, IndexStore
from .fingerprint import check_restart
from .key_shards import KeyShards
from .layouts import KEY_SHARDS
from .part_log import PartStore

EVENT, PROCESSING = "event", "processing"
#: The group record's field holding the key shards' bookkeeping (absent: a record per key).
SHARDS = KEY_SHARDS.meta_key
#: A record as compact JSON (one encoder for every record: ``json.dumps`` with options makes one a call).
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def record_text(state_data: Any, due: list[Optional[int]]) -> str:
    """A key's stored record: its due times and its state's data, as one line of JSON."""
    return _encode([due[0], due[1], state_data])


def read_record(record: Any) -> tuple[Any, list[Optional[int]]]:
    """A parsed record's (state data, [event-time due, processing-time due]), in either version's form."""
    if isinstance(record, list):
        return record[2], record[:2]
    return legacy.key_record_fields(record)


class StateCodec(Protocol):
    """A key's state <-> JSON-able data."""

    def new(self) -> Any: ...

    def is_empty(self, state: Any) -> bool: ...

    def to_data(self, state: Any) -> Any: ...

    def from_data(self, data: Any) -> Any: ...


class GroupStore(IndexStore, PartStore, Protocol):
    """Where one key group's records live (Spark: a ValueState and two MapStates); the due index's
    parts too (``IndexStore``), and the texts of key shards and logs (``PartStore``)."""

    def get_meta(self) -> Optional[str]: ...

    def put_meta(self, text: str) -> None: ...

    def get_keys(self, keys: list[Hashable]) -> list[Optional[str]]: ...

    def put_keys(self, items: list[tuple[Hashable, str]]) -> None: ...

    def remove_keys(self, keys: list[Hashable]) -> None: ...

    def all_keys(self) -> list[Hashable]: ...


@dataclass
class _Loaded:
    state: Any
    due: list[Optional[int]]  # [event, processing]: the due times the index holds the key under
    existed: bool
    changed: bool = False


@dataclass
class GroupState:
    """One key group's state in a batch: its record (``meta``: clocks, fingerprint, bookkeeping of
    the layout), its keys' records read on demand (``preload``, ``touch``) from entries or key shards,
    and the due indexes naming the keys with work due; ``commit`` writes what changed and ``save`` the
    record.  The fingerprint is checked when the record is read: a restart that changed what the state
    depends on is refused."""

    store: GroupStore
    codec: StateCodec
    fingerprint: dict[str, str]
    label: str
    #: Keep the keys' records in shards (``key_shards``), moving a group stored with a record per
    #: entry into them; False: as stored (the logs and row shards, whose groups keep no per-key records).
    sharded: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    loaded: dict[Hashable, _Loaded] = field(default_factory=dict)

    def __post_init__(self) -> None:
        text = self.store.get_meta()
        self.meta = json.loads(text) if text is not None else {}
        check_restart(self.meta.get("fingerprint"), self.fingerprint, self.label)
        self.indexes = {domain: DueIndex.from_record(domain, self.store, self.meta.get(f"{domain}_index"))
                        for domain in (EVENT, PROCESSING)}
        shards = self.meta.get(SHARDS)
        #: Where the keys' records are read and written: the store's own entries or shards of them.
        self.records: Union[GroupStore, KeyShards] = \
            KeyShards(self.store, shards) if shards is not None or (self.sharded and not self.meta) else self.store

    # -- keys -------------------------------------------------------------------------------------
    def preload(self, keys: Iterable[Hashable]) -> None:
        """Read the keys not read yet, all at once (the store may answer many in one round trip)."""
        missing = list(dict.fromkeys(k for k in keys if k not in self.loaded))
        if not missing:
            return
        texts = self.records.get_keys(missing)
        stored = [text for text in texts if text is not None]
        records = iter(json.loads(f"[{','.join(stored)}]") if stored else ())  # (one parse for all of them)
        for key, text in zip(missing, texts):
            if text is None:
                self.loaded[key] = _Loaded(self.codec.new(), [None, None], existed=False)
            else:
                data, due = read_record(next(records))
                self.loaded[key] = _Loaded(self.codec.from_data(data), due, existed=True)

    def key(self, key: Hashable) -> Any:
        """The key's state, read from the store the first time the batch asks (new: empty)."""
        self.preload((key,))
        return self.loaded[key].state

    def touch(self, key: Hashable) -> Any:
        """The key's state, to be changed by this batch (so written back)."""
        state = self.key(key)
        self.loaded[key].changed = True
        return state

    def due_keys(self, watermark: int, processing_time: Optional[int]) -> list[Hashable]:
        """Keys the indexes hold as due (maybe stale: their state says whether they really are),
        read; their index entries are taken out, so ``commit`` enters them again if work remains."""
        taken = self.indexes[EVENT].take_due(watermark)
        if processing_time is not None:
            taken |= self.indexes[PROCESSING].take_due(processing_time)
        self.preload(taken)
        for key in taken:
            entry = self.loaded[key]
            if entry.due[0] is not None and is_timer_due(entry.due[0], watermark):
                entry.due[0] = None  # its entry was taken
            if processing_time is not None and entry.due[1] is not None and is_timer_due(entry.due[1], processing_time):
                entry.due[1] = None
        return list(taken)

    def take_every_key(self) -> list[Hashable]:
        """Every key holding state, read: each is in an index (its next due time), so taking every
        entry names them all (a group moving to another layout, ``drop_keys`` after)."""
        taken = [key for index in self.indexes.values() for key in index.take_due(MAX_TIMESTAMP)]
        keys = list(dict.fromkeys(taken))
        self.preload(keys)
        return [key for key in keys if self.loaded[key].existed]

    def drop_keys(self, keys: list[Hashable]) -> None:
        """Remove ``keys``' records, forget every key read, and write the emptied indexes: the
        group's state has moved to another layout."""
        if keys:
            self.records.remove_keys(keys)
        if isinstance(self.records, KeyShards):
            self.records.write()
        self.loaded.clear()
        for index in self.indexes.values():
            index.flush()


    # -- writing back -----------------------------------------------------------------------------
    def commit(self, next_due: Callable[[Any], tuple[Optional[int], Optional[int]]]) -> None:
        """Write every key whose state or index entry changed (remove those left empty) and enter
        keys with new due times; then ``save`` the group's record."""
        puts: list[tuple[Hashable, str]] = []
        removals: list[Hashable] = []
        for key, entry in self.loaded.items():
            if self.codec.is_empty(entry.state):
                if entry.existed:
                    removals.append(key)
                continue
            due = list(next_due(entry.state))
            moved = False
            for i, domain in enumerate((EVENT, PROCESSING)):
                at = due[i]
                if at is not None and at != entry.due[i]:
                    self.indexes[domain].enter(key, at)
                    entry.due[i] = at
                    moved = True
            if entry.changed or moved or not entry.existed:
                puts.append((key, record_text(self.codec.to_data(entry.state), entry.due)))
        if puts:
            self.records.put_keys(puts)
        if removals:
            self.records.remove_keys(removals)
        came_back = sum(1 for entry in self.loaded.values() if entry.existed)
        if isinstance(self.records, KeyShards):
            self.records.flush(len(self.loaded), came_back)
        self._move_records(len(self.loaded), came_back)
        for index in self.indexes.values():
            index.flush()

    def _move_records(self, touched: int, came_back: int) -> None:
        """Move every key's record into shards when the group keeps a record per entry (a checkpoint
        written before key shards, or with the removed ``spark.windowed_operator.keyShards=false``):
        once, after the batch wrote its keys the old way."""
        if not self.sharded or isinstance(self.records, KeyShards):
            return
        keys = self.store.all_keys()
        # (every key all_keys names has its record)
        items = [(key, text) for key, text in zip(keys, self.store.get_keys(keys)) if text is not None] if keys \
            else []
        self.records = KeyShards.of(self.store, items, touched, came_back)
        if keys:
            self.store.remove_keys(keys)

    def save(self, **bookkeeping: Any) -> None:
        """Write the group's record (kept even when no key is due: it is small, and keys without a
        due time may still hold state)."""
        self.meta.update(bookkeeping)
        self.meta["fingerprint"] = self.fingerprint
        for domain, index in self.indexes.items():
            self.meta[f"{domain}_index"] = index.to_record()
        if isinstance(self.records, KeyShards):
            self.meta[SHARDS] = self.records.to_record()
        else:
            self.meta.pop(SHARDS, None)
        self.store.put_meta(json.dumps(self.meta, separators=(",", ":")))

    def next_event_time(self) -> Optional[int]:
        return self.indexes[EVENT].earliest()

    def has_due(self) -> bool:
        """Whether any key is indexed as due some time (a runner that polls keeps polling)."""
        return any(index.buckets for index in self.indexes.values())
