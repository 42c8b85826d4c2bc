"""The columnar paths on per-key records: a key group's table built from the keys a batch loads,
and split back into one record per key.

Three tables: the pane table of windows assigned by timestamp under the default trigger
(``columnar``, records ``KeyPanes``), the session table (``columnar_sessions``, records
``KeySessions``) and the window table of windows assigned by timestamp under early/late firings
(``columnar_windows``, records ``KeyWindows``); ``PaneRecords``, ``SessionRecords`` and
``WindowRecords`` build and split them, and ``KeyRecords`` runs a batch on any (the store of the per-key rows).

The columnar core (``columnar.ColumnarCore``) works on a ``PaneTable``: rows of (key, pane start,
accumulator columns, the watermark when data first came), sorted by key then pane start, plus the
last watermark applied and the LATE panes fired per window.  On the per-key layout a batch builds the
table from the keys it touches and the keys the due index names, runs the core, and writes each key's
rows back.  The last watermark applied is the group's: a key left unloaded had nothing due between
two batches (the due index would have named it), so applying the group's watermark to it changes
nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Callable, Hashable, Optional, Protocol

import numpy as np


from ..engine.columnar import ColumnarCore, ColumnarForm, PaneTable
from ..engine.columnar_panes import object_array
from ..engine.tables import Engine
from ..engine.columnar_sessions import ColumnarSessions, SessionTable
from ..engine.columnar_triggers import NOT_SET
from ..engine.columnar_windows import ColumnarWindows, WindowTable
from ..time import MIN_TIMESTAMP
from ..time_rules import expiry_due
from . import legacy
from .codec import KeyStateCodec
from .group_batch import StoreResult, StoreBatch, TableEngine
from .layouts import PER_KEY_PANE_ROWS, PER_KEY_SESSION_ROWS, PER_KEY_WINDOW_ROWS, Layout


@dataclass(slots=True)
class KeyPanes:
    """One key's pane rows (sorted by start) and its LATE pane counts per window end."""

    starts: list = field(default_factory=list)
    first_watermark: list = field(default_factory=list)
    acc: list = field(default_factory=list)  # one list per accumulator column
    late: dict = field(default_factory=dict)  # window end -> LATE panes fired
    #: When the key next has work (set after a batch, for the due index; not stored).
    next_due: Optional[int] = field(default=None, compare=False)
    #: (pane rows never wait on processing time)
    next_processing_due: Optional[int] = field(default=None, compare=False)


#: The tag that opens a key's pane rows stored by position (state version 7).
PANES = "panes"


class KeyPanesCodec:
    """``KeyPanes`` <-> data: ``["panes", starts, first_watermark, acc, late]`` (one list per column,
    accumulator values in the state codec's tagged form, ``late`` as [end, n] pairs); the named
    fields of state version 6 are read too."""

    def __init__(self) -> None:
        self.values = KeyStateCodec()

    def new(self) -> KeyPanes:
        return KeyPanes()

    @staticmethod
    def is_empty(state: KeyPanes) -> bool:
        return not state.starts and not state.late

    def to_data(self, state: KeyPanes) -> list:
        encode = self.values.value
        return [PANES, state.starts, state.first_watermark, [_encoded(encode, column) for column in state.acc],
                [[end, n] for end, n in state.late.items()]]

    def from_data(self, data: Any) -> KeyPanes:
        read = self.values.read_value
        columns = stored_columns(data)
        return KeyPanes(columns["starts"], columns["first_watermark"],
                        [_decoded(read, column) for column in columns["acc"]], {end: n for end, n in columns["late"]})


def _encoded(encode: Callable[[Any], Any], column: list) -> list:
    """A column of values in the state codec's tagged form.  Integers, strings, finite floats and None
    are their own form: a column of only those (nearly every column: counts, sums, last outputs) is
    kept as it is instead of encoded value by value."""
    for v in column:
        t = type(v)
        if t is int or t is str or v is None or (t is float and math.isfinite(v)):
            continue
        return [encode(v) for v in column]
    return column


def _decoded(decode: Callable[[Any], Any], column: list) -> list:
    """A stored column of values read back: only a tagged value (a list) needs decoding."""
    for v in column:
        if type(v) is list:
            return [decode(v) for v in column]
    return column


def _column(values: list) -> np.ndarray:
    """Stored values as an array: typed where they fit, else Python objects (an integer past int64,
    which numpy would read as uint64, or beside smaller ones as float64, rounded, stays a Python
    integer for the overflow check at firing); a sequence value stays one object (numpy would make
    equal-length ones a second dimension, and refuse others)."""
    try:
        array = np.array(values)
    except ValueError:  # (sequences of several lengths)
        return object_array(values)
    if array.ndim == 1 and (array.dtype.kind in "ib" or (array.dtype.kind == "f" and
                                                         not any(type(v) is int for v in values))):
        return array
    return object_array(values)


def _joined(pieces: list[np.ndarray]) -> np.ndarray:
    """Columns of several stored pieces as one: joined as they are where they share a type, else as
    the Python values they hold, made an array as ``_column`` makes one."""
    if len(pieces) == 1:
        return pieces[0]
    if len({p.dtype for p in pieces}) == 1:
        return np.concatenate(pieces)
    return _column([v for p in pieces for v in p.tolist()])


def _key_column(keys: list[Hashable], states: list[Any]) -> np.ndarray:
    """Each key repeated once per row of its state (states with ``starts``, one per row)."""
    return object_array([key for key, s in zip(keys, states) for _ in s.starts])


def _acc_columns(states: list[Any]) -> list[np.ndarray]:
    """The states' accumulator columns, one array each, rows in state order."""
    width = max(len(s.acc) for s in states if s.starts)
    return [_column([v for s in states for v in (s.acc[c] if s.starts else [])]) for c in range(width)]


def _key_runs(keys: np.ndarray) -> list[tuple[int, int]]:
    """The ``[lo, hi)`` row range of each key in a table whose rows are grouped by key."""
    bounds = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1], [True]))).tolist()
    return list(zip(bounds[:-1], bounds[1:]))


def build_table(keys: list[Hashable], states: list[KeyPanes], watermark: int) -> PaneTable:
    """The pane table of the given keys (rows grouped by key in this order, by start within a key)."""
    late = {(key, end): n for key, s in zip(keys, states) for end, n in s.late.items()}
    if not any(s.starts for s in states):
        return PaneTable(watermark=watermark, late_panes=late)
    return PaneTable(_key_column(keys, states), np.array([t for s in states for t in s.starts], dtype=np.int64),
                     _acc_columns(states), np.array([t for s in states for t in s.first_watermark], dtype=np.int64),
                     watermark, late)


def split_table(core: ColumnarCore, table: PaneTable, keys: list[Hashable]) -> dict[Hashable, KeyPanes]:
    """Each of ``keys``' rows and LATE counts after the core ran (a key without rows: empty), with
    the time each next has work due."""
    out = {key: KeyPanes() for key in keys}
    if len(table):
        starts, first = table.starts.tolist(), table.first_watermark.tolist()
        columns = [c.tolist() for c in table.acc]
        for lo, hi in _key_runs(table.keys):
            out[table.keys[lo]] = KeyPanes(starts[lo:hi], first[lo:hi], [c[lo:hi] for c in columns])
    for (key, end), n in table.late_panes.items():
        out.setdefault(key, KeyPanes()).late[end] = n
    for key, due in next_due_by_key(core, table).items():
        out[key].next_due = due
    for state in out.values():
        late = late_only_due(core, state.late)
        if late is not None:
            state.next_due = late if state.next_due is None else min(state.next_due, late)
    return out


def next_due_by_key(core: ColumnarCore, table: PaneTable) -> dict[Hashable, int]:
    """When each key of the table next has something to do (``ColumnarCore.next_event_time``, per key)."""
    if not len(table):
        return {}
    firsts = np.array([lo for lo, _ in _key_runs(table.keys)])
    return dict(zip(table.keys[firsts].tolist(), np.minimum.reduceat(core.due_per_row(table), firsts).tolist()))


def late_only_due(core: ColumnarCore, late: dict) -> Optional[int]:
    """A key with LATE counts but no rows keeps them until its windows expire."""
    return min((int(expiry_due(end - 1, core.lateness)) for end in late), default=None)


class ColumnarRecords(Protocol):
    """How one columnar path's table is made of per-key records and split back."""

    codec: Any  # the records' StateCodec
    layout: str  # the state layout's name in the fingerprint (``layouts``)
    kind: str  # the table: ``panes``, ``sessions`` or ``windows`` (``layouts.Layout.records``)

    def build(self, keys: list[Hashable], states: list[Any], watermark: int) -> Any: ...

    def split(self, table: Any, keys: list[Hashable]) -> dict[Hashable, Any]: ...


class PaneRecords:
    layout = PER_KEY_PANE_ROWS.name
    kind = PER_KEY_PANE_ROWS.records

    def __init__(self, core: ColumnarCore) -> None:
        self.core, self.codec = core, KeyPanesCodec()

    def build(self, keys: list[Hashable], states: list[KeyPanes], watermark: int) -> PaneTable:
        return build_table(keys, states, watermark)

    def split(self, table: PaneTable, keys: list[Hashable]) -> dict[Hashable, KeyPanes]:
        return split_table(self.core, table, keys)


# -- session and window rows -------------------------------------------------------------------------
@dataclass(slots=True)
class KeyRows:
    """One key's sessions or windows (sorted by start, end), column by column as in ``SessionTable``
    and ``WindowTable``."""

    starts: list = field(default_factory=list)
    ends: list = field(default_factory=list)
    acc: list = field(default_factory=list)  # one list per accumulator column
    pending: list = field(default_factory=list)
    hold: list = field(default_factory=list)
    nonspeculative: list = field(default_factory=list)
    index: list = field(default_factory=list)
    last: list = field(default_factory=list)
    late: list = field(default_factory=list)
    count: list = field(default_factory=list)
    fire_at: list = field(default_factory=list)
    closed: list = field(default_factory=list)
    #: When the key next has work, in event time and in processing time (set after a batch, for the
    #: due indexes; not stored).
    next_due: Optional[int] = field(default=None, compare=False)
    next_processing_due: Optional[int] = field(default=None, compare=False)


KeySessions = KeyWindows = KeyRows


#: The plain columns of session and window rows and their types (besides ``acc`` and ``last``,
#: which hold values).
_ROW_COLUMNS = {"starts": np.int64, "ends": np.int64, "pending": np.int64, "hold": bool,
                "nonspeculative": np.int64, "index": np.int64, "late": bool, "count": np.int64,
                "fire_at": np.int64, "closed": bool}
#: Columns a record may leave out when every row holds the default (``fire_at`` only matters to
#: firings by processing time; records written before them have none).
_OPTIONAL_COLUMNS = {"fire_at": NOT_SET}
#: Their places among the plain columns, with their defaults.
_OPTIONAL_AT = [(list(_ROW_COLUMNS).index(name), default) for name, default in _OPTIONAL_COLUMNS.items()]
#: The fields of a key's rows stored by position, after the tag naming its kind.
_STORED_ROWS = (*_ROW_COLUMNS, "acc", "last")
_STORED_PANES = ("starts", "first_watermark", "acc", "late")


def stored_columns(data: Any) -> dict[str, Any]:
    """A key's stored pane rows or session/window rows as named columns, every column present, from
    either form: by position after a tag (state version 7) or named fields (version 6, which left
    out default columns and, before sessions took count triggers, the trigger's)."""
    if isinstance(data, list):
        tag, *values = data
        if tag == PANES:
            return {"kind": PANES, **dict(zip(_STORED_PANES, values))}
        columns = {"kind": tag, **dict(zip(_STORED_ROWS, values))}
    else:
        columns = legacy.named_columns(data, PANES)
        if columns["kind"] == PANES:
            return columns
    n = len(columns["starts"])
    for name, default in _OPTIONAL_COLUMNS.items():
        if columns.get(name) is None:
            columns[name] = [default] * n
    return columns


class RowsCodec:
    """Per-key rows <-> data: ``[kind, starts, ends, pending, hold, nonspeculative, index, late, count,
    fire_at, closed, acc, last]`` (one list per column, by position; accumulator values and last
    panes tagged; ``fire_at`` null when no row waits on processing time).

    Older records are read too (``legacy``), and written back in this layout: the named fields of
    state version 6 (``{"rows": kind, "starts": [...], ...}``), and the object path's windows
    (``{"windows": [...]}``, written while these operators ran element by element: the migration of
    state version 6 checkpoints, key by key as keys are touched or due)."""

    def __init__(self, form: ColumnarForm, kind: str) -> None:
        self.values = KeyStateCodec()
        self.form, self.kind, self.record, self.columns = form, kind, KeyRows, _ROW_COLUMNS

    def new(self) -> Any:
        return self.record()

    @staticmethod
    def is_empty(state: Any) -> bool:
        return not state.starts

    def to_data(self, state: Any) -> list:
        encode = self.values.value
        plain = [getattr(state, name) for name in self.columns]
        for i, default in _OPTIONAL_AT:
            if plain[i].count(default) == len(plain[i]):
                plain[i] = None
        return [self.kind, *plain, [_encoded(encode, column) for column in state.acc], _encoded(encode, state.last)]

    def from_data(self, data: Any) -> Any:
        if isinstance(data, dict) and "windows" in data:
            return legacy.windows_as_rows(self, data)
        read = self.values.read_value
        columns = stored_columns(data)
        return self.record(**{name: columns[name] for name in self.columns},
                           acc=[_decoded(read, column) for column in columns["acc"]],
                           last=_decoded(read, columns["last"]))



class RowRecords:
    """A table of rows per window or session (``SessionTable``, ``WindowTable``) built from per-key
    records and split back."""

    def __init__(self, engine: Any, table: type, layout: Layout) -> None:
        self.engine, self.table, self.record, self.columns = engine, table, KeyRows, _ROW_COLUMNS
        self.layout, self.kind = layout.name, layout.records
        self.codec = RowsCodec(engine.form, layout.records)

    def build(self, keys: list[Hashable], states: list[Any], watermark: int) -> Any:
        rows = sum(len(s.starts) for s in states)
        if not rows:
            return self.table(watermark=watermark)
        columns = {name: np.fromiter(chain.from_iterable([getattr(s, name) for s in states]), dtype=dtype, count=rows)
                   for name, dtype in self.columns.items()}
        return self.table(keys=_key_column(keys, states), acc=_acc_columns(states),
                          last=object_array(list(chain.from_iterable([s.last for s in states]))), watermark=watermark,
                          **columns)

    def split(self, table: Any, keys: list[Hashable]) -> dict[Hashable, Any]:
        """Each key's rows (keys left without rows: empty), with when it next has work due: one
        slice per column and key, the due times reduced per key at once."""
        out: dict[Hashable, Any] = {}
        if len(table):
            c = {name: getattr(table, name).tolist() for name in (*self.columns, "last")}
            acc = [column.tolist() for column in table.acc]
            firsts = np.flatnonzero(np.concatenate(([True], table.keys[1:] != table.keys[:-1])))
            due = np.minimum.reduceat(self.engine.due_per_row(table), firsts).tolist()
            timed = np.minimum.reduceat(self.engine.processing_due_per_row(table), firsts).tolist()
            bounds = [*firsts.tolist(), len(table)]
            starts, ends, pending, hold, nonspeculative, index, last, late, count, fire_at, closed = (
                c["starts"], c["ends"], c["pending"], c["hold"], c["nonspeculative"], c["index"], c["last"],
                c["late"], c["count"], c["fire_at"], c["closed"])
            record = self.record
            for key, lo, hi, key_due, key_timed in zip(table.keys[firsts].tolist(), bounds, bounds[1:], due, timed):
                out[key] = record(starts=starts[lo:hi], ends=ends[lo:hi], acc=[a[lo:hi] for a in acc],
                                  pending=pending[lo:hi], hold=hold[lo:hi], nonspeculative=nonspeculative[lo:hi],
                                  index=index[lo:hi], last=last[lo:hi], late=late[lo:hi], count=count[lo:hi],
                                  fire_at=fire_at[lo:hi], closed=closed[lo:hi], next_due=key_due,
                                  next_processing_due=None if key_timed == NOT_SET else key_timed)
        for key in keys:
            if key not in out:
                out[key] = self.record()
        return out


class KeySessionsCodec(RowsCodec):
    def __init__(self, form: ColumnarForm) -> None:
        super().__init__(form, "sessions")


class KeyWindowsCodec(RowsCodec):
    def __init__(self, form: ColumnarForm) -> None:
        super().__init__(form, "windows")


class SessionRecords(RowRecords):
    def __init__(self, sessions: ColumnarSessions) -> None:
        super().__init__(sessions, SessionTable, PER_KEY_SESSION_ROWS)


class WindowRecords(RowRecords):
    def __init__(self, windows: ColumnarWindows) -> None:
        super().__init__(windows, WindowTable, PER_KEY_WINDOW_ROWS)


def columnar_records(engine: Engine) -> ColumnarRecords:
    if isinstance(engine, ColumnarSessions):
        return SessionRecords(engine)
    if isinstance(engine, ColumnarWindows):
        return WindowRecords(engine)
    return PaneRecords(engine)


class KeyRecords:
    """The per-key rows' store (``layouts.PER_KEY_PANE_ROWS``, and the per-key session and window rows
    a checkpoint may hold): each key's rows in its own record."""

    def __init__(self, records: ColumnarRecords) -> None:
        self.records = records

    @classmethod
    def opened(cls, stores: Any) -> "KeyRecords":
        return cls(stores.records)

    def run_batch(self, batch: StoreBatch, engine: TableEngine) -> StoreResult:
        """Load the batch's keys and the keys due (in event time or processing time), build their
        table at the group's last watermark, run the engine on it, and hand each key's records back to
        the group (``group.save`` remains to do)."""
        group, records = batch.group, self.records
        keys = list(dict.fromkeys(batch.keys))
        group.preload(keys)
        touched = set(keys)
        keys += [key for key in group.due_keys(batch.watermark, batch.processing_time) if key not in touched]
        table = engine.run(records.build(keys, [group.loaded[k].state for k in keys],
                                         group.meta.get("wm", MIN_TIMESTAMP)))
        for key, state in records.split(table, keys).items():  # every key of ``keys``: all written back
            group.touch(key)
            group.loaded[key].state = state
        group.commit(lambda state: (state.next_due, state.next_processing_due))
        return StoreResult(engine.out)
