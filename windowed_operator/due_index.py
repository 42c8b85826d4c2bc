"""Which keys of a key group have work due, found without reading every key.

A key group holds each key's state under the key (a map), so a micro-batch reads only the keys it
touches; keys without new rows still have windows that become due as the watermark (or processing
time) advances.  This index finds them: every key with state is entered under the time its next
work is due, in *buckets* of ``bucket_ms`` of time, each bucket a list of ``parts`` of at most
``part_size`` ``(key, due)`` entries.  The group's small bookkeeping record keeps, per bucket, how
many parts it has and its earliest due time, so:
- entering keys costs one read and one write of a bucket's last part per bucket a batch touches;
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

from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Optional, Protocol

from .time_rules import is_timer_due

#: Bucket width: keys due within the same 10 s share a bucket.
BUCKET_MS = 10_000
#: Entries per stored part: a bounded read and write per bucket touched.
PART_SIZE = 256

Entry = tuple[Hashable, int]  # (key, due time)


class IndexStore(Protocol):
    """Parts of buckets, addressed by ``(domain, bucket, part)``."""

    def get_part(self, domain: str, bucket: int, part: int) -> list[Entry]: ...

    def put_part(self, domain: str, bucket: int, part: int, entries: list[Entry]) -> None: ...

    def remove_part(self, domain: str, bucket: int, part: int) -> None: ...


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
        """Append the entered keys to their buckets: per bucket, its last part is read and rewritten,
        and new parts are written as it fills."""
        for bucket, entries in sorted(self._pending.items()):
            known = self.buckets.get(bucket)
            earliest = min(due for _, due in entries)
            if known is None:
                known = self.buckets[bucket] = _Bucket(0, earliest)
                last: list[Entry] = []
            else:
                known.earliest = min(known.earliest, earliest)
                last = self.store.get_part(self.domain, bucket, known.parts - 1)
                known.parts -= 1
            self._write(bucket, known, last + entries)
        self._pending.clear()

    def _write(self, bucket: int, known: _Bucket, entries: list[Entry]) -> None:
        for lo in range(0, len(entries), self.part_size):
            self.store.put_part(self.domain, bucket, known.parts, entries[lo:lo + self.part_size])
            known.parts += 1

    # -- finding due keys -------------------------------------------------------------------------
    def take_due(self, time: int) -> set[Hashable]:
        """The keys entered as due at or before ``time``, removed from the index; entries due later
        in the same buckets are written back (over the bucket's first parts)."""
        keys: set[Hashable] = set()
        for bucket in sorted(b for b, v in self.buckets.items() if is_timer_due(v.earliest, time)):
            known = self.buckets.pop(bucket)
            later: list[Entry] = []
            for part in range(known.parts):
                for key, due in self.store.get_part(self.domain, bucket, part):
                    if is_timer_due(due, time):
                        keys.add(key)
                    else:
                        later.append((key, due))
            rest = _Bucket(0, min((due for _, due in later), default=0))
            self._write(bucket, rest, later)
            for part in range(rest.parts, known.parts):
                self.store.remove_part(self.domain, bucket, part)
            if rest.parts:
                self.buckets[bucket] = rest
        return keys
