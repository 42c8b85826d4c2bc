"""Per-key sessions that merge when an element's proto-session touches them."""
from __future__ import annotations

from typing import ClassVar, Iterable, Optional

from pydantic import Field

from ..config import Duration
from .base import MergingWindowOption, Window


class SessionWindows(MergingWindowOption):
    """An element makes ``[ts, ts + min_gap)``; it joins a session containing that interval, merges
    every session it overlaps, or stands alone.  Merging is per bundle (``merge_windows``)."""

    _positional: ClassVar[tuple[str, ...]] = ("min_gap",)
    min_gap: Duration = Field(gt=0, description="inactivity gap in ms that closes a session")

    def assign(self, ts: int) -> list[Window]:
        return [Window(ts, ts + self.min_gap)]

    def merge_windows(self, windows: Iterable[Window]) -> list[tuple[list[Window], Window]]:
        """Overlapping windows chain into one (Beam's MergeOverlappingIntervalWindows): sorted by
        start, a window joins the group whose span it overlaps; touching windows do not merge."""
        groups: list[tuple[list[Window], Window]] = []
        members: list[Window] = []
        span: Optional[Window] = None
        for window in sorted(set(windows)):
            if span is not None and span.intersects(window):
                members.append(window)
                span = span.span(window)
                continue
            if len(members) > 1:
                groups.append((members, span))  # type: ignore[arg-type]
            members, span = [window], window
        if len(members) > 1:
            groups.append((members, span))  # type: ignore[arg-type]
        return groups
