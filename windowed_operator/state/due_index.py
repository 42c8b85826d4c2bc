"""Which keys of a key group have work due, found without reading every key.

A key group holds each key's state under the key (a map), so a micro-batch reads only the keys it
touches; keys without new rows still have windows that become due as the watermark (or processing
time) advances.  This index finds them: every key with state is entered under the time its next
work is due, in *buckets* of ``bucket_ms`` of time, each bucket a list of ``parts`` of at most
``part_size`` ``(key, due)`` entries.  The group's small bookkeeping record keeps, per bucket, how
many parts it has and its earliest due time, so:
- entering keys costs one read and one write of a bucket's last part per bucket a batch touches
  (all buckets' parts in one call each: a remote store answers a call in one round trip);
- finding the keys due at time ``t`` reads only the parts of buckets whose earliest due time is at
  most ``t``, and writes back what is not due yet;
- a key whose due time moved keeps its old entry until that bucket comes due (lazy deletion): the
  caller loads the key, sees it has nothing due, and moves on.  Each stale entry was made by one
  touch of the key, so stale reads are bounded by the touches, never by the keys held.
Every read and write goes through ``IndexStore`` (a map of parts), so the cost of a batch follows the
keys it touches and the keys that are due, not the keys held.  Pure Python: the Spark runner gives it
a MapState; tests give it a dict that counts calls.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Optional, Protocol

from ..time_rules import is_timer_due
from .shards import KEY_CODEC

#: Bucket width: keys due within the same 10 s share a bucket.
BUCKET_MS = 10_000
#: Entries per stored part: a bounded read and write per bucket touched.
PART_SIZE = 256

Entry = tuple[Hashable, int]  # (key, due time)


Place = tuple[int, int]  # (bucket, part)


def entries_text(entries: list[Entry], value: Any) -> str:
    """A part's entries as stored: ``[[key, due], ...]``, each key in the codec's tagged form (``value``)."""
    return json.dumps([[value(key), due] for key, due in entries], separators=(",", ":"))


def entries_of(text: str, read_value: Any) -> list[Entry]:
    """A stored part's entries (``entries_text``) back, each key read with the codec's ``read_value``."""
    return [(read_value(key), due) for key, due in json.loads(text)]


class PartsAsTexts:
    """The ``IndexStore`` of a store that keeps texts by part (``get_texts``, ``put_texts``,
    ``remove_texts``): each part is one text (``entries_text``), its keys in the codec's tagged form
    (the codec of shards' keys: ``shards.KEY_CODEC``).  ``plain_key`` turns a key into what the text
    holds (the Spark store: numpy scalars as Python ones)."""

    def get_texts(self, domain: str, places: list[Place]) -> list[Optional[str]]:
        raise NotImplementedError

    def put_texts(self, domain: str, items: list[tuple[int, int, str]]) -> None:
        raise NotImplementedError

    def remove_texts(self, domain: str, places: list[Place]) -> None:
        raise NotImplementedError

    def plain_key(self, key: Hashable) -> Hashable:
        return key

    def get_parts(self, domain: str, places: list[Place]) -> list[list[Entry]]:
        return [entries_of(text, KEY_CODEC.read_value) if text is not None else []
                for text in self.get_texts(domain, places)]

    def put_parts(self, domain: str, items: list[tuple[int, int, list[Entry]]]) -> None:
        self.put_texts(domain, [(bucket, part, entries_text([(self.plain_key(key), due) for key, due in entries],
                                                            KEY_CODEC.value))
                                for bucket, part, entries in items])

    def remove_parts(self, domain: str, places: list[Place]) -> None:
        self.remove_texts(domain, places)


class IndexStore(Protocol):
    """Parts of buckets, addressed by ``(domain, bucket, part)``; many parts per call, because each
    call to a remote store is a round trip (the Spark runner answers a call's parts in one)."""

    def get_parts(self, domain: str, places: list[Place]) -> list[list[Entry]]: ...

    def put_parts(self, domain: str, items: list[tuple[int, int, list[Entry]]]) -> None: ...

    def remove_parts(self, domain: str, places: list[Place]) -> None: ...


@dataclass
class _Bucket:
    parts: int
    earliest: int


@dataclass
class DueIndex:
    """One time domain's index (``"event"`` or ``"processing"``) of one key group."""

    domain: str
    store: IndexStore
    bucket_ms: int = BUCKET_MS
    part_size: int = PART_SIZE
    buckets: dict[int, _Bucket] = field(default_factory=dict)
    _pending: dict[int, list[Entry]] = field(default_factory=dict)

    # -- bookkeeping (kept in the group's record) ----------------------------------------------
    def to_record(self) -> list[list[int]]:
        return [[b, v.parts, v.earliest] for b, v in sorted(self.buckets.items())]

    @classmethod
    def from_record(cls, domain: str, store: IndexStore, record: Optional[Iterable[list[int]]],
                    **options: Any) -> "DueIndex":
        index = cls(domain, store, **options)
        for bucket, parts, earliest in record or ():
            index.buckets[bucket] = _Bucket(parts, earliest)
        return index

    def earliest(self) -> Optional[int]:
        """The earliest due time entered (maybe stale: then the key is found with nothing due)."""
        return min((b.earliest for b in self.buckets.values()), default=None)

    # -- entering keys ----------------------------------------------------------------------------
    def enter(self, key: Hashable, due: int) -> None:
        """Enter ``key`` as due at ``due`` (written by ``flush``)."""
        self._pending.setdefault(due // self.bucket_ms, []).append((key, due))

    def flush(self) -> None:
        """Append the entered keys to their buckets: the last part of every bucket touched is read
        (one call) and rewritten with the new parts as each bucket fills (one call)."""
        pending = sorted(self._pending.items())
        self._pending.clear()
        known_buckets = [bucket for bucket, _ in pending if bucket in self.buckets]
        lasts: dict[int, list[Entry]] = {}
        if known_buckets:
            places = [(bucket, self.buckets[bucket].parts - 1) for bucket in known_buckets]
            lasts = dict(zip(known_buckets, self.store.get_parts(self.domain, places)))
        writes: list[tuple[int, int, list[Entry]]] = []
        for bucket, entries in pending:
            earliest = min(due for _, due in entries)
            known = self.buckets.get(bucket)
            if known is None:
                known = self.buckets[bucket] = _Bucket(0, earliest)
            else:
                known.earliest = min(known.earliest, earliest)
                known.parts -= 1  # (its last part is rewritten)
            writes += self._parts(bucket, known, lasts.get(bucket, []) + entries)
        if writes:
            self.store.put_parts(self.domain, writes)

    def _parts(self, bucket: int, known: _Bucket, entries: list[Entry]) -> list[tuple[int, int, list[Entry]]]:
        """The parts ``entries`` fill after the bucket's ``known.parts`` first ones (counted in)."""
        parts = []
        for lo in range(0, len(entries), self.part_size):
            parts.append((bucket, known.parts, entries[lo:lo + self.part_size]))
            known.parts += 1
        return parts

    # -- finding due keys -------------------------------------------------------------------------
    def take_due(self, time: int) -> set[Hashable]:
        """The keys entered as due at or before ``time``, removed from the index; entries due later
        in the same buckets are written back (over the bucket's first parts).  One call reads every
        part of the due buckets, one writes back, one removes the parts left over."""
        due_buckets = sorted(b for b, v in self.buckets.items() if is_timer_due(v.earliest, time))
        if not due_buckets:
            return set()
        places = [(bucket, part) for bucket in due_buckets for part in range(self.buckets[bucket].parts)]
        stored: dict[int, list[Entry]] = {bucket: [] for bucket in due_buckets}
        for (bucket, _), entries in zip(places, self.store.get_parts(self.domain, places)):
            stored[bucket] += entries
        keys: set[Hashable] = set()
        writes: list[tuple[int, int, list[Entry]]] = []
        removals: list[Place] = []
        for bucket in due_buckets:
            known = self.buckets.pop(bucket)
            later: list[Entry] = []
            for key, due in stored[bucket]:
                if is_timer_due(due, time):
                    keys.add(key)
                else:
                    later.append((key, due))
            rest = _Bucket(0, min((due for _, due in later), default=0))
            writes += self._parts(bucket, rest, later)
            removals += [(bucket, part) for part in range(rest.parts, known.parts)]
            if rest.parts:
                self.buckets[bucket] = rest
        if writes:
            self.store.put_parts(self.domain, writes)
        if removals:
            self.store.remove_parts(self.domain, removals)
        return keys
