"""Local pre-aggregation: fold each micro-batch per (key, pane) before the shuffle and the state.

Measured on local[2] (benchmarks/, 2M rows, 11 micro-batches): transformWithStateInPandas costs
about 0.45 s per micro-batch even with no rows, plus about 2.3 us per row it is handed (Arrow to
pandas, shuffle, grouping).  Folding rows into one partial per (key, pane) in the scan stage (the
local half of Flink's local-global aggregation) hands the stateful operator 5-20x fewer rows.

Spark Structured Streaming has no stateless JVM aggregate to put there: a streaming ``groupBy`` is
itself a stateful operator (state store, Append mode waits for the watermark, drops late rows).
So the fold runs in ``mapInArrow``, with Arrow's C++ hash aggregation (no Python per row): the
rows cross to Python once, as Arrow, and only partials cross the shuffle.

Only the columnar path (default trigger, sum/count/min/max/mean) takes partials, and only when no
element must be kept (no late-data or dead-letter output): a partial carries its element count,
so dropped-element accounting is unchanged.  A row with a null key, time or value raises the same
error the processor would.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from accumulations.int64 import may_wrap

from ...elements import rejected_row_error
from ...engine.columnar import ColumnarForm
from ...time import event_time_in_range
from ...windows.pane_layout import PaneLayout

PANE_COLUMN = "__wo_pane"
COUNT_COLUMN = "__wo_n"
AGGREGATE_PREFIX = "__wo_agg"
#: Rows folded at once: bounds the memory of one partition's micro-batch held as Arrow.
MAX_ROWS = 1_000_000


def in_chunks(batches: Iterator[pa.RecordBatch], max_rows: int = MAX_ROWS) -> Iterator[list[pa.RecordBatch]]:
    """A partition's Arrow batches in groups of at least ``max_rows`` rows (the last: what is left),
    so that a scan-stage fold holds a bounded part of a micro-batch; empty partitions give none."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        if rows >= max_rows:
            yield pending
            pending, rows = [], 0
    if rows:
        yield pending

_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double")
_ARROW_TYPES = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
                "float": pa.float32(), "double": pa.float64()}


def preaggregable(key_type: Optional[str], value_type: Optional[str]) -> bool:
    """Keys Arrow can group by and values it folds as the columnar path would (no decimals, no
    strings, no nested keys)."""
    return (key_type is None or key_type in (*_NUMERIC, "string", "boolean", "date")) and (
        value_type is None or value_type in _NUMERIC)


@dataclass(frozen=True)
class FormFold:
    """What a scan-stage fold of (key, event ms, value) rows has: the columns it reads, the
    accumulation's columnar form, and the reader whose error a bad row raises.  A fold's ``fields``
    are its output columns; ``_fold`` turns a chunk of a partition's batches into them."""

    form: ColumnarForm
    key_column: Optional[str]
    time_column: str
    value_column: Optional[str]
    key_type: Optional[str]
    value_type: Optional[str]
    reader: Any  # raises the processor's error for a bad row

    @property
    def input_columns(self) -> list[str]:
        """Each column read once (an accumulation may fold the event-time column itself)."""
        return list(dict.fromkeys(c for c in (self.key_column, self.time_column, self.value_column) if c is not None))

    def aggregate_columns(self) -> list[str]:
        return [name for name, _ in aggregate_fields(self.form, self.value_type)]

    def fields(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    def schema(self) -> str:
        """``fields`` as DDL (names quoted: the key keeps the user's column name)."""
        return ", ".join(f"`{name}` {type_name}" for name, type_name in self.fields())

    def output_schema(self) -> Any:
        """``fields`` as the Spark schema of the rows handed on (``scan_fold.ScanFold``)."""
        from ..base.connect_compat import parse_ddl_schema

        return parse_ddl_schema(self.schema())

    def plan_updates(self) -> dict[str, Any]:
        """The processor reads the partials' aggregate columns, in ``ColumnarForm.partial_aggregates`` order."""
        return {"partial_columns": tuple(self.aggregate_columns())}

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in in_chunks(batches):
            yield from self._fold(chunk)

    def _fold(self, batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def _checked_times(self, table: pa.Table) -> np.ndarray:
        """The event times (epoch ms) of the rows (``checked_event_times`` over the columns read)."""
        return checked_event_times(self.reader, table, self.time_column, self.input_columns, self.value_column)


@dataclass(frozen=True)
class PreAggregation(FormFold):
    """The ``mapInArrow`` function: Arrow batches of (key, event ms, value) -> partials per (key, pane)."""

    layout: PaneLayout

    def fields(self) -> list[tuple[str, str]]:
        """The partials' columns and Spark types: [key,] pane start, element count, the form's aggregates."""
        cols = [(self.key_column, str(self.key_type))] if self.key_column else []
        return cols + [(PANE_COLUMN, "bigint"), (COUNT_COLUMN, "bigint"),
                       *aggregate_fields(self.form, self.value_type)]

    def _fold(self, batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(batches).select(self.input_columns).combine_chunks()
        ts = self._checked_times(table)
        panes = pa.array(self.layout.pane_start(ts.astype(np.int64, copy=False)))
        keys = [table.column(self.key_column)] if self.key_column else []
        values = table.column(self.value_column) if self.value_column else None
        fields = self.fields()
        if values is not None and pa.types.is_integer(values.type) and may_wrap(values.to_numpy()):
            # Arrow's hash sum wraps past int64: hand these rows on as one partial each (every value
            # fits), and the processor, which sums with Python integers where int64 could wrap, folds them.
            ones = pa.array(np.ones(len(table), dtype=np.int64))
            out = pa.Table.from_arrays([*keys, panes, ones, *[values] * len(self.form.partial_aggregates)],
                                       names=[name for name, _ in fields])
        else:
            out = self._fold_with_arrow(keys, panes, values, fields)
        yield from out.cast(declared_arrow_schema(fields, out)).to_batches()

    def _fold_with_arrow(self, keys: list, panes: pa.Array, values: Optional[pa.ChunkedArray],
                         fields: list[tuple[str, str]]) -> pa.Table:
        """One partial per (key, pane): Arrow's C++ hash aggregation."""
        columns = {PANE_COLUMN: panes}
        if self.key_column:
            columns[self.key_column] = keys[0]
        aggregates: list[tuple[str, str]] = [(PANE_COLUMN, "count")]
        if values is not None:
            columns[str(self.value_column)] = values
            aggregates += [(str(self.value_column), agg) for agg in self.form.partial_aggregates]
        group = [self.key_column, PANE_COLUMN] if self.key_column else [PANE_COLUMN]
        folded = pa.table(columns).group_by(group, use_threads=False).aggregate(aggregates)
        return pa.Table.from_arrays([folded.column(name) for name in group]
                                    + [folded.column(f"{column}_{agg}") for column, agg in aggregates],
                                    names=[name for name, _ in fields])


def aggregate_fields(form: ColumnarForm, value_type: Optional[str]) -> list[tuple[str, str]]:
    """The partial aggregates' columns and Spark types (a sum widened to bigint or double, a min or
    max of the value's type)."""
    return [(f"{AGGREGATE_PREFIX}{i}", ("double" if value_type in ("float", "double") else "bigint") if agg == "sum"
             else str(value_type)) for i, agg in enumerate(form.partial_aggregates)]


def declared_arrow_schema(fields: list[tuple[str, str]], out: pa.Table) -> pa.Schema:
    """``fields`` as an Arrow schema (a numeric Spark type as its Arrow type, others as ``out`` has
    them): the fold's output is cast to it (Arrow's sum of int32 is int64, and so on)."""
    return pa.schema([pa.field(name, _ARROW_TYPES.get(type_name, out.schema.field(name).type))
                      for name, type_name in fields])


def checked_event_times(reader: Any, table: pa.Table, time_column: str, required: list[str],
                        value_column: Optional[str] = None) -> np.ndarray:
    """The event times (epoch ms, as int64) of a chunk a scan-stage fold or selection reads.  These
    run only where bad elements raise, so the first row the processor would reject raises its error:
    a null in a ``required`` column, a NaN in ``value_column`` (pandas' null, which the processor's
    rows reject) or an event time out of range, whichever row comes first."""
    times = table.column(time_column)
    ts = (times if not times.null_count else pc.fill_null(times, 0)).to_numpy()  # (a null time is a null)
    in_range = event_time_in_range(ts)
    value = table.column(value_column) if value_column is not None else None
    has_nan = value is not None and pa.types.is_floating(value.type) and pc.any(pc.is_nan(value)).as_py()
    if in_range.all() and not has_nan and not any(table.column(name).null_count for name in required):
        return ts.astype(np.int64, copy=False)
    bad = pa.array(~in_range)
    for name in required:
        bad = pc.or_(bad, pc.is_null(table.column(name), nan_is_null=name == value_column))
    raise first_bad_row_error(reader, table, bad, value_column)


def first_bad_row_error(reader: Any, table: pa.Table, bad: Any, value_column: Optional[str] = None) -> Exception:
    """The processor's error for the first row ``bad`` marks (a scan stage raises what it would)."""
    row = table.filter(bad).slice(0, 1).to_pylist()[0]
    return rejected_row_error(reader, value_column, row)
