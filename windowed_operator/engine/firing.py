"""Turning a firing into pane records: timing, index, retractions, suppression and accumulation mode.

This is the one place that decides what a pane looks like, so both runners (and merges, which
retract the sessions they absorb) produce identical records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Optional

from accumulations.base import Accumulation
from triggers.option import TriggerOption

from ..panes import DroppedElement, PaneRecord, TimestampCombiner, Timing
from ..windows.base import Window
from .key_state import WindowState
from .pane_rules import TIMINGS, absorbed_timing_code, check_output, emitted, timing_code


#: One input of the core: event time, value, and the window it already has (window propagation) or None.
CoreElement = tuple[int, Any, Optional[Window]]


@dataclass(slots=True)
class Emission:
    """What a call emitted: panes, and the elements it dropped."""

    outputs: list[PaneRecord] = field(default_factory=list)
    dropped: list[DroppedElement] = field(default_factory=list)

    def extend(self, other: "Emission") -> None:
        self.outputs.extend(other.outputs)
        self.dropped.extend(other.dropped)


class PaneEmitter:
    """The object engine's pane: what a firing window emits under the accumulation mode (the value,
    its retraction, the pane's timing, index and flags, its timestamp by the combiner), and what it
    keeps for the next pane."""

    def __init__(self, accumulation: Accumulation, option: TriggerOption, combiner: TimestampCombiner,
                 label: str = "operator", column: Optional[str] = None) -> None:
        self.accumulation = accumulation
        self.option = option
        self.combiner = combiner
        #: How errors name the operator and the column it folds.
        self.label = label
        self.column = column

    def _timestamp(self, window: Window, ws: WindowState) -> int:
        if self.combiner == TimestampCombiner.EARLIEST and ws.pane_min_ts is not None:
            return ws.pane_min_ts
        if self.combiner == TimestampCombiner.LATEST and ws.pane_max_ts is not None:
            return ws.pane_max_ts
        return window.max_timestamp

    def _timing(self, window: Window, ws: WindowState, watermark: int, timer_hold: bool) -> Timing:
        """The pane's timing (``pane_rules.timing_code``) over the window's holds."""
        held = timer_hold or ws.has_element_hold(self.combiner == TimestampCombiner.END_OF_WINDOW)
        return TIMINGS[timing_code(window.max_timestamp, watermark, ws.nonspeculative_index, held)]

    def emit(self, key: Optional[Hashable], window: Window, ws: WindowState, watermark: int, *,
             finished: bool, timer_hold: bool = False) -> list[PaneRecord]:
        """Fire one pane of ``window`` and apply the accumulation mode to its state; ``timer_hold``: the
        trigger's end-of-window timer held the window's output watermark until this step.  Every pane
        releases the window's element holds."""
        timing = self._timing(window, ws, watermark, timer_hold)
        if timing != Timing.EARLY:
            ws.nonspeculative_index += 1
        ws.on_time_hold = False
        value = check_output(self.accumulation.get_output(ws.acc), self.label, self.column, key, window)
        timestamp = self._timestamp(window, ws)
        # In retracting mode every re-fired pane is preceded by the retraction of the last one, also
        # when the value is unchanged: the pane's timing (ON_TIME, is_last) stays visible and
        # downstream sums of panes minus retractions still equal the window's value.
        only_updated = self.option.only_updated_panes
        unchanged = bool(only_updated and ws.fired and value == ws.last_output)
        records: list[PaneRecord] = []
        if emitted(ws.fired, unchanged, only_updated, self.accumulation.is_result(value)):
            if self.option.retracting and ws.fired:
                records.append(self._retraction(key, window, ws, timing, is_last=False))
            records.append(PaneRecord(key, window.start, window.end, value, timing, ws.pane_index,
                                      ws.pane_index == 0, finished, False, timestamp))
            ws.pane_index += 1
            ws.fired = True
            ws.last_output = value
            ws.last_timestamp = timestamp
        ws.pending = 0
        ws.pane_min_ts = ws.pane_max_ts = None
        if finished:
            ws.closed = True
            ws.acc = self.accumulation.default_accumulated_value()
            ws.trigger_state.clear()
            ws.timers.clear()
        elif self.option.discarding:
            ws.acc = self.accumulation.default_accumulated_value()
        return records

    def retract_absorbed(self, key: Optional[Hashable], window: Window, ws: WindowState,
                         watermark: int) -> list[PaneRecord]:
        """A session merged away after firing: retract its last pane (retracting mode only)."""
        if not (self.option.retracting and ws.fired):
            return []
        timing = TIMINGS[absorbed_timing_code(window.max_timestamp, watermark)]
        return [self._retraction(key, window, ws, timing, is_last=True)]

    def _retraction(self, key: Optional[Hashable], window: Window, ws: WindowState, timing: Timing,
                    is_last: bool) -> PaneRecord:
        value: Any = self.accumulation.get_retraction(ws.last_output)
        return PaneRecord(key, window.start, window.end, value, timing, ws.pane_index, False, is_last, True,
                          ws.last_timestamp)
