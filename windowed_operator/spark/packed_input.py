"""A key group's rows of a scan partition handed to the stateful processor as one packed row.

pyspark 4.3's ``transformWithStateInPandas`` regroups its input row by row in Python: it turns
each Arrow batch into pandas, walks it with ``itertuples`` and builds a pandas DataFrame per
grouping key from the tuples (``pyspark/worker.py``, ``transform_with_state_func``).  Measured on
Nexmark q11 (2M events, sessions per bidder, no scan-stage fold): 4.2 s of one worker's 9.3 s in
the operator went there, about 4.6 us a row, before the processor saw a row.

The processor is called per *key group* (a few per partition, ``runner.run_processor``), so the
scan stage can hand it each group's rows as one row instead: ``PackRows`` (a ``mapInArrow``
function) sorts a chunk of a partition's rows by group, stably, and writes each group's run of rows
as one Arrow IPC stream in a binary column; the processor reads those streams back
(``unpack_rows``) and converts them to pandas with pyspark's own conversion
(``ArrowBatchTransformer.to_pandas``, the call its row path starts with; a struct of numbers,
strings and booleans, a merge's whole row, in one Arrow call that gives the same dicts), so the
frame it works on holds the same rows, in the same order within a partition, with the same dtypes.  Nothing about
what a row means changes (keys, times, bad rows, heartbeats travel as they are); only the handoff.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd
import pyarrow as pa

from .preaggregate import in_chunks
from .settings import read_flag

#: The packed rows' payload column: one Arrow IPC stream of a key group's rows.
PACKED_COLUMN = "__wo_packed"
#: Its position among the packed rows' columns (group, payload).
PACKED_POSITION = 1
#: Rows per payload at most: bounds what one packed row holds (a partition's chunk is at most
#: ``preaggregate.MAX_ROWS`` rows; a group's run of it is split into payloads of this many).
MAX_PACK_ROWS = 65_536
#: Bytes of one output batch's payloads at most: below what a binary column's 32-bit offsets reach.
MAX_PAYLOAD_BYTES = 2**31 - 1
#: The Spark conf that turns packing off (``false``): the processor then takes rows one by one from
#: pyspark, as before packing existed (for comparison, or a pyspark whose row path is faster).
PACK_CONF = "spark.windowed_operator.packInput"
#: pyspark's conf making integer columns pandas extension dtypes in the row path: packing keeps to
#: the default conversion, so it steps aside when this is on.
INT_EXTENSION_CONF = "spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype"


@dataclass(frozen=True)
class PackRows:
    """The ``mapInArrow`` function: a partition's rows -> (group, payload) rows, a few per group."""

    group_column: str
    max_pack_rows: int = MAX_PACK_ROWS
    #: Bytes of payloads per output batch at most (a binary column's 32-bit offsets bound it).
    max_payload_bytes: int = MAX_PAYLOAD_BYTES

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in in_chunks(batches):
            yield from self._pack(pa.Table.from_batches(chunk).combine_chunks())

    def _pack(self, table: pa.Table) -> Iterator[pa.RecordBatch]:
        group_array = table.column(self.group_column)
        groups = group_array.to_numpy()
        order = np.argsort(groups, kind="stable")  # (stable: each group's rows keep their order)
        table = table.take(pa.array(order))
        sorted_groups = groups[order]
        starts = np.flatnonzero(np.concatenate(([True], sorted_groups[1:] != sorted_groups[:-1])))
        ends = np.append(starts[1:], len(sorted_groups))
        packed = _Payloads(group_array.type, self.group_column, self.max_payload_bytes)
        for start, end in zip(starts.tolist(), ends.tolist()):
            for lo in range(start, end, self.max_pack_rows):
                yield from packed.add(int(sorted_groups[start]), table.slice(lo, min(end, lo + self.max_pack_rows) - lo))
        yield from packed.flush()


class _Payloads:
    """Payloads written one after the other into one buffer, which becomes the binary column's data
    as it is (its offsets are where each stream ends): no copy of a stream into Python bytes and back.
    A batch is yielded before its data would pass ``max_bytes`` (a binary column's offsets are 32-bit)."""

    def __init__(self, group_type: pa.DataType, group_column: str, max_bytes: int) -> None:
        self.group_type, self.group_column, self.max_bytes = group_type, group_column, max_bytes
        self._start()

    def _start(self) -> None:
        self.sink = pa.BufferOutputStream()
        self.groups: list[int] = []
        self.offsets: list[int] = [0]

    def add(self, group: int, rows: pa.Table) -> Iterator[pa.RecordBatch]:
        with pa.ipc.new_stream(self.sink, rows.schema) as writer:
            writer.write_table(rows)
        end = self.sink.tell()
        if end - self.offsets[-1] > self.max_bytes:
            raise ValueError(f"a packed payload of {rows.num_rows} rows takes {end - self.offsets[-1]} bytes, more "
                             f"than a binary column holds ({self.max_bytes}); lower max_pack_rows")
        if end > self.max_bytes:  # this stream goes into the next batch: written again there
            yield from self.flush()
            yield from self.add(group, rows)
            return
        self.groups.append(group)
        self.offsets.append(end)

    def flush(self) -> Iterator[pa.RecordBatch]:
        if self.groups:
            data = self.sink.getvalue()
            offsets = pa.py_buffer(np.asarray(self.offsets, dtype=np.int32).tobytes())
            payloads = pa.Array.from_buffers(pa.binary(), len(self.groups), [None, offsets, data])
            yield pa.RecordBatch.from_arrays([pa.array(self.groups, type=self.group_type), payloads],
                                             names=[self.group_column, PACKED_COLUMN])
        self._start()


def unpack_rows(payloads: Any, timezone: Optional[str]) -> pd.DataFrame:
    """The rows of a key group's packed payloads (in order) as one pandas frame, converted as
    pyspark's row path converts each Arrow batch (``timezone``: the session's, for timestamps)."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    tables = [pa.ipc.open_stream(pa.py_buffer(payload)).read_all() for payload in payloads]
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    records = [i for i, field in enumerate(table.schema) if _plain_record(field.type)]
    others = [i for i in range(table.num_columns) if i not in records]
    converted = iter(ArrowBatchTransformer.to_pandas(table.select(others), timezone=timezone)  # type: ignore[arg-type]
                     if others else [])
    columns = [_records(table.column(i)) if i in records else next(converted) for i in range(table.num_columns)]
    frame = pd.concat(columns, axis=1) if columns else pd.DataFrame(index=range(table.num_rows))
    frame.columns = table.column_names
    return _widened_as_tuples_make_them(frame)


#: Arrow field types whose Python values (``to_pylist``) are the ones pyspark's conversion gives a
#: struct's fields (checked against it value by value in ``tests/spark/test_packed_input.py``).
_PLAIN_FIELD_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_boolean)


def _plain_record(arrow_type: pa.DataType) -> bool:
    """A struct of plain fields: a merge's whole row of numbers and strings, say."""
    return pa.types.is_struct(arrow_type) and all(any(is_type(field.type) for is_type in _PLAIN_FIELD_TYPES)
                                                  for field in arrow_type)


def _records(column: pa.ChunkedArray) -> pd.Series:
    """A struct column as pyspark converts it (a dict per row, None for a null row), in one Arrow
    call: pyspark converts a struct row by row in Python (about 2 us a row of a merge's whole row,
    measured), Arrow's ``to_pylist`` builds the same dicts in C++."""
    values = np.empty(len(column), dtype=object)
    values[:] = column.to_pylist()
    return pd.Series(values, dtype=object)


def _widened_as_tuples_make_them(frame: pd.DataFrame) -> pd.DataFrame:
    """The row path builds its frame from tuples of Python values, so pandas infers each column's
    dtype again: narrower integers come back int64 and float32 float64 (measured); the rest keep
    their dtype."""
    widened = {name: np.int64 if column.dtype.kind in "iu" else np.float64
               for name, column in frame.items()
               if (column.dtype.kind in "iu" and column.dtype != np.int64)
               or (column.dtype.kind == "f" and column.dtype != np.float64)}
    return frame.astype(widened) if widened else frame


def packing_conf(df: Any) -> tuple[bool, Optional[str]]:
    """Whether to pack (``PACK_CONF`` not ``false``, pyspark's int-extension conversion off) and the
    session's time zone, from the session's conf (on Spark Connect a conf request, no analysis);
    where the conf cannot be read, rows are not packed."""
    try:
        conf = df.sparkSession.conf
        plain_ints = str(conf.get(INT_EXTENSION_CONF, "false")).lower() != "true"
        timezone = conf.get("spark.sql.session.timeZone", None)
    except Exception:  # noqa: BLE001 - a session without a readable conf: the row path, as before
        return False, None
    return read_flag(conf, PACK_CONF) and plain_ints, timezone


__all__ = ["PACKED_COLUMN", "PACKED_POSITION", "PACK_CONF", "PackRows", "unpack_rows", "packing_conf"]
