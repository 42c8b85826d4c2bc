"""Heartbeats: every key group learns, in every micro-batch, whether the stream had any input.

A quiet stream's watermark advances with processing time (``watermarks.idle_advanced``) once *no
input at all* has come for ``idle_timeout``.  Each key group runs alone and sees only its own keys'
rows, so a group whose keys are quiet cannot tell a quiet stream from a busy one.  So, just before
the shuffle, each partition that had rows in the batch adds one heartbeat row per key group (a
``mapInArrow`` pass: the rows go through unchanged, as Arrow); a heartbeat row carries its group in
``BEAT_COLUMN`` and nulls elsewhere, and the processor takes it out before anything reads the rows.
Every group then notes the same batches as input, and computes the same watermark as the local
runner.  The cost: ``key_groups`` rows per partition and batch, and every group is woken in every
batch with input (a few state calls each).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import IntegerType, StructField, StructType

from ...time import latest_event_time

#: The key group a heartbeat row goes to (null on data rows).
BEAT_COLUMN = "__wo_beat"


def max_known(a: Optional[int], b: Optional[int]) -> Optional[int]:
    """The larger of two event times where either may be unknown (None)."""
    return b if a is None else a if b is None else max(a, b)


def with_beat_column(schema: StructType) -> StructType:
    """The rows' schema with the heartbeat column; every column nullable (a heartbeat is nulls)."""
    return StructType([StructField(f.name, f.dataType, True) for f in schema.fields]
                      + [StructField(BEAT_COLUMN, IntegerType(), True)])


@dataclass(frozen=True)
class Heartbeats:
    """The ``mapInArrow`` function: a partition's batches, then, if it had rows, one heartbeat per
    key group; for a merge (``side_column``), one per key group and input that had rows, carrying
    the input's largest event time in range in ``time_column`` (each group keeps each input's
    bounded-disorder watermark from them: Spark's own is one minimum over both)."""

    groups: int
    side_column: Optional[str] = None
    time_column: Optional[str] = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema: Optional[pa.Schema] = None  # every batch in it: all columns nullable (a heartbeat is nulls)
        seen: dict[str, Optional[int]] = {}
        for batch in batches:
            if schema is None:
                schema = pa.schema([f.with_nullable(True) for f in batch.schema]
                                   + [pa.field(BEAT_COLUMN, pa.int32(), True)])
            if not batch.num_rows:
                continue
            self._note(batch, seen)
            yield pa.RecordBatch.from_arrays([*batch.columns, pa.nulls(batch.num_rows, pa.int32())], schema=schema)
        if seen and schema is not None:
            yield self._beats(schema, seen)

    def _note(self, batch: pa.RecordBatch, seen: dict[str, Optional[int]]) -> None:
        if self.side_column is None:
            seen[""] = None
            return
        sides, times = batch.column(self.side_column), batch.column(self.time_column)
        in_range = pc.and_kleene(pc.is_valid(times), pc.less_equal(times, latest_event_time()))  # (event_time_in_range)
        for side in pc.unique(sides).to_pylist():
            largest = pc.max(pc.filter(times, pc.and_kleene(pc.equal(sides, side), in_range))).as_py()
            seen[side] = max_known(seen.get(side), largest)

    def _beats(self, schema: pa.Schema, seen: dict[str, Optional[int]]) -> pa.RecordBatch:
        n = self.groups * len(seen)
        columns = []
        for field in list(schema)[:-1]:  # (the last is the heartbeat column)
            if field.name == self.side_column:
                columns.append(pa.array([side for side in seen for _ in range(self.groups)], field.type))
            elif field.name == self.time_column:
                columns.append(pa.array([ts for ts in seen.values() for _ in range(self.groups)], field.type))
            else:
                columns.append(pa.nulls(n, field.type))
        groups = pa.array([g for _ in seen for g in range(self.groups)], pa.int32())
        return pa.RecordBatch.from_arrays([*columns, groups], schema=schema)


def split_beats(frame: Optional[pd.DataFrame], side_column: Optional[str] = None,
                time_column: Optional[str] = None) -> tuple[Optional[pd.DataFrame], dict[str, Optional[int]]]:
    """A group's rows without its heartbeats, and the inputs that had rows in this batch (for a
    merge, each with its largest event time in range, or None; for one input, ``{"": None}``)."""
    if frame is None or BEAT_COLUMN not in frame.columns:
        return frame, {}
    is_beat = frame[BEAT_COLUMN].notna().to_numpy()
    rows = frame.loc[~is_beat].drop(columns=BEAT_COLUMN).reset_index(drop=True)
    beats = frame.loc[is_beat]
    seen: dict[str, Optional[int]] = {}
    if side_column is None:
        if len(beats):
            seen[""] = None
    else:
        for side, ts in zip(beats[side_column].tolist(), beats[time_column].tolist()):
            ts = None if ts is None or ts != ts else int(ts)  # (a column with nulls comes as floats)
            seen[side] = max_known(seen.get(side), ts)
    return (rows if len(rows) else None), seen
