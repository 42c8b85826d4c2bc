"""A key group's session or window rows kept in *row shards*: each shard one JSON text of columns.

On the per-key layout (``group_state``, ``records``) a batch reads each key it touches as a
record of its own, decodes it into lists, builds the group's table from them, and after the engine
ran splits the table back into a record per key, encodes and writes each.  Nexmark's q11 and q12
come back to nearly every key of a group in every batch, and there that record layer cost about
30 us a key against 3 us a key for the engine itself (``benchmarks/key_records.py``).  Here a shard
holds the rows of many keys as columns (``row_columns_text``): it is parsed into arrays and written
from them in one piece, without an object or a JSON text per key.

- **Which shard:** a key's shard is its hash (``shards.key_hash`` of its tagged JSON: stable
  across processes) modulo the group's shard count.  With one shard no key is hashed at all.
- **How many shards:** the shards' cost model (``shards.ShardBook``), at what a key costs inside a shard of columns
  (``ROW_KEY_US``), with at most about one shard per key: a group whose batches come back to most
  keys keeps one shard, one whose batches touch few keys of many keeps about a key a shard (so a
  batch reads about the rows of the keys it touches), and never more than ``MAX_KEYS_PER_SHARD``
  keys a shard.  A new group starts in one shard (see ``RowShards.write``).  When the current
  count costs ``SLACK`` times the model's, the group's rows are rewritten at the new count.
- **What is due:** the group's due indexes (``due_index``) hold shards, not keys: a shard is entered
  under the earliest event time and processing time any of its rows has work at (the engine's
  ``due_per_row`` and ``processing_due_per_row``: the rules of ``time_rules``), and its text records
  the due times the index holds it under, so it is entered again only when they move (as a key's
  record does).  A stale entry costs a read of a shard with nothing due: running the engine over
  rows with nothing due changes nothing.
- **What a batch does:** read the shards of its keys and the shards due, in one call; run the
  engine on their rows as one table (``run``); write every shard read back (or remove it once
  empty), in one call.

Stored (``PartStore``, domain ``"rows"``): shard ``s`` at ``(s, 0)`` as ``[event due, processing
due, <rows_text>]``.  The group's record holds ``{"shards", "held", "touched"}`` under ``"row_shards"``.
A restart that finds per-key records (a checkpoint written before row shards, or with
``spark.windowed_operator.rowShards=false`` before that setting went) moves every row once
(``transitions.key_records_to_row_shards``).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Optional, cast

import numpy as np

from ..engine.columnar_triggers import NOT_SET, RowTable
from ..time import MIN_TIMESTAMP
from ..time_rules import is_timer_due
from .group_batch import StoreResult, StoreBatch, TableEngine
from .group_state import EVENT, PROCESSING, GroupState
from .layouts import ROW_SHARDS
from .part_log import PartStore
from .row_columns_text import decoded_keys, key_runs, rows_texts, table_of_parts
from .shards import ShardBook, compact_json

#: The part domain and the group record's field (``layouts.ROW_SHARDS``: one row per kind of rows, both alike).
DOMAIN, META = ROW_SHARDS["sessions"].domain, ROW_SHARDS["sessions"].meta_key
#: What a key held in a shard a batch touches costs in microseconds: in Python about 3.5 (parsed,
#: run through the engine with the batch, written: ``benchmarks/row_shards.py``, 344 ms a batch for
#: a 100,000-key shard of one session each), and for the JVM its share of the text's bytes, about 145
#: read and written, at the rate a key shard's records cost (``shards.RECORD_US`` for about 250).
ROW_KEY_US = 7.0
#: The fewest keys a shard is sized for: about one, where a batch touching few keys of many reads
#: about what it touches (a shard's own cost in Python is a few microseconds: ``row_columns_text``
#: cuts and joins many shards' columns in one pass).
MIN_KEYS_PER_SHARD = 1
#: The most keys a shard is sized for (about 7 MB of text at q12's 140 bytes a key): a state value
#: stays of a size the store and the socket pass without trouble, however many keys a group holds.
MAX_KEYS_PER_SHARD = 50_000


@dataclass
class _Shard:
    """A shard read in this batch: its rows (as parsed) and its keys, the due times the index holds it under,
    whether it has a text in the store, whether the batch's table took its rows."""

    part: Optional[list] = None  # the parsed ``rows_text`` (None: no rows)
    keys: list = field(default_factory=list)
    due: list[Optional[int]] = field(default_factory=lambda: [None, None])
    stored: bool = False
    ran: bool = False


def joined(tables: list[RowTable], watermark: int) -> RowTable:
    """Shards' tables as one, in the order given: each is grouped by key and no key is in two, so
    the result is grouped by key (no sort)."""
    return RowTable.concat(tables, watermark, sort=False)


def unique_keys(table: RowTable) -> list[Hashable]:
    """A table's keys, once each, in its order (its rows are grouped by key)."""
    return table.keys[key_runs(table.keys)[0]].tolist()


class RowShards(ShardBook):
    """One group's rows by shard, for one batch: ``load`` the shards it needs, ``write`` the table
    the engine left (``RowShardStore.run_batch`` does both)."""

    def __init__(self, group: GroupState, store: PartStore, engine: Any, kind: str, *,
                 min_keys: float = MIN_KEYS_PER_SHARD, key_us: float = ROW_KEY_US) -> None:
        super().__init__(store, DOMAIN, group.meta.get(META))
        self.group, self.engine, self.kind = group, engine, kind
        #: (the cost model's parameters; tests make many shards pay with a dear key)
        self.min_keys, self.key_us = min_keys, key_us
        self.loaded: dict[int, _Shard] = {}

    # -- reading ----------------------------------------------------------------------------------
    def load(self, shards: Iterable[int], watermark: int) -> None:
        """Read the shards not read yet, in one call, and parse them in one."""
        read = self.read_missing(shards, self.loaded)
        stored = [text for _, text in read if text is not None]
        parsed = iter(json.loads(f"[{','.join(stored)}]") if stored else ())
        for shard, text in read:
            if text is None:
                self.loaded[shard] = _Shard()
                continue
            event_due, processing_due, rows = next(parsed)
            if rows[0] != self.kind:
                raise RuntimeError(f"row shard {shard} holds {rows[0]} rows where this operator keeps {self.kind}")
            self.loaded[shard] = _Shard(rows, decoded_keys(rows), [event_due, processing_due], stored=True)

    def load_due(self, watermark: int, processing_time: Optional[int], last_watermark: int) -> None:
        """Read the shards the indexes hold as due; their entries are taken out (so ``write`` enters
        them again while rows of theirs have work left)."""
        indexes = self.group.indexes
        taken = indexes[EVENT].take_due(watermark)
        if processing_time is not None:
            taken |= indexes[PROCESSING].take_due(processing_time)
        shard_ids = cast("set[int]", taken)  # (row shards enter their shard numbers in the group's indexes)
        self.load(shard_ids, last_watermark)
        for shard in shard_ids:
            due = self.loaded[shard].due
            if due[0] is not None and is_timer_due(due[0], watermark):
                due[0] = None
            if processing_time is not None and due[1] is not None and is_timer_due(due[1], processing_time):
                due[1] = None

    def read_table(self, watermark: int) -> RowTable:
        """The rows of every shard read, as the batch's table (at the group's last watermark)."""
        for shard in self.loaded.values():
            shard.ran = True
        return self._table([shard for _, shard in sorted(self.loaded.items())], watermark)

    @staticmethod
    def _table(shards: list[_Shard], watermark: int) -> RowTable:
        """Shards' rows as one table, each column made an array once."""
        held = [(shard.part, shard.keys) for shard in shards if shard.part is not None and shard.keys]
        if not held:
            return RowTable(watermark=watermark)
        return table_of_parts([part for part, _ in held], watermark, [k for _, keys in held for k in keys])

    def addresses(self) -> dict[Hashable, int]:
        """The shard of every key read."""
        return {key: s for s, shard in self.loaded.items() for key in shard.keys}

    # -- writing ----------------------------------------------------------------------------------
    def write(self, table: RowTable, addresses: dict[Hashable, int], touched: int, came_back: int) -> None:
        """Write the rows the engine left of every shard read (``addresses``: the shard of each key
        of the table, unless there is one shard), remove the shards left empty, and enter the
        shards' new due times; first rebuild at the model's count when it is ``SLACK`` times cheaper."""
        keys = unique_keys(table)
        self.held += len(keys) - sum(len(shard.keys) for shard in self.loaded.values() if shard.ran)
        self.note_batch(touched, came_back)
        # Until a batch has come back to a key, the model assumes batches come back to every key: a
        # group starts in few shards.  Where later batches touch few keys of many, the first that
        # comes back reads the group's few texts once (a key costs ``ROW_KEY_US`` there) and spreads
        # them at the model's count; starting in many (as key shards do, where the wrong guess costs
        # without bound) would cost an entry a key twice where batches come back to every key.
        fewest = 1 << max(0, math.ceil(math.log2(max(self.held, 1) / MAX_KEYS_PER_SHARD)))
        target = self.rebuild_target(float(self.held), self.key_us, self.min_keys, fewest)
        if target is not None:
            table = self._everything(table)
            keys = unique_keys(table)
            self.count = target
            addresses = dict(zip(keys, self.shards_of(keys)))
        if not len(table):
            shards: list[int] = []
            ends: list[int] = []
        elif self.count == 1:
            shards, ends = [0], [len(table)]
        else:
            _, lengths = key_runs(table.keys)
            row_shard = np.repeat(np.array([addresses[k] for k in keys], dtype=np.int64), lengths)
            order = np.argsort(row_shard, kind="stable")  # (keeps each shard's rows grouped by key)
            table = table.take(order)
            found, starts = np.unique(row_shard[order], return_index=True)
            shards, ends = found.tolist(), [*starts.tolist()[1:], len(table)]
        self._put(table, shards, ends)

    def _put(self, table: RowTable, shards: list[int], ends: list[int]) -> None:
        """Each shard's rows (``table``'s rows up to its end, sorted by shard) as its text, its due
        times entered where they moved; the shards read that hold no rows now, removed."""
        puts: list[tuple[int, int, str]] = []
        if shards:
            starts = [0, *ends[:-1]]
            event_due = np.minimum.reduceat(self.engine.due_per_row(table), starts).tolist()
            processing_due = np.minimum.reduceat(self.engine.processing_due_per_row(table), starts).tolist()
            texts = rows_texts(table, self.kind, ends)
            for shard, text, *earliest in zip(shards, texts, event_due, processing_due):
                loaded = self.loaded.setdefault(shard, _Shard())
                for i, domain in enumerate((EVENT, PROCESSING)):
                    if earliest[i] != NOT_SET and earliest[i] != loaded.due[i]:
                        self.group.indexes[domain].enter(shard, earliest[i])
                        loaded.due[i] = earliest[i]
                puts.append((shard, 0, f"[{compact_json(loaded.due[0])},{compact_json(loaded.due[1])},{text}]"))
        written = set(shards)
        removals = [(s, 0) for s, shard in sorted(self.loaded.items()) if shard.stored and s not in written]
        if puts:
            self.store.put_texts(DOMAIN, puts)
        if removals:
            self.store.remove_texts(DOMAIN, removals)
        for s in written:
            self.loaded[s].stored = True
        for s, _ in removals:
            self.loaded[s].stored = False

    def _everything(self, table: RowTable) -> RowTable:
        """The batch's table with the rows of every shard not read yet (they had nothing due: they
        move as they are), every shard to be written anew (rebuilding at another count)."""
        self.load(range(self.count), table.watermark)
        rest = self._table([shard for _, shard in sorted(self.loaded.items()) if not shard.ran], table.watermark)
        for shard in self.loaded.values():
            shard.ran, shard.due = True, [None, None]  # (new shard numbers: every due time entered anew)
        return joined([table, rest], table.watermark)


class RowShardStore:
    """The row shards' store (``layouts.SESSION_ROW_SHARDS``, ``WINDOW_ROW_SHARDS``)."""

    def __init__(self, store: PartStore, engine: Any, kind: str, **model: float) -> None:
        self.store, self.engine, self.kind = store, engine, kind
        self.model = model  # (the cost model's parameters: ``RowShards``)

    @classmethod
    def opened(cls, stores: Any) -> "RowShardStore":
        return cls(stores.store, stores.columnar, stores.records.codec.kind)

    def run_batch(self, batch: StoreBatch, engine: TableEngine) -> StoreResult:
        """Read the shards of the batch's keys and the shards due, run the engine on their rows as
        one table at the group's last watermark (with the rows moving in from key records, if any),
        write them back.  The group's ``save`` remains to do."""
        group, watermark = batch.group, batch.watermark
        shards = RowShards(group, self.store, self.engine, self.kind, **self.model)
        last = group.meta.get("wm", MIN_TIMESTAMP)
        keys = list(dict.fromkeys(batch.keys))
        addresses = dict(zip(keys, shards.shards_of(keys)))
        shards.load(addresses.values(), last)
        shards.load_due(watermark, batch.processing_time, last)
        held = shards.addresses() if shards.count > 1 or shards.touched is None else {}
        came_back = sum(1 for key in keys if key in held) if shards.touched is None else 0
        table = shards.read_table(last)
        moved = batch.moved.rows
        if moved is not None and len(moved):
            moved_keys = unique_keys(moved)
            addresses.update(zip(moved_keys, shards.shards_of(moved_keys)))
            table = joined([table, moved], last)
        shards.write(engine.run(table), {**held, **addresses}, len(keys), came_back)
        for index in group.indexes.values():
            index.flush()
        group.meta[META] = shards.to_record()
        return StoreResult(engine.out)
