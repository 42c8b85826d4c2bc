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

from .. import time_rules
from ..panes import DropReason, DroppedElement
from ..windows.base import Window
from .core import Emission, WindowedCore
from .key_state import KeyState
from .range_ops import lexsort_ints


def supports_vectorized(core: WindowedCore) -> bool:
    """Windows assigned by timestamp alone, or inherited (each element's window given: a chained
    stage without a window option), and an accumulation with ``fold_array``."""
    return core.kind in ("assigned", "inherited") and core.accumulation.supports_fold_array()


Windows = tuple[np.ndarray, np.ndarray]


def process_arrays(core: WindowedCore, key: Optional[Hashable], state: KeyState, timestamps: np.ndarray,
                   values: Optional[np.ndarray], watermark: int, processing_time: int,
                   element_of: Callable[[int], Any], windows: Optional[Windows] = None,
                   weights: Optional[np.ndarray] = None, retracted: Optional[np.ndarray] = None) -> Emission:
    """``core.process_elements`` for arrays: ``values`` holds what the accumulation folds (None for
    accumulations that read nothing, such as Count); ``element_of(i)`` rebuilds element i for the
    late-data output, only for dropped elements; ``windows`` (starts, ends) gives each element's
    window where the core inherits windows instead of assigning them.  With ``weights``, each
    "element" is a partial accumulator standing for that many elements of one pane, all of whose
    windows it belongs to (folded before the shuffle: ``spark/scan/prefold.py``): values are merged.
    ``retracted`` marks upstream retractions (a chained stage's input): their values are what they
    undo, folded out of their window with the accumulation's inverse (``core.accumulate_into``)."""
    emission = Emission()
    n = len(timestamps)
    if n == 0:
        return emission
    if core.kind == "inherited":
        assert windows is not None, "an operator that inherits windows needs each element's window"
        starts, ends, index = windows[0], windows[1], np.arange(n, dtype=np.int64)
    else:
        starts, ends, index = core.window_option.assign_array(timestamps)
    order = lexsort_ints((index, ends, starts))  # each window's elements in input order (what keeps rows keeps it)
    starts, ends, index = starts[order], ends[order], index[order]
    first = np.concatenate(([0], np.flatnonzero((np.diff(starts) != 0) | (np.diff(ends) != 0)) + 1))
    counts = np.diff(np.append(first, len(index))).tolist()
    earliest, latest = segment_holds(timestamps[index], first, watermark)
    window_starts, window_ends = starts[first].tolist(), ends[first].tolist()
    acc = core.accumulation
    window_states = state.windows
    seg_live = [False] * len(counts)
    seg_open = [False] * len(counts)
    open_segments = []  # (segment, window, window state or None)
    for seg, (start, end) in enumerate(zip(window_starts, window_ends)):
        window = Window(start, end)
        if core.is_expired(window, watermark):
            continue
        seg_live[seg] = True
        ws = window_states.get(window)
        if ws is not None and ws.closed:
            continue
        seg_open[seg] = True
        open_segments.append((seg, window, ws))
    if len(open_segments) < len(counts):  # some elements may be dropped: decide per element
        seg_of_pair = np.repeat(np.arange(len(counts)), counts)
        accepted = np.zeros(n, dtype=bool)
        accepted[index[np.asarray(seg_open)[seg_of_pair]]] = True
        not_expired = np.zeros(n, dtype=bool)
        not_expired[index[np.asarray(seg_live)[seg_of_pair]]] = True
        for i in np.flatnonzero(~accepted).tolist():
            reason = DropReason.CLOSED_WINDOW if not_expired[i] else DropReason.EXPIRED
            emission.dropped.append(DroppedElement(reason, element_of(i), key, int(timestamps[i]), watermark))
    # Values in window order (Count, the one accumulation reading no column, folds the indices).
    pair_values = values[index] if values is not None else index
    undone: dict[int, list] = {}
    if weights is not None:  # partial accumulators: merged, counted by the elements they stand for
        counts = np.add.reduceat(weights[index], first).tolist() if len(index) else []
        partials = [_merge_all(acc, pair_values[lo:hi]) for lo, hi in zip(first.tolist(), [*first[1:].tolist(),
                                                                                         len(index)])]
    elif retracted is not None and open_segments and retracted.any():
        partials, undone = _fold_with_retractions(acc, pair_values, retracted[index], first, counts)
    else:
        partials = acc.fold_segments(pair_values, first) if open_segments else []
    touched: list[Window] = []
    for seg, window, ws in open_segments:
        if ws is None:
            ws = window_states[window] = core.new_window_state()
        core.accumulate_into(window, ws, partials[seg], counts[seg], watermark, processing_time, earliest[seg],
                             latest[seg], undone.get(seg, ()))
        touched.append(window)
    core.fire_ready(key, state, touched, watermark, processing_time, emission)
    return emission


def _fold_with_retractions(acc: Any, pair_values: np.ndarray, pair_retracted: np.ndarray, first: np.ndarray,
                           counts: list[int]) -> tuple[list, dict[int, list]]:
    """Per segment, the fold of its elements that are not retractions, and the values of those that
    are (in order), which the window then subtracts."""
    segment = np.repeat(np.arange(len(counts)), counts)
    kept = ~pair_retracted
    partials = [acc.default_accumulated_value() for _ in counts]
    kept_segment = segment[kept]
    if len(kept_segment):
        starts = np.flatnonzero(np.concatenate(([True], np.diff(kept_segment) != 0)))
        for seg, partial in zip(kept_segment[starts].tolist(), acc.fold_segments(pair_values[kept], starts)):
            partials[seg] = partial
    undone: dict[int, list] = {}
    for seg, value in zip(segment[pair_retracted].tolist(), pair_values[pair_retracted].tolist()):
        undone.setdefault(seg, []).append(value)
    return partials, undone


def _merge_all(acc: Any, partials: Any) -> Any:
    merged = acc.default_accumulated_value()
    for partial in partials:
        merged = acc.merge(merged, partial)
    return merged


_NO_HOLD_MIN = np.iinfo(np.int64).max
_NO_HOLD_MAX = np.iinfo(np.int64).min


def _held_extremes(ufunc: np.ufunc, stamps: np.ndarray, first: np.ndarray, none: int) -> list[Optional[int]]:
    """Per segment, the extreme held timestamp, or None where no element of it holds one."""
    return [None if v == none else v for v in ufunc.reduceat(stamps, first).tolist()]


def segment_holds(stamps: np.ndarray, first: np.ndarray, watermark: int) -> tuple[list, list]:
    """Per segment of ``stamps`` (starting at ``first``), the earliest and latest timestamp at or
    after the watermark, which hold a pane's EARLIEST/LATEST output timestamp (None if none)."""
    held = time_rules.sets_element_hold(stamps, watermark)
    return (_held_extremes(np.minimum, np.where(held, stamps, _NO_HOLD_MIN), first, _NO_HOLD_MIN),
            _held_extremes(np.maximum, np.where(held, stamps, _NO_HOLD_MAX), first, _NO_HOLD_MAX))


def process_batch_arrays(core: WindowedCore, key: Optional[Hashable], state: KeyState, timestamps: np.ndarray,
                         values: Optional[np.ndarray], watermark: int, processing_time: int,
                         element_of: Callable[[int], Any], windows: Optional[Windows] = None,
                         weights: Optional[np.ndarray] = None, retracted: Optional[np.ndarray] = None) -> Emission:
    """``core.process_batch`` with the elements as arrays (the same order of steps)."""
    return core.run_batch(key, state, watermark, processing_time, len(timestamps) > 0,
                          lambda: process_arrays(core, key, state, timestamps, values, watermark, processing_time,
                                                 element_of, windows, weights, retracted))


__all__ = ["supports_vectorized", "process_arrays", "process_batch_arrays"]
