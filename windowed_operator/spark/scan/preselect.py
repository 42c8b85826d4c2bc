"""Local pre-selection: before the shuffle, keep only the rows an accumulation that keeps rows could keep.

AllMax and TopN keep whole rows (Nexmark's highest bid keeps every bid at the top price of its
window). A window is a union of panes (``windows/pane_layout.py``), and a row that is not among the
top of its own (key, pane) in a micro-batch's partition cannot be among the top of any window over
that pane: ``AllMax``/``TopN.candidates``. So the scan stage keeps the candidates per (key, pane)
and the stateful operator, which a non-keyed operator runs as a single task, receives a few rows
per pane instead of all of them. It is the row-keeping analogue of ``preaggregate``.

Each kept row carries how many rows it stands for (``WEIGHT_COLUMN``: the left-out rows of its
group are added to the group's first kept row), so that late rows dropped are counted as before.
Only where the trigger does not count elements (Beam's default trigger), no element must be kept
(no late-data or dead-letter output: bad rows raise the processor's error here) and the windows have
a pane layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...windows.pane_layout import PaneLayout
from .preaggregate import checked_event_times, in_chunks

WEIGHT_COLUMN = "__wo_weight"


@dataclass(frozen=True)
class PreSelection:
    """The ``mapInArrow`` function: Arrow batches of rows -> the candidate rows, each with its weight."""

    layout: PaneLayout
    accumulation: Any  # AllMax or TopN ranking by ``field``
    key_column: Optional[str]
    time_column: str
    reader: Any  # raises the processor's error for a bad row
    #: The input's schema (a ``StructType``: declared, or the DataFrame's), the event time as read.
    shape: Any = None

    @property
    def input_columns(self) -> list[str]:
        return [f.name for f in self.shape.fields]

    def output_schema(self) -> Any:
        """The input's rows (the event time as epoch ms) and their weights, from the input's schema
        without analysing it (``scan_fold.ScanFold``)."""
        from pyspark.sql.types import LongType, StructField, StructType

        return StructType([StructField(f.name, LongType() if f.name == self.time_column else f.dataType, f.nullable)
                           for f in self.shape.fields] + [StructField(WEIGHT_COLUMN, LongType(), False)])

    def plan_updates(self) -> dict[str, Any]:
        return {}

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in in_chunks(batches):
            yield from self._select(chunk)

    def _select(self, batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(batches).combine_chunks()
        # (the ranked field is not checked: a row without a rank is handed on, the fold decides)
        needed = [c for c in (self.key_column, self.time_column) if c is not None]
        ts = checked_event_times(self.reader, table, self.time_column, needed)
        groups = group_codes(table, self.key_column, self.layout.pane_start(ts))
        field = table.column(self.accumulation.field)
        ranked = ~np.asarray(pc.is_null(field, nan_is_null=True).to_numpy(zero_copy_only=False))
        keep = np.ones(len(table), dtype=bool)  # (a row without a rank is handed on: the fold decides)
        weights = np.ones(len(table), dtype=np.int64)
        if ranked.any():
            positions = np.flatnonzero(ranked)
            ranks = field.filter(pa.array(ranked)).to_numpy()
            chosen = self.accumulation.candidates(ranks, groups[positions])
            keep[positions[~chosen]] = False
            left_out = np.bincount(groups[positions[~chosen]], minlength=groups.max() + 1)
            kept_rows = positions[chosen]
            _, first = np.unique(groups[kept_rows], return_index=True)
            weights[kept_rows[first]] += left_out[groups[kept_rows[first]]]
        selected = table.filter(pa.array(keep)).append_column(WEIGHT_COLUMN, pa.array(weights[keep]))
        yield from selected.to_batches()


def group_codes(table: pa.Table, key_column: Optional[str], panes: np.ndarray) -> np.ndarray:
    """Integer codes of each row's (key, pane)."""
    # (a hash table, then its few panes sorted: np.unique's codes, without sorting every row)
    pane_codes = pd.factorize(panes, sort=True)[0].astype(np.int64, copy=False)
    if key_column is None:
        return pane_codes
    encoded = pc.dictionary_encode(table.column(key_column)).combine_chunks()
    key_codes = encoded.indices.to_numpy().astype(np.int64)
    return np.unique(key_codes * (int(pane_codes.max()) + 1) + pane_codes, return_inverse=True)[1]


def preselectable(accumulation: Any, rank_type: Optional[str]) -> bool:
    """An accumulation with ``candidates`` ranking a numeric field (not a callable)."""
    from .preaggregate import preaggregable

    return (callable(getattr(accumulation, "candidates", None)) and getattr(accumulation, "field", None) is not None
            and getattr(accumulation, "key", None) is None and rank_type is not None
            and preaggregable(None, rank_type))


__all__ = ["PreSelection", "WEIGHT_COLUMN", "preselectable"]
