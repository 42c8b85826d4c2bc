"""A micro-batch of panes netted to what the sink's table must become (``table.TableSink``): per
(key, window), the rows taken in pane order (pane index, a retraction before the pane it precedes)
and only their net effect kept: in mode ``upsert`` the last pane's value, or a delete where it is a
retraction; in mode ``add`` the sum of the batch's panes.  Each value is converted to its column's
kind (``columns.converter``); one that does not fit is a ``NetError`` naming the column, the value
and the pane.  The table's columns (``TableColumns``) and how a window's bounds are stored (the
global window's, null in the panes, as the earliest and latest instants a timestamp shows) live here.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Optional

from ..time import MAX_SHOWN_TIME, MIN_SHOWN_TIME, shown_time
from .columns import ColumnKindError, as_utc, converter

#: Columns a sink may add beside the key, the window and the value, by name.
OPTIONAL_COLUMNS = ("timing", "pane_index", "is_last", "batch_id", "fired_by", "firing_watermark")
_OPTIONAL_KINDS = {"timing": "string", "pane_index": "bigint", "is_last": "boolean", "batch_id": "bigint",
                   "fired_by": "string", "firing_watermark": "timestamp"}
WINDOW_COLUMNS = ("window_start", "window_end")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
GLOBAL_START = EPOCH + dt.timedelta(milliseconds=MIN_SHOWN_TIME)
GLOBAL_END = EPOCH + dt.timedelta(milliseconds=MAX_SHOWN_TIME)


@dataclass(frozen=True)
class TableColumns:
    """The table's columns: the key's (None: a non-keyed operator), the value's (one column, or a
    record's fields), the optional ones."""

    key: Optional[tuple[str, str]]
    values: tuple[tuple[str, str], ...]
    record: bool
    optional: tuple[str, ...]

    @property
    def primary_key(self) -> list[str]:
        return ([self.key[0]] if self.key else []) + list(WINDOW_COLUMNS)

    def columns(self) -> list[tuple[str, str]]:
        return ([self.key] if self.key else []) + [(c, "timestamp") for c in WINDOW_COLUMNS] + list(self.values) + \
            [(c, _OPTIONAL_KINDS[c]) for c in self.optional]


def window_bound(value: Any, default: dt.datetime) -> dt.datetime:
    """A window bound as a UTC datetime: epoch ms (the local runner's) or a time (Spark's); the
    global window's (null, or ms beyond what a timestamp holds) is ``default``."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = shown_time(value)
        return default if value is None else EPOCH + dt.timedelta(milliseconds=value)
    return default if value is None else as_utc(value)


def field_of(record: Any, name: str) -> Any:
    if record is None:
        return None
    if isinstance(record, dict):
        return record.get(name)
    if hasattr(record, "asDict"):
        return record.asDict().get(name)
    return getattr(record, name, None)


class NetError(ValueError):
    """A value that does not fit its column: which column, the value, the pane row it came from, why."""

    def __init__(self, column: str, value: Any, row: dict, why: str) -> None:
        super().__init__(why)
        self.column, self.value, self.row, self.why = column, value, row, why


def net(panes: list[dict], batch_id: int, columns: TableColumns, mode: str) -> tuple[list[dict], list[dict]]:
    """The batch's net effect per (key, window): rows to delete (their primary key as ``pk_<column>``)
    and rows to write, each value converted (see the module's docstring)."""
    layout = columns
    groups: dict[tuple, list[dict]] = {}
    # windows repeat over keys: each distinct (start, end) object pair, alive in ``panes`` while
    # this runs, is converted and hashed once (hashing an aware datetime asks its offset)
    by_objects: dict[tuple[int, int], tuple] = {}
    windows: dict[tuple, tuple] = {}  # stored window -> itself (one object per window)
    keyed = layout.key is not None
    for row in panes:
        start, end = row.get("window_start"), row.get("window_end")
        window = by_objects.get((id(start), id(end)))
        if window is None:
            stored = (window_bound(start, GLOBAL_START), window_bound(end, GLOBAL_END))
            window = by_objects[(id(start), id(end))] = windows.setdefault(stored, stored)
        pk = (row.get("key"), id(window)) if keyed else (id(window),)
        group = groups.get(pk)
        if group is None:
            groups[pk] = [row]
        else:
            group.append(row)
    window_of = {id(window): window for window in windows.values()}
    deletes, upserts = [], []
    key_column = layout.key[0] if layout.key else None
    key_convert = converter(layout.key[1]) if layout.key else None
    keys: dict[Any, Any] = {}  # key as given -> as written (a key has many windows)
    value_converts = [(n, converter(k)) for n, k in layout.values]
    value_column, value_convert = value_converts[0]
    optional = [(n, n == "batch_id") for n in layout.optional]
    upsert_mode, add_mode, record = mode == "upsert", mode == "add", layout.record
    column, item, last = "", None, None  # (what is being checked, for the error)
    try:
        for pk, rows in groups.items():
            window = window_of[pk[-1]]
            if len(rows) > 1:
                rows.sort(key=lambda r: (r.get("pane_index") or 0, 0 if r.get("is_retraction") else 1))
            last = rows[-1]
            if key_column is not None:
                column, item = key_column, pk[0]
                key = keys.get(item)
                if key is None:
                    key = keys[item] = key_convert(item)  # type: ignore[misc]
                out = {key_column: key, "window_start": window[0], "window_end": window[1]}
            else:
                out = {"window_start": window[0], "window_end": window[1]}
            if upsert_mode and last.get("is_retraction"):
                deletes.append({f"pk_{c}": v for c, v in out.items()})
                continue
            if add_mode:
                column, item = value_column, 0
                for row in rows:
                    if row.get("value") is None:
                        raise ColumnKindError("null, which mode 'add' cannot add")
                    item = item + row["value"]
                out[value_column] = value_convert(item)
            elif record:
                whole = last.get("value")
                for column, convert in value_converts:
                    item = field_of(whole, column)
                    out[column] = None if item is None else convert(item)
            else:
                column, item = value_column, last.get("value")
                out[value_column] = None if item is None else value_convert(item)
            for name, is_batch in optional:
                out[name] = batch_id if is_batch else last.get(name)
            upserts.append(out)
    except ColumnKindError as exc:
        raise NetError(column, item, last or {}, str(exc)) from None
    return deletes, upserts


__all__ = ["GLOBAL_END", "GLOBAL_START", "NetError", "OPTIONAL_COLUMNS", "TableColumns", "WINDOW_COLUMNS",
           "field_of", "net", "window_bound"]
