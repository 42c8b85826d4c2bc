"""``AfterWatermark`` with early and late firings as arrays: every N elements or every D ms of
processing time.

The triggers most windowed aggregations use need no timers but the end of the window's and, for
firings by processing time, one processing-time timer, and a per-window state of three numbers:
which phase the window is in (before its ON_TIME pane or after it), how many elements arrived since
its last pane in this phase, and when its processing-time firing of this phase is due.  Beam's
default trigger is the same machine with no early firings and a late firing on every bundle (late
every 1 element, never finishing); ``AfterWatermark`` without late firings finishes at its ON_TIME
pane, and the window then drops its elements as arriving in a closed window until it expires.  What
the trigger state machines in ``triggers`` do, per bundle (``WindowedCore.run_batch``):

- before the ON_TIME pane, the end-of-window timer is pending; the window fires once its end is
  reached (the ON_TIME pane, or LATE if the window never held the watermark: the timing is the
  emitter's), or, with early firings, once ``early`` elements arrived since its last pane or
  processing time reached the early firing's due time;
- after it, with late firings, once ``late`` elements arrived since its last pane or processing time
  reached the late firing's due time;
- a firing by processing time is due ``delay`` ms after the first element since the phase's last
  pane (``AfterProcessingTime``): the first element sets it, later ones leave it;
- each firing restarts the count and clears the due time (``Repeatedly`` resets its sub-trigger;
  the ON_TIME pane clears the early one), also for the elements beyond N of the same bundle: a
  bundle is counted once, as Beam evaluates triggers per bundle.

``tests/test_columnar_windows.py`` checks the machine against the trigger state machines on random
streams.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

import numpy as np

from accumulations.base import Accumulation
from triggers.option import Firing, TriggerOption

from ..time import MAX_TIMESTAMP, MIN_TIMESTAMP
from ..time_rules import end_of_window_due, expiry_due, is_end_reached, is_expired, is_timer_due
from .columnar import ColumnarForm, Panes, columnar_form
from .columnar_panes import ColumnarEmitter, object_array
from .range_ops import factorize, lexsort_ints

#: A row's processing-time firing when none is pending (no element since its phase's last pane, or
#: no firing by processing time in its phase).
NOT_SET = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Every:
    """A repeated firing of one phase: every ``count`` elements, or ``delay`` ms of processing time
    after the first element since the last pane."""

    count: Optional[int] = None
    delay: Optional[int] = None

    @staticmethod
    def of(firing: Optional[Firing]) -> Optional["Every"]:
        if firing is None:
            return None
        if firing.count is not None:
            return Every(count=firing.count)
        assert firing.duration is not None  # (a firing by count or by time)
        return Every(delay=int(firing.duration))


def _fires_by_count(every: Optional[Every], count: np.ndarray) -> Any:
    return every is not None and every.count is not None and count >= every.count


def _fires_by_time(every: Optional[Every], fire_at: np.ndarray, processing_time: int) -> Any:
    return every is not None and every.delay is not None and is_timer_due(fire_at, processing_time)


@dataclass(frozen=True)
class RowTrigger:
    """``AfterWatermark`` with early and late firings every N elements or every D ms of
    processing time, as the table engines run it over all rows of a key group at once: the early
    and late firing rules (``Every``), whether the trigger finishes at the ON_TIME pane, and the
    per-row decisions as array operations (``row_trigger`` builds it from a ``TriggerOption``)."""

    #: Early firings (None: none).
    early: Optional[Every]
    #: Late firings after the ON_TIME pane (None: the trigger finishes at it).
    late: Optional[Every]

    @property
    def finishes(self) -> bool:
        return self.late is None

    @property
    def uses_processing_time(self) -> bool:
        return any(every is not None and every.delay is not None for every in (self.early, self.late))

    def end_of_window_pending(self, late: np.ndarray, closed: np.ndarray) -> np.ndarray:
        """Rows whose end-of-window timer is set: every window before its ON_TIME pane."""
        return ~late & ~closed

    def timer_due(self, ends: np.ndarray) -> np.ndarray:
        return end_of_window_due(ends - 1)

    def should_fire(self, ends: np.ndarray, late: np.ndarray, count: np.ndarray, fire_at: np.ndarray,
                    watermark: int, processing_time: int) -> np.ndarray:
        """Which open rows fire after a bundle or at processing time (``AfterWatermark.should_fire``)."""
        early = ~late & (is_end_reached(ends - 1, watermark) | _fires_by_count(self.early, count)
                         | _fires_by_time(self.early, fire_at, processing_time))
        return early | (late & (_fires_by_count(self.late, count) | _fires_by_time(self.late, fire_at,
                                                                                    processing_time)))

    def on_elements(self, late: np.ndarray, fire_at: np.ndarray, rows: np.ndarray, processing_time: int) -> None:
        """Elements arrived in ``rows``: a phase firing by processing time is due ``delay`` after the
        first of them since its last pane (``AfterProcessingTime.on_element``), in place."""
        for phase, every in ((False, self.early), (True, self.late)):
            if every is not None and every.delay is not None:
                starting = rows[(late[rows] == phase) & (fire_at[rows] == NOT_SET)]
                fire_at[starting] = processing_time + every.delay

    def on_fire(self, ends: np.ndarray, late: np.ndarray, count: np.ndarray, fire_at: np.ndarray, rows: np.ndarray,
                watermark: int) -> np.ndarray:
        """The fired ``rows``' new trigger state, in place; returns which of them finished."""
        on_time = ~late[rows] & is_end_reached(ends[rows] - 1, watermark)
        late[rows] |= on_time
        count[rows] = 0
        fire_at[rows] = NOT_SET
        return on_time & self.finishes


def row_trigger(option: TriggerOption) -> Optional[RowTrigger]:
    """The machine equal to ``option``'s trigger, or None when it is another trigger (a custom one)."""
    if option.kind == "default":
        return RowTrigger(early=None, late=Every(count=1))
    if option.kind != "at_watermark":
        return None
    return RowTrigger(early=Every.of(option.early), late=Every.of(option.late))


def supports_triggered_rows(accumulation: Accumulation, trigger: TriggerOption, timestamp_combiner: Any) -> bool:
    """What a window or session table needs besides its window family: the default trigger or
    ``AfterWatermark`` with firings by count or processing time, in any accumulation mode, with or
    without only-updated panes; a built-in numeric accumulation; panes stamped with the end of the
    window.  Discarding min/max keep the object path (their accumulator
    has no array identity to restart from), and so does a discarding mean with early firings (its
    ON_TIME pane may be empty, which has no mean)."""
    from ..panes import TimestampCombiner

    form = columnar_form(accumulation)
    machine = row_trigger(trigger)
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
    columns, the pane bookkeeping of ``WindowState`` and the trigger's state (``watermark``:
    the last applied)."""

    keys: np.ndarray = field(default_factory=object_array)
    starts: np.ndarray = field(default_factory=_ints)
    ends: np.ndarray = field(default_factory=_ints)
    acc: list = field(default_factory=list)  # accumulator columns (ColumnarForm)
    pending: np.ndarray = field(default_factory=_ints)  # elements since the last pane
    hold: np.ndarray = field(default_factory=_bools)  # on_time_hold: an element since the last pane came before the end
    nonspeculative: np.ndarray = field(default_factory=_ints)  # ON_TIME and LATE panes fired
    index: np.ndarray = field(default_factory=_ints)  # panes fired: the next pane's index
    last: np.ndarray = field(default_factory=object_array)  # the last pane's value (None before the first)
    late: np.ndarray = field(default_factory=_bools)  # the trigger is past its ON_TIME pane
    count: np.ndarray = field(default_factory=_ints)  # elements since the trigger last fired
    fire_at: np.ndarray = field(default_factory=_ints)  # the phase's processing-time firing (NOT_SET: none)
    closed: np.ndarray = field(default_factory=_bools)  # the trigger finished: elements are dropped
    watermark: int = MIN_TIMESTAMP

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, rows: np.ndarray) -> "RowTable":
        """The rows selected by a mask or index array."""
        return RowTable(**{f.name: _select(getattr(self, f.name), rows) for f in fields(self)
                           if f.name != "watermark"}, watermark=self.watermark)

    @staticmethod
    def concat(tables: list["RowTable"], watermark: int, *, sort: bool = True) -> "RowTable":
        """Tables of one group as one, sorted by key, start and end (``sort=False``: in the order given,
        for tables that hold different keys each, grouped by key, as row shards do)."""
        tables = [t for t in tables if len(t)]
        if not tables:
            return RowTable(watermark=watermark)
        if len(tables) == 1:
            tables[0].watermark = watermark
            return tables[0]
        columns: dict[str, Any] = {f.name: (
            [np.concatenate([t.acc[c] for t in tables]) for c in range(len(tables[0].acc))] if f.name == "acc"
            else np.concatenate([getattr(t, f.name) for t in tables])) for f in fields(RowTable)
            if f.name != "watermark"}
        joined = RowTable(**columns, watermark=watermark)
        if not sort:
            return joined
        codes, _ = factorize(joined.keys)
        return joined.take(lexsort_ints((joined.ends, joined.starts, codes)))


def _select(column: Any, rows: np.ndarray) -> Any:
    return [c[rows] for c in column] if isinstance(column, list) else column[rows]


class TriggeredRows:
    """What the window and session tables share: a ``RowTrigger`` per row (columns ``late``,
    ``count``, ``fire_at``, ``closed``), its timers, the watermark and processing-time steps, and
    firing through the emitter."""

    def __init__(self, accumulation: Accumulation, trigger: TriggerOption, allowed_lateness: int, *,
                 label: str, column: Optional[str]) -> None:
        form = columnar_form(accumulation)
        machine = row_trigger(trigger)
        assert form is not None and machine is not None
        self.form: ColumnarForm = form
        self.trigger: RowTrigger = machine
        self.emitter = ColumnarEmitter(form, accumulation, trigger, label=label, column=column)
        self.lateness = allowed_lateness

    def due_per_row(self, table: Any) -> np.ndarray:
        """When each row next has something to do in event time: its end-of-window timer, or its expiry."""
        pending = self.trigger.end_of_window_pending(table.late, table.closed)
        return np.minimum(np.where(pending, self.trigger.timer_due(table.ends), MAX_TIMESTAMP),
                          expiry_due(table.ends - 1, self.lateness))

    def next_event_time(self, table: Any) -> Optional[int]:
        return int(self.due_per_row(table).min()) if len(table) else None

    def processing_due_per_row(self, table: Any) -> np.ndarray:
        """When each row's processing-time firing is due (``NOT_SET``: none pending)."""
        return np.where(table.closed, NOT_SET, table.fire_at)

    def next_processing_time(self, table: Any) -> Optional[int]:
        due = int(self.processing_due_per_row(table).min()) if len(table) else NOT_SET
        return None if due == NOT_SET else due

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
                rows = rows[lexsort_ints((table.starts[rows], table.ends[rows]))]  # in event-time order
                finished = expired[rows] | collected[rows]
                on_time = due[rows]  # (the end-of-window timer fires: it held the watermark until now)
                finished[on_time] |= self.trigger.on_fire(table.ends, table.late, table.count, table.fire_at,
                                                          rows[on_time], watermark)
                self.fire(table, rows, watermark, finished, out, timer_hold=on_time)
            if expired.any():
                table = table.take(~expired)
        table.watermark = watermark
        return table

    def on_processing_time(self, table: Any, processing_time: int, out: Panes) -> Any:
        """Rows whose processing-time firing is due fire (``WindowedCore.on_processing_time``), at the
        table's watermark (applied first: ``on_watermark``)."""
        if self.trigger.uses_processing_time and len(table):
            rows = np.flatnonzero(is_timer_due(self.processing_due_per_row(table), processing_time))
            if len(rows):
                finished = self.trigger.on_fire(table.ends, table.late, table.count, table.fire_at, rows,
                                                table.watermark)
                self.fire(table, rows, table.watermark, finished, out)
        return table

    def on_elements(self, table: Any, touched: np.ndarray, watermark: int, processing_time: int, out: Panes) -> None:
        """Rows a bundle added elements to (open ones, ``touched``): the trigger notes them, then each
        is asked once whether to fire (``WindowedCore.fire_ready``), and those that say so fire."""
        trigger = self.trigger
        trigger.on_elements(table.late, table.fire_at, touched, processing_time)
        fire = touched[trigger.should_fire(table.ends[touched], table.late[touched], table.count[touched],
                                           table.fire_at[touched], watermark, processing_time)]
        if len(fire):
            finished = trigger.on_fire(table.ends, table.late, table.count, table.fire_at, fire, watermark)
            self.fire(table, fire, watermark, finished, out)

    def fire(self, table: Any, rows: np.ndarray, watermark: int, finished: np.ndarray, out: Panes,
             timer_hold: Optional[np.ndarray] = None) -> None:
        """One pane of each of ``rows``; those whose trigger finished are closed (kept, holding
        nothing, until they expire, so that their later elements are dropped as closed_window).
        ``timer_hold``: ``ColumnarEmitter.fire``'s (only a watermark step fires by the end-of-window
        timer: a row whose end is reached is never left with the timer pending after it)."""
        self.emitter.fire(table, rows, watermark, finished, out, timer_hold)
        done = rows[finished]
        if len(done):
            table.closed[done] = True
            table.count[done] = 0
            table.fire_at[done] = NOT_SET
            for column in table.acc:
                column[done] = 0


__all__ = ["Every", "NOT_SET", "RowTable", "RowTrigger", "TriggeredRows", "row_trigger", "supports_triggered_rows"]
