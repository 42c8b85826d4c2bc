"""Session windows as arrays: the columnar path for merging windows under Beam's default trigger.

A key group's sessions are one table, one row per active session, sorted by key then start: bounds,
accumulator columns, elements since the last pane, whether an end-of-window timer is pending, and
the pane bookkeeping (panes fired, ON_TIME/LATE panes fired, the last pane's value for
retractions).  A micro-batch is then a few array operations for all keys at once instead of Python
objects per session, in the order of ``WindowedCore.run_batch``:

1. the watermark step: sessions whose end the watermark reached with the end-of-window timer pending
   fire (ON_TIME if it is their first non-early pane, else LATE); expired sessions are purged, those
   with unfired elements firing a last pane first (``time_rules``);
2. the bundle: each element makes a proto-session ``[ts, ts + gap)`` (the window's gap, or the
   element's, read from a column: ``session_windows.read_gaps``); those already expired are
   dropped; the bundle's proto-sessions and the key's sessions are merged all at once (Beam's
   bundle-level merge, ``SessionWindows.merge_windows``: sorted by key and start, a row starts a new
   session unless it starts before the running end; touching sessions do not merge).  A merge group
   holding one session with the group's bounds keeps that session's state; a group holding sessions
   that grew or joined becomes a new session with their merged state (pane count restarting, each
   absorbed session that fired retracted in retracting mode); a group of proto-sessions only is a new
   session.  Every element folds into its group's session; sessions whose end is reached fire a LATE
   pane per bundle.

With the default trigger a session's end-of-window timer is pending exactly when it got data
before its end and has not fired since, which is the ``on_time_hold`` of ``WindowState``; one
boolean column serves both.  ``tests/test_columnar_sessions.py`` runs this path against
``WindowedCore`` on random streams with watermarks at session boundaries.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from accumulations.base import Accumulation
from triggers.option import TriggerOption

from .columnar import Panes, columnar_form
from .columnar_panes import ColumnarEmitter, object_array
from .panes import DropReason, DroppedElement
from .range_ops import factorize
from .time import MAX_TIMESTAMP, MIN_TIMESTAMP
from .time_rules import end_of_window_due, expiry_due, is_end_reached, is_expired, is_timer_due
from .windows.session_windows import SessionWindows


def _ints(values: Any = ()) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


@dataclass
class SessionTable:
    """A key group's active sessions, sorted by key then start (``watermark``: the last applied)."""

    keys: np.ndarray = field(default_factory=object_array)
    starts: np.ndarray = field(default_factory=_ints)
    ends: np.ndarray = field(default_factory=_ints)
    acc: list = field(default_factory=list)  # accumulator columns (ColumnarForm)
    pending: np.ndarray = field(default_factory=_ints)  # elements since the last pane
    hold: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # end-of-window timer pending
    nonspeculative: np.ndarray = field(default_factory=_ints)  # ON_TIME and LATE panes fired
    index: np.ndarray = field(default_factory=_ints)  # panes fired: the next pane's index
    last: np.ndarray = field(default_factory=object_array)  # the last pane's value (None before the first)
    watermark: int = MIN_TIMESTAMP

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, rows: np.ndarray) -> "SessionTable":
        """The rows selected by a mask or index array."""
        return SessionTable(**{f.name: _select(getattr(self, f.name), rows) for f in fields(self)
                               if f.name != "watermark"}, watermark=self.watermark)


def _select(column: Any, rows: np.ndarray) -> Any:
    return [c[rows] for c in column] if isinstance(column, list) else column[rows]


def supports_columnar_sessions(window: Any, accumulation: Accumulation, trigger: TriggerOption,
                               timestamp_combiner: Any) -> bool:
    """Sessions (a gap per element read from a column: ``process(gaps=)``), Beam's default trigger (any accumulation mode), a built-in numeric
    accumulation (discarding min/max excepted: their accumulator has no array identity), and panes
    stamped with the end of the window."""
    from .panes import TimestampCombiner

    form = columnar_form(accumulation)
    return (isinstance(window, SessionWindows) and (not window.dynamic or isinstance(window.gap, str))
            and trigger.kind == "default" and not trigger.only_updated_panes
            and form is not None and not (trigger.discarding and form.kind in ("min", "max"))
            and timestamp_combiner == TimestampCombiner.END_OF_WINDOW)


class ColumnarSessions:
    def __init__(self, window: SessionWindows, accumulation: Accumulation, trigger: TriggerOption,
                 allowed_lateness: int, *, label: str = "operator", column: Optional[str] = None) -> None:
        form = columnar_form(accumulation)
        assert form is not None
        self.gap = int(window.min_gap) if window.min_gap is not None else None  # (None: each element's)
        self.form = form
        self.accumulation = accumulation
        self.discarding = trigger.discarding
        self.retracting = trigger.retracting
        self.lateness = allowed_lateness
        self.label, self.column = label, column
        self.emitter = ColumnarEmitter(form, accumulation, trigger, label=label, column=column)

    # -- timers ---------------------------------------------------------------------------------
    def due_per_row(self, table: SessionTable) -> np.ndarray:
        """When each session next has something to do: its end-of-window timer, or its expiry."""
        max_ts = table.ends - 1
        return np.minimum(np.where(table.hold, end_of_window_due(max_ts), MAX_TIMESTAMP),
                          expiry_due(max_ts, self.lateness))

    def next_event_time(self, table: SessionTable) -> Optional[int]:
        return int(self.due_per_row(table).min()) if len(table) else None

    # -- the watermark step ---------------------------------------------------------------------
    def on_watermark(self, table: SessionTable, watermark: int, out: Panes) -> SessionTable:
        if watermark <= table.watermark:
            return table
        if len(table):
            max_ts = table.ends - 1
            expired = is_expired(max_ts, self.lateness, watermark)
            due = table.hold & is_timer_due(end_of_window_due(max_ts), watermark)
            # Garbage collection fires what the trigger has not (Beam's FIRE_IF_NON_EMPTY).
            fire = due | (expired & (table.pending > 0))
            if fire.any():
                rows = np.flatnonzero(fire)
                rows = rows[np.lexsort((table.starts[rows], table.ends[rows]))]  # in event-time order
                self.emitter.fire(table, rows, watermark, expired[rows], out)
            if expired.any():
                table = table.take(~expired)
        table.watermark = watermark
        return table

    # -- a bundle of elements -------------------------------------------------------------------
    def process(self, table: SessionTable, keys: np.ndarray, timestamps: np.ndarray, values: Optional[np.ndarray],
                watermark: int, out: Panes, dropped: list, element_of: Callable[[int], Any],
                gaps: Optional[np.ndarray] = None) -> SessionTable:
        """One batch of a key group (``keys``, ``timestamps``, ``values`` aligned), in the core's order;
        ``gaps``: each element's gap in ms (positive), for sessions whose gap is the element's."""
        table = self.on_watermark(table, watermark, out)
        if not len(timestamps):
            return table
        timestamps = np.asarray(timestamps, dtype=np.int64)
        assert (gaps is None) != (self.gap is None), "a gap per element exactly when the window has no fixed gap"
        ends = timestamps + (np.asarray(gaps, dtype=np.int64) if gaps is not None else self.gap)  # proto-sessions
        live = ~is_expired(ends - 1, self.lateness, watermark)
        for i in np.flatnonzero(~live).tolist():
            dropped.append(DroppedElement(DropReason.EXPIRED, element_of(i), keys[i], int(timestamps[i]), watermark))
        if not live.any():
            return table
        keys, timestamps, ends = keys[live], timestamps[live], ends[live]
        partials = self.form.from_partials(np.ones(len(timestamps), dtype=np.int64),
                                           [values[live]] * len(self.form.partial_aggregates) if values is not None
                                           else [])
        return self._merge_bundle(table, keys, timestamps, ends, partials, watermark, out)

    def _merge_bundle(self, table: SessionTable, keys: np.ndarray, timestamps: np.ndarray, proto_ends: np.ndarray,
                      partials: list, watermark: int, out: Panes) -> SessionTable:
        n_rows = len(table)
        codes, uniques = factorize(np.concatenate([table.keys, keys]))
        # Every interval: the sessions (row i), then the proto-sessions (element j, as -1 - j).
        member = np.concatenate([np.arange(n_rows), -1 - np.arange(len(timestamps))])
        starts = np.concatenate([table.starts, timestamps])
        ends = np.concatenate([table.ends, proto_ends])
        order = np.lexsort((ends, starts, codes))
        codes, starts, ends, member = codes[order], starts[order], ends[order], member[order]
        reach = pd.Series(ends).groupby(codes).cummax().to_numpy()  # the running end within each key
        new = np.ones(len(order), dtype=bool)
        new[1:] = (codes[1:] != codes[:-1]) | (starts[1:] >= reach[:-1])
        first = np.flatnonzero(new)
        g_codes, g_starts = codes[first], starts[first]
        g_ends = np.maximum.reduceat(ends, first)
        is_row = member >= 0
        g_rows = np.add.reduceat(is_row.astype(np.int64), first)
        g_elements = np.add.reduceat((~is_row).astype(np.int64), first)
        n_groups = len(first)
        group_of = np.repeat(np.arange(n_groups), np.diff(np.append(first, len(order))))
        # A group holding exactly one session with the group's bounds keeps that session's state.
        row_of_group = np.zeros(n_groups, dtype=np.int64)
        row_of_group[group_of[is_row]] = member[is_row]  # (the group's one session, where it has one)
        kept = (g_rows == 1) & (table.starts[row_of_group] == g_starts) & (table.ends[row_of_group] == g_ends) \
            if n_rows else np.zeros(n_groups, dtype=bool)
        touched = g_elements > 0
        if self.retracting and n_rows:
            absorbed = member[is_row & (~kept & touched)[group_of]]
            self.emitter.retract_absorbed(table, absorbed[table.index[absorbed] > 0], watermark, out)
        # Accumulators, elements since the last pane and holds fold over each group's members.
        rows = np.where(is_row, member, 0)
        elements = np.where(is_row, 0, -1 - member)
        if n_rows:
            columns = [np.where(is_row, table.acc[c][rows], partial[elements]) for c, partial in enumerate(partials)]
            pending = np.where(is_row, table.pending[rows], 1)
            held = is_row & table.hold[rows]
        else:
            columns = [partial[elements] for partial in partials]
            pending, held = np.ones(len(member), dtype=np.int64), np.zeros(len(member), dtype=bool)
        hold = np.logical_or.reduceat(held, first) | (touched & ~is_end_reached(g_ends - 1, watermark))

        def carried(column: np.ndarray, fresh: Any) -> np.ndarray:
            """A kept session's value of ``column``; ``fresh`` for new and merged sessions."""
            if not n_rows:
                return np.full(n_groups, fresh, dtype=column.dtype)
            return np.where(kept, column[row_of_group], fresh).astype(column.dtype)

        result = SessionTable(
            keys=uniques[g_codes], starts=g_starts, ends=g_ends, acc=self.form.reduce_segments(columns, first),
            pending=np.add.reduceat(pending, first), hold=hold,
            nonspeculative=carried(table.nonspeculative, 0), index=carried(table.index, 0),
            last=carried(table.last, None), watermark=table.watermark)
        # Sessions that got elements after their end: a LATE pane per bundle.
        late = np.flatnonzero(touched & is_end_reached(g_ends - 1, watermark))
        if len(late):
            self.emitter.fire(result, late, watermark, np.zeros(len(late), dtype=bool), out)
        return result
