"""The bookkeeping key shards and row shards share: which shard a key is in, how many shards a group
keeps, and the one-call read of the shards a batch needs.

Both stores keep a group's keys in ``count`` shards, a key in shard ``key_hash(key_json(key)) %
count`` (stable across processes and runs, unlike Python's ``hash``), and hold ``{"shards", "held",
"touched"}`` in the group's record: the count, the keys held, and a running mean of the keys a batch
touches (learnt once a batch comes back to a key it held).  The count follows the cost model
(``modelled_cost``: every shard a batch touches is read and written whole), at each store's price of
a key inside a shard; when the current count costs ``SLACK`` times the model's best, the store
rebuilds at that count in one pass.  What a shard holds (records by line, rows by column) and how
it is rebuilt is the store's (``key_shards.KeyShards``, ``row_shards.RowShards``).
"""
from __future__ import annotations

import json
import math
import zlib
from typing import Any, Hashable, Iterable, Optional

from .codec import KeyStateCodec
from .part_log import PartStore

#: What a record costs in microseconds, read and written: in its own MapState entry (pipelined), and
#: inside a JSON text of many (``benchmarks/results/state_call_costs.txt``).  Only their ratio
#: decides the shard count.
ENTRY_US = 42.6 + 37.2
RECORD_US = 2.6 + 3.3
#: The shards are rebuilt only when the model finds the current count this many times dearer than
#: the target (so a group does not move back and forth on noise).
SLACK = 1.5

#: JSON as shards and records are written (compact; one encoder for all: ``json.dumps`` with options makes one a call).
compact_json = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
#: Keys in their tagged form (``codec``).
KEY_CODEC = KeyStateCodec()


def key_hash(key_json: str) -> int:
    """A key's hash from its tagged JSON (``key_json``): the same in every process and every run.
    (crc32's low bits cluster for keys that differ in a character or two, "k0000001", "k0000002":
    62,500 such keys fill 35.7K of 65,536 shards where a uniform hash fills 40.3K; a multiplicative
    mix spreads them.)"""
    mixed = (zlib.crc32(key_json.encode()) * 0x9E3779B1) & 0xFFFFFFFF
    return mixed ^ (mixed >> 15)


def key_json(key: Hashable) -> str:
    """A key's tagged JSON: its name in a shard and what its hash is taken of (the codec's ``value``
    makes numpy scalars plain, so a numpy key and a Python one are the same key)."""
    return compact_json(KEY_CODEC.value(key))


def modelled_cost(shards: int, touched: float, held: int, record_us: float = RECORD_US) -> float:
    """Expected microseconds a batch coming back to ``touched`` keys (spread by hash) of ``held``
    spends on ``shards`` shards: every shard it touches is read and written whole, at ``record_us``
    a key it holds."""
    if held <= 0 or touched <= 0:
        return 0.0
    hit = shards * -math.expm1(touched * math.log1p(-1.0 / shards)) if shards > 1 else 1.0
    return hit * (ENTRY_US + record_us * held / shards)


def target_shards(touched: float, held: int, record_us: float = RECORD_US, keys_per_shard: float = 0.5) -> int:
    """The power of two of shards the model finds cheapest, with at least about ``keys_per_shard``
    keys each (by default about one per key, where shards cost what records of their own cost)."""
    best, best_cost, shards = 1, modelled_cost(1, touched, held, record_us), 2
    while shards <= max(held, 1) / keys_per_shard:
        cost = modelled_cost(shards, touched, held, record_us)
        if cost < best_cost:
            best, best_cost = shards, cost
        shards *= 2
    return best


class ShardBook:
    """A group's shards as its record keeps them (``{"shards", "held", "touched"}``), the address of
    a key, the rule that rebuilds them, and the one-call read: the base of both shard stores."""

    def __init__(self, store: PartStore, domain: str, record: Optional[dict] = None) -> None:
        record = record or {}
        self.store, self.domain = store, domain
        self.count: int = record.get("shards", 1)
        self.held: int = record.get("held", 0)
        self.touched: Optional[float] = record.get("touched")

    def to_record(self) -> dict[str, Any]:
        return {"shards": self.count, "held": self.held, "touched": self.touched}

    def address(self, name: str) -> int:
        """The shard of the key whose tagged JSON is ``name``."""
        return key_hash(name) % self.count

    def shards_of(self, keys: list[Hashable]) -> list[int]:
        """Each key's shard (with one shard no key is hashed)."""
        if self.count == 1:
            return [0] * len(keys)
        return [self.address(key_json(key)) for key in keys]

    def note_batch(self, touched: int, came_back: int) -> None:
        """A batch touched ``touched`` keys, ``came_back`` of them held before: the running mean of
        keys touched, once a batch has come back to a key (a first batch creating every key says
        nothing of how many later batches touch)."""
        if came_back or self.touched is not None:
            self.touched = float(touched) if self.touched is None else (self.touched + touched) / 2

    def rebuild_target(self, unknown: float, record_us: float, keys_per_shard: float, fewest: int = 1) -> Optional[int]:
        """The count to rebuild at (None: keep this one): the model's best for the keys a batch
        touches (``unknown`` until learnt), at ``record_us`` a key in a shard and at least about
        ``keys_per_shard`` keys a shard, and never below ``fewest`` shards; rebuilt when the current
        count is below ``fewest`` or costs ``SLACK`` times the best."""
        estimate = self.touched if self.touched is not None else unknown
        target = max(target_shards(estimate, self.held, record_us, keys_per_shard), fewest)
        if self.count < fewest or target != self.count and modelled_cost(
                self.count, estimate, self.held, record_us) > SLACK * modelled_cost(target, estimate, self.held,
                                                                                     record_us):
            return target
        return None

    def read_missing(self, shards: Iterable[int], have: Iterable[int]) -> list[tuple[int, Optional[str]]]:
        """The texts of ``shards`` not in ``have`` (None: no text), read in one call, in shard order."""
        known = set(have)
        missing = sorted({s for s in shards if s not in known})
        if not missing:
            return []
        return list(zip(missing, self.store.get_texts(self.domain, [(s, 0) for s in missing])))
