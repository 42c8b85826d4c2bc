"""An upstream stage's panes read as columns, exactly as the element reader reads them one by one.

A chained stage takes each upstream pane as an element (``panes.pane_from_row``, then the
stage's ``ElementReader``): its key, timestamp, value and window, a retraction carrying the
output it undoes.  When the stage reads nothing but the pane's own fields (the pane's key or
one of its columns as key, its value, its timestamp and, without a window option, its window),
that read is column arithmetic, and a batch of 60,000 panes costs milliseconds instead of a
second of per-row Python.  ``read_pane_columns`` answers None whenever a row needs the reader
itself (a callable, a field inside the value, a payload, a session gap, a null the reader
would reject with its reason, a value that is not a number): the caller then reads row by row.
A value that is a record of the pane's fields (``value={"auction": "key", "num": "value"}``) is
read as ``Rows``, one column per field: the array path ranks or folds it without a dict per pane.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np

from accumulations.rows import Rows

from ..elements import ElementReader
from ..panes import RetractedValue

#: The dtype kinds of value columns taken as they are (what ``pane_from_row`` would read, row by row,
#: as Python numbers of the same values).
_NUMERIC_KINDS = "iuf"


@dataclass(frozen=True)
class PaneColumns:
    """Each pane as the element reader gives it: key, timestamp, value, window, and whether it is a
    retraction (its value is then the output it undoes, which the window subtracts)."""

    keys: np.ndarray
    timestamps: np.ndarray
    #: Numbers, or ``Rows`` for a value that is a record of the pane's fields.
    values: Any
    retracted: np.ndarray
    #: (starts, ends) when the stage inherits its windows, else None (it assigns them).
    windows: Optional[tuple[np.ndarray, np.ndarray]]

    def element(self, i: int) -> Any:
        """Element ``i``'s value as the element path's drops carry it."""
        if isinstance(self.values, Rows):
            value = self.values.records(np.array([i]))[0]
        else:
            value = self.values[i]
            value = value.item() if isinstance(value, np.generic) else value
        return RetractedValue(value) if self.retracted[i] else value


#: The pane attributes a key may name whose column holds what the pane's attribute holds (``timing``
#: is an enum on the pane and a string in the column; ``index`` is the column ``pane_index``).
_KEY_COLUMNS = {"key": "key", "value": "value", "window_start": "window_start", "window_end": "window_end",
                "timestamp": "timestamp", "index": "pane_index", "is_first": "is_first", "is_last": "is_last",
                "is_retraction": "is_retraction"}


def key_column(reader: ElementReader, upstream_keyed: bool) -> Optional[str]:
    """The pane column a stage's key is, or None where it is not one (a callable, ``timing``) or
    the stage has no key.  (A stage without key= takes the upstream pane's key.)"""
    if not reader.keyed:
        return None
    if reader.key is None:
        return "key" if upstream_keyed else None
    return _KEY_COLUMNS.get(reader.key) if isinstance(reader.key, str) else None


def reads_pane_fields(reader: ElementReader, upstream_keyed: bool) -> bool:
    """Whether the stage's read of a pane is its fields alone (see the module docstring)."""
    if reader.payload is not None or reader.gap is not None or reader.timestamp is not None:
        return False
    if reader.keyed and key_column(reader, upstream_keyed) is None:
        return False
    if reader.keyed and reader.key is not None:  # the extractors read the pane: its value is its fields
        return reader.value == "value" or record_columns(reader.value) is not None
    return reader.value is None


def record_columns(value: Any) -> Optional[dict[str, str]]:
    """A value record's fields as the pane columns they read (None: not a record of pane fields)."""
    if not isinstance(value, dict):
        return None
    columns = {name: _KEY_COLUMNS.get(field) for name, field in value.items()}
    return None if None in columns.values() else columns  # type: ignore[return-value]


def read_pane_columns(columns: Mapping[str, np.ndarray], reader: ElementReader, upstream_keyed: bool,
                      undo: Callable[[Any], Any]) -> Optional[PaneColumns]:
    """The panes of ``columns`` (the upstream's output columns, times as epoch ms) read as
    ``reader`` reads each; ``undo`` is the upstream accumulation's ``get_retraction`` (a
    retraction row holds the negated output; the stage folds out the output itself).  None
    where the rows must be read one by one."""
    if not reads_pane_fields(reader, upstream_keyed):
        return None
    n = len(columns["timestamp"])
    timestamps = _integers(columns["timestamp"])
    values = np.asarray(columns["value"])
    record = record_columns(reader.value)
    if record is not None:  # the value column counts only if the record reads it
        if any(column not in columns for column in record.values()):
            return None
        numeric = all(_plain_keys(np.asarray(columns[c])) for c in record.values() if c != "value")
        reads_value = "value" in record.values()
    else:
        numeric, reads_value = True, True
    if timestamps is None or not numeric or (reads_value and (values.dtype.kind not in _NUMERIC_KINDS
                                                              or _has_nan(values))):
        return None
    if reader.keyed:
        name = key_column(reader, upstream_keyed)
        if name not in columns:
            return None
        keys = np.asarray(columns[name])  # type: ignore[index]
        if not _plain_keys(keys):
            return None  # a null key (the reader rejects it with its reason), or one pane_from_row converts
    else:
        keys = np.full(n, None, dtype=object)
    windows = None
    if reader.inherit_windows:
        starts, ends = _integers(columns["window_start"]), _integers(columns["window_end"])
        if starts is None or ends is None:
            return None
        windows = (starts, ends)
    retracted = np.asarray(columns["is_retraction"], dtype=bool)
    if retracted.any() and reads_value:
        undone = [undo(v) for v in values[retracted].tolist()]
        values = values.copy() if all(type(v) in (int, float) for v in undone) else values.astype(object)
        values[retracted] = undone
    read: Union[np.ndarray, Rows] = values
    if record is not None:
        read = Rows({name: values if column == "value" else np.asarray(columns[column])
                     for name, column in record.items()}, n)
    return PaneColumns(keys, timestamps, read, retracted, windows)


def _integers(column: Any) -> Optional[np.ndarray]:
    array = np.asarray(column)
    return array.astype(np.int64, copy=False) if array.dtype.kind in "iu" else None


def _has_nan(array: np.ndarray) -> bool:
    return array.dtype.kind == "f" and bool(np.isnan(array).any())


def _plain_keys(keys: np.ndarray) -> bool:
    """Keys that are, as they are, what ``pane_from_row`` reads: numbers without NaN, booleans, strings."""
    if keys.dtype.kind in "iub":
        return True
    if keys.dtype.kind == "f":
        return not _has_nan(keys)
    return keys.dtype.kind == "O" and all(type(k) is str for k in keys.tolist())


__all__ = ["PaneColumns", "read_pane_columns", "reads_pane_fields", "key_column", "record_columns"]
