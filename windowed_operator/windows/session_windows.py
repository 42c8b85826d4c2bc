"""Per-key sessions that merge when an element's proto-session touches them."""
from __future__ import annotations

from typing import ClassVar, Iterable

from pydantic import Field

from ..config import Duration
from .base import MergingWindowOption, Window


class SessionWindows(MergingWindowOption):
    """An element makes ``[ts, ts + min_gap)``; it joins a session containing that interval, merges
    every session it overlaps, or stands alone."""

    _positional: ClassVar[tuple[str, ...]] = ("min_gap",)
    min_gap: Duration = Field(gt=0, description="inactivity gap in ms that closes a session")

    def assign(self, ts: int) -> list[Window]:
        return [Window(ts, ts + self.min_gap)]

    def merge(self, active: Iterable[Window], proto: Window) -> tuple[Window, list[Window]]:
        overlapping = sorted(w for w in active if w.intersects(proto))
        for window in overlapping:
            if window.start <= proto.start and proto.end <= window.end:
                return window, []
        result = proto
        for window in overlapping:
            result = result.span(window)
        return result, overlapping
