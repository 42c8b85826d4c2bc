"""How the object engine adds a bundle to the window families that are more than assigning each
element its windows: merging sessions (Beam's bundle-level merge, ``ReduceFnRunner.processElements``
with its ``MergingActiveWindowSet``) and per-record sliding windows (a running aggregate, KIP-450).
The other families are assigned by their option and added by ``WindowedCore`` itself."""
from __future__ import annotations

from bisect import bisect_right, insort
from typing import Any, Callable, Hashable, Optional, Protocol, Sequence

from accumulations.base import Accumulation
from triggers.base import Trigger, TriggerContext

from .. import time_rules
from ..panes import DropReason, DroppedElement, RetractedValue
from ..windows.base import MergingWindowOption, Window, WindowOption
from ..windows.sliding_windows import SlidingWindows
from .firing import CoreElement, Emission, PaneEmitter
from .key_state import KeyState, WindowState


class Core(Protocol):
    """What the families' adders use of ``core.WindowedCore``."""

    window_option: WindowOption
    accumulation: Accumulation
    trigger: Trigger
    emitter: PaneEmitter
    allowed_lateness: int

    def is_expired(self, window: Window, watermark: int) -> bool: ...

    def new_window_state(self) -> WindowState: ...

    def accumulate_element(self, window: Window, ws: WindowState, ts: int, value: Any, watermark: int,
                           processing_time: int) -> None: ...

    def context(self, window: Window, ws: WindowState, watermark: int, processing_time: int) -> TriggerContext: ...


def add_to_sessions(core: Core, key: Optional[Hashable], state: KeyState, elements: Sequence[CoreElement],
                     watermark: int, processing_time: int, emission: Emission,
                     origin_of: Callable[[int, Any], Any]) -> dict:
    """Beam's bundle-level merge (ReduceFnRunner.processElements): drop elements whose
    proto-session has expired; merge the bundle's proto-sessions with the key's active sessions
    all at once (a session whose trigger finished is no longer active and merges with nothing);
    then add each element to its merged session.  Returns the sessions to consider firing, each
    mapped to whether it is a merge's result."""
    assert isinstance(core.window_option, MergingWindowOption)
    live: list[tuple[int, Any, Window, int]] = []
    for i, (ts, value, read_window) in enumerate(elements):
        # (the reader's proto-session when the gap is the element's; ``assign`` otherwise)
        proto = read_window if read_window is not None else core.window_option.assign(ts)[0]
        if core.is_expired(proto, watermark):
            emission.dropped.append(DroppedElement(DropReason.EXPIRED, origin_of(i, value), key, ts, watermark))
        else:
            live.append((ts, value, proto, i))
    active = [w for w, ws in state.windows.items() if not ws.closed]
    merged_into: dict[Window, Window] = {}
    merges: set[Window] = set()
    for members, result in core.window_option.merge_windows([*active, *(p for _, _, p, _ in live)]):
        for window in members:
            merged_into[window] = result
        if _merge_sessions(core, key, state, members, result, watermark, processing_time, emission):
            merges.add(result)
    touched: dict[Window, bool] = {}
    for ts, value, proto, i in live:
        window = merged_into.get(proto, proto)
        ws = state.windows.get(window)
        if ws is None:
            ws = state.windows[window] = core.new_window_state()
        elif ws.closed:
            emission.dropped.append(DroppedElement(DropReason.CLOSED_WINDOW, origin_of(i, value), key, ts,
                                                   watermark))
            continue
        core.accumulate_element(window, ws, ts, value, watermark, processing_time)
        touched[window] = window in merges
    return touched

def _merge_sessions(core: Core, key: Optional[Hashable], state: KeyState, members: list[Window], result: Window,
                    watermark: int, processing_time: int, emission: Emission) -> bool:
    """One merge group: the active sessions among ``members`` become ``result``; each absorbed
    session that fired is retracted (retracting mode); the trigger merges their states.  Returns
    whether the group merged (not when ``result`` has the bounds of a finished session)."""
    sources = [w for w in members if w in state.windows and not state.windows[w].closed]
    if sources == [result]:
        return True  # new proto-sessions inside an active session: Beam's merge is a no-op there (but holds)
    if result in state.windows:
        # ``result`` has the bounds of a session whose trigger finished.  Beam Java would merge the
        # live sessions into it and never emit them; we keep them as they are, and the bundle's
        # elements of ``result`` are dropped as closed_window, as in Java.
        return False
    merged = core.new_window_state()
    contexts = []
    for window in sources:
        old = state.windows.pop(window)
        emission.outputs.extend(core.emitter.retract_absorbed(key, window, old, watermark))
        merged.absorb(old, core.accumulation.merge)
        contexts.append(core.context(window, old, watermark, processing_time))
    state.windows[result] = merged
    core.trigger.on_merge(core.context(result, merged, watermark, processing_time), contexts)
    return True

def add_per_record(core: Core, state: KeyState, ts: int, value: Any, watermark: int, processing_time: int,
                    touched: dict) -> Optional[DropReason]:
    """O(log n) per element in time order: the windows containing ``ts`` are found by bisection
    (only windows of later elements within ``size``: none for an in-order element), and a new
    window's aggregate comes from the two-stacks running aggregate instead of a rescan.  An
    out-of-order element costs one rebuild of the running aggregate at the next in-order one."""
    option = core.window_option
    assert isinstance(option, SlidingWindows)
    if isinstance(value, RetractedValue):  # Chain refuses this pairing; a hand-fed pane gets a reason
        raise ValueError("per-record sliding windows cannot fold retractions out of their running aggregates")
    if time_rules.is_expired(option.last_window_max_timestamp(ts), core.allowed_lateness, watermark):
        return DropReason.EXPIRED
    acc = core.accumulation
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
        later_ws = state.windows[window]
        if not later_ws.closed and not core.is_expired(window, watermark):
            core.accumulate_element(window, later_ws, ts, value, watermark, processing_time)
            touched[window] = None
            added = True
    own = option.window_of(ts)
    result: Optional[DropReason] = None
    if not core.is_expired(own, watermark):
        ws = state.windows.get(own)
        if ws is None:
            ws = state.windows[own] = core.new_window_state()
            insort(times, ts)
            if in_order:
                before = sliding.query(acc.merge)
                if before is not None:
                    ws.acc = acc.merge(ws.acc, before)
            else:
                for _, partial in buffer.in_range(own.start, ts - 1):
                    ws.acc = acc.merge(ws.acc, partial)
            # Earlier elements the new window covers hold its output timestamp by the same rule
            # as arriving ones.
            for held in buffer.time_range(max(own.start, watermark), ts - 1):
                ws.hold(held)
            core.accumulate_element(own, ws, ts, value, watermark, processing_time)
            touched[own] = None
        elif not ws.closed:
            core.accumulate_element(own, ws, ts, value, watermark, processing_time)
            touched[own] = None
        elif not added:
            result = DropReason.CLOSED_WINDOW
    if in_order:
        sliding.push(ts, acc.accumulate(acc.default_accumulated_value(), value), acc.merge)
    # An element whose own window already expired stays buffered for later windows that cover it.
    return result
