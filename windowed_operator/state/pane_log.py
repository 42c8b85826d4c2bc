"""The pane log: a key group's pane rows stored by pane, not by key, where no element needs the
state it joins.

On the per-key layout (``records``) every key a batch touches costs a read and a write of
its record, and every key due a read and a write or removal: on Spark each is a request to the
JVM's state server, and Nexmark's q5 (bids per auction in hopping windows, most auctions new)
spent most of its operator time there.  Under the default trigger with no allowed lateness an
element never needs what is stored: it is dropped if every window over its pane has expired, and
otherwise only added to its (key, pane) partial; no window fires on an element (a window whose end
is reached has expired).  State is read only when windows fire, and then it is exactly the rows
of the panes under the windows that fire, which a watermark step names without any key.

So the rows are kept per pane, a bucket of the part log (``part_log``): each pane's rows are parts
appended without reading.  A watermark step reads the parts of the panes that have work due
(``ColumnarCore.due_per_row``, the columnar core's own rule), folds repeated (key, pane) rows, runs
the core, and writes each loaded pane back as one part, or removes it once its every window has
expired.  The bytes read follow the panes that fire, which is what the batch outputs.

A checkpoint written on the per-key layout keeps it (``pane_log_migration``).
"""
from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from ..engine.columnar import ColumnarCore, PaneTable
from ..engine.columnar_panes import object_array
from ..engine.range_ops import factorize, lexsort_ints, run_starts
from ..time_rules import is_timer_due
from .codec import KeyStateCodec
from .group_batch import StoreResult, StoreBatch, TableEngine
from .layouts import PANE_LOG
from .part_log import PartStore, held_buckets, run_part_log
from .records import _column, _decoded, _encoded

#: The store's part domain the pane log writes under (the due index's parts use "event", "processing"), and its
#: field of the group's record (``layouts.PANE_LOG``).
DOMAIN, META = PANE_LOG.domain, PANE_LOG.meta_key
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


class PaneLog:
    """A ``part_log.PartLog`` whose buckets are panes (by start)."""

    layout = PANE_LOG.name
    domain = DOMAIN
    meta_key = META

    def __init__(self, core: ColumnarCore, store: Optional[PartStore] = None) -> None:
        self.core, self.store = core, store
        self.values = KeyStateCodec()

    @classmethod
    def opened(cls, stores: Any) -> "PaneLog":
        return cls(stores.columnar, stores.store)

    def run_batch(self, batch: StoreBatch, engine: TableEngine) -> StoreResult:
        """Read the panes due, run the engine on their rows, write them back and the batch's rows as
        new parts (``part_log.run_part_log``)."""
        assert self.store is not None
        meta = batch.group.meta
        due = run_part_log(self, self.store, meta, batch.watermark, engine.run)
        return StoreResult(engine.out, due, bool(held_buckets(self, meta)))

    # -- which panes a watermark step needs -------------------------------------------------------
    def _due_times(self, held: dict[int, int], watermark: int) -> tuple[np.ndarray, np.ndarray]:
        """The held panes' starts and when each next has work after ``watermark`` (the core's rule,
        asked of a table of one row per pane: it reads only the starts)."""
        starts = np.fromiter(held, dtype=np.int64, count=len(held))
        return starts, self.core.due_per_row(PaneTable(object_array([None] * len(starts)), starts, watermark=watermark))

    def due_buckets(self, held: dict[int, int], last_watermark: int, watermark: int) -> list[int]:
        """The held panes with work due between the last watermark applied and ``watermark``."""
        if not held or watermark <= last_watermark:
            return []
        starts, due = self._due_times(held, last_watermark)
        return starts[is_timer_due(due, watermark)].tolist()

    def next_due(self, held: dict[int, int], watermark: int) -> Optional[int]:
        """When the group next has work: the earliest due time of a held pane."""
        if not held:
            return None
        return int(self._due_times(held, watermark)[1].min())

    # -- parts <-> rows ---------------------------------------------------------------------------
    def part_text(self, keys: list, acc: list[list]) -> str:
        return _encode({"keys": _encoded(self.values.value, keys), "acc": [_encoded(self.values.value, c)
                                                                          for c in acc]})

    def build(self, bucket_parts: list[tuple[int, str]], watermark: int) -> PaneTable:
        """The table of the given parts (pane start, text), one row per (key, pane): rows a pane got
        in several parts are folded."""
        if not bucket_parts:
            return PaneTable(watermark=watermark)
        data = json.loads(f"[{','.join(text for _, text in bucket_parts)}]")
        read = self.values.read_value
        keys = object_array([k for part in data for k in _decoded(read, part["keys"])])
        starts = np.fromiter((start for (start, _), part in zip(bucket_parts, data) for _ in part["keys"]),
                             dtype=np.int64, count=len(keys))
        width = self.core.form.width
        acc = [_column([v for part in data for v in _decoded(read, part["acc"][c])]) for c in range(width)]
        codes, uniques = factorize(keys)
        order = lexsort_ints((starts, codes))
        codes, starts = codes[order], starts[order]
        first = run_starts(codes, starts)
        folded = self.core.form.reduce_segments([c[order] for c in acc], first)
        return PaneTable(uniques[codes[first]], starts[first], folded,
                         np.full(len(first), watermark, dtype=np.int64), watermark)

    def texts_by_bucket(self, table: PaneTable) -> dict[int, str]:
        """Each pane of the table as one part's text."""
        if not len(table):
            return {}
        order = np.argsort(table.starts, kind="stable")
        starts = table.starts[order]
        bounds = np.flatnonzero(np.concatenate(([True], starts[1:] != starts[:-1], [True]))).tolist()
        keys = table.keys[order].tolist()
        acc = [c[order].tolist() for c in table.acc]
        return {int(starts[lo]): self.part_text(keys[lo:hi], [c[lo:hi] for c in acc])
                for lo, hi in zip(bounds[:-1], bounds[1:])}


