"""A slice of a key group's session or window rows as one JSON text of columns, and back.

The per-key layout (``group_state``, ``records``) keeps a record per key: a batch that
comes back to nearly every key of a group (Nexmark q11 and q12) reads, decodes, splits, encodes and
writes every one of them, about 30 us a key in Python against 3 us a key for the engine itself
(``benchmarks/key_records.py``).  A group's rows kept as columns are read into arrays and written
from them in one piece: one parse and one encoding per text, no object per key.  This module is that
text; ``row_shards`` stores a group's rows in shards of such texts.

The text: ``[kind, keys, rows per key, starts, ends, pending, hold, nonspeculative, index, late,
count, fire_at, closed, acc, last]``: ``kind`` is "sessions" or "windows", ``keys`` each key once
(in the state codec's tagged form), in the table's order, with its count of rows; then one list per
plain column (``records._ROW_COLUMNS``), or the one value every row holds (a global window's
bounds, a trigger's phase: a q12-shaped group's texts, read and written, went from 420 KB to 98 KB a
batch, ``benchmarks/row_shards.py``), the accumulator columns and the last panes (values tagged
where they are not plain JSON, as in a per-key record).
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..engine.columnar_panes import object_array
from ..engine.columnar_triggers import RowTable
from .codec import KeyStateCodec
from .records import _ROW_COLUMNS, _column, _decoded, _encoded

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
    return rows_texts(table, kind, [len(table)])[0] if len(table) else _encode_json(
        [kind, [], [], *[[] for _ in _ROW_COLUMNS], [[] for _ in table.acc], []])


def rows_texts(table: RowTable, kind: str, ends: list[int]) -> list[str]:
    """The table's rows cut at ``ends`` (row positions, each at the end of a key's run, the last the
    table's length) as one JSON text per piece: every column is made a list and tagged once for the
    whole table, and each piece is slices of those lists (so a piece of one key costs a few
    microseconds, not a pass over every column)."""
    encode = _VALUES.value
    firsts, lengths = key_runs(table.keys)
    keys = _encoded(encode, table.keys[firsts].tolist())
    counts = lengths.tolist()
    plain: list[Any] = []
    for name in _ROW_COLUMNS:
        column = getattr(table, name)
        plain.append(_Same(column[0].item()) if len(column) and (column == column[0]).all() else column.tolist())
    acc = [_encoded(encode, a.tolist()) for a in table.acc]
    last = _encoded(encode, table.last.tolist())
    key_ends = np.searchsorted(firsts, ends).tolist()  # (the number of keys starting before each end)
    texts, lo, key_lo = [], 0, 0
    for hi, key_hi in zip(ends, key_ends):
        texts.append(_encode_json([kind, keys[key_lo:key_hi], counts[key_lo:key_hi],
                                   *[c.value if type(c) is _Same else c[lo:hi] for c in plain],
                                   [a[lo:hi] for a in acc], last[lo:hi]]))
        lo, key_lo = hi, key_hi
    return texts


class _Same:
    """A plain column whose every row holds ``value`` (written as the value instead of a list)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def column_values(stored: Any, rows: int) -> list:
    """A stored plain column as a list of its ``rows`` values (a column written as one value: that
    value in every row)."""
    return stored if isinstance(stored, list) else [stored] * rows


def table_of(text: str, watermark: int) -> tuple[str, RowTable]:
    """The kind and the rows of a text written by ``rows_text``."""
    return table_of_data(json.loads(text), watermark)


def table_of_data(data: list, watermark: int) -> tuple[str, RowTable]:
    """The kind and the rows of a parsed ``rows_text`` (a text nested in a larger one is parsed with it)."""
    return data[0], table_of_parts([data], watermark)


def decoded_keys(data: list) -> list:
    """The keys of a parsed ``rows_text``, once each, in its order."""
    return _decoded(_VALUES.read_value, data[1])


def table_of_parts(parts: list[list], watermark: int, keys: list | None = None) -> RowTable:
    """The rows of several parsed ``rows_text`` pieces (no key in two) as one table, each column
    made an array once (``keys``: the pieces' keys already decoded, in order)."""
    read = _VALUES.read_value
    width = len(_ROW_COLUMNS)
    if keys is None:
        keys = [k for part in parts for k in decoded_keys(part)]
    lengths = [n for part in parts for n in part[2]]

    def joined(i: int) -> list:
        return parts[0][i] if len(parts) == 1 else [v for part in parts for v in part[i]]

    def plain(i: int, dtype: Any) -> np.ndarray:
        if len(parts) == 1 and not isinstance(parts[0][i], list):
            return np.full(sum(parts[0][2]), parts[0][i], dtype=dtype)
        return np.asarray([v for part in parts for v in column_values(part[i], sum(part[2]))], dtype=dtype)

    columns = {name: plain(3 + i, dtype) for i, (name, dtype) in enumerate(_ROW_COLUMNS.items())}
    n_acc = max((len(part[3 + width]) for part in parts), default=0)
    acc = [_column(_decoded(read, [v for part in parts if c < len(part[3 + width]) for v in part[3 + width][c]]))
           for c in range(n_acc)]
    return RowTable(keys=np.repeat(object_array(keys), lengths), acc=acc,
                    last=object_array(_decoded(read, joined(4 + width))), watermark=watermark, **columns)


__all__ = ["decoded_keys", "key_runs", "rows_text", "rows_texts", "table_of", "table_of_data", "table_of_parts"]
