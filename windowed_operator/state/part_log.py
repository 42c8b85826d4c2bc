"""A key group's rows stored by *bucket* (a pane, a window's due time), not by key: the bookkeeping
the pane log and the window log share.

Both serve operators whose elements never need the state they join (the default trigger with no
allowed lateness): a batch appends its new rows to their buckets as *parts* (one text each) without
reading anything, and a watermark step reads only the buckets with work due.  So the calls a batch
makes follow the buckets it touches and the buckets due, whatever the number of keys held.  What a
bucket is, when it is due and how its rows fold is the log's own (``pane_log.PaneLog``,
``window_log.WindowLog``); this module only moves parts.

The group's record holds each bucket and its part count (``meta[log.meta_key]``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

from ..time import MIN_TIMESTAMP

#: A bucket holding this many parts has them folded into one when a batch adds to it: a bucket's
#: read stays bounded however many batches its windows span (each fold is paid by that many appends).
COMPACT_PARTS = 32


class PartStore(Protocol):
    """Texts by (domain, bucket, part), many per call (``SparkGroupStore``: pipelined)."""

    def get_texts(self, domain: str, places: list[tuple[int, int]]) -> list[Optional[str]]: ...

    def put_texts(self, domain: str, items: list[tuple[int, int, str]]) -> None: ...

    def remove_texts(self, domain: str, places: list[tuple[int, int]]) -> None: ...


class PartLog(Protocol):
    """What a log's rows are: the store domain and record field it uses, which buckets are due, and
    its table of rows (``build`` folds the rows several parts hold for one key into one)."""

    domain: str
    meta_key: str

    def due_buckets(self, held: dict[int, int], last_watermark: int, watermark: int) -> list[int]: ...

    def next_due(self, held: dict[int, int], watermark: int) -> Optional[int]: ...

    def build(self, bucket_parts: list[tuple[int, str]], watermark: int) -> Any: ...

    def texts_by_bucket(self, table: Any) -> dict[int, str]: ...


def held_buckets(log: PartLog, meta: dict) -> dict[int, int]:
    """Bucket -> parts, from the group's record."""
    return {bucket: parts for bucket, parts in meta.get(log.meta_key, [])}


def read_buckets(log: PartLog, store: PartStore, held: dict[int, int], buckets: list[int]) -> list[tuple[int, str]]:
    """Every part of ``buckets``, in part order, in one call."""
    places = [(bucket, part) for bucket in buckets for part in range(held[bucket])]
    texts = store.get_texts(log.domain, places) if places else []
    missing = [place for place, text in zip(places, texts) if text is None]
    if missing:
        raise RuntimeError(f"the {log.domain} log's record names parts the state does not hold: {missing[:5]}")
    return [(bucket, text) for (bucket, _), text in zip(places, texts) if text is not None]  # (all: none missing)


def write_whole_buckets(log: PartLog, store: PartStore, meta: dict, texts: dict[int, str]) -> None:
    """A log started from rows moved in from another layout: each bucket's text as its one part."""
    if texts:
        store.put_texts(log.domain, [(bucket, 0, text) for bucket, text in texts.items()])
    meta[log.meta_key] = sorted([bucket, 1] for bucket in texts)



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
        parts = held.pop(bucket)
        text = written.pop(bucket, None)
        first_removed = 0
        if text is not None:
            puts.append((bucket, 0, text))
            held[bucket] = first_removed = 1
        removals += [(bucket, part) for part in range(first_removed, parts)]
    for bucket, text in written.items():  # rows only this batch's elements made: a new part
        part = held.get(bucket, 0)
        if part < COMPACT_PARTS:
            puts.append((bucket, part, text))
            held[bucket] = part + 1
            continue
        # a bucket many batches added to (a long window, small batches): its parts folded into one
        folded = log.build(read_buckets(log, store, held, [bucket]) + [(bucket, text)], last)
        puts.append((bucket, 0, log.texts_by_bucket(folded)[bucket]))
        removals += [(bucket, p) for p in range(1, part)]
        held[bucket] = 1
    if puts:
        store.put_texts(log.domain, puts)
    if removals:
        store.remove_texts(log.domain, removals)
    meta[log.meta_key] = sorted([bucket, parts] for bucket, parts in held.items())
    return log.next_due(held, watermark)
