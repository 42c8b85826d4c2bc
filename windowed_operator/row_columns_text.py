"""A slice of a key group's session or window rows as one JSON text of columns, and back.

The per-key layout (``group_state``, ``columnar_records``) keeps a record per key: a batch that
comes back to nearly every key of a group (Nexmark q11 and q12) reads, decodes, splits, encodes and
writes every one of them, about 30 us a key in Python against 3 us a key for the engine itself
(``benchmarks/key_records.py``).  A group's rows kept as columns are read into arrays and written
from them in one piece: one parse and one encoding per text, no object per key.  This module is that
text; the layout that stores a group's rows in shards of such texts builds on it.

The text: ``[kind, keys, rows per key, starts, ends, pending, hold, nonspeculative, index, late,
count, fire_at, closed, acc, last]``: ``kind`` is "sessions" or "windows", ``keys`` each key once
(in the state codec's tagged form), in the table's order, with its count of rows; then one list per
plain column (``columnar_records._ROW_COLUMNS``), the accumulator columns and the last panes (values
tagged where they are not plain JSON, as in a per-key record).
"""
from __future__ import annotations

import json

import numpy as np

from .columnar_panes import object_array
from .columnar_records import _ROW_COLUMNS, _column, _decoded, _encoded
from .columnar_triggers import RowTable
from .state_codec import KeyStateCodec

_VALUES = KeyStateCodec()
_encode_json = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def key_runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each key's run in a table grouped by key, and each run's length."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    firsts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return firsts, np.diff(np.append(firsts, len(keys)))


def rows_text(table: RowTable, kind: str) -> str:
    """The table's rows (grouped by key) as one JSON text."""
    encode = _VALUES.value
    firsts, lengths = key_runs(table.keys)
    keys = _encoded(encode, table.keys[firsts].tolist())
    plain = [getattr(table, name).tolist() for name in _ROW_COLUMNS]
    return _encode_json([kind, keys, lengths.tolist(), *plain, [_encoded(encode, a.tolist()) for a in table.acc],
                         _encoded(encode, table.last.tolist())])


def table_of(text: str, watermark: int) -> tuple[str, RowTable]:
    """The kind and the rows of a text written by ``rows_text``."""
    return table_of_data(json.loads(text), watermark)


def table_of_data(data: list, watermark: int) -> tuple[str, RowTable]:
    """The kind and the rows of a parsed ``rows_text`` (a text nested in a larger one is parsed with it)."""
    read = _VALUES.read_value
    kind, keys, lengths, *rest = data
    plain, (acc, last) = rest[:len(_ROW_COLUMNS)], rest[len(_ROW_COLUMNS):]
    columns = {name: np.asarray(values, dtype=dtype) for (name, dtype), values in zip(_ROW_COLUMNS.items(), plain)}
    key_column = np.repeat(object_array(_decoded(read, keys)), lengths)
    return kind, RowTable(keys=key_column, acc=[_column(_decoded(read, a)) for a in acc],
                          last=object_array(_decoded(read, last)), watermark=watermark, **columns)


__all__ = ["key_runs", "rows_text", "table_of", "table_of_data"]
