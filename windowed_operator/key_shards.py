"""A key group's per-key records kept in a few *shards*, each one JSON text of many keys' records.

Inside Spark's transformWithState every state entry costs a share of a round trip to the JVM: a
key's record in its own MapState entry costs about 43 us to read and 37 us to write even pipelined,
while the same record inside one JSON text of thousands costs 2.6 and 3.3 us
(``benchmarks/state_call_costs.py``).  A batch that touches most of a group's keys (sessions with
early firings, Nexmark q11) pays the first price per key; in shards it pays an entry per shard it
touches plus a few microseconds per record those shards hold.  A batch that touches few keys of many
(1M held, 20K touched) would pay for every record of every shard it touched, so the number of
shards follows the ratio of keys touched to keys held: ``target_shards`` picks the count that the
cost model says is cheapest for the last batches, and the group moves towards it a few shards per
batch by *linear hashing* (one shard split in two, or two merged into one, at a time), so that no
batch rewrites the whole group because its keys grew.

A key's shard: its hash (crc32 of the key's tagged JSON, stable across processes, unlike Python's
``hash``) modulo ``2**level``, or modulo ``2**(level + 1)`` for the shards already split this round
(those below ``split``); ``2**level + split`` shards in all.

Stored (``PartStore``, domain ``"keys"``): shard ``s`` is the text ``[[key, record], ...]`` at
``(s, 0)`` (the key in the state codec's tagged form, the record the key's own record text, as
``group_state`` writes it); an empty shard has no text.  The group's record holds
``{"level", "split", "held", "touched"}`` (``to_record``).
"""
from __future__ import annotations

import json
import math
import zlib
from typing import Any, Hashable, Iterable, Optional

from .part_log import PartStore
from .state_codec import KeyStateCodec

DOMAIN = "keys"
#: What a record costs in microseconds, read and written: in its own MapState entry (pipelined), and
#: inside a JSON text of many (``benchmarks/state-call-costs-2026-11-24.txt``).  Only their ratio
#: decides the shard count.
ENTRY_US = 42.6 + 37.2
RECORD_US = 2.6 + 3.3
#: Splits or merges a batch may make beyond one per shard it touched (the moves cost about what
#: the batch's own shards cost).
MIN_MOVES = 4
#: The shard count moves only when the model finds the current count this many times dearer.
SLACK = 1.5

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_KEYS = KeyStateCodec()


def _plain(key: Any) -> Any:
    return key.item() if hasattr(key, "item") and not isinstance(key, (str, bytes)) else key


def key_hash(tagged: Any) -> int:
    """A key's hash from its tagged form: the same in every process and every run."""
    return zlib.crc32(_encode(tagged).encode())


def modelled_cost(shards: int, touched: float, held: int) -> float:
    """Expected microseconds a batch touching ``touched`` keys (spread by hash) of ``held`` spends
    on ``shards`` shards: every shard it touches is read and written whole."""
    if held <= 0 or touched <= 0:
        return 0.0
    hit = shards * -math.expm1(touched * math.log1p(-1.0 / shards)) if shards > 1 else 1.0
    return hit * (ENTRY_US + RECORD_US * held / shards)


def target_shards(touched: float, held: int) -> int:
    """The power of two of shards the model finds cheapest (the one-shard-per-key end costs what
    per-key records cost)."""
    best, best_cost, shards = 1, modelled_cost(1, touched, held), 2
    while shards <= 2 * max(held, 1):
        cost = modelled_cost(shards, touched, held)
        if cost < best_cost:
            best, best_cost = shards, cost
        shards *= 2
    return best


class KeyShards:
    """The records of one group's keys, by shard: read a shard when a key of it is asked for, write
    the shards that changed on ``flush``.  The same three calls as a per-key store
    (``get_keys``/``put_keys``/``remove_keys``), so ``GroupState`` reads and writes either."""

    def __init__(self, store: PartStore, record: Optional[dict] = None) -> None:
        record = record or {}
        self.store = store
        self.level: int = record.get("level", 0)
        self.split: int = record.get("split", 0)
        self.held: int = record.get("held", 0)
        self.touched: Optional[float] = record.get("touched")
        #: shard -> {key: [tagged key, record text]} (shards read or changed in this batch)
        self.shards: dict[int, dict[Hashable, list]] = {}
        self.dirty: set[int] = set()
        self.stored: set[int] = set()  # shards read or written that have a text in the store

    # -- addressing -------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        return (1 << self.level) + self.split

    def _address(self, hashed: int) -> int:
        shard = hashed & ((1 << self.level) - 1)
        return hashed & ((2 << self.level) - 1) if shard < self.split else shard

    def shard_of(self, key: Hashable) -> int:
        return self._address(key_hash(_KEYS.value(_plain(key))))

    # -- reading ----------------------------------------------------------------------------------
    def _load(self, shards: Iterable[int]) -> None:
        """Read the shards not read yet, in one call."""
        missing = sorted({s for s in shards if s not in self.shards})
        if not missing:
            return
        texts = self.store.get_texts(DOMAIN, [(s, 0) for s in missing])
        for shard, text in zip(missing, texts):
            pairs = json.loads(text) if text is not None else []
            if text is not None:
                self.stored.add(shard)
            self.shards[shard] = {_KEYS.read_value(pair[0]): pair for pair in pairs}

    def get_keys(self, keys: list[Hashable]) -> list[Optional[str]]:
        where = [self.shard_of(key) for key in keys]
        self._load(where)
        out = []
        for key, shard in zip(keys, where):
            pair = self.shards[shard].get(key)
            out.append(pair[1] if pair is not None else None)
        return out

    # -- writing ----------------------------------------------------------------------------------
    def put_keys(self, items: list[tuple[Hashable, str]]) -> None:
        tagged = [_KEYS.value(_plain(key)) for key, _ in items]
        where = [self._address(key_hash(t)) for t in tagged]
        self._load(where)
        for (key, text), tag, shard in zip(items, tagged, where):
            entries = self.shards[shard]
            if key not in entries:
                self.held += 1
            entries[key] = [tag, text]
            self.dirty.add(shard)

    def remove_keys(self, keys: list[Hashable]) -> None:
        where = [self.shard_of(key) for key in keys]
        self._load(where)
        for key, shard in zip(keys, where):
            if self.shards[shard].pop(key, None) is not None:
                self.held -= 1
                self.dirty.add(shard)

    def flush(self, touched: int) -> None:
        """The batch touched ``touched`` keys: move the shard count towards the model's target,
        then write the shards that changed (one call) and remove those left empty (one call)."""
        self.touched = float(touched) if self.touched is None else (self.touched + touched) / 2
        self._rebalance(max(MIN_MOVES, len(self.shards)))
        self.write()

    def write(self) -> None:
        """Write the shards that changed, remove those left empty."""
        puts = [(s, 0, _encode(list(self.shards[s].values()))) for s in sorted(self.dirty) if self.shards[s]]
        emptied = [(s, 0) for s in sorted(self.dirty) if not self.shards[s] and s in self.stored]
        if puts:
            self.store.put_texts(DOMAIN, puts)
            self.stored.update(s for s, _, _ in puts)
        if emptied:
            self.store.remove_texts(DOMAIN, emptied)
            self.stored.difference_update(s for s, _ in emptied)
        self.dirty.clear()

    # -- the shard count --------------------------------------------------------------------------
    def _rebalance(self, budget: int) -> None:
        """Split or merge towards the target count, when the model says the current count costs
        ``SLACK`` times the target's or more (so a group does not move back and forth on noise)."""
        touched = self.touched or 0.0
        target = target_shards(touched, self.held)
        if modelled_cost(self.count, touched, self.held) <= SLACK * modelled_cost(target, touched, self.held):
            return
        if self.count < target:
            moves = min(budget, target - self.count)
            self._load(self._split_sources(moves))
            for _ in range(moves):
                self._split_one()
        else:
            moves = min(budget, self.count - target)
            self._load(self._merge_sources(moves))
            for _ in range(moves):
                self._merge_one()

    def _split_sources(self, moves: int) -> list[int]:
        """The stored shards the next ``moves`` splits read (a split of a shard this batch made
        reads nothing more)."""
        level, split, out, made = self.level, self.split, [], set()
        for _ in range(moves):
            if split not in made:
                out.append(split)
            made |= {split, split + (1 << level)}
            split += 1
            if split == 1 << level:
                level, split = level + 1, 0
        return out

    def _merge_sources(self, moves: int) -> list[int]:
        level, split, out = self.level, self.split, []
        for _ in range(moves):
            if split == 0:
                level, split = level - 1, 1 << (level - 1)
            split -= 1
            out += [split, split + (1 << level)]
        return out

    def _split_one(self) -> None:
        low, high = self.split, self.split + (1 << self.level)
        entries = self.shards[low]
        moving = {key: pair for key, pair in entries.items() if key_hash(pair[0]) & (1 << self.level)}
        for key in moving:
            del entries[key]
        self.shards[high] = moving
        self.dirty |= {low, high}
        self.split += 1
        if self.split == 1 << self.level:
            self.level, self.split = self.level + 1, 0

    def _merge_one(self) -> None:
        if self.split == 0:
            self.level, self.split = self.level - 1, 1 << (self.level - 1)
        self.split -= 1
        low, high = self.split, self.split + (1 << self.level)
        self.shards[low].update(self.shards.pop(high))
        self.shards[high] = {}  # (written as removed)
        self.dirty |= {low, high}

    @classmethod
    def of(cls, store: PartStore, items: list[tuple[Hashable, str]], touched: int) -> "KeyShards":
        """A group's records moved in from per-key entries, in the model's shard count at once."""
        shards = cls(store)
        shards.touched = float(touched)
        shards.level = target_shards(touched, len(items)).bit_length() - 1
        shards.shards = {shard: {} for shard in range(shards.count)}  # (new: nothing stored to read)
        if items:
            shards.put_keys(items)
        shards.write()
        return shards

    # -- the whole group --------------------------------------------------------------------------
    def take_all(self) -> list[tuple[Hashable, str]]:
        """Every key's record, its shard texts removed: the group goes back to per-key records."""
        self.write()
        self._load(range(self.count))
        items = [(key, pair[1]) for shard in range(self.count) for key, pair in self.shards[shard].items()]
        if self.stored:
            self.store.remove_texts(DOMAIN, [(s, 0) for s in sorted(self.stored)])
        self.shards.clear()
        self.stored.clear()
        self.level, self.split, self.held = 0, 0, 0
        return items

    def to_record(self) -> dict[str, Any]:
        return {"level": self.level, "split": self.split, "held": self.held, "touched": self.touched}
