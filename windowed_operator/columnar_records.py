"""The columnar path on per-key records: a key group's pane table built from the keys a batch
loads, and split back into one record per key.

The columnar core (``columnar.ColumnarCore``) works on a ``PaneTable``: rows of (key, pane start,
accumulator columns, the watermark when data first came), sorted by key then pane start, plus the
last watermark applied and the LATE panes fired per window.  On the per-key layout a batch builds the
table from the keys it touches and the keys the due index names, runs the core, and writes each key's
rows back.  The last watermark applied is the group's: a key left unloaded had nothing due between
two batches (the due index would have named it), so applying the group's watermark to it changes
nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Optional

import numpy as np

from .columnar import ColumnarCore, PaneTable
from .group_state import GroupState
from .state_codec import KeyStateCodec
from .time import MIN_TIMESTAMP
from .time_rules import expiry_due


@dataclass
class KeyPanes:
    """One key's pane rows (sorted by start) and its LATE pane counts per window end."""

    starts: list = field(default_factory=list)
    first_watermark: list = field(default_factory=list)
    acc: list = field(default_factory=list)  # one list per accumulator column
    late: dict = field(default_factory=dict)  # window end -> LATE panes fired
    #: When the key next has work (set after a batch, for the due index; not stored).
    next_due: Optional[int] = field(default=None, compare=False)


class KeyPanesCodec:
    """``KeyPanes`` <-> data (accumulator values in the state codec's tagged form)."""

    def __init__(self) -> None:
        self.values = KeyStateCodec()

    def new(self) -> KeyPanes:
        return KeyPanes()

    @staticmethod
    def is_empty(state: KeyPanes) -> bool:
        return not state.starts and not state.late

    def to_data(self, state: KeyPanes) -> dict:
        data: dict[str, Any] = {"starts": state.starts, "first_watermark": state.first_watermark,
                                "acc": [[self.values.value(v) for v in column] for column in state.acc]}
        if state.late:
            data["late"] = [[end, n] for end, n in state.late.items()]
        return data

    def from_data(self, data: dict) -> KeyPanes:
        read = self.values.read_value
        return KeyPanes(list(data["starts"]), list(data["first_watermark"]),
                        [[read(v) for v in column] for column in data["acc"]],
                        {end: n for end, n in data.get("late", [])})


def _column(values: list) -> np.ndarray:
    array = np.array(values)
    return array if array.dtype.kind in "iufb" else np.array(values, dtype=object)


def build_table(keys: list[Hashable], states: list[KeyPanes], watermark: int) -> PaneTable:
    """The pane table of the given keys (rows grouped by key in this order, by start within a key)."""
    rows = [len(s.starts) for s in states]
    late = {(key, end): n for key, s in zip(keys, states) for end, n in s.late.items()}
    if not sum(rows):
        return PaneTable(watermark=watermark, late_panes=late)
    key_column = np.empty(sum(rows), dtype=object)
    key_column[:] = [key for key, n in zip(keys, rows) for _ in range(n)]
    width = max(len(s.acc) for s in states if s.starts)
    acc = [_column([v for s in states for v in (s.acc[c] if s.starts else [])]) for c in range(width)]
    return PaneTable(key_column, np.array([t for s in states for t in s.starts], dtype=np.int64), acc,
                     np.array([t for s in states for t in s.first_watermark], dtype=np.int64), watermark, late)


def split_table(core: ColumnarCore, table: PaneTable, keys: list[Hashable]) -> dict[Hashable, KeyPanes]:
    """Each of ``keys``' rows and LATE counts after the core ran (a key without rows: empty), with
    the time each next has work due."""
    out = {key: KeyPanes() for key in keys}
    if len(table):
        bounds = np.flatnonzero(np.concatenate(([True], table.keys[1:] != table.keys[:-1], [True])))
        starts, first = table.starts.tolist(), table.first_watermark.tolist()
        columns = [c.tolist() for c in table.acc]
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
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
    due = core.due_per_row(table)
    bounds = np.flatnonzero(np.concatenate(([True], table.keys[1:] != table.keys[:-1])))
    return dict(zip(table.keys[bounds].tolist(), np.minimum.reduceat(due, bounds).tolist()))


def late_only_due(core: ColumnarCore, late: dict) -> Optional[int]:
    """A key with LATE counts but no rows keeps them until its windows expire."""
    return min((int(expiry_due(end - 1, core.lateness)) for end in late), default=None)


def run_columnar_batch(core: ColumnarCore, group: GroupState, batch_keys: Iterable[Hashable], watermark: int,
                       run: Callable[[PaneTable], PaneTable]) -> None:
    """One batch of one group on per-key pane rows: load the batch's keys and the keys due, build
    their table at the group's last watermark, ``run`` the core on it, and hand each key's rows back
    to the group (``group.save`` remains to do)."""
    keys = list(dict.fromkeys(batch_keys))
    group.preload(keys)
    touched = set(keys)
    keys += [key for key in group.due_keys(watermark, None) if key not in touched]
    table = run(build_table(keys, [group.loaded[k].state for k in keys], group.meta.get("wm", MIN_TIMESTAMP)))
    for key, state in split_table(core, table, keys).items():  # every key of ``keys``: all written back
        group.touch(key)
        group.loaded[key].state = state
    group.commit(lambda state: (state.next_due, None))
