"""What every pane obeys, whichever engine fires it: written once, for one pane (Python scalars: the
object engine, ``firing.PaneEmitter``) and for many (numpy arrays: the table engines,
``columnar_panes.ColumnarEmitter`` and the pane table), with the same expressions.

- **Timing** (Beam's ``PaneInfoTracker``, over ``time_rules``): EARLY until the watermark passes the
  window's end; then ON_TIME for the first pane after it while the window held its output watermark
  at its end, LATE otherwise.  A session merged away after firing retracts its last pane EARLY or
  LATE by the same end rule.
- **Index**: a pane's index counts the panes emitted before it; the non-speculative index counts the
  panes fired after the end was reached (whether emitted or not).
- **Suppression**: a re-fired pane whose value did not change is not emitted under only-updated panes
  (nor its retraction), and a value that is no result (``Accumulation.is_result``: a join's window
  without a pair) is not emitted at all.
- **Overflow**: an integer output outside int64 (Spark's bigint) is an error naming its window.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable

import numpy as np

from accumulations.base import Accumulation
from accumulations.int64 import first_outside_int64, fits_int64

from ..panes import Timing, WindowOverflowError
from ..time_rules import is_end_reached, is_on_time
from ..windows.base import Window

#: The timings by code (``timing_code``): 0 EARLY, 1 ON_TIME, 2 LATE.
TIMINGS = (Timing.EARLY, Timing.ON_TIME, Timing.LATE)
#: Their values, indexed by an array of codes (the table engines' timing column).
TIMING_VALUES = np.array([timing.value for timing in TIMINGS], dtype=object)


def timing_code(max_timestamp: Any, watermark: Any, nonspeculative_index: Any, held: Any) -> Any:
    """A pane's timing as a code of ``TIMINGS``, fired at ``watermark``: 0 before the end is
    reached, then 1 if ON_TIME (``time_rules.is_on_time``), else 2.  Scalars or arrays alike."""
    return is_end_reached(max_timestamp, watermark) * (2 - is_on_time(max_timestamp, watermark,
                                                                      nonspeculative_index, held))


def absorbed_timing_code(max_timestamp: Any, watermark: Any) -> Any:
    """The timing code of the retraction of a session merged away after firing: EARLY before its
    end, LATE after (it can no longer be on time)."""
    return 2 * is_end_reached(max_timestamp, watermark)


def emitted(refired: Any, unchanged: Any, only_updated: bool, result: Any = True) -> Any:
    """Whether a firing emits its pane: not a re-fired pane (``refired``) whose value is ``unchanged``
    under only-updated panes, and only a value that is a result.  Scalars (truthy or not) or boolean
    arrays alike (``~`` of a Python bool is -1 or -2, whose lowest bit is the negation)."""
    if not only_updated:
        return result
    return ~(refired & unchanged) & result


def every_value_a_result(accumulation: Accumulation) -> bool:
    """Whether every value of the accumulation is a result (it does not override ``is_result``): what
    the pane table, which fires no per-window state, requires (``columnar.supports_columnar``)."""
    return type(accumulation).is_result is Accumulation.is_result


def results(accumulation: Accumulation, values: Any) -> Any:
    """Which of ``values`` are results: True where every value of the accumulation is one
    (``every_value_a_result``), else a boolean array of its answers."""
    if every_value_a_result(accumulation):
        return True
    return np.fromiter((bool(accumulation.is_result(v)) for v in values), dtype=bool, count=len(values))


def check_outputs(values: np.ndarray, label: str, column: Any, key_at: Callable[[int], Hashable],
                  window_at: Callable[[int], Window]) -> np.ndarray:
    """``values``, or ``WindowOverflowError`` for the first integer among them outside int64 (naming
    the operator, the column it folds, and the key and window at that position)."""
    bad = first_outside_int64(values)
    if bad is not None:
        raise WindowOverflowError(label, column, key_at(bad), window_at(bad), values[bad])
    return values


def check_output(value: Any, label: str, column: Any, key: Hashable, window: Window) -> Any:
    """One pane's ``value``: ``check_outputs`` for a single pane."""
    if not fits_int64(value):
        raise WindowOverflowError(label, column, key, window, value)
    return value


__all__ = ["TIMINGS", "TIMING_VALUES", "timing_code", "absorbed_timing_code", "emitted", "every_value_a_result",
           "results",
           "check_outputs", "check_output"]
