"""Local pre-folding for sketches: before the shuffle, fold each (key, pane) into one sketch.

``preaggregate`` folds numeric accumulations with Arrow's hash aggregation; sketches (HyperLogLog,
KLL: ``Accumulation.partials_are_bytes``) have no Arrow kernel, but they merge, and a window is a
union of panes (``windows/pane_layout.py``).  So the scan stage groups a partition's rows by (key,
pane) and folds each group with the accumulation's ``fold_array`` into the sketch's bytes; the
stateful operator receives one row per group (the pane's start as its time, the sketch as its value,
``WEIGHT_COLUMN`` the rows it stands for) and merges it into every window over the pane
(``vectorized.process_arrays`` with weights).  Fewer rows cross the shuffle, the Arrow hand-over and
the state's Python side.

Only where that changes nothing: Beam's default trigger (it does not count elements), windows with
a pane layout, panes stamped with the end of the window, no element kept aside (no late-data or
dead-letter output: a bad row raises the processor's error here) and values the scan stage reads as
the processor does (numbers, strings, booleans).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa

from ...windows.pane_layout import PaneLayout
from .preaggregate import checked_event_times, in_chunks
from .preselect import WEIGHT_COLUMN, group_codes

#: Value types whose Arrow values equal what the processor reads from pandas.
PREFOLDABLE_VALUES = ("tinyint", "smallint", "int", "bigint", "float", "double", "string", "boolean")


@dataclass(frozen=True)
class PreFolding:
    """The ``mapInArrow`` function: Arrow batches of rows -> one sketch per (key, pane) with its weight."""

    layout: PaneLayout
    accumulation: Any
    key_column: Optional[str]
    time_column: str
    value_column: str
    reader: Any  # raises the processor's error for a bad row
    #: The key column's Spark type (a ``DataType``; None: not keyed).
    key_type: Any = None

    def output_schema(self) -> Any:
        """[key,] the pane's start, the sketch, the weight (``scan_fold.ScanFold``)."""
        from pyspark.sql.types import BinaryType, LongType, StructField, StructType

        fields = [StructField(self.key_column, self.key_type, True)] if self.key_column is not None else []
        return StructType([*fields, StructField(self.time_column, LongType(), False),
                           StructField(self.value_column, BinaryType(), True),
                           StructField(WEIGHT_COLUMN, LongType(), False)])

    @property
    def input_columns(self) -> list[str]:
        return [f.name for f in self.output_schema().fields if f.name != WEIGHT_COLUMN]

    def plan_updates(self) -> dict[str, Any]:
        return {}

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in in_chunks(batches):
            yield self._fold(chunk)

    def _fold(self, batches: list[pa.RecordBatch]) -> pa.RecordBatch:
        table = pa.Table.from_batches(batches).combine_chunks()
        read = [c for c in (self.key_column, self.time_column, self.value_column) if c is not None]
        ts = checked_event_times(self.reader, table, self.time_column, read, self.value_column)
        panes = self.layout.pane_start(ts)
        groups = group_codes(table, self.key_column, panes)
        order = np.argsort(groups, kind="stable")
        starts = np.flatnonzero(np.diff(groups[order], prepend=-1))
        bounds = [*starts.tolist(), len(order)]
        values = table.column(self.value_column).to_numpy(zero_copy_only=False)[order]
        sketches = [self.accumulation.fold_array(values[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
        firsts = order[starts]
        columns = [table.column(self.key_column).take(pa.array(firsts))] if self.key_column is not None else []
        columns += [pa.array(panes[firsts], pa.int64()), pa.array(sketches, pa.binary()),
                    pa.array(np.diff(bounds), pa.int64())]
        names = [*([self.key_column] if self.key_column is not None else []), self.time_column, self.value_column,
                 WEIGHT_COLUMN]
        return pa.RecordBatch.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                                           for c in columns], names=names)


def prefoldable(accumulation: Any, value_type: Optional[str]) -> bool:
    return accumulation.partials_are_bytes() and value_type in PREFOLDABLE_VALUES


__all__ = ["PreFolding", "prefoldable"]
