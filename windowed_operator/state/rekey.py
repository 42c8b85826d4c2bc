"""Moving a stopped query's keys to another number of key groups: each old group's stored state split
by key, and the pieces that meet in a new group joined, in every layout.

A key's group is a function of the key and the count (``pmod(xxhash64(key), key_groups)`` on Spark),
so with another count a group's keys scatter over new groups, and a new group gathers keys of
several old ones.  Everything a group stores is split by the key it belongs to:

- a key's own record (``keys``: a per-key layout outside key shards) and the due index's entries
  (``[key, due]``) go with their key;
- key shards' lines go with their key, and each new group's records are sharded anew
  (``KeyShards.of``: the cost model's count for the keys it holds);
- the pane log's and the window log's parts are cut by row (a row is one key's) and a bucket's pieces
  are renumbered as the new group's parts of that bucket;
- row shards are cut by row and the rows re-sharded at the largest count of the groups they came
  from; each new shard keeps the earliest due times of the shards its rows came from (a due time
  earlier than the rows' own costs a read of a shard with nothing due, which changes nothing), and
  the index holds the new shards under them;
- the group's record: the watermark last applied is the latest of the groups joined (a group's
  watermark lags only while nothing of it is due: its timer would have called it), and so are its
  other clocks (an upstream's watermark, the processing time last applied, the last input, each
  partition's largest event time and last input under a per-partition watermark, each merge input's);
  the timer is the earliest, the fingerprint says the new count, the indexes and the stores'
  bookkeeping are those of what the new group holds.  Fields that are no clock (the pause an idle
  clock takes out of a stop, the run it last saw) must agree, or the rescale is refused naming them.

Pure: texts in, texts out (``spark.rescale`` reads and writes them from a checkpoint).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

import numpy as np

from ..engine.columnar_panes import object_array
from ..engine.columnar_triggers import RowTable
from ..time import MIN_TIMESTAMP
from .due_index import DueIndex, Entry, PartsAsTexts, entries_of
from .group_state import EVENT, PROCESSING, SHARDS as KEY_SHARDS_META
from .key_shards import DOMAIN as KEY_SHARDS_DOMAIN, KeyShards, parse_shard
from .layouts import PANE_LOG, ROW_SHARDS, WINDOW_LOG
from .pane_log import part_rows, part_text
from .part_log import Held, held_entries
from .record_columns import decode_sided, encode_sided
from .records import _decoded
from .row_columns_text import key_runs, rows_texts, table_of_data
from .row_shards import joined
from .shards import KEY_CODEC as _CODEC, compact_json, key_hash, key_json

INDEX_DOMAINS = (EVENT, PROCESSING)
ROWS_DOMAIN, ROWS_META = ROW_SHARDS["sessions"].domain, ROW_SHARDS["sessions"].meta_key
#: The group record's fields this module knows how to join (others must agree across the groups joined).
_JOINED = {"wm", "timer", "fingerprint", "up", "pt", "input", "seen", "parts", "sides", f"{EVENT}_index", f"{PROCESSING}_index", KEY_SHARDS_META, ROWS_META,
           PANE_LOG.meta_key, WINDOW_LOG.meta_key}
Place = tuple[str, int, int]


class RekeyError(ValueError):
    """Stored state this module cannot move between key groups; the message names what."""


@dataclass
class StoredGroup:
    """One key group's stored state as texts: its record, its parts by (domain, bucket, part), and
    each key's record kept in an entry of its own."""

    meta: dict[str, Any]
    parts: dict[Place, str] = field(default_factory=dict)
    keys: dict[Hashable, str] = field(default_factory=dict)
    #: (a new group) the old groups its state came from: their runner timers are its own.
    sources: tuple[int, ...] = ()


class TextStore(PartsAsTexts):
    """Texts by (domain, bucket, part) in memory: the ``PartStore`` and ``IndexStore`` the stores
    write a new group through."""

    def __init__(self) -> None:
        self.texts: dict[Place, str] = {}

    def get_texts(self, domain: str, places: list[tuple[int, int]]) -> list[Optional[str]]:
        return [self.texts.get((domain, bucket, part)) for bucket, part in places]

    def put_texts(self, domain: str, items: list[tuple[int, int, str]]) -> None:
        for bucket, part, text in items:
            self.texts[(domain, bucket, part)] = text

    def remove_texts(self, domain: str, places: list[tuple[int, int]]) -> None:
        for bucket, part in places:
            self.texts.pop((domain, bucket, part), None)


@dataclass
class _Gathered:
    """What reaches one new group from the old ones."""

    metas: list[dict[str, Any]] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    due: dict[str, list[Entry]] = field(default_factory=lambda: {EVENT: [], PROCESSING: []})
    keys: dict[Hashable, str] = field(default_factory=dict)
    shard_lines: dict[Hashable, str] = field(default_factory=dict)
    sharded: bool = False
    touched: list[float] = field(default_factory=list)
    log_parts: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    row_kind: Optional[str] = None
    row_tables: list[RowTable] = field(default_factory=list)
    row_dues: list[np.ndarray] = field(default_factory=list)  # per table: [rows, 2] event and processing due
    row_counts: list[int] = field(default_factory=list)


def rekey(groups: dict[int, StoredGroup], group_of: Callable[[Hashable], int], old_count: int,
          key_groups: int, *, keyed: bool = True) -> dict[int, StoredGroup]:
    """The state of ``groups`` (old group 0 .. ``old_count`` - 1 -> its stored state) as ``key_groups``
    new groups hold it: each key in ``group_of(key)``.  A new group no key reaches still gets a record
    (its clocks: the watermark, idleness, an upstream's watermark), from the old group it divides
    (``key_groups`` a multiple of ``old_count``: new group ``g`` takes only keys of old group ``g mod
    old_count``) or else joined from every old group.  A non-keyed operator (``keyed`` false) keeps its
    one group 0; its fingerprint says the new count, as the query's keyed operators'."""
    gathered: dict[int, _Gathered] = {}

    def into(group: int) -> _Gathered:
        if not 0 <= group < key_groups:
            raise RekeyError(f"a key's new group {group} is outside 0 .. {key_groups - 1}")
        return gathered.setdefault(group, _Gathered())

    for old, stored in sorted(groups.items()):
        _split(old, stored, group_of if keyed else (lambda key: 0), into)
    for group in range(key_groups if keyed else 0):
        if group in gathered or not groups:
            continue
        empty = into(group)
        if key_groups % old_count == 0:
            sources = [group % old_count] if group % old_count in groups else []
        else:
            sources = sorted(groups)
        empty.metas, empty.sources = [groups[old].meta for old in sources], sources
        empty.sharded = any(KEY_SHARDS_META in groups[old].meta for old in sources)
        if not empty.metas:
            del gathered[group]
    return {group: _joined(g, key_groups) for group, g in sorted(gathered.items())}


# -- splitting one old group -------------------------------------------------------------------------------
def _split(old: int, stored: StoredGroup, group_of: Callable[[Hashable], int],
           into: Callable[[int], _Gathered]) -> None:
    meta = stored.meta
    reached: set[int] = set()

    def reach(key: Hashable) -> _Gathered:
        group = group_of(key)
        reached.add(group)
        return into(group)

    rows_layout = ROWS_META in meta
    for key, text in stored.keys.items():
        reach(key).keys[key] = text
    by_domain: dict[str, list[tuple[int, int, str]]] = {}
    for (domain, bucket, part), text in sorted(stored.parts.items()):
        by_domain.setdefault(domain, []).append((bucket, part, text))
    for domain, parts in by_domain.items():
        if domain in INDEX_DOMAINS:
            if rows_layout:
                continue  # (the indexes hold shard numbers: rebuilt with the shards)
            for _, _, text in parts:
                for key, due in entries_of(text, _CODEC.read_value):
                    reach(key).due[domain].append((key, due))
        elif domain == KEY_SHARDS_DOMAIN:
            for _, _, text in parts:
                for name, record in (parse_shard(text) if text else {}).items():
                    key = _CODEC.read_value(json.loads(name))
                    reach(key).shard_lines[key] = record
        elif domain in (PANE_LOG.domain, WINDOW_LOG.domain):
            for bucket, _, text in parts:
                for group, piece in _cut_log_part(domain, bucket, text, group_of).items():
                    reached.add(group)
                    into(group).log_parts.setdefault((domain, bucket), []).append(piece)
        elif domain == ROWS_DOMAIN:
            for _, _, text in parts:
                _cut_row_shard(text, meta.get("wm", MIN_TIMESTAMP), group_of, into, reached,
                               meta[ROWS_META].get("shards", 1))
        else:
            raise RekeyError(f"group {old}: stored parts of a domain this release does not move: {domain!r}")
    sharded = KEY_SHARDS_META in meta
    touched = (meta.get(KEY_SHARDS_META) or meta.get(ROWS_META) or {}).get("touched")
    for group in reached:
        gathered = into(group)
        gathered.metas.append(meta)
        gathered.sources.append(old)
        gathered.sharded |= sharded
        if touched is not None:
            gathered.touched.append(float(touched))


def _cut_log_part(domain: str, bucket: int, text: str, group_of: Callable[[Hashable], int]) -> dict[int, str]:
    """A pane-log or window-log part cut by the group of each row's key (every column sliced alike;
    ``bucket``: the part's, which a pane-log part of state version 9 or before holds the pane of)."""
    if domain == PANE_LOG.domain:
        return _cut_pane_part(bucket, text, group_of)
    part = json.loads(text)
    keys = _decoded(_CODEC.read_value, part["k"])
    rows_of: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        rows_of.setdefault(group_of(key), []).append(i)
    pieces: dict[int, str] = {}
    for group, rows in rows_of.items():
        piece: dict[str, Any] = {name: [part[name][i] for i in rows] for name in ("k", "s", "e", "n")}
        if "a" in part:
            piece["a"] = [part["a"][i] for i in rows]
        if "x" in part:
            sided = decode_sided(_CODEC.read_value, part["x"])
            piece["x"] = encode_sided(_CODEC.value, [sided[i] for i in rows])
        if "h" in part:
            piece["h"] = [part["h"][i] for i in rows]
        unknown = set(part) - {"k", "s", "e", "n", "a", "x", "h"}
        if unknown:
            raise RekeyError(f"a window-log part with fields this release does not move: {sorted(unknown)}")
        pieces[group] = compact_json(piece)
    return pieces


def _cut_pane_part(bucket: int, text: str, group_of: Callable[[Hashable], int]) -> dict[int, str]:
    """A pane-log part cut by the group of each row's key, each piece in this version's form."""
    rows = part_rows(text, bucket)
    keys = object_array(rows.keys)
    of_key = np.array([group_of(key) for key in rows.keys], dtype=np.int64)[rows.codes]
    return {group: part_text(rows.starts[mine], rows.codes[mine], keys, [c[mine] for c in rows.acc], _CODEC.value)
            for group in np.unique(of_key).tolist() for mine in [of_key == group]}


def _cut_row_shard(text: str, watermark: int, group_of: Callable[[Hashable], int], into: Callable[[int], _Gathered],
                   reached: set[int], count: int) -> None:
    event_due, processing_due, rows = json.loads(text)
    kind, table = table_of_data(rows, watermark)
    if not len(table):
        return
    groups = np.array([group_of(key) for key in table.keys.tolist()], dtype=np.int64)
    for group in np.unique(groups).tolist():
        gathered = into(group)
        if gathered.row_kind not in (None, kind):
            raise RekeyError(f"row shards of {gathered.row_kind} and of {kind} would meet in group {group}")
        gathered.row_kind = kind
        taken = table.take(np.flatnonzero(groups == group))
        gathered.row_tables.append(taken)
        gathered.row_dues.append(np.array([[_due(event_due), _due(processing_due)]] * len(taken), dtype=object))
        gathered.row_counts.append(count)
        reached.add(group)


def _due(value: Optional[int]) -> Optional[int]:
    return None if value is None else int(value)


# -- joining what reaches a new group -----------------------------------------------------------------------
def _joined(g: _Gathered, key_groups: int) -> StoredGroup:
    store = TextStore()
    meta = _joined_meta(g.metas, key_groups)
    indexes = {domain: DueIndex(domain, store) for domain in INDEX_DOMAINS}
    for domain, entries in g.due.items():
        for key, due in entries:
            indexes[domain].enter(key, due)
    keys = dict(g.keys)
    if g.sharded:  # (records kept in entries of their own join the shards: a sharded group reads only those)
        g.shard_lines.update(keys)
        keys = {}
    if g.shard_lines or g.sharded:
        touched = max(g.touched) if g.touched else None
        shards = KeyShards.of(store, sorted(g.shard_lines.items(), key=lambda item: key_json(item[0])),
                              int(round(touched)) if touched else 0, 1 if touched else 0)
        if touched is not None:
            shards.touched = touched
        meta[KEY_SHARDS_META] = shards.to_record()
    for (domain, bucket), pieces in sorted(g.log_parts.items()):
        store.put_texts(domain, [(bucket, part, text) for part, text in enumerate(pieces)])
    for log in (PANE_LOG, WINDOW_LOG):
        if log.meta_key in meta:
            meta[log.meta_key] = held_entries({bucket: Held(len(pieces), _least(domain, bucket, pieces))
                                               for (domain, bucket), pieces in g.log_parts.items()
                                               if domain == log.domain})
    if ROWS_META in meta:
        meta[ROWS_META] = _joined_rows(g, store, indexes, meta)
    for domain, index in indexes.items():
        index.flush()
        meta[f"{domain}_index"] = index.to_record()
    return StoredGroup(meta=meta, parts=dict(store.texts), keys=keys, sources=tuple(sorted(set(g.sources))))


def _least(domain: str, bucket: int, pieces: list[str]) -> int:
    """A bucket's least (``part_log.Held``): the pane log's earliest pane start, the window log's bucket."""
    if domain != PANE_LOG.domain:
        return bucket
    return min(int(part_rows(text, bucket).starts.min()) for text in pieces)


def _joined_meta(metas: list[dict[str, Any]], key_groups: int) -> dict[str, Any]:
    first = metas[0]
    for meta in metas[1:]:
        for name in (set(first) | set(meta)) - _JOINED:
            if first.get(name) != meta.get(name):
                raise RekeyError(f"groups to be joined disagree on {name!r} ({first.get(name)!r}, {meta.get(name)!r}),"
                                 " which this release does not join")
        if meta.get("fingerprint") != first.get("fingerprint"):
            raise RekeyError("groups to be joined were written by different operators (their fingerprints differ)")
    joined: dict[str, Any] = {name: value for name, value in first.items() if name not in _JOINED}
    watermarks = [m["wm"] for m in metas if m.get("wm") is not None]
    if watermarks:
        joined["wm"] = max(watermarks)
    joined.update(_joined_clocks(metas))
    timers = [m["timer"] for m in metas if m.get("timer") is not None]
    if any("timer" in m for m in metas):
        joined["timer"] = min(timers) if timers else None
    fingerprint = first.get("fingerprint")
    if fingerprint is not None:
        joined["fingerprint"] = {**fingerprint, "key groups": str(key_groups)}
    for name in (KEY_SHARDS_META, ROWS_META, PANE_LOG.meta_key, WINDOW_LOG.meta_key):
        if any(name in m for m in metas):
            joined[name] = None
    return joined


#: Clocks in a group's record (never back): joined as their latest.
_CLOCKS = ("up", "pt", "input", "seen")


def _joined_clocks(holders: list[dict[str, Any]]) -> dict[str, Any]:
    """The clocks of several groups' records (or of one merge input's part of them) as one: each the
    latest; per-partition trackers (``parts``) partition by partition; merge inputs (``sides``) input by input."""
    out: dict[str, Any] = {}
    for name in _CLOCKS + ("max",):
        values = [h[name] for h in holders if h.get(name) is not None]
        if values:
            out[name] = max(values)
    trackers = [h["parts"] for h in holders if h.get("parts") is not None]
    if trackers:
        partitions: dict[str, list] = {}
        for tracker in trackers:
            for partition, largest, last in tracker["partitions"]:
                seen = partitions.setdefault(json.dumps(partition), [partition, largest, last])
                seen[1], seen[2] = max(seen[1], largest), max(seen[2], last)
        out["parts"] = {"watermark": max(t["watermark"] for t in trackers), "partitions": list(partitions.values())}
    sides = [h["sides"] for h in holders if h.get("sides") is not None]
    if sides:
        out["sides"] = {side: _joined_clocks([s[side] for s in sides if side in s])
                        for side in dict.fromkeys(side for s in sides for side in s)}
    return out


def _joined_rows(g: _Gathered, store: TextStore, indexes: dict[str, DueIndex], meta: dict[str, Any]) -> dict:
    """The rows reaching the group, re-sharded; each shard's due times the earliest of its rows' shards."""
    touched = max(g.touched) if g.touched else None
    count = max(g.row_counts, default=1)
    if not g.row_tables:
        return {"shards": count, "held": 0, "touched": touched}
    table = joined(g.row_tables, meta.get("wm", MIN_TIMESTAMP))
    dues = np.concatenate(g.row_dues)
    firsts, lengths = key_runs(table.keys)
    keys = table.keys[firsts].tolist()
    shard_of_key = [key_hash(key_json(key)) % count if count > 1 else 0 for key in keys]
    row_shard = np.repeat(np.array(shard_of_key, dtype=np.int64), lengths)
    order = np.argsort(row_shard, kind="stable")
    table, dues, row_shard = table.take(order), dues[order], row_shard[order]
    found, starts = np.unique(row_shard, return_index=True)
    ends = [*starts.tolist()[1:], len(table)]
    texts = rows_texts(table, g.row_kind or "sessions", ends)
    puts = []
    for shard, lo, hi, text in zip(found.tolist(), starts.tolist(), ends, texts):
        due = [_earliest(dues[lo:hi, 0]), _earliest(dues[lo:hi, 1])]
        for domain, at in zip(INDEX_DOMAINS, due):
            if at is not None:
                indexes[domain].enter(shard, at)
        puts.append((shard, 0, f"[{compact_json(due[0])},{compact_json(due[1])},{text}]"))
    store.put_texts(ROWS_DOMAIN, puts)
    return {"shards": count, "held": len(keys), "touched": touched}


def _earliest(values: np.ndarray) -> Optional[int]:
    present = [int(v) for v in values.tolist() if v is not None]
    return min(present) if present else None


__all__ = ["RekeyError", "StoredGroup", "TextStore", "rekey"]
