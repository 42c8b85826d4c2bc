"""The semantic core: one key's state + a bundle of its elements + clocks -> panes and new state.

Runners own the clocks and the per-key state; the core owns every rule.  Each call mutates the
``KeyState`` it is given and returns what was emitted; ``next_event_time``/``next_processing_time``
tell a runner when the key next needs waking.  Per bundle, elements are first added to their
windows, then every touched window's trigger is asked once whether to fire, which is how count
triggers are evaluated once per bundle, as in Beam.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Hashable, Iterable, Optional, Sequence

from accumulations.base import Accumulation
from triggers.base import TimeDomain, TriggerContext
from triggers.option import TriggerOption

from .. import time_rules
from ..panes import DropReason, DroppedElement, RetractedValue, TimestampCombiner
from ..time import MAX_TIMESTAMP
from ..windows.base import Window, WindowOption
from ..windows.sliding_windows import SlidingWindows
from . import window_families
from .firing import CoreElement, Emission, PaneEmitter
from .key_state import KeyState, WindowState

_WATERMARK = TimeDomain.WATERMARK.value
_PROCESSING = TimeDomain.PROCESSING_TIME.value
_WATERMARK_SUFFIX = "@" + _WATERMARK


class WindowedCore:
    """The object engine: Beam's windowing for one key at a time, element by element or on arrays
    (``vectorized``).  Assigns windows, runs the trigger state machines, fires, accumulates and expires
    windows on a ``KeyState`` (``process_batch``, ``on_watermark``, ``on_processing_time``), with
    every time rule from ``time_rules``.  The reference the table engines are property-tested against."""

    def __init__(self, window_option: WindowOption, accumulation: Accumulation, trigger_option: TriggerOption,
                 allowed_lateness: int = 0,
                 timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW, *,
                 label: str = "operator", value_column: Optional[str] = None) -> None:
        self.window_option = window_option
        self.accumulation = accumulation
        self.trigger_option = trigger_option
        self.trigger = trigger_option.to_trigger()
        self.allowed_lateness = allowed_lateness
        self.emitter = PaneEmitter(accumulation, trigger_option, timestamp_combiner, label, value_column)
        self.kind = window_option.kind
        self._uses_processing_time = self.trigger.uses_processing_time()

    # -- time rules (stated in ``time_rules``) ------------------------------------------------
    def is_expired(self, window: Window, watermark: int) -> bool:
        return bool(time_rules.is_expired(window.max_timestamp, self.allowed_lateness, watermark))

    def expiry_due(self, window: Window) -> int:
        return time_rules.expiry_due(window.max_timestamp, self.allowed_lateness)

    def context(self, window: Window, ws: WindowState, watermark: int, processing_time: int) -> TriggerContext:
        return TriggerContext(window, ws.trigger_state, ws.timers, watermark, processing_time)

    @staticmethod
    def _timer_hold(window: Window, ws: WindowState) -> bool:
        """Whether the trigger's pending end-of-window timer holds the window's output watermark at its
        end (read before the step consumes the timer: it holds until it has fired)."""
        return any(time_rules.timer_holds(t, window.max_timestamp) for t in ws.timer_times(_WATERMARK))

    def new_window_state(self) -> WindowState:
        return WindowState(acc=self.accumulation.default_accumulated_value())

    # -- elements -----------------------------------------------------------------------------
    def process_elements(self, key: Optional[Hashable], state: KeyState, elements: Sequence[CoreElement],
                         watermark: int, processing_time: int, origins: Optional[Sequence[Any]] = None) -> Emission:
        """Add a bundle, then ask each window it touched, once, whether to fire.  ``origins``: what
        each element was before it was read (the input's row), which a dropped element reports (its
        value read, without them)."""
        emission = Emission()
        origin_of = (lambda i, value: origins[i]) if origins is not None else (lambda i, value: value)
        if self.kind == "merging":
            touched = window_families.add_to_sessions(self, key, state, elements, watermark, processing_time, emission,
                                                       origin_of)
        else:
            touched = {}
            for i, (ts, value, inherited) in enumerate(elements):
                if self.kind == "per_record":
                    reason = window_families.add_per_record(self, state, ts, value, watermark, processing_time, touched)
                else:
                    if self.kind == "inherited":
                        assert inherited is not None  # (the reader gives each element its window when inheriting)
                        windows = [inherited]
                    else:
                        windows = self.window_option.assign(ts)
                    reason = self._add_to_windows(state, windows, ts, value, watermark, processing_time, touched)
                if reason is not None:
                    emission.dropped.append(DroppedElement(reason, origin_of(i, value), key, ts, watermark))
        self.fire_ready(key, state, touched, watermark, processing_time, emission)
        if self.kind == "merging":
            for window, merged in touched.items():
                # After the bundle (its panes read the output watermark as it was before it), a merge
                # re-places the END_OF_WINDOW hold at the merged session's end (``time_rules``).
                ws = state.windows.get(window) if merged else None
                if ws is not None:
                    ws.on_time_hold = ws.on_time_hold and bool(time_rules.sets_element_hold(window.max_timestamp,
                                                                                            watermark))
        return emission

    def fire_ready(self, key: Optional[Hashable], state: KeyState, windows: Iterable[Window], watermark: int,
                   processing_time: int, emission: Emission) -> None:
        """Fire each of ``windows`` (in window order) whose trigger says so."""
        for window in sorted(windows):
            ws = state.windows.get(window)
            if ws is None or ws.closed:
                continue
            self._fire_if_ready(key, window, ws, watermark, processing_time, emission)

    def _fire_if_ready(self, key: Optional[Hashable], window: Window, ws: WindowState, watermark: int,
                       processing_time: int, emission: Emission) -> None:
        """Emit the window's pane if its trigger says so (after an element, or a processing-time timer)."""
        ctx = self.context(window, ws, watermark, processing_time)
        if self.trigger.should_fire(ctx):
            timer_hold = self._timer_hold(window, ws)
            finished = self.trigger.on_fire(ctx)
            emission.outputs.extend(self.emitter.emit(key, window, ws, watermark, finished=finished,
                                                      timer_hold=timer_hold))

    def accumulate_into(self, window: Window, ws: WindowState, partial: Any, count: int, watermark: int,
                        processing_time: int, earliest: Optional[int], latest: Optional[int],
                        retracted: Sequence[Any] = ()) -> None:
        """Fold ``count`` elements, already folded into ``partial``, into a window (the array path).
        ``earliest``/``latest`` are their extreme timestamps at or after the watermark (None if
        none): only those hold the pane's output timestamp.  ``retracted`` holds the values of the
        upstream retractions among the ``count`` elements (not in ``partial``): they come out after
        the rest is merged in, so an accumulator never holds less than its retractions undo (an
        upstream pane is always folded in before its retraction arrives, so the element path's
        order gives the same accumulator)."""
        ws.acc = self.accumulation.merge(ws.acc, partial)
        for value in retracted:
            ws.acc = self.accumulation.subtract(ws.acc, value)
        self._note_elements(window, ws, count, earliest, latest, watermark, processing_time)

    def accumulate_element(self, window: Window, ws: WindowState, ts: int, value: Any, watermark: int,
                         processing_time: int) -> None:
        if isinstance(value, RetractedValue):
            ws.acc = self.accumulation.subtract(ws.acc, value.value)
        else:
            ws.acc = self.accumulation.accumulate(ws.acc, value)
        held = ts if time_rules.sets_element_hold(ts, watermark) else None
        self._note_elements(window, ws, 1, held, held, watermark, processing_time)

    def _note_elements(self, window: Window, ws: WindowState, count: int, earliest: Optional[int],
                       latest: Optional[int], watermark: int, processing_time: int) -> None:
        ws.add_pending(count)
        ws.hold(earliest)
        ws.hold(latest)
        if time_rules.sets_element_hold(window.max_timestamp, watermark):
            ws.on_time_hold = True
        self.trigger.on_element(self.context(window, ws, watermark, processing_time), count)

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
                ws = state.windows[window] = self.new_window_state()
            self.accumulate_element(window, ws, ts, value, watermark, processing_time)
            touched[window] = None
        return None

    # -- clocks -------------------------------------------------------------------------------
    def on_watermark(self, key: Optional[Hashable], state: KeyState, watermark: int,
                     processing_time: int) -> Emission:
        """Fire windows whose event-time timers are due, then expire and purge old windows."""
        emission = Emission()
        lateness = self.allowed_lateness
        per_record = isinstance(self.window_option, SlidingWindows)
        if per_record:
            option = self.window_option
            assert isinstance(option, SlidingWindows)
            # No trigger sets a watermark timer before a window's end, so only windows whose end is
            # reached can be due, and they are due in the order of their timestamps (max timestamps).
            times = state.window_times
            reached = len(times) if watermark >= MAX_TIMESTAMP else \
                bisect_right(times, time_rules.latest_max_timestamp_reached(watermark))
            order = [option.window_of(t) for t in times[:reached]]
        else:
            # Only windows that expire or have a due event-time timer can change; visit those in
            # event-time order.
            candidates = []
            for window, ws in state.windows.items():
                if self.is_expired(window, watermark) or any(
                        time_rules.is_timer_due(t, watermark) for t in ws.timer_times(_WATERMARK)):
                    candidates.append(window)
            order = sorted(candidates, key=lambda w: (w.end, w.start))
        for window in order:
            ws = state.windows[window]
            expired = self.is_expired(window, watermark)
            if ws.closed:
                if expired:
                    del state.windows[window]
                continue
            due = [k for k, t in ws.timers.items() if k.endswith(_WATERMARK_SUFFIX)
                   and time_rules.is_timer_due(t, watermark)]
            timer_hold = self._timer_hold(window, ws)
            fired = False
            if due:
                for k in due:
                    del ws.timers[k]
                ctx = self.context(window, ws, watermark, processing_time)
                if self.trigger.should_fire(ctx):
                    finished = self.trigger.on_fire(ctx) or expired
                    emission.outputs.extend(self.emitter.emit(key, window, ws, watermark, finished=finished,
                                                              timer_hold=timer_hold))
                    fired = True
            if expired and not fired and not ws.closed and ws.pending:
                # Garbage collection fires what the trigger has not (Beam's FIRE_IF_NON_EMPTY).
                emission.outputs.extend(self.emitter.emit(key, window, ws, watermark, finished=True,
                                                          timer_hold=timer_hold))
            if expired:
                del state.windows[window]
        if per_record:
            assert isinstance(self.window_option, SlidingWindows)
            times = state.window_times
            ended = watermark >= MAX_TIMESTAMP
            del times[:len(times) if ended else
                      bisect_right(times, time_rules.latest_max_timestamp_expired(watermark, lateness))]
            if len(state.buffer):
                # An element is needed until the last window that can cover it (``size`` later) expires.
                state.buffer.purge_up_to(MAX_TIMESTAMP if ended else
                                         time_rules.latest_max_timestamp_expired(watermark, lateness)
                                         - self.window_option.size)
        return emission

    def on_processing_time(self, key: Optional[Hashable], state: KeyState, watermark: int,
                           processing_time: int) -> Emission:
        """Fire windows whose processing-time timers are due."""
        emission = Emission()
        for window in sorted(state.windows):
            ws = state.windows[window]
            if ws.closed:
                continue
            due = [k for k, t in ws.timers.items() if k.endswith(_PROCESSING)
                   and time_rules.is_timer_due(t, processing_time)]
            if not due:
                continue
            for k in due:
                del ws.timers[k]
            self._fire_if_ready(key, window, ws, watermark, processing_time, emission)
        return emission

    def next_event_time(self, state: KeyState) -> Optional[int]:
        """The first watermark at which this key has something to do (a due timer or an expiry)."""
        if isinstance(self.window_option, SlidingWindows):
            # Every window is due no earlier than its end: only windows ending within the allowed
            # lateness of the first one can be due before it expires.
            live = state.window_times
            windows = [] if not live else [self.window_option.window_of(t) for t in
                                           live[:bisect_right(live, live[0] + self.allowed_lateness)]]
            candidates = [(w, state.windows[w]) for w in windows]
        else:
            candidates = list(state.windows.items())
        best: Optional[int] = None
        for window, ws in candidates:
            due = self.expiry_due(window)
            if best is None or due < best:
                best = due
            for name, time in ws.timers.items():
                if time < best and name.endswith(_WATERMARK_SUFFIX):
                    best = time
        if len(state.buffer) and isinstance(self.window_option, SlidingWindows):
            due = time_rules.expiry_due(self.window_option.last_window_max_timestamp(state.buffer.times[0]),
                                        self.allowed_lateness)
            best = due if best is None else min(best, due)
        return best

    def next_processing_time(self, state: KeyState) -> Optional[int]:
        if not self._uses_processing_time:
            return None
        times = [t for ws in state.windows.values() if not ws.closed for t in ws.timer_times(_PROCESSING)]
        return min(times) if times else None

    def event_time_work_due(self, state: KeyState, watermark: int) -> bool:
        """Whether ``on_watermark`` has something to do for this key at ``watermark``."""
        due = self.next_event_time(state)
        return due is not None and bool(time_rules.is_timer_due(due, watermark))

    def processing_time_work_due(self, state: KeyState, processing_time: int) -> bool:
        """Whether ``on_processing_time`` has something to do for this key now."""
        due = self.next_processing_time(state)
        return due is not None and bool(time_rules.is_timer_due(due, processing_time))

    def process_batch(self, key: Optional[Hashable], state: KeyState, elements: list[CoreElement],
                      watermark: int, processing_time: int, origins: Optional[Sequence[Any]] = None) -> Emission:
        """One key's share of a micro-batch (or of one local-runner bundle); ``origins``: as
        ``process_elements``'s."""
        return self.run_batch(key, state, watermark, processing_time, bool(elements),
                              lambda: self.process_elements(key, state, elements, watermark, processing_time,
                                                            origins))

    def run_batch(self, key: Optional[Hashable], state: KeyState, watermark: int, processing_time: int,
                  has_elements: bool, add_elements: Callable[[], Emission]) -> Emission:
        """The order of one batch, whatever form its elements take (``add_elements`` adds them).

        Order: windows the watermark has reached, then due processing-time timers, then the
        elements (judged against ``watermark``), then anything the elements made due.  The order is
        fixed so that a Spark batch and a no-data batch before it produce the same panes as one
        batch doing both.
        """
        emission = Emission()
        if self.event_time_work_due(state, watermark):
            emission.extend(self.on_watermark(key, state, watermark, processing_time))
        if self.processing_time_work_due(state, processing_time):
            emission.extend(self.on_processing_time(key, state, watermark, processing_time))
        if has_elements:
            emission.extend(add_elements())
            if self.event_time_work_due(state, watermark):
                emission.extend(self.on_watermark(key, state, watermark, processing_time))
        return emission
