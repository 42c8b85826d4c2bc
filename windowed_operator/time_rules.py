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
- an element whose timestamp equals the watermark is on time;
- watermark holds and pane timing (``WatermarkHold``, ``PaneInfoTracker``), below.

Watermark holds.  A window holds the output watermark back while it has an *element hold* or a
pending *end-of-window timer* of its trigger:

- an element sets an element hold at its output time -- its timestamp under the EARLIEST and
  LATEST timestamp combiners, the window's max timestamp under END_OF_WINDOW -- only when that
  time is not before the watermark (``WatermarkHold.addHolds``): under EARLIEST/LATEST an element
  behind the watermark sets none, under END_OF_WINDOW an element arriving after the window's end
  sets none (``sets_element_hold``).  The held times of EARLIEST/LATEST are also the pane's output
  timestamp;
- every pane, EARLY ones included, releases the window's element holds (``extractAndRelease``);
- when sessions merge (a proto-session inside a session included), EARLIEST/LATEST holds combine,
  and the END_OF_WINDOW hold is re-placed at the merged session's max timestamp by the same test,
  so it is dropped once that end is reached (``WatermarkHold.onMerge``) -- for the bundles after the
  merge's: a bundle's panes read the output watermark as the bundle before left it;
- the trigger's end-of-window timer (``AfterWatermark``: the default trigger and ``at_watermark()``
  with early/late firings), set only before the end, holds the watermark at the max timestamp
  while pending, up to and including the step at which it fires (``timer_holds``); other timers
  hold nothing that matters here;
- a pane is ON_TIME when the end is reached, only EARLY panes came before, and the window's
  output watermark is not after its max timestamp -- it still holds it there (``is_on_time``).
  Otherwise it is EARLY before the end and LATE after.  So after an EARLY pane, a window holds
  at its end only through elements that arrived on time since that pane or through its
  trigger's pending end-of-window timer.

Beam's output watermark is the whole stage's, which other windows and keys hold back too; here each
window's own holds decide (see the README's "Differences from Beam").

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


def sets_element_hold(output_time: Any, watermark: Any) -> Any:
    """Whether an element arriving at ``watermark`` sets an element hold at ``output_time``: its
    timestamp (EARLIEST/LATEST: the hold is also the pane's output timestamp) or the window's max
    timestamp (END_OF_WINDOW: the element arrived before the window's end)."""
    return output_time >= watermark


def timer_holds(due: Any, max_timestamp: Any) -> Any:
    """Whether a pending event-time timer of the trigger, due at ``due``, holds the window's output
    watermark at or before its max timestamp (the end-of-window timer does)."""
    return due <= end_of_window_due(max_timestamp)


def is_on_time(max_timestamp: Any, watermark: Any, nonspeculative_index: Any, held: Any) -> Any:
    """Whether a pane fired at ``watermark`` is ON_TIME: the end is reached, no ON_TIME or LATE pane
    came before (``nonspeculative_index`` 0) and the window ``held`` its output watermark at its max
    timestamp (an element hold, or its trigger's end-of-window timer pending or firing now)."""
    return is_end_reached(max_timestamp, watermark) & (nonspeculative_index == 0) & held
