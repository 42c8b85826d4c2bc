"""A key group's rows of a scan partition handed to the stateful processor as one packed row.

pyspark 4.3's ``transformWithStateInPandas`` regroups its input row by row in Python: it turns
each Arrow batch into pandas, walks it with ``itertuples`` and builds a pandas DataFrame per
grouping key from the tuples (``pyspark/worker.py``, ``transform_with_state_func``).  Measured on
Nexmark q11 (2M events, sessions per bidder, no scan-stage fold): 4.2 s of one worker's 9.3 s in
the operator went there, about 4.6 us a row, before the processor saw a row.

The processor is called per *key group* (a few per partition, ``driver.stage.run_processor``), so the
scan stage can hand it each group's rows as one row instead: ``PackRows`` (a ``mapInArrow``
function) sorts a chunk of a partition's rows by group, stably, and writes each group's run of rows
as one Arrow IPC stream in a binary column; the processor reads those streams back
(``unpack_rows``) and converts them to pandas with pyspark's own conversion
(``ArrowBatchTransformer.to_pandas``, the call its row path starts with; a struct of numbers,
strings and booleans, a merge's whole row, in one Arrow call that gives the same dicts), so the
frame it works on holds the same rows, in the same order within a partition, with the same dtypes.  Nothing about
what a row means changes (keys, times, bad rows, heartbeats travel as they are); only the handoff
(chosen in ``handoff``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd
import pyarrow as pa

from .preaggregate import in_chunks
from ..base.row_frames import rows_frame

#: The packed rows' payload column: one Arrow IPC stream of a key group's rows.
PACKED_COLUMN = "__wo_packed"
#: Its position among the packed rows' columns (group, payload).
PACKED_POSITION = 1
#: Rows per payload at most: bounds what one packed row holds (a partition's chunk is at most
#: ``preaggregate.MAX_ROWS`` rows; a group's run of it is split into payloads of this many).
MAX_PACK_ROWS = 65_536
#: Bytes of one output batch's payloads at most: below what a binary column's 32-bit offsets reach.
MAX_PAYLOAD_BYTES = 2**31 - 1
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
    tables = [pa.ipc.open_stream(pa.py_buffer(payload)).read_all() for payload in payloads]
    return rows_frame(tables[0] if len(tables) == 1 else pa.concat_tables(tables), timezone)


__all__ = ["PACKED_COLUMN", "PACKED_POSITION", "PackRows", "unpack_rows"]
