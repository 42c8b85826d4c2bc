"""The event-time rules of the Beam model, stated once.

Every engine (the element, array, columnar and per-record paths, the Spark processor's timers and
the pre-aggregation) asks these functions instead of comparing watermarks itself: the 1 ms boundary
is easy to get wrong and was once wrong in seven places.  They follow Beam Java:

- the end of a window is reached once the watermark is *after* its max timestamp
  (``AfterWatermark``'s ``endOfWindowReached``: ``watermark > max_timestamp``, i.e.
  ``watermark >= end``); until then a pane is EARLY (``PaneInfoTracker``);
- a window expires once ``max_timestamp + allowed_lateness`` is *before* the watermark
  (``LateDataUtils``: ``watermark > max_timestamp + allowed_lateness``); its state is purged and
  elements whose windows have all expired are dropped; the end of input (a watermark at
  ``MAX_TIMESTAMP``) expires every window;
- an element whose timestamp equals the watermark is on time; only elements at or after the
  watermark hold back a pane's output timestamp (``WatermarkHold``: an element behind the
  watermark sets no hold).

Timers are kept as *due times*: the first watermark at which they are due (``watermark >= due``),
which is also how Spark fires an event-time timer.  So the end-of-window timer of a window is due
at ``max_timestamp + 1`` and its expiry at ``max_timestamp + allowed_lateness + 1``.

Each function works on Python ints and, elementwise, on numpy int64 arrays.
"""
from __future__ import annotations

from typing import Any

from .time import MAX_TIMESTAMP


def is_end_reached(max_timestamp: Any, watermark: Any) -> Any:
    """Whether the watermark has passed the window's end (its max timestamp): ON_TIME/LATE, not EARLY."""
    return watermark > max_timestamp


def is_expired(max_timestamp: Any, allowed_lateness: int, watermark: Any) -> Any:
    """Whether the window is past its allowed lateness (or input ended): dropped, purged."""
    return (watermark >= MAX_TIMESTAMP) | (watermark > max_timestamp + allowed_lateness)


def end_of_window_due(max_timestamp: Any) -> Any:
    """The first watermark at which ``is_end_reached`` holds: when the end-of-window timer is due."""
    return max_timestamp + 1


def expiry_due(max_timestamp: Any, allowed_lateness: int) -> Any:
    """The first watermark at which ``is_expired`` holds: when the window's state is purged."""
    return max_timestamp + allowed_lateness + 1


def is_timer_due(due: Any, now: Any) -> Any:
    """A timer fires once its clock reaches its due time: an event-time timer at the watermark ``due``
    (Spark's rule too), a processing-time timer at the processing time ``due`` (Beam's
    ``AfterProcessingTime``: once processing time is past the first element plus the delay)."""
    return now >= due


def latest_max_timestamp_reached(watermark: Any) -> Any:
    """The largest max timestamp whose end is reached at ``watermark`` (for range queries over windows)."""
    return watermark - 1


def latest_max_timestamp_expired(watermark: Any, allowed_lateness: int) -> Any:
    """The largest max timestamp that is expired at ``watermark`` (before the end of input)."""
    return watermark - allowed_lateness - 1


def holds_output_timestamp(timestamp: Any, watermark: Any) -> Any:
    """Whether an element counts for the EARLIEST/LATEST output timestamp of its pane: it arrived at or
    after the watermark (Beam sets no watermark hold for an element behind it)."""
    return timestamp >= watermark
