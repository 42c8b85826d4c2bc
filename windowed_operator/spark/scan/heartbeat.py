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

Under a per-partition watermark (``bounded_disorder(..., partition=<column>)``) a heartbeat also
carries the partitions: one per key group, input and partition that had rows, holding the
partition's value in its column and its largest event time in range in the time column, so that
every group observes the same per-partition maxima (``watermarks.PartitionWatermarks``) whichever
keys it holds.  A row with a null partition is a bad element (the processor rejects it) and counts
for no partition.  The cost: ``key_groups`` rows per partition of the input and batch.

A chained stage after a per-partition watermark takes its upstream's watermark the same way
(``WatermarkBeats``): the upstream's watermark rows (every call of every group reports its
watermark: ``SparkPlan.hands_on_watermark``) are replaced, per partition of the upstream's output,
by one heartbeat per key group of the stage carrying the largest of them, so that every group of
the stage advances to exactly the upstream's watermark, whichever keys it holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Iterator, Optional

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


def beat_schema(schema: pa.Schema) -> pa.Schema:
    """The rows' schema with the heartbeat column, every column nullable (a heartbeat is nulls but
    what it carries)."""
    return pa.schema([f.with_nullable(True) for f in schema] + [pa.field(BEAT_COLUMN, pa.int32(), True)])


def not_beats(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Rows passing through, in ``beat_schema``: no heartbeat (a null heartbeat column)."""
    return pa.RecordBatch.from_arrays([*batch.columns, pa.nulls(batch.num_rows, pa.int32())], schema=schema)


def filler(n: int, type_: pa.DataType) -> pa.Array:
    """What a heartbeat holds in a column it carries nothing in: nulls, but zeros in an integer
    column, which a null would turn into floats in the group's pandas frame (pyspark's conversion),
    and with them the batch's rows: integers past 2^53 rounded, sums past int64 never caught as
    overflows, bad rows reported with ``1700000003000.0`` for a time."""
    if pa.types.is_integer(type_):
        return pa.repeat(pa.scalar(0, type_), n)
    return pa.nulls(n, type_)


@dataclass(frozen=True)
class Heartbeats:
    """The ``mapInArrow`` function: a partition's batches, then, if it had rows, one heartbeat per
    key group (``groups``: each group's value in Spark, ``SparkPlan.groups``); for a merge (``side_column``), one per key group and input that had rows, carrying
    the input's largest event time in range in ``time_column`` (each group keeps each input's
    bounded-disorder watermark from them: Spark's own is one minimum over both); with
    ``partition_column``, one per key group, input and partition, carrying the partition's largest
    event time in range (``time_column`` is then required)."""

    groups: tuple[int, ...]
    side_column: Optional[str] = None
    time_column: Optional[str] = None
    partition_column: Optional[str] = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema: Optional[pa.Schema] = None  # every batch in it: all columns nullable (a heartbeat is nulls)
        seen: dict[Any, Optional[int]] = {}  # input, or (input, partition), -> largest event time
        for batch in batches:
            schema = schema or beat_schema(batch.schema)
            if not batch.num_rows:
                continue
            self._note(batch, seen)
            yield not_beats(batch, schema)
        if seen and schema is not None:
            yield self._beats(schema, seen)

    def _note(self, batch: pa.RecordBatch, seen: dict[Any, Optional[int]]) -> None:
        if self.side_column is None and self.partition_column is None:
            seen[""] = None
            return
        assert self.time_column is not None  # (given with a side or a partition column)
        times = batch.column(self.time_column)
        in_range = pc.and_kleene(pc.is_valid(times), pc.less_equal(times, latest_event_time()))  # (event_time_in_range)
        keys = {"side": batch.column(self.side_column) if self.side_column is not None
                else pa.array([""] * batch.num_rows, pa.string())}
        if self.partition_column is not None:
            keys["part"] = batch.column(self.partition_column)
        table = pa.table({**keys, "t": pc.if_else(in_range, times, pa.scalar(None, times.type))})
        for found in table.group_by(list(keys)).aggregate([("t", "max")]).to_pylist():
            side, largest = found["side"], found["t_max"]
            if self.partition_column is None:
                seen[side] = max_known(seen.get(side), largest)
                continue
            seen.setdefault((side, None), None)  # (the input had rows, whatever their partitions)
            if found["part"] is not None:  # (a null partition: a bad element, no partition's)
                seen[(side, found["part"])] = max_known(seen.get((side, found["part"])), largest)

    def _beats(self, schema: pa.Schema, seen: dict[Any, Optional[int]]) -> pa.RecordBatch:
        with_partitions = {entry[0] for entry in seen if isinstance(entry, tuple) and entry[1] is not None}
        # (an input's own beat only where none of its partitions has one: its null in an integer
        # partition column would make the frame's column float, and its partitions' beats say it had rows)
        seen = {entry: ts for entry, ts in seen.items()
                if not (isinstance(entry, tuple) and entry[1] is None and entry[0] in with_partitions)}
        n = len(self.groups) * len(seen)
        sides = [entry[0] if isinstance(entry, tuple) else entry for entry in seen]
        parts = [entry[1] if isinstance(entry, tuple) else None for entry in seen]
        columns = []
        for field in list(schema)[:-1]:  # (the last is the heartbeat column)
            if field.name == self.side_column:
                columns.append(pa.array([side for side in sides for _ in self.groups], field.type))
            elif field.name == self.partition_column:
                columns.append(pa.array([part for part in parts for _ in self.groups], field.type))
            elif field.name == self.time_column:
                columns.append(pa.array([ts for ts in seen.values() for _ in self.groups], field.type))
            else:
                columns.append(filler(n, field.type))
        groups = pa.array([g for _ in seen for g in self.groups], pa.int32())
        return pa.RecordBatch.from_arrays([*columns, groups], schema=schema)


@dataclass(frozen=True)
class WatermarkBeats:
    """The ``mapInArrow`` function over an upstream stage's pane rows (``feed.pane_rows``): the rows
    pass unchanged, but those carrying the upstream's watermark in ``column`` (its count rows), which
    are replaced by one heartbeat per key group (``groups``: each group's value in Spark) holding their
    largest watermark."""

    groups: tuple[int, ...]
    column: str

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema: Optional[pa.Schema] = None
        largest: Optional[int] = None
        for batch in batches:
            schema = schema or beat_schema(batch.schema)
            if not batch.num_rows:
                continue
            marks = batch.column(self.column)
            is_mark = pc.is_valid(marks)
            if pc.any(is_mark).as_py():
                largest = max_known(largest, pc.max(marks).as_py())
                batch = batch.filter(pc.invert(is_mark))
            if batch.num_rows:
                yield not_beats(batch, schema)
        if largest is not None and schema is not None:
            n = len(self.groups)
            columns = [pa.array([largest] * n, field.type) if field.name == self.column
                       else filler(n, field.type) for field in list(schema)[:-1]]
            yield pa.RecordBatch.from_arrays([*columns, pa.array(self.groups, pa.int32())], schema=schema)


def split_watermark_beats(frame: Optional[pd.DataFrame], column: str) -> tuple[Optional[pd.DataFrame], Optional[int]]:
    """A group's rows without the heartbeats ``WatermarkBeats`` made (and without their columns), and
    the largest upstream watermark they carry (None: none came)."""
    if frame is None or BEAT_COLUMN not in frame.columns:
        return frame, None
    is_beat = frame[BEAT_COLUMN].notna().to_numpy()
    marks = [_known(mark) for mark in frame.loc[is_beat, column].tolist()]
    rows = frame.loc[~is_beat].drop(columns=[BEAT_COLUMN, column]).reset_index(drop=True)
    largest = max((mark for mark in marks if mark is not None), default=None)
    return (rows if len(rows) else None), largest


def split_beats(frame: Optional[pd.DataFrame], side_column: Optional[str] = None,
                time_column: Optional[str] = None, partition_column: Optional[str] = None,
                ) -> tuple[Optional[pd.DataFrame], dict[str, Optional[int]], dict[tuple[str, Hashable], Optional[int]]]:
    """A group's rows without its heartbeats, the inputs that had rows in this batch (for a merge,
    each with its largest event time in range, or None; for one input, ``{"": None}``) and, with
    ``partition_column``, each (input, partition) that had rows with its largest event time in
    range (None: only bad ones)."""
    if frame is None or BEAT_COLUMN not in frame.columns:
        return frame, {}, {}
    is_beat = frame[BEAT_COLUMN].notna().to_numpy()
    rows = frame.loc[~is_beat].drop(columns=BEAT_COLUMN).reset_index(drop=True)
    beats = frame.loc[is_beat]
    seen: dict[str, Optional[int]] = {}
    parts: dict[tuple[str, Hashable], Optional[int]] = {}
    if partition_column is not None:
        assert time_column is not None  # (a partition's beat carries its largest event time)
        sides = beats[side_column].tolist() if side_column is not None else [""] * len(beats)
        for side, part, ts in zip(sides, beats[partition_column].tolist(), beats[time_column].tolist()):
            ts = _known(ts)
            seen[side] = max_known(seen.get(side), ts) if side_column is not None else None
            if not _is_null(part):
                parts[(side, _plain(part))] = max_known(parts.get((side, _plain(part))), ts)
    elif side_column is None:
        if len(beats):
            seen[""] = None
    else:
        for side, ts in zip(beats[side_column].tolist(), beats[time_column].tolist()):
            seen[side] = max_known(seen.get(side), _known(ts))
    return (rows if len(rows) else None), seen, parts


def _known(ts: Any) -> Optional[int]:
    """An event time read from a heartbeat (a column with nulls comes as floats, the null as NaN)."""
    return None if ts is None or ts != ts else int(ts)


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _plain(value: Any) -> Hashable:
    """A partition value as the element reader reads it from a row: a whole float of an integral
    column with nulls (pandas) back to an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.item() if hasattr(value, "item") else value
