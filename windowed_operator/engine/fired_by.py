"""Why a pane fired (``fired_by=True``): the trigger clause or the event that produced it, the input
watermark at firing and, under a per-partition watermark, the partition holding it back.

Every runner and engine names the cause the same way, from what each pane already says and the
step that made it (``Phase``), so the local runner, the object and the array engines and Spark agree
wherever their panes do:

- ``end_of_input``: the watermark reached the end of input;
- ``watermark``: the watermark passed the window's end (the ON_TIME pane);
- ``expiry``: the window expired at the watermark's advance (past the allowed lateness) and fired
  what it held (a pane that is the window's last);
- ``early_count``, ``early_time``, ``late_count``, ``late_time``: the early or late firing clause
  of ``at_watermark()`` (or the default trigger's late firing on every late element: ``late_count``);
- ``element``, ``processing_time``: a custom trigger, fired while elements were added or as
  processing time advanced;
- ``merge``: the retraction of a session that a merge absorbed (no pane of its window follows in the
  same step); any other retraction has the cause of the pane that follows it.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Hashable, Optional, Sequence

from triggers.option import TriggerOption

from ..panes import Firing
from ..time import MAX_TIMESTAMP


class Phase(IntEnum):
    """The step of a batch that made a pane (a column of every Spark stage's output)."""

    WATERMARK = 0  # the watermark's advance (and, in a fed stage, the upstream panes it released)
    PROCESSING_TIME = 1  # processing time's advance (and the upstream panes it made)
    ELEMENTS = 2  # the batch's elements


@dataclass(frozen=True)
class Clauses:
    """The names of an operator's early and late firing clauses (None: it has none, or a custom
    trigger, whose panes are named by their step)."""

    early: Optional[str]
    late: Optional[str]

    @classmethod
    def of(cls, trigger: TriggerOption) -> "Clauses":
        def name(when: str, firing: Any) -> Optional[str]:
            return None if firing is None else f"{when}_{'count' if firing.count is not None else 'time'}"

        if trigger.kind == "default":
            return cls(None, "late_count")  # (Beam's default trigger: a LATE pane for every late bundle)
        if trigger.kind == "at_watermark":
            return cls(name("early", trigger.early), name("late", trigger.late))
        return cls(None, None)


_BY_STEP = {Phase.WATERMARK: "watermark", Phase.PROCESSING_TIME: "processing_time", Phase.ELEMENTS: "element"}


def cause(phase: int, timing: str, is_last: bool, watermark: int, clauses: Clauses) -> str:
    """The cause of a pane (not a retraction) made by step ``phase`` at ``watermark``."""
    if watermark >= MAX_TIMESTAMP:
        return "end_of_input"
    if timing == "ON_TIME":
        return "watermark"
    if phase == Phase.WATERMARK and is_last:
        return "expiry"
    clause = clauses.early if timing == "EARLY" else clauses.late
    return clause if clause is not None else _BY_STEP[Phase(phase)]


def causes(windows: Sequence[tuple[Optional[Hashable], Any, Any]], timings: Sequence[Optional[str]],
           is_last: Sequence[Any], is_retraction: Sequence[Any], phase: int, watermark: int,
           clauses: Clauses) -> list[Optional[str]]:
    """The cause of each row of one step's output, in order (``windows``: each row's key, start and
    end; a row whose timing is None is no pane: None).  A retraction takes the cause of the next pane
    of its window in the step, or is a merge's."""
    found: list[Optional[str]] = [None] * len(timings)
    following: dict[tuple, str] = {}
    for i in range(len(timings) - 1, -1, -1):
        timing = timings[i]
        if timing is None:
            continue
        if is_retraction[i]:
            found[i] = following.get(windows[i], "merge")
        else:
            found[i] = following[windows[i]] = cause(phase, timing, bool(is_last[i]), watermark, clauses)
    return found


__all__ = ["Clauses", "Firing", "Phase", "cause", "causes"]
