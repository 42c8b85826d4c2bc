"""A micro-batch as the table sink reads it: a Spark batch DataFrame (through Arrow), a pyarrow
Table, a pandas DataFrame, the local runner's ``PaneRecord`` list, or rows with the Spark output's
columns, each as rows of the columns the sink reads, with the batch's streaming query id where known.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Optional

from ..panes import HELD_BY_ROW_COLUMN, WATERMARK_ROW_COLUMN, PaneRecord
from ..time import shown_datetime
from .completeness import BatchWatermark
from .netting import EPOCH

def pane_rows(panes: Iterable[PaneRecord]) -> list[dict]:
    """The local runner's panes as rows with the Spark output's names (times stay as they are, but
    the firing watermark, a time as on Spark)."""
    return [{"key": p.key, "window_start": p.window_start, "window_end": p.window_end, "value": p.value,
             "timing": p.timing.value, "pane_index": p.index, "is_first": p.is_first, "is_last": p.is_last,
             "is_retraction": p.is_retraction,
             **({} if p.firing is None else {"fired_by": p.firing.fired_by,
                                             "firing_watermark": shown_datetime(p.firing.watermark)})} for p in panes]


#: The columns of a pane row the sink reads.
_READ = ("key", "window_start", "window_end", "value", "timing", "pane_index", "is_last", "is_retraction",
         "record_type", "fired_by", "firing_watermark", WATERMARK_ROW_COLUMN, HELD_BY_ROW_COLUMN)


def arrow_rows(table: Any) -> list[dict]:
    """The rows of an Arrow table, only the columns the sink reads; timestamps become UTC datetimes
    through their epoch microseconds, one object per distinct instant (``to_pylist`` builds an
    aware datetime per cell, most of the cost of a batch)."""
    import pyarrow as pa

    columns = {}
    for name in table.column_names:
        if name not in _READ:
            continue
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            cache: dict[int, dt.datetime] = {}
            micros = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
            columns[name] = [None if m is None else cache.get(m) or
                             cache.setdefault(m, EPOCH + dt.timedelta(microseconds=m)) for m in micros]
        else:
            columns[name] = column.to_pylist()
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*columns.values())]


def watermark_rows(rows: list[dict], schema: Any = None) -> tuple[list[dict], Optional[BatchWatermark]]:
    """The rows without the operator's watermark rows (``with_watermark``'s), and the batch's
    watermark they report (None: the batch has none); ``schema``: the batch's Arrow schema, where it
    has one (without the watermark column no row is looked at)."""
    if schema is not None and WATERMARK_ROW_COLUMN not in schema.names:
        return rows, None
    if not any(r.get(WATERMARK_ROW_COLUMN) is not None for r in rows):
        return rows, None
    marks = [BatchWatermark(r[WATERMARK_ROW_COLUMN], r.get(HELD_BY_ROW_COLUMN)) for r in rows
             if r[WATERMARK_ROW_COLUMN] is not None]
    return [r for r in rows if r[WATERMARK_ROW_COLUMN] is None], BatchWatermark.lowest(marks)


def read_batch(batch: Any) -> tuple[list[dict], Any, Optional[str]]:
    """(rows, Arrow schema or None, the batch's streaming query id or None)."""
    if hasattr(batch, "sparkSession") and hasattr(batch, "toArrow"):  # a Spark DataFrame
        from ..spark.base.table_sink import read_spark_batch

        table, query = read_spark_batch(batch)
        return arrow_rows(table), table.schema, query
    if hasattr(batch, "to_pylist") and hasattr(batch, "schema"):  # a pyarrow Table
        return arrow_rows(batch), batch.schema, None
    if hasattr(batch, "to_dict") and hasattr(batch, "columns"):  # a pandas DataFrame
        import pyarrow as pa

        table = pa.Table.from_pandas(batch, preserve_index=False)
        return arrow_rows(table), table.schema, None
    rows = list(batch)
    if rows and isinstance(rows[0], PaneRecord):
        return pane_rows(rows), None, None
    return [dict(r) for r in rows], None, None


__all__ = ["arrow_rows", "pane_rows", "read_batch", "watermark_rows"]
