"""Count triggers as arrays: ``AfterWatermark`` with early and late firings every N elements.

The triggers most windowed aggregations use need no timers but the end of the window's, and a
per-window state of two numbers: which phase the window is in (before its ON_TIME pane or after
it) and how many elements arrived since its last pane in this phase.  Beam's default trigger is the
same machine with no early firings and a late firing on every bundle (late every 1 element, never
finishing); ``AfterWatermark`` without late firings finishes at its ON_TIME pane, and the window
then drops its elements as arriving in a closed window until it expires.  What the trigger state
machines in ``triggers`` do, per bundle (``WindowedCore.fire_ready``):

- before the ON_TIME pane, the end-of-window timer is pending; the window fires once its end is
  reached (the ON_TIME pane, or LATE if the window never held the watermark: the timing is the
  emitter's), or, with early firings, once ``early`` elements arrived since its last pane;
- after it, with late firings, once ``late`` elements arrived since its last pane;
- each firing restarts the count (``Repeatedly`` resets its ``AfterCount``), also for the elements
  beyond N of the same bundle: a bundle is counted once, as Beam evaluates triggers per bundle.

``tests/test_columnar_windows.py`` checks the machine against the trigger state machines on random
streams.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

import numpy as np

from accumulations.base import Accumulation
from triggers.option import TriggerOption

from .columnar import ColumnarForm, Panes, columnar_form
from .columnar_panes import ColumnarEmitter, object_array
from .range_ops import factorize
from .time import MAX_TIMESTAMP, MIN_TIMESTAMP
from .time_rules import end_of_window_due, expiry_due, is_end_reached, is_expired, is_timer_due


@dataclass(frozen=True)
class CountTrigger:
    #: Elements per early firing (None: no early firings).
    early: Optional[int]
    #: Elements per late firing after the ON_TIME pane (None: the trigger finishes at it).
    late: Optional[int]

    @property
    def finishes(self) -> bool:
        return self.late is None

    def end_of_window_pending(self, late: np.ndarray, closed: np.ndarray) -> np.ndarray:
        """Rows whose end-of-window timer is set: every window before its ON_TIME pane."""
        return ~late & ~closed

    def timer_due(self, ends: np.ndarray) -> np.ndarray:
        return end_of_window_due(ends - 1)

    def should_fire(self, ends: np.ndarray, late: np.ndarray, count: np.ndarray, watermark: int) -> np.ndarray:
        """Which open rows fire after a bundle (``AfterWatermark.should_fire``)."""
        reached = is_end_reached(ends - 1, watermark)
        fire = ~late & reached
        if self.early is not None:
            fire |= ~late & (count >= self.early)
        if self.late is not None:
            fire |= late & (count >= self.late)
        return fire

    def on_fire(self, ends: np.ndarray, late: np.ndarray, count: np.ndarray, rows: np.ndarray,
                watermark: int) -> np.ndarray:
        """The fired ``rows``' new trigger state, in place; returns which of them finished."""
        on_time = ~late[rows] & is_end_reached(ends[rows] - 1, watermark)
        late[rows] |= on_time
        count[rows] = 0
        return on_time & self.finishes


def count_trigger(option: TriggerOption) -> Optional[CountTrigger]:
    """The count machine equal to ``option``'s trigger, or None when it is another trigger."""
    if option.kind == "default":
        return CountTrigger(early=None, late=1)
    if option.kind != "at_watermark":
        return None
    firings = (option.early, option.late)
    if any(f is not None and f.count is None for f in firings):
        return None  # firings by processing time
    return CountTrigger(early=option.early.count if option.early is not None else None,
                        late=option.late.count if option.late is not None else None)


def supports_count_triggered_rows(accumulation: Accumulation, trigger: TriggerOption, timestamp_combiner: Any) -> bool:
    """What a window or session table needs besides its window family: a count trigger in any
    accumulation mode, with or without only-updated panes, a built-in numeric accumulation, and panes
    stamped with the end of the window.  Discarding min/max keep the object path (their accumulator
    has no array identity to restart from), and so does a discarding mean with early firings (its
    ON_TIME pane may be empty, which has no mean)."""
    from .panes import TimestampCombiner

    form = columnar_form(accumulation)
    machine = count_trigger(trigger)
    if form is None or machine is None:
        return False
    if trigger.discarding and (form.kind in ("min", "max") or (form.kind == "mean" and machine.early is not None)):
        return False
    return timestamp_combiner == TimestampCombiner.END_OF_WINDOW


def _ints(values: Any = ()) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _bools(values: Any = ()) -> np.ndarray:
    return np.asarray(values, dtype=bool)


@dataclass
class RowTable:
    """A key group's windows or sessions, one row each, sorted by key, start and end: accumulator
    columns, the pane bookkeeping of ``WindowState`` and the count trigger's state (``watermark``:
    the last applied)."""

    keys: np.ndarray = field(default_factory=object_array)
    starts: np.ndarray = field(default_factory=_ints)
    ends: np.ndarray = field(default_factory=_ints)
    acc: list = field(default_factory=list)  # accumulator columns (ColumnarForm)
    pending: np.ndarray = field(default_factory=_ints)  # elements since the last pane
    hold: np.ndarray = field(default_factory=_bools)  # on_time_hold: data came before the end
    nonspeculative: np.ndarray = field(default_factory=_ints)  # ON_TIME and LATE panes fired
    index: np.ndarray = field(default_factory=_ints)  # panes fired: the next pane's index
    last: np.ndarray = field(default_factory=object_array)  # the last pane's value (None before the first)
    late: np.ndarray = field(default_factory=_bools)  # the trigger is past its ON_TIME pane
    count: np.ndarray = field(default_factory=_ints)  # elements since the trigger last fired
    closed: np.ndarray = field(default_factory=_bools)  # the trigger finished: elements are dropped
    watermark: int = MIN_TIMESTAMP

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, rows: np.ndarray) -> "RowTable":
        """The rows selected by a mask or index array."""
        return RowTable(**{f.name: _select(getattr(self, f.name), rows) for f in fields(self)
                           if f.name != "watermark"}, watermark=self.watermark)

    @staticmethod
    def concat(tables: list["RowTable"], watermark: int) -> "RowTable":
        """Tables of one group as one, sorted by key, start and end."""
        tables = [t for t in tables if len(t)]
        if not tables:
            return RowTable(watermark=watermark)
        if len(tables) == 1:
            tables[0].watermark = watermark
            return tables[0]
        joined = RowTable(**{f.name: (
            [np.concatenate([t.acc[c] for t in tables]) for c in range(len(tables[0].acc))] if f.name == "acc"
            else np.concatenate([getattr(t, f.name) for t in tables])) for f in fields(RowTable)
            if f.name != "watermark"}, watermark=watermark)
        codes, _ = factorize(joined.keys)
        return joined.take(np.lexsort((joined.ends, joined.starts, codes)))


def _select(column: Any, rows: np.ndarray) -> Any:
    return [c[rows] for c in column] if isinstance(column, list) else column[rows]


class TriggeredRows:
    """What the window and session tables share: a count trigger per row (columns ``late``,
    ``count``, ``closed``), its timers, the watermark step, and firing through the emitter."""

    def __init__(self, accumulation: Accumulation, trigger: TriggerOption, allowed_lateness: int, *,
                 label: str, column: Optional[str]) -> None:
        form = columnar_form(accumulation)
        machine = count_trigger(trigger)
        assert form is not None and machine is not None
        self.form: ColumnarForm = form
        self.trigger: CountTrigger = machine
        self.emitter = ColumnarEmitter(form, accumulation, trigger, label=label, column=column)
        self.lateness = allowed_lateness

    def due_per_row(self, table: Any) -> np.ndarray:
        """When each row next has something to do: its end-of-window timer, or its expiry."""
        pending = self.trigger.end_of_window_pending(table.late, table.closed)
        return np.minimum(np.where(pending, self.trigger.timer_due(table.ends), MAX_TIMESTAMP),
                          expiry_due(table.ends - 1, self.lateness))

    def next_event_time(self, table: Any) -> Optional[int]:
        return int(self.due_per_row(table).min()) if len(table) else None

    def on_watermark(self, table: Any, watermark: int, out: Panes) -> Any:
        """Rows whose end-of-window timer is due fire (finishing if the trigger has no late firings,
        or if they also expire); expired rows are purged, those with elements since their last pane
        firing a last pane first (Beam's garbage collection, FIRE_IF_NON_EMPTY)."""
        if watermark <= table.watermark:
            return table
        if len(table):
            expired = is_expired(table.ends - 1, self.lateness, watermark)
            due = self.trigger.end_of_window_pending(table.late, table.closed) & \
                is_timer_due(self.trigger.timer_due(table.ends), watermark)
            collected = expired & ~table.closed & ~due & (table.pending > 0)
            fire = due | collected
            if fire.any():
                rows = np.flatnonzero(fire)
                rows = rows[np.lexsort((table.starts[rows], table.ends[rows]))]  # in event-time order
                finished = expired[rows] | collected[rows]
                on_time = due[rows]
                finished[on_time] |= self.trigger.on_fire(table.ends, table.late, table.count, rows[on_time],
                                                          watermark)
                self.fire(table, rows, watermark, finished, out)
            if expired.any():
                table = table.take(~expired)
        table.watermark = watermark
        return table

    def fire_ready(self, table: Any, candidates: np.ndarray, watermark: int, out: Panes) -> None:
        """Ask each of ``candidates`` (open rows a bundle touched) once whether to fire
        (``WindowedCore.fire_ready``), and fire those that say so."""
        fire = candidates[self.trigger.should_fire(table.ends[candidates], table.late[candidates],
                                                   table.count[candidates], watermark)]
        if len(fire):
            finished = self.trigger.on_fire(table.ends, table.late, table.count, fire, watermark)
            self.fire(table, fire, watermark, finished, out)

    def fire(self, table: Any, rows: np.ndarray, watermark: int, finished: np.ndarray, out: Panes) -> None:
        """One pane of each of ``rows``; those whose trigger finished are closed (kept, holding
        nothing, until they expire, so that their later elements are dropped as closed_window)."""
        self.emitter.fire(table, rows, watermark, finished, out)
        done = rows[finished]
        if len(done):
            table.closed[done] = True
            table.count[done] = 0
            for column in table.acc:
                column[done] = 0


__all__ = ["CountTrigger", "RowTable", "TriggeredRows", "count_trigger", "supports_count_triggered_rows"]
