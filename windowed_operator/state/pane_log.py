"""The pane log: a key group's pane rows stored by time, not by key, where no element needs the
state it joins.

On the per-key layout (``records``) every key a batch touches costs a read and a write of
its record, and every key due a read and a write or removal: on Spark each is a request to the
JVM's state server, and Nexmark's q5 (bids per auction in hopping windows, most auctions new)
spent most of its operator time there.  Under the default trigger with no allowed lateness an
element never needs what is stored: it is dropped if every window over its pane has expired, and
otherwise only added to its (key, pane) partial; no window fires on an element (a window whose end
is reached has expired).  State is read only when windows fire, and then it is exactly the rows
of the panes under the windows that fire, which a watermark step names without any key.

So the rows are kept by time, in buckets of the part log (``part_log``): each bucket's rows are
parts appended without reading.  A bucket holds a window's length of panes (``PaneLayout.window_length``,
at most ``BUCKET_PANES``, from an aligned start: since state version 10; before, one pane), so a
window's firing reads one or two buckets whatever its number of panes (hopping 60 s / 1 s: 160 texts a key group and batch became
4, ``benchmarks/results/before_after.txt``).  A watermark step reads the buckets with work due: a
bucket is due when its earliest pane is (its *least*, kept in the group's record: a pane's next work
never comes before an earlier pane's, ``ColumnarCore.due_per_row``), folds repeated (key, pane) rows,
runs the core, and writes each loaded bucket back as one part, or removes it once its every window
has expired.  The bytes read follow the panes that fire, which is what the batch outputs.

A part's text (``part_text``) holds its rows as columns: the pane starts and the key codes packed
(``row_columns_text.packed``), each key once, and the accumulator columns packed where they are
numbers.  A part written before version 10 (``{"keys", "acc"}``: one pane's rows, the bucket its
start) is read beside them (``part_columns``), and its rows are written in the new form when its
bucket is loaded.

A checkpoint written on the per-key layout keeps it (``pane_log_migration``).
"""
from __future__ import annotations

import json
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from ..engine.columnar import ColumnarCore, PaneTable
from ..engine.columnar_panes import object_array
from ..engine.range_ops import factorize, lexsort_ints, run_starts
from ..time_rules import is_timer_due
from .codec import KeyStateCodec
from .group_batch import StoreResult, StoreBatch, TableEngine
from .layouts import PANE_LOG
from .part_log import Held, PartStore, held_buckets, run_part_log
from .records import _column, _decoded, _encoded, _joined
from .row_columns_text import PACKED_KINDS, accumulator_column, packed, unpacked

#: The store's part domain the pane log writes under (the due index's parts use "event", "processing"), and its
#: field of the group's record (``layouts.PANE_LOG``).
DOMAIN, META = PANE_LOG.domain, PANE_LOG.meta_key
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_VALUES = KeyStateCodec()
#: The most panes a bucket holds: a window of a day sliding by a minute keeps its 1,440 panes in three
#: buckets, so that a text stays within a few hundred panes' rows (the rows a batch reads are the
#: same; a bucket's least makes any span right, so a later release may change this one).
BUCKET_PANES = 512


class PaneLog:
    """A ``part_log.PartLog`` whose buckets are a window's length of panes (by the first's start)."""

    layout = PANE_LOG.name
    domain = DOMAIN
    meta_key = META

    def __init__(self, core: ColumnarCore, store: Optional[PartStore] = None) -> None:
        self.core, self.store = core, store

    @classmethod
    def opened(cls, stores: Any) -> "PaneLog":
        return cls(stores.columnar, stores.store)

    def run_batch(self, batch: StoreBatch, engine: TableEngine) -> StoreResult:
        """Read the buckets due, run the engine on their rows, write them back and the batch's rows as
        new parts (``part_log.run_part_log``)."""
        assert self.store is not None
        meta = batch.group.meta
        due = run_part_log(self, self.store, meta, batch.watermark, engine.run)
        return StoreResult(engine.out, due, bool(held_buckets(self, meta)))

    def bucket_of(self, starts: np.ndarray) -> np.ndarray:
        """The bucket of each pane start: the aligned start of the window's length (at most
        ``BUCKET_PANES`` panes) holding it."""
        layout = self.core.layout
        span = layout.pane * min(layout.window_length // layout.pane, BUCKET_PANES)
        return starts - (starts - layout.offset) % span

    # -- which buckets a watermark step needs -----------------------------------------------------
    def _due_times(self, held: dict[int, Held], watermark: int) -> tuple[np.ndarray, np.ndarray]:
        """The held buckets and when each next has work after ``watermark``: when its earliest pane
        has (the core's rule, asked of a table of one row per bucket: it reads only the starts)."""
        buckets = np.fromiter(held, dtype=np.int64, count=len(held))
        least = np.fromiter((h.least for h in held.values()), dtype=np.int64, count=len(held))
        return buckets, self.core.due_per_row(PaneTable(object_array([None] * len(least)), least, watermark=watermark))

    def due_buckets(self, held: dict[int, Held], last_watermark: int, watermark: int) -> list[int]:
        """The held buckets with work due between the last watermark applied and ``watermark``."""
        if not held or watermark <= last_watermark:
            return []
        buckets, due = self._due_times(held, last_watermark)
        return buckets[is_timer_due(due, watermark)].tolist()

    def next_due(self, held: dict[int, Held], watermark: int) -> Optional[int]:
        """When the group next has work: the earliest due time of a held bucket."""
        if not held:
            return None
        return int(self._due_times(held, watermark)[1].min())

    # -- parts <-> rows ---------------------------------------------------------------------------
    def build(self, bucket_parts: list[tuple[int, str]], watermark: int) -> PaneTable:
        """The table of the given parts (bucket, text), one row per (key, pane): rows a pane got in
        several parts are folded."""
        if not bucket_parts:
            return PaneTable(watermark=watermark)
        data = json.loads(f"[{','.join(text for _, text in bucket_parts)}]")
        read = _VALUES.read_value
        width = self.core.form.width
        columns = [part_columns(part, bucket, read, width) for (bucket, _), part in zip(bucket_parts, data)]
        starts = np.concatenate([c.starts for c in columns])
        codes, uniques = _joined_codes(columns)
        acc = [_joined([c.acc[i] for c in columns]) for i in range(width)]
        order = lexsort_ints((starts, codes))
        codes, starts = codes[order], starts[order]
        first = run_starts(codes, starts)
        folded = self.core.form.reduce_segments([c[order] for c in acc], first)
        return PaneTable(uniques[codes[first]], starts[first], folded,
                         np.full(len(first), watermark, dtype=np.int64), watermark)

    def texts_by_bucket(self, table: PaneTable) -> dict[int, tuple[str, int]]:
        """Each bucket of the table as one part's text, with its earliest pane start."""
        return self._texts(table, self.bucket_of(table.starts))

    def text_of(self, table: PaneTable, bucket: int) -> tuple[str, int]:
        """The table as one part's text of ``bucket`` (its parts folded: they stay in it), with its
        earliest pane start."""
        return self._texts(table, np.full(len(table), bucket, dtype=np.int64))[bucket]

    def _texts(self, table: PaneTable, buckets: np.ndarray) -> dict[int, tuple[str, int]]:
        if not len(table):
            return {}
        order = np.argsort(buckets, kind="stable")
        buckets, starts = buckets[order], table.starts[order]
        codes, uniques = factorize(table.keys)
        codes = codes[order]
        acc = [c[order] for c in table.acc]
        bounds = np.flatnonzero(np.concatenate(([True], buckets[1:] != buckets[:-1], [True]))).tolist()
        encode = _VALUES.value
        return {int(buckets[lo]): (part_text(starts[lo:hi], codes[lo:hi], uniques, [c[lo:hi] for c in acc], encode),
                                   int(starts[lo:hi].min()))
                for lo, hi in zip(bounds[:-1], bounds[1:])}


# -- a part's text ---------------------------------------------------------------------------------
class PartColumns(NamedTuple):
    """A part's rows: pane starts, key codes into ``keys`` (each key once), accumulator columns."""
    starts: np.ndarray
    codes: np.ndarray
    keys: list
    acc: list


def part_text(starts: np.ndarray, codes: np.ndarray, keys: np.ndarray, acc: list[np.ndarray],
              encode: Callable[[Any], Any]) -> str:
    """Rows as a part's text: ``{"s": starts, "c": codes, "k": keys, "a": accumulators}``, the
    starts and codes packed, the codes renumbered to the keys the rows hold (``keys[codes]``: the row's
    key), each accumulator column packed where it holds numbers, else a list of tagged values."""
    if len(codes) * 8 < len(keys):  # (a few rows of many keys: the sort of the rows is the cheaper)
        held, local = np.unique(codes, return_inverse=True)
        local = local.reshape(-1)
    else:  # (np.unique's held codes and renumbering, without its sort)
        present = np.zeros(len(keys), dtype=bool)
        present[codes] = True
        held = np.flatnonzero(present)
        local = (np.cumsum(present) - 1)[codes]
    return _encode({"s": packed(starts), "c": packed(local), "k": _encoded(encode, keys[held].tolist()),
                    "a": [packed(c) if c.dtype.kind in PACKED_KINDS else _encoded(encode, c.tolist()) for c in acc]})


def part_columns(part: dict, bucket: int, read: Callable[[Any], Any], width: int) -> PartColumns:
    """A parsed part's rows, in either form: ``part_text``'s, or (before state version 10) one pane's
    rows as ``{"keys", "acc"}`` lists, the pane starting at ``bucket``."""
    if "keys" in part:
        keys = _decoded(read, part["keys"])
        n = len(keys)
        return PartColumns(np.full(n, bucket, dtype=np.int64), np.arange(n, dtype=np.int64), keys,
                           [_column(_decoded(read, part["acc"][c])) for c in range(width)])
    return PartColumns(unpacked(part["s"])[0], unpacked(part["c"])[0], _decoded(read, part["k"]),
                       [accumulator_column(a, read) for a in part["a"]])


def part_rows(text: str, bucket: int) -> PartColumns:
    """A part's rows from its text (the inspector's, a rescale's)."""
    data = json.loads(text)
    width = len(data["acc"] if "keys" in data else data["a"])
    return part_columns(data, bucket, _VALUES.read_value, width)


def _joined_codes(columns: list[PartColumns]) -> tuple[np.ndarray, np.ndarray]:
    """Every part's rows' key codes into one numbering, and its keys: the parts' keys factorized
    (each part holds each of its keys once), not every row's."""
    keys = object_array([k for c in columns for k in c.keys])
    key_codes, uniques = factorize(keys)
    offsets = np.cumsum([0] + [len(c.keys) for c in columns[:-1]])
    return np.concatenate([key_codes[offset + c.codes] for offset, c in zip(offsets.tolist(), columns)]), uniques
