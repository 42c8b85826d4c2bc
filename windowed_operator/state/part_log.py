"""A key group's rows stored by *bucket* (a pane, a window's due time), not by key: the bookkeeping
the pane log and the window log share.

Both serve operators whose elements never need the state they join (the default trigger with no
allowed lateness): a batch appends its new rows to their buckets as *parts* (one text each) without
reading anything, and a watermark step reads only the buckets with work due.  So the calls a batch
makes follow the buckets it touches and the buckets due, whatever the number of keys held.  What a
bucket is, when it is due and how its rows fold is the log's own (``pane_log.PaneLog``,
``window_log.WindowLog``); this module only moves parts.

The group's record holds each bucket, its part count and, where it is not the bucket itself, its
least (``meta[log.meta_key]``, ``Held``).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Protocol

from ..time import MIN_TIMESTAMP

#: A bucket holding this many parts has them folded into one when a batch adds to it: a bucket's
#: read stays bounded however many batches its windows span (each fold is paid by that many appends).
COMPACT_PARTS = 32


class PartStore(Protocol):
    """Texts by (domain, bucket, part), many per call (``SparkGroupStore``: pipelined)."""

    def get_texts(self, domain: str, places: list[tuple[int, int]]) -> list[Optional[str]]: ...

    def put_texts(self, domain: str, items: list[tuple[int, int, str]]) -> None: ...

    def remove_texts(self, domain: str, places: list[tuple[int, int]]) -> None: ...


class Held(NamedTuple):
    """A bucket as the group's record holds it: its number of parts and its least (see ``PartLog``)."""
    parts: int
    least: int


class PartLog(Protocol):
    """What a log's rows are: the store domain and record field it uses, which buckets are due, and
    its table of rows (``build`` folds the rows several parts hold for one key into one).  A log's
    texts come with the *least* of each bucket: the earliest time its rows hold (the pane log's
    buckets span many panes, and a bucket is due when its earliest pane is; the window log's bucket
    is its due time itself)."""

    domain: str
    meta_key: str

    def due_buckets(self, held: dict[int, Held], last_watermark: int, watermark: int) -> list[int]: ...

    def next_due(self, held: dict[int, Held], watermark: int) -> Optional[int]: ...

    def build(self, bucket_parts: list[tuple[int, str]], watermark: int) -> Any: ...

    def texts_by_bucket(self, table: Any) -> dict[int, tuple[str, int]]: ...

    def text_of(self, table: Any, bucket: int) -> tuple[str, int]:
        """The whole table as one part's text of ``bucket``, with its least: a bucket's parts folded
        stay in it, whichever bucket ``texts_by_bucket`` would give each row now."""
        ...


def held_buckets(log: PartLog, meta: dict) -> dict[int, Held]:
    """Bucket -> its parts and least, from the group's record: ``[bucket, parts]`` where the least
    is the bucket itself (every entry before state version 10), else ``[bucket, parts, least]``."""
    return {entry[0]: Held(entry[1], entry[2] if len(entry) > 2 else entry[0]) for entry in meta.get(log.meta_key, [])}


def held_entries(held: dict[int, Held]) -> list[list[int]]:
    """The group record's entries of ``held`` (``held_buckets`` reads them)."""
    return sorted([bucket, h.parts] if h.least == bucket else [bucket, h.parts, h.least] for bucket, h in held.items())


def read_buckets(log: PartLog, store: PartStore, held: dict[int, Held], buckets: list[int]) -> list[tuple[int, str]]:
    """Every part of ``buckets``, in part order, in one call."""
    places = [(bucket, part) for bucket in buckets for part in range(held[bucket].parts)]
    texts = store.get_texts(log.domain, places) if places else []
    missing = [place for place, text in zip(places, texts) if text is None]
    if missing:
        raise RuntimeError(f"the {log.domain} log's record names parts the state does not hold: {missing[:5]}")
    return [(bucket, text) for (bucket, _), text in zip(places, texts) if text is not None]  # (all: none missing)


def write_whole_buckets(log: PartLog, store: PartStore, meta: dict, texts: dict[int, tuple[str, int]]) -> None:
    """A log started from rows moved in from another layout: each bucket's text as its one part."""
    if texts:
        store.put_texts(log.domain, [(bucket, 0, text) for bucket, (text, _) in texts.items()])
    meta[log.meta_key] = held_entries({bucket: Held(1, least) for bucket, (_, least) in texts.items()})


def run_part_log(log: PartLog, store: PartStore, meta: dict, watermark: int,
                 run: Callable[[Any], Any]) -> Optional[int]:
    """One batch of one group: read the buckets due, ``run`` the engine on their table (it fires,
    drops, and adds the batch's elements), write the loaded buckets back folded (or remove them once
    nothing of them remains) and the elements' new rows as new parts.  Updates ``meta`` (the caller
    saves it) and returns when the group next has work."""
    held = held_buckets(log, meta)
    last = meta.get("wm", MIN_TIMESTAMP)
    loaded = log.due_buckets(held, last, watermark)
    table = run(log.build(read_buckets(log, store, held, loaded), last))
    written = log.texts_by_bucket(table)
    puts: list[tuple[int, int, str]] = []
    removals: list[tuple[int, int]] = []
    for bucket in loaded:
        parts = held.pop(bucket).parts
        piece = written.pop(bucket, None)
        first_removed = 0
        if piece is not None:
            puts.append((bucket, 0, piece[0]))
            held[bucket] = Held(1, piece[1])
            first_removed = 1
        removals += [(bucket, part) for part in range(first_removed, parts)]
    for bucket, (text, least) in written.items():  # rows only this batch's elements made: a new part
        before = held.get(bucket)
        if before is None or before.parts < COMPACT_PARTS:
            part = before.parts if before else 0
            puts.append((bucket, part, text))
            held[bucket] = Held(part + 1, min(before.least, least) if before else least)
            continue
        # a bucket many batches added to (a long window, small batches): its parts folded into one
        folded = log.build(read_buckets(log, store, held, [bucket]) + [(bucket, text)], last)
        text, least = log.text_of(folded, bucket)
        puts.append((bucket, 0, text))
        removals += [(bucket, p) for p in range(1, before.parts)]
        held[bucket] = Held(1, least)
    if puts:
        store.put_texts(log.domain, puts)
    if removals:
        store.remove_texts(log.domain, removals)
    meta[log.meta_key] = held_entries(held)
    return log.next_due(held, watermark)
