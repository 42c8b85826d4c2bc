"""A key group's per-key records kept in a few *shards*, each one JSON text of many keys' records.

Inside Spark's transformWithState every state entry costs a share of a round trip to the JVM: a
key's record in its own MapState entry costs about 43 us to read and 37 us to write even pipelined,
while the same record inside one JSON text of thousands costs 2.6 and 3.3 us
(``benchmarks/state_call_costs.py``).  A batch that comes back to most of a group's keys (sessions
with early firings, Nexmark q11) pays the first price per key; in shards it pays an entry per shard
it touches plus a few microseconds per record those shards hold.  A batch that comes back to few
keys of many (1M held, 20K touched) would pay for every record of every shard it touched, so the
number of shards follows the share of held keys a batch comes back to: ``target_shards`` picks the
count the cost model finds cheapest, and when the current count costs ``SLACK`` times the target's,
the group's shards are rebuilt at the target count in one pass (as costly as a batch touching every
key once; a group whose keys grow rebuilds each time they have about doubled, as a hash table does).

A key a batch creates counts as touched (per key, its read finds nothing and it is written: an
entry's price; in a shard, a record's), but a first batch that creates every key says nothing of
how many keys later batches touch: until a batch has come back to a key it held, the model assumes
batches touch one (``UNKNOWN_TOUCHED``): about one key per shard.

Stored (``PartStore``, domain ``"keys"``): shard ``s`` of ``n`` holds the keys whose hash (crc32 of
the key's tagged JSON: stable across processes, unlike Python's ``hash``) is ``s`` modulo ``n``, as
one text at ``(s, 0)``: a line per key, ``<key JSON>\t<record>`` (the key in the state codec's
tagged form, the record the key's own one-line JSON text as ``group_state`` writes it); an empty
shard has no text.  Lines, not a JSON array of pairs: a record nested in JSON would be escaped and
parsed twice over (every record of every shard a batch reads, not only the keys it asks for), and
JSON never holds a raw newline or tab, so splitting finds the fields.  A shard is looked up by its
keys' JSON, which the hash needs anyway, so reading one parses no JSON at all.  (Shards written as
``[[key, record], ...]``, before lines, are read too and rewritten as lines when they change.)
The group's record holds ``{"shards", "held", "touched"}`` (``to_record``).
"""
from __future__ import annotations

from typing import Hashable, Iterable, Optional

from . import legacy
from .layouts import KEY_SHARDS
from .part_log import PartStore
from .shards import RECORD_US, ShardBook, compact_json, key_json, target_shards

DOMAIN = KEY_SHARDS.domain
#: What the model assumes a batch comes back to before any batch has come back to a key: one key,
#: which makes a shard of about one key.  Many shards are the safe guess: where batches come back to
#: most keys they cost what records of their own cost (13.5x one shard's), while one shard where
#: batches come back to few keys of many costs without bound (every held record read for each).
UNKNOWN_TOUCHED = 1.0
#: At least about this many keys a shard: about one per key, where shards cost what records of their
#: own cost.
KEYS_PER_SHARD = 0.5



def parse_shard(text: str) -> dict[str, str]:
    """A shard's text as {key JSON: record text} (either form it may be stored in)."""
    if text.startswith("[["):  # (pairs, as written before lines; a tagged key's JSON never starts so)
        return legacy.shard_pairs(text, compact_json)
    return dict(line.split("\t", 1) for line in text.split("\n"))


def shard_text(entries: dict[str, str]) -> str:
    return "\n".join([f"{key}\t{record}" for key, record in entries.items()])


class KeyShards(ShardBook):
    """The records of one group's keys, by shard: a shard is read when a key of it is asked for,
    and the shards that changed are written on ``flush``.  The same three calls as a per-key store
    (``get_keys``/``put_keys``/``remove_keys``), so ``GroupState`` reads and writes either."""

    def __init__(self, store: PartStore, record: Optional[dict] = None) -> None:
        super().__init__(store, DOMAIN, record)
        #: shard -> {key JSON: record text} (shards read or changed in this batch)
        self.shards: dict[int, dict[str, str]] = {}
        self.dirty: set[int] = set()
        self.stored: set[int] = set()  # shards read or written that have a text in the store

    def shard_of(self, key: Hashable) -> int:
        return self.address(key_json(key))

    # -- reading ----------------------------------------------------------------------------------
    def _load(self, shards: Iterable[int]) -> None:
        """Read the shards not read yet, in one call."""
        for shard, text in self.read_missing(shards, self.shards):
            if text is not None:
                self.stored.add(shard)
            self.shards[shard] = parse_shard(text) if text else {}

    def _located(self, keys: Iterable[Hashable]) -> list[tuple[str, int]]:
        """Each key's (JSON, shard), the shards read."""
        names = [key_json(key) for key in keys]
        where = [self.address(name) for name in names]
        self._load(where)
        return list(zip(names, where))

    def get_keys(self, keys: list[Hashable]) -> list[Optional[str]]:
        return [self.shards[shard].get(name) for name, shard in self._located(keys)]

    # -- writing ----------------------------------------------------------------------------------
    def put_keys(self, items: list[tuple[Hashable, str]]) -> None:
        for (key, text), (name, shard) in zip(items, self._located(key for key, _ in items)):
            if "\n" in text:
                raise ValueError(f"the record of key {key!r} is not one line of JSON: {text[:80]!r}")
            entries = self.shards[shard]
            if name not in entries:
                self.held += 1
            entries[name] = text
            self.dirty.add(shard)

    def remove_keys(self, keys: list[Hashable]) -> None:
        for name, shard in self._located(keys):
            if self.shards[shard].pop(name, None) is not None:
                self.held -= 1
                self.dirty.add(shard)

    def flush(self, touched: int, came_back: int) -> None:
        """The batch touched ``touched`` keys, ``came_back`` of them held before: rebuild the shards
        at the model's count if the current one costs ``SLACK`` times more, then write what changed."""
        if not self.shards:  # (a call that read no key: nothing to write, nothing learnt)
            return
        self.note_batch(touched, came_back)
        target = self.rebuild_target(UNKNOWN_TOUCHED, RECORD_US, KEYS_PER_SHARD)
        if target is not None:
            self._rebuild(target)
        self.write()

    def write(self) -> None:
        """Write the shards that changed (one call), remove those left empty (one call)."""
        puts = [(s, 0, shard_text(self.shards[s])) for s in sorted(self.dirty) if self.shards[s]]
        emptied = [(s, 0) for s in sorted(self.dirty) if not self.shards[s] and s in self.stored]
        if puts:
            self.store.put_texts(DOMAIN, puts)
            self.stored.update(s for s, _, _ in puts)
        if emptied:
            self.store.remove_texts(DOMAIN, emptied)
            self.stored.difference_update(s for s, _ in emptied)
        self.dirty.clear()

    def _rebuild(self, count: int) -> None:
        """Every record into ``count`` shards: the old shards read in one call, the new ones written
        (and the old ones beyond them removed) by ``write``."""
        self._load(range(self.count))
        pairs = [pair for entries in self.shards.values() for pair in entries.items()]
        old = set(self.shards)
        self.count = count
        self.shards = {shard: {} for shard in old | set(range(count))}
        for name, text in pairs:
            self.shards[self.address(name)][name] = text
        self.dirty = set(self.shards)

    # -- the whole group --------------------------------------------------------------------------
    @classmethod
    def of(cls, store: PartStore, items: list[tuple[Hashable, str]], touched: int, came_back: int) -> "KeyShards":
        """A group's records moved in from entries of their own, at the model's count at once."""
        shards = cls(store)
        shards.touched = float(touched) if came_back else None
        shards.count = target_shards(shards.touched or UNKNOWN_TOUCHED, len(items), RECORD_US, KEYS_PER_SHARD)
        shards.shards = {shard: {} for shard in range(shards.count)}  # (new: nothing stored to read)
        if items:
            shards.put_keys(items)
        shards.write()
        return shards
