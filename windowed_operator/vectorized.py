"""The vectorized path of the core: one key's micro-batch as arrays instead of element by element.

For windows assigned by timestamp alone (tumbling, hopping, cumulative, global) and accumulations
with a vectorized form (``fold_array``), a bundle is: assign every (element, window) pair with array
arithmetic, decide lateness per window, fold each live window's values with one numpy call, and
only then ask each touched window's trigger, once, whether to fire.  That is exactly what the
element-by-element path does for a bundle (count triggers see the bundle's count; lateness is
judged against the watermark at the start of the bundle), so the two paths produce the same panes;
``tests/test_vectorized.py`` runs both on the same streams.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Optional

import numpy as np

from .core import Emission, WindowedCore
from .panes import DropReason, DroppedElement
from .state import KeyState
from .windows.base import Window


def supports_vectorized(core: WindowedCore) -> bool:
    """Windows assigned by timestamp alone and an accumulation with ``fold_array``."""
    return core.kind == "assigned" and core.accumulation.supports_fold_array()


def process_arrays(core: WindowedCore, key: Optional[Hashable], state: KeyState, timestamps: np.ndarray,
                   values: Optional[np.ndarray], watermark: int, processing_time: int,
                   element_of: Callable[[int], Any]) -> Emission:
    """``core.process_elements`` for arrays: ``values`` holds what the accumulation folds (None for
    accumulations that read nothing, such as Count); ``element_of(i)`` rebuilds element i for the
    late-data output, only for dropped elements."""
    emission = Emission()
    n = len(timestamps)
    if n == 0:
        return emission
    starts, ends, index = core.window_option.assign_array(timestamps)
    order = np.lexsort((ends, starts))
    starts, ends, index = starts[order], ends[order], index[order]
    change = np.flatnonzero((np.diff(starts) != 0) | (np.diff(ends) != 0)) + 1
    bounds = np.concatenate(([0], change, [len(starts)]))
    accepted = np.zeros(n, dtype=bool)
    all_expired = np.ones(n, dtype=bool)
    pair_values = values[index] if values is not None else index
    pair_ts = timestamps[index]
    acc = core.accumulation
    touched: list[tuple[Window, Any]] = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        window = Window(int(starts[lo]), int(ends[lo]))
        members = index[lo:hi]
        if core.is_expired(window, watermark):
            continue
        all_expired[members] = False
        ws = state.windows.get(window)
        if ws is not None and ws.closed:
            continue
        accepted[members] = True
        if ws is None:
            ws = state.windows[window] = core._new_window_state()
        ws.acc = acc.merge(ws.acc, acc.fold_array(pair_values[lo:hi]))
        window_ts = pair_ts[lo:hi]
        ws.note_element(int(window_ts.min()), 0)
        ws.note_element(int(window_ts.max()), hi - lo)
        core.trigger.on_element(core._context(window, ws, watermark, processing_time), hi - lo)
        touched.append((window, ws))
    for i in np.flatnonzero(~accepted).tolist():
        reason = DropReason.EXPIRED if all_expired[i] else DropReason.CLOSED_WINDOW
        emission.dropped.append(DroppedElement(reason, element_of(i), key, int(timestamps[i]), watermark))
    for window, ws in touched:  # already in window order
        ctx = core._context(window, ws, watermark, processing_time)
        if core.trigger.should_fire(ctx):
            finished = core.trigger.on_fire(ctx)
            emission.outputs.extend(core.emitter.emit(key, window, ws, watermark, from_watermark=False,
                                                      finished=finished))
    return emission


def process_batch_arrays(core: WindowedCore, key: Optional[Hashable], state: KeyState, timestamps: np.ndarray,
                         values: Optional[np.ndarray], watermark: int, processing_time: int,
                         element_of: Callable[[int], Any]) -> Emission:
    """``core.process_batch`` with the elements as arrays (the same order of steps)."""
    return core.run_batch(key, state, watermark, processing_time, len(timestamps) > 0,
                          lambda: process_arrays(core, key, state, timestamps, values, watermark, processing_time,
                                                 element_of))


__all__ = ["supports_vectorized", "process_arrays", "process_batch_arrays"]
