"""Per-record sliding windows (Kafka Streams KIP-450): each element defines ``[ts - size, ts]``."""
from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ..config import Duration
from .base import Window, WindowOption


class SlidingWindows(WindowOption):
    """Both bounds inclusive; stored half-open as ``[ts - size, ts + 1)``.

    The window's aggregate covers every element of the key inside it, including elements that
    arrive later out of order; an element therefore also updates the existing windows of later
    elements within ``size`` of it.
    """

    kind: ClassVar[str] = "per_record"
    _positional: ClassVar[tuple[str, ...]] = ("size",)
    size: Duration = Field(ge=0, description="time difference in ms covered before each element")

    def assign(self, ts: int) -> list[Window]:
        return [Window(ts - self.size, ts + 1)]

    def window_of(self, ts: int) -> Window:
        return Window(ts - self.size, ts + 1)

    def last_window_max_timestamp(self, ts: int) -> int:
        """The latest window an element at ``ts`` can belong to ends at ``ts + size``."""
        return ts + self.size
