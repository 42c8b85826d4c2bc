"""Firing panes of many windows at once: ``firing.PaneEmitter`` for the columnar window tables.

The columnar paths keep one row per window (or session) with the same bookkeeping a
``WindowState`` holds: accumulator columns, elements since the last pane, whether its element hold
at the end of the window is set (``on_time_hold``), ON_TIME/LATE panes fired, panes fired, and the
last pane's value (for retractions and for suppressing unchanged panes).  Firing a set of rows is
``PaneEmitter.emit`` applied to each: the timing rule, the retraction before a re-fired pane, the
only-updated suppression, and what the accumulation mode keeps.  Both the session table and the
window table fire through here, so a pane looks the same on every path.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol

import numpy as np

from accumulations.base import Accumulation
from triggers.option import TriggerOption

from ..time_rules import is_end_reached
from ..windows.base import Window
from .columnar import ColumnarForm, Panes
from .pane_rules import TIMING_VALUES, absorbed_timing_code, check_outputs, emitted, results, timing_code


def object_array(values: Any = ()) -> np.ndarray:
    """A 1-d object array of ``values`` (``np.array`` would make nested lists 2-d)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


class WindowRows(Protocol):
    """The columns a window table fires from (``SessionTable``, ``WindowTable``)."""

    keys: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    acc: list
    pending: np.ndarray
    hold: np.ndarray
    nonspeculative: np.ndarray
    index: np.ndarray
    last: np.ndarray


class ColumnarEmitter:
    """The table engines' panes: the rows that fire, as columns (``Panes``), under the accumulation
    mode (values, retractions, timing, index, flags), with the accumulator columns reset or kept for
    the next pane."""

    def __init__(self, form: ColumnarForm, accumulation: Accumulation, option: TriggerOption, *,
                 label: str = "operator", column: Optional[str] = None) -> None:
        self.form = form
        self.accumulation = accumulation
        self.discarding = option.discarding
        self.retracting = option.retracting
        self.only_updated = option.only_updated_panes
        self.label, self.column = label, column

    def values(self, table: WindowRows, rows: np.ndarray) -> np.ndarray:
        """The rows' outputs; an integer that does not fit int64 is an error naming its window."""
        return check_outputs(self.form.outputs([c[rows] for c in table.acc]), self.label, self.column,
                             lambda i: table.keys[rows[i]],
                             lambda i: Window(int(table.starts[rows[i]]), int(table.ends[rows[i]])))

    def fire(self, table: WindowRows, rows: np.ndarray, watermark: int, finished: np.ndarray, out: Panes,
             timer_hold: Optional[np.ndarray] = None) -> None:
        """One pane of each of ``rows``, the table updated in place (the trigger's own state is the
        caller's); ``finished``: the trigger finished with this pane (``is_last``); ``timer_hold``:
        the rows whose end-of-window timer held their output watermark until this step (None: none).
        Every pane releases the row's element hold (``time_rules``)."""
        if not len(rows):
            return
        values = self.values(table, rows)
        max_timestamps = table.ends[rows] - 1
        held = table.hold[rows] if timer_hold is None else table.hold[rows] | timer_hold
        codes = timing_code(max_timestamps, watermark, table.nonspeculative[rows], held)
        timing = TIMING_VALUES[codes]
        index = table.index[rows]
        shown = object_array(np.asarray(values).tolist())
        refired = index > 0
        unchanged = (np.fromiter((a == b for a, b in zip(shown, table.last[rows])), dtype=bool, count=len(rows))
                     if self.only_updated else False)
        emits = np.broadcast_to(emitted(refired, unchanged, self.only_updated, results(self.accumulation, shown)),
                                (len(rows),))
        if self.retracting:  # (an unchanged re-fired pane that is not emitted is not retracted either)
            again = emits & refired
            if again.any():
                self.retract(table, rows[again], timing[again], np.zeros(int(again.sum()), dtype=bool), out)
        if emits.all():
            out.add(table.keys[rows], table.starts[rows], table.ends[rows], values, timing, index.copy(), finished)
        elif emits.any():
            shown_rows = rows[emits]
            out.add(table.keys[shown_rows], table.starts[shown_rows], table.ends[shown_rows],
                    np.asarray(values)[emits], timing[emits], index[emits], finished[emits])
        table.nonspeculative[rows] += is_end_reached(max_timestamps, watermark)
        table.hold[rows] = False
        table.index[rows] += emits
        table.last[rows[emits]] = shown[emits]
        table.pending[rows] = 0
        if self.discarding:
            for column in table.acc:
                column[rows] = 0

    def retract(self, table: WindowRows, rows: np.ndarray, timing: np.ndarray, is_last: np.ndarray,
                out: Panes) -> None:
        """The last pane of each of ``rows``, retracted (pane index: the pane it precedes)."""
        values = object_array([self.accumulation.get_retraction(v) for v in table.last[rows].tolist()])
        out.add(table.keys[rows], table.starts[rows], table.ends[rows], values, timing, table.index[rows].copy(),
                is_last, is_retraction=True)

    def retract_absorbed(self, table: WindowRows, rows: np.ndarray, watermark: int, out: Panes) -> None:
        """Sessions merged away after firing: their last pane retracted (``PaneEmitter.retract_absorbed``)."""
        if not len(rows):
            return
        timing = TIMING_VALUES[absorbed_timing_code(table.ends[rows] - 1, watermark)]
        self.retract(table, rows, timing, np.ones(len(rows), dtype=bool), out)


__all__ = ["ColumnarEmitter", "WindowRows", "object_array"]
