"""The semantic core: one key's state + a bundle of its elements + clocks -> panes and new state.

Runners own the clocks and the per-key state; the core owns every rule.  Each call mutates the
``KeyState`` it is given and returns what was emitted; ``next_event_time``/``next_processing_time``
tell a runner when the key next needs waking.  Per bundle, elements are first added to their
windows, then every touched window's trigger is asked once whether to fire, which is how count
triggers are evaluated once per bundle, as in Beam.
"""
from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Optional

from accumulations.base import Accumulation
from triggers.base import TimeDomain, TriggerContext
from triggers.option import TriggerOption

from .firing import PaneEmitter
from .panes import DropReason, DroppedElement, PaneRecord, TimestampCombiner
from .state import KeyState, WindowState
from .time import MAX_TIMESTAMP
from .windows.base import MergingWindowOption, Window, WindowOption
from .windows.sliding_windows import SlidingWindows

#: One input of the core: event time, value, and the window it already has (window propagation) or None.
CoreElement = tuple[int, Any, Optional[Window]]

_WATERMARK = TimeDomain.WATERMARK.value
_PROCESSING = TimeDomain.PROCESSING_TIME.value
_WATERMARK_SUFFIX = "@" + _WATERMARK


@dataclass(slots=True)
class Emission:
    outputs: list[PaneRecord] = field(default_factory=list)
    dropped: list[DroppedElement] = field(default_factory=list)

    def extend(self, other: "Emission") -> None:
        self.outputs.extend(other.outputs)
        self.dropped.extend(other.dropped)


class WindowedCore:
    def __init__(self, window_option: WindowOption, accumulation: Accumulation, trigger_option: TriggerOption,
                 allowed_lateness: int = 0,
                 timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW) -> None:
        self.window_option = window_option
        self.accumulation = accumulation
        self.trigger_option = trigger_option
        self.trigger = trigger_option.to_trigger()
        self.allowed_lateness = allowed_lateness
        self.emitter = PaneEmitter(accumulation, trigger_option, timestamp_combiner)
        self.kind = window_option.kind
        self._uses_processing_time = self.trigger.uses_processing_time()

    # -- time rules ---------------------------------------------------------------------------
    def is_expired(self, window: Window, watermark: int) -> bool:
        """A window expires once ``watermark >= max_timestamp + allowed_lateness`` (or input ended)."""
        return watermark >= MAX_TIMESTAMP or watermark >= window.max_timestamp + self.allowed_lateness

    def _context(self, window: Window, ws: WindowState, watermark: int, processing_time: int) -> TriggerContext:
        return TriggerContext(window, ws.trigger_state, ws.timers, watermark, processing_time)

    def _new_window_state(self) -> WindowState:
        return WindowState(acc=self.accumulation.default_accumulated_value())

    # -- elements -----------------------------------------------------------------------------
    def process_elements(self, key: Optional[Hashable], state: KeyState, elements: Iterable[CoreElement],
                         watermark: int, processing_time: int) -> Emission:
        emission = Emission()
        touched: dict[Window, None] = {}
        for ts, value, inherited in elements:
            if self.kind == "merging":
                reason = self._add_to_session(key, state, ts, value, watermark, processing_time, touched, emission)
            elif self.kind == "per_record":
                reason = self._add_per_record(state, ts, value, watermark, processing_time, touched)
            else:
                windows = [inherited] if self.kind == "inherited" else self.window_option.assign(ts)
                reason = self._add_to_windows(state, windows, ts, value, watermark, processing_time, touched)
            if reason is not None:
                emission.dropped.append(DroppedElement(reason, value, key, ts, watermark))
        for window in sorted(touched):
            ws = state.windows.get(window)
            if ws is None or ws.closed:
                continue
            ctx = self._context(window, ws, watermark, processing_time)
            if self.trigger.should_fire(ctx):
                finished = self.trigger.on_fire(ctx)
                emission.outputs.extend(
                    self.emitter.emit(key, window, ws, watermark, from_watermark=False, finished=finished))
        return emission

    def _accumulate_into(self, window: Window, ws: WindowState, ts: int, value: Any, watermark: int,
                         processing_time: int) -> None:
        ws.acc = self.accumulation.accumulate(ws.acc, value)
        ws.note_element(ts)
        self.trigger.on_element(self._context(window, ws, watermark, processing_time))

    def _add_to_windows(self, state: KeyState, windows: list[Window], ts: int, value: Any, watermark: int,
                        processing_time: int, touched: dict) -> Optional[DropReason]:
        live = [w for w in windows if not self.is_expired(w, watermark)]
        if not live:
            return DropReason.EXPIRED
        open_windows = [w for w in live if w not in state.windows or not state.windows[w].closed]
        if not open_windows:
            return DropReason.CLOSED_WINDOW
        for window in open_windows:
            ws = state.windows.get(window)
            if ws is None:
                ws = state.windows[window] = self._new_window_state()
            self._accumulate_into(window, ws, ts, value, watermark, processing_time)
            touched[window] = None
        return None

    def _add_to_session(self, key: Optional[Hashable], state: KeyState, ts: int, value: Any, watermark: int,
                        processing_time: int, touched: dict, emission: Emission) -> Optional[DropReason]:
        assert isinstance(self.window_option, MergingWindowOption)
        proto = self.window_option.assign(ts)[0]
        if self.is_expired(proto, watermark):
            return DropReason.EXPIRED
        result, absorbed = self.window_option.merge(state.windows.keys(), proto)
        if not absorbed:
            ws = state.windows.get(result)
            if ws is not None and ws.closed:
                return DropReason.CLOSED_WINDOW
            if ws is None:
                ws = state.windows[result] = self._new_window_state()
            self._accumulate_into(result, ws, ts, value, watermark, processing_time)
            touched[result] = None
            return None
        if any(state.windows[w].closed for w in absorbed):
            return DropReason.CLOSED_WINDOW
        merged = self._new_window_state()
        sources = []
        for window in absorbed:
            old = state.windows.pop(window)
            touched.pop(window, None)
            emission.outputs.extend(self.emitter.retract_absorbed(key, window, old, watermark))
            merged.acc = self.accumulation.merge(merged.acc, old.acc)
            if old.pending:
                merged.note_element(old.pane_min_ts, 0)
                merged.note_element(old.pane_max_ts, old.pending)
            sources.append(self._context(window, old, watermark, processing_time))
        state.windows[result] = merged
        self.trigger.on_merge(self._context(result, merged, watermark, processing_time), sources)
        self._accumulate_into(result, merged, ts, value, watermark, processing_time)
        touched[result] = None
        return None

    def _add_per_record(self, state: KeyState, ts: int, value: Any, watermark: int, processing_time: int,
                        touched: dict) -> Optional[DropReason]:
        """O(log n) per element in time order: the windows containing ``ts`` are found by bisection
        (only windows of later elements within ``size``: none for an in-order element), and a new
        window's aggregate comes from the two-stacks running aggregate instead of a rescan.  An
        out-of-order element costs one rebuild of the running aggregate at the next in-order one."""
        option = self.window_option
        assert isinstance(option, SlidingWindows)
        if watermark >= MAX_TIMESTAMP or watermark >= option.last_window_max_timestamp(ts) + self.allowed_lateness:
            return DropReason.EXPIRED
        acc = self.accumulation
        buffer, times, sliding = state.buffer, state.window_times, state.sliding
        in_order = not len(buffer) or ts >= buffer.times[-1]
        if in_order:
            if not sliding.valid:  # rebuilt from the elements before this one
                sliding.reset()
                for other_ts, partial in buffer.in_range(ts - option.size, ts):
                    sliding.push(other_ts, acc.merge(acc.default_accumulated_value(), partial), acc.merge)
            sliding.evict_before(ts - option.size, acc.merge)
        else:
            sliding.valid = False
        buffer.add(ts, acc.accumulate(buffer.get(ts, acc.default_accumulated_value()), value))
        added = False
        for later in times[bisect_right(times, ts):bisect_right(times, ts + option.size)]:
            window = option.window_of(later)
            ws = state.windows[window]
            if not ws.closed and not self.is_expired(window, watermark):
                self._accumulate_into(window, ws, ts, value, watermark, processing_time)
                touched[window] = None
                added = True
        own = option.window_of(ts)
        result: Optional[DropReason] = None
        if not self.is_expired(own, watermark):
            ws = state.windows.get(own)
            if ws is None:
                ws = state.windows[own] = self._new_window_state()
                insort(times, ts)
                if in_order:
                    before, oldest, newest = sliding.query(acc.merge)
                    if before is not None:
                        ws.acc = acc.merge(ws.acc, before)
                        ws.note_element(oldest, 0)
                        ws.note_element(newest, 0)
                else:
                    for other_ts, partial in buffer.in_range(own.start, ts - 1):
                        ws.acc = acc.merge(ws.acc, partial)
                        ws.note_element(other_ts, 0)
                self._accumulate_into(own, ws, ts, value, watermark, processing_time)
                touched[own] = None
            elif not ws.closed:
                self._accumulate_into(own, ws, ts, value, watermark, processing_time)
                touched[own] = None
            elif not added:
                result = DropReason.CLOSED_WINDOW
        if in_order:
            sliding.push(ts, acc.accumulate(acc.default_accumulated_value(), value), acc.merge)
        # An element whose own window already expired stays buffered for later windows that cover it.
        return result

    # -- clocks -------------------------------------------------------------------------------
    def on_watermark(self, key: Optional[Hashable], state: KeyState, watermark: int,
                     processing_time: int) -> Emission:
        """Fire windows whose event-time timers are due, then expire and purge old windows."""
        emission = Emission()
        per_record = isinstance(self.window_option, SlidingWindows)
        if per_record:
            # Windows are due in the order of their timestamps (no trigger sets a watermark timer
            # before a window's end): only those ending at or before the watermark can be due.
            times = state.window_times
            due_times = times if watermark >= MAX_TIMESTAMP else times[:bisect_right(times, watermark)]
            order = [self.window_option.window_of(t) for t in due_times]
        else:
            # Only windows that expire or have a due event-time timer can change; visit those in
            # event-time order.
            lateness, ended = self.allowed_lateness, watermark >= MAX_TIMESTAMP
            candidates = []
            for window, ws in state.windows.items():
                if ended or watermark >= window.end - 1 + lateness:
                    candidates.append(window)
                    continue
                for name, time in ws.timers.items():
                    if time <= watermark and name.endswith(_WATERMARK_SUFFIX):
                        candidates.append(window)
                        break
            order = sorted(candidates, key=lambda w: (w.end, w.start))
        for window in order:
            ws = state.windows[window]
            expired = self.is_expired(window, watermark)
            if ws.closed:
                if expired:
                    del state.windows[window]
                continue
            due = [k for k, t in ws.timers.items() if k.endswith(_WATERMARK) and t <= watermark]
            fired = False
            if due:
                for k in due:
                    del ws.timers[k]
                ctx = self._context(window, ws, watermark, processing_time)
                if self.trigger.should_fire(ctx):
                    finished = self.trigger.on_fire(ctx) or expired
                    emission.outputs.extend(
                        self.emitter.emit(key, window, ws, watermark, from_watermark=True, finished=finished))
                    fired = True
            if expired and not fired and not ws.closed and ws.pending:
                # Garbage collection fires what the trigger has not (Beam's FIRE_IF_NON_EMPTY).
                emission.outputs.extend(
                    self.emitter.emit(key, window, ws, watermark, from_watermark=True, finished=True))
            if expired:
                del state.windows[window]
        if per_record:
            times = state.window_times
            cut = len(times) if watermark >= MAX_TIMESTAMP else bisect_right(times, watermark - self.allowed_lateness)
            del times[:cut]
        if self.kind == "per_record" and len(state.buffer):
            assert isinstance(self.window_option, SlidingWindows)
            if watermark >= MAX_TIMESTAMP:
                state.buffer.purge_up_to(MAX_TIMESTAMP)
            else:
                state.buffer.purge_up_to(watermark - self.window_option.size - self.allowed_lateness)
        return emission

    def on_processing_time(self, key: Optional[Hashable], state: KeyState, watermark: int,
                           processing_time: int) -> Emission:
        """Fire windows whose processing-time timers are due."""
        emission = Emission()
        for window in sorted(state.windows):
            ws = state.windows[window]
            if ws.closed:
                continue
            due = [k for k, t in ws.timers.items() if k.endswith(_PROCESSING) and t <= processing_time]
            if not due:
                continue
            for k in due:
                del ws.timers[k]
            ctx = self._context(window, ws, watermark, processing_time)
            if self.trigger.should_fire(ctx):
                finished = self.trigger.on_fire(ctx)
                emission.outputs.extend(
                    self.emitter.emit(key, window, ws, watermark, from_watermark=False, finished=finished))
        return emission

    def next_event_time(self, state: KeyState) -> Optional[int]:
        """The earliest watermark at which this key has something to do (a timer or an expiry)."""
        if not isinstance(self.window_option, SlidingWindows):
            best: Optional[int] = None
            lateness = self.allowed_lateness
            for window, ws in state.windows.items():
                due = window.end - 1 + lateness
                if best is None or due < best:
                    best = due
                for name, time in ws.timers.items():
                    if time < best and name.endswith(_WATERMARK_SUFFIX):
                        best = time
            return best
        times = []
        if isinstance(self.window_option, SlidingWindows):
            # Every window is due no earlier than its end: only windows ending within the allowed
            # lateness of the first one can be due before it expires.
            live = state.window_times
            windows = [] if not live else [self.window_option.window_of(t) for t in
                                           live[:bisect_right(live, live[0] + self.allowed_lateness)]]
            candidates = [(w, state.windows[w]) for w in windows]
        else:
            candidates = list(state.windows.items())
        for window, ws in candidates:
            times.append(window.max_timestamp + self.allowed_lateness)
            times.extend(ws.timer_times(_WATERMARK))
        if len(state.buffer) and isinstance(self.window_option, SlidingWindows):
            times.append(state.buffer.times[0] + self.window_option.size + self.allowed_lateness)
        return min(times) if times else None

    def next_processing_time(self, state: KeyState) -> Optional[int]:
        if not self._uses_processing_time:
            return None
        times = [t for ws in state.windows.values() if not ws.closed for t in ws.timer_times(_PROCESSING)]
        return min(times) if times else None

    def process_batch(self, key: Optional[Hashable], state: KeyState, elements: list[CoreElement],
                      watermark: int, processing_time: int) -> Emission:
        """One key's share of a micro-batch (or of one local-runner bundle)."""
        return self.run_batch(key, state, watermark, processing_time, bool(elements),
                              lambda: self.process_elements(key, state, elements, watermark, processing_time))

    def run_batch(self, key: Optional[Hashable], state: KeyState, watermark: int, processing_time: int,
                  has_elements: bool, add_elements: Callable[[], Emission]) -> Emission:
        """The order of one batch, whatever form its elements take (``add_elements`` adds them).

        Order: windows the watermark has reached, then due processing-time timers, then the
        elements (judged against ``watermark``), then anything the elements made due.  The order is
        fixed so that a Spark batch and a no-data batch before it produce the same panes as one
        batch doing both.
        """
        emission = Emission()
        due = self.next_event_time(state)
        if due is not None and due <= watermark:
            emission.extend(self.on_watermark(key, state, watermark, processing_time))
        due = self.next_processing_time(state)
        if due is not None and due <= processing_time:
            emission.extend(self.on_processing_time(key, state, watermark, processing_time))
        if has_elements:
            emission.extend(add_elements())
            due = self.next_event_time(state)
            if due is not None and due <= watermark:
                emission.extend(self.on_watermark(key, state, watermark, processing_time))
        return emission
