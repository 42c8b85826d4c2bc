"""A slice of a key group's session or window rows as one JSON text of columns, and back.

The per-key layout (``group_state``, ``records``) keeps a record per key: a batch that
comes back to nearly every key of a group (Nexmark q11 and q12) reads, decodes, splits, encodes and
writes every one of them, about 30 us a key in Python against 3 us a key for the engine itself
(``benchmarks/key_records.py``).  A group's rows kept as columns are read into arrays and written
from them in one piece: one parse and one encoding per text, no object per key.  This module is that
text; ``row_shards`` stores a group's rows in shards of such texts.

The text: ``[kind, keys, rows per key, starts, ends, pending, hold, nonspeculative, index, late,
count, fire_at, closed, acc, last]``: ``kind`` is "sessions" or "windows", ``keys`` each key once
(in the state codec's tagged form), in the table's order, with its count of rows; then one entry per
plain column (``records._ROW_COLUMNS``), the accumulator columns and the last panes.  A column is
stored in one of three forms:
- the one value every row holds (a global window's bounds, a trigger's phase: a q12-shaped group's
  texts, read and written, went from 420 KB to 98 KB a batch, ``benchmarks/row_shards.py``; and
  since state version 9, last panes that are all None: windows that have not fired);
- packed (state version 9): a string ``"<dtype>:<base>:<base64>[:<base64>]"``, the column's
  numbers as little-endian bytes: each value less ``base`` (the column's least) in the narrowest of
  ``u1 u2 u4`` that holds them all, else ``i8`` (``i8``, ``f8`` and ``b1`` with base 0), and where
  some rows hold None (last panes), the bits of those rows (``np.packbits``).  In texts of
  ``PACKED_ROWS`` rows or more (on average), a plain column, a typed accumulator column, and last
  panes that are all integers within int64 or all floats, beside None, are packed: on Spark, a key
  group of hopping windows with early firings held about 9,600 rows, 420 KB of JSON encoded in 8 ms
  a batch; packed, ``benchmarks/row_shards.py``'s hopping case reads and writes 330 KB instead of
  831 KB a batch, in 5.3 ms instead of 17.0 (``benchmarks/results/before_after.txt``);
- a list of values (tagged where they are not plain JSON, as in a per-key record): every other
  accumulator or last-pane column, and every column of a text written by state versions 7 and 8,
  which are read as before.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Optional

import numpy as np

from ..engine.columnar_panes import object_array
from ..engine.columnar_triggers import RowTable
from .codec import KeyStateCodec
from .records import _ROW_COLUMNS, _column, _decoded, _encoded, _joined

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
    table's length) as one JSON text per piece: what each column is stored as (one value, packed, a
    list of tagged values) is decided once for the whole table, and each piece is slices of it (so a
    piece of one key costs a few microseconds, not a pass over every column)."""
    encode = _VALUES.value
    firsts, lengths = key_runs(table.keys)
    keys = _encoded(encode, table.keys[firsts].tolist())
    counts = lengths.tolist()
    pack = len(table) >= PACKED_ROWS * len(ends)
    plain = [_Same(column[0].item()) if len(column) and (column == column[0]).all() else
             column if pack else column.tolist() for column in (getattr(table, name) for name in _ROW_COLUMNS)]
    acc = [a if pack and a.dtype.kind in PACKED_KINDS else _encoded(encode, a.tolist()) for a in table.acc]
    no_last = table.last == None  # noqa: E711 (elementwise)
    last: Any
    none: Optional[np.ndarray] = None
    if len(table) and no_last.all():  # (no window has fired)
        last = _Same(None)
    else:
        typed_last = _packable_values(table.last, no_last) if pack else None
        if typed_last is None:
            last = _encoded(encode, table.last.tolist())
        else:
            last, none = typed_last

    def piece(column: Any, lo: int, hi: int, none: Optional[np.ndarray] = None) -> Any:
        if type(column) is _Same:
            return column.value
        if isinstance(column, np.ndarray):
            return packed(column[lo:hi], None if none is None else none[lo:hi])
        return column[lo:hi]

    key_ends = np.searchsorted(firsts, ends).tolist()  # (the number of keys starting before each end)
    texts, lo, key_lo = [], 0, 0
    for hi, key_hi in zip(ends, key_ends):
        texts.append(_encode_json([kind, keys[key_lo:key_hi], counts[key_lo:key_hi],
                                   *[piece(c, lo, hi) for c in plain], [piece(a, lo, hi) for a in acc],
                                   piece(last, lo, hi, none)]))
        lo, key_lo = hi, key_hi
    return texts


#: The fewest rows a text holds on average for its columns to be packed: packing costs about 6 us a
#: column a text, which the faster encoding and parsing pay back from about 64 rows a text on
#: (``benchmarks/row_shards.py``' sessions case spreads a group over texts of a few rows: they stay lists).
PACKED_ROWS = 64
#: The array kinds a packed column holds: integers, floats, booleans.
PACKED_KINDS = frozenset("ifb")
#: The narrow widths, each with the largest offset it holds.
_NARROW = [(np.dtype(t), int(np.iinfo(t).max)) for t in ("<u1", "<u2", "<u4")]


def packed(values: np.ndarray, none: Optional[np.ndarray] = None) -> str:
    """A typed column (integers, floats, booleans) in the packed form (``none``: the rows that hold None)."""
    mask = "" if none is None else ":" + _b64(np.packbits(none))
    if values.dtype.kind == "b":
        return f"b1:0:{_b64(values)}{mask}"
    if values.dtype.kind == "f":
        return f"f8:0:{_b64(values.astype('<f8', copy=False))}{mask}"
    if not len(values):
        return f"u1:0:{mask}"
    lo, hi = int(values.min()), int(values.max())
    for dtype, largest in _NARROW:
        if hi - lo <= largest:
            return f"{dtype.str[1:]}:{lo}:{_b64((values - lo).astype(dtype))}{mask}"
    return f"i8:0:{_b64(values.astype('<i8', copy=False))}{mask}"


def accumulator_column(stored: Any, read: Any) -> np.ndarray:
    """A stored accumulator column as an array: a packed text unpacked, a list of tagged values decoded
    (``records._column``)."""
    return unpacked(stored)[0] if isinstance(stored, str) else _column(_decoded(read, stored))


def unpacked(text: str) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """A packed column's values (int64, float64 or bool; a row holding None reads 0) and its rows
    holding None (None: none does)."""
    dtype, base, data, *mask = text.split(":")
    raw = np.frombuffer(base64.b64decode(data), dtype=np.dtype("<" + dtype) if dtype != "b1" else bool)
    if dtype == "b1":
        values = raw.copy()
    elif dtype == "f8":
        values = raw.astype(np.float64)
    else:
        values = raw.astype(np.int64)
        if base != "0":
            values += int(base)
    none = np.unpackbits(np.frombuffer(base64.b64decode(mask[0]), dtype=np.uint8),
                         count=len(values)).astype(bool) if mask else None
    return values, none


def _b64(values: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(values).data).decode("ascii")


def _packable_values(values: np.ndarray, none: np.ndarray) -> Optional[tuple[np.ndarray, Optional[np.ndarray]]]:
    """Last panes (Python values; ``none``: the rows holding None) as a typed column and the rows
    holding None, where every other row holds an ``int`` within int64 or every one a ``float``
    (None: kept as a list of values)."""
    held = values[~none] if none.any() else values
    kinds = set(map(type, held.tolist()))
    if kinds == {int}:
        try:
            typed = held.astype(np.int64)
        except OverflowError:
            return None
    elif kinds == {float}:
        typed = held.astype(np.float64)
    else:
        return None
    if held is values:
        return typed, None
    full = np.zeros(len(values), dtype=typed.dtype)
    full[~none] = typed
    return full, none


class _Same:
    """A plain column whose every row holds ``value`` (written as the value instead of a list)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def column_values(stored: Any, rows: int) -> list:
    """A stored column as a list of its ``rows`` values, in any of its forms (a column written as one
    value: that value in every row)."""
    if isinstance(stored, list):
        return stored
    if isinstance(stored, str):
        values, none = unpacked(stored)
        return _with_none(values, none).tolist()
    return [stored] * rows


def _with_none(values: np.ndarray, none: Optional[np.ndarray]) -> np.ndarray:
    """A packed column's values as Python objects, None where ``none`` says."""
    out = values.astype(object)
    if none is not None:
        out[none] = None
    return out


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

    sizes = [sum(part[2]) for part in parts]

    def plain(i: int, dtype: Any) -> np.ndarray:
        if len(parts) == 1 and not isinstance(parts[0][i], (list, str)):
            return np.full(sizes[0], parts[0][i], dtype=dtype)
        if not any(isinstance(part[i], str) for part in parts):  # (lists: joined, made an array once)
            return np.asarray([v for part, size in zip(parts, sizes) for v in column_values(part[i], size)], dtype=dtype)
        return np.concatenate([unpacked(part[i])[0].astype(dtype, copy=False) if isinstance(part[i], str)
                               else np.asarray(column_values(part[i], size), dtype=dtype)
                               for part, size in zip(parts, sizes)])

    def accumulator(c: int) -> np.ndarray:
        stored = [part[3 + width][c] for part in parts if c < len(part[3 + width])]
        return _joined([accumulator_column(s, read) for s in stored])

    def last() -> np.ndarray:
        stored = [part[4 + width] for part in parts]
        if all(s is None for s in stored):
            return np.full(sum(sizes), None, dtype=object)
        if not any(isinstance(s, str) for s in stored):
            return object_array(_decoded(read, [v for s, size in zip(stored, sizes) for v in column_values(s, size)]))
        pieces = [_with_none(*unpacked(s)) if isinstance(s, str) else object_array(_decoded(read, column_values(s, size)))
                  for s, size in zip(stored, sizes)]
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

    columns = {name: plain(3 + i, dtype) for i, (name, dtype) in enumerate(_ROW_COLUMNS.items())}
    n_acc = max((len(part[3 + width]) for part in parts), default=0)
    return RowTable(keys=np.repeat(object_array(keys), lengths), acc=[accumulator(c) for c in range(n_acc)],
                    last=last(), watermark=watermark, **columns)


__all__ = ["PACKED_KINDS", "accumulator_column", "column_values", "decoded_keys", "key_runs", "packed", "rows_text", "rows_texts", "table_of", "table_of_data",
           "table_of_parts", "unpacked"]
