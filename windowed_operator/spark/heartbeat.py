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
from pyspark.sql.types import IntegerType, StructField, StructType

#: The key group a heartbeat row goes to (null on data rows).
BEAT_COLUMN = "__wo_beat"


def with_beat_column(schema: StructType) -> StructType:
    """The rows' schema with the heartbeat column; every column nullable (a heartbeat is nulls)."""
    return StructType([StructField(f.name, f.dataType, True) for f in schema.fields]
                      + [StructField(BEAT_COLUMN, IntegerType(), True)])


@dataclass(frozen=True)
class Heartbeats:
    """The ``mapInArrow`` function: a partition's batches, then one heartbeat per key group if it had rows."""

    groups: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema: Optional[pa.Schema] = None
        had_rows = False
        for batch in batches:
            schema = batch.schema
            had_rows = had_rows or batch.num_rows > 0
            if batch.num_rows:
                yield batch.append_column(BEAT_COLUMN, pa.nulls(batch.num_rows, pa.int32()))
        if had_rows and schema is not None:
            columns = [pa.nulls(self.groups, field.type) for field in schema]
            yield pa.RecordBatch.from_arrays([*columns, pa.array(range(self.groups), pa.int32())],
                                             names=[*schema.names, BEAT_COLUMN])


def split_beats(frame: Optional[pd.DataFrame]) -> tuple[Optional[pd.DataFrame], bool]:
    """A group's rows without its heartbeats, and whether the stream had input in this batch."""
    if frame is None or BEAT_COLUMN not in frame.columns:
        return frame, frame is not None and len(frame) > 0
    beats = frame[BEAT_COLUMN].notna().to_numpy()
    rows = frame.loc[~beats].drop(columns=BEAT_COLUMN).reset_index(drop=True)
    return (rows if len(rows) else None), bool(beats.any())
