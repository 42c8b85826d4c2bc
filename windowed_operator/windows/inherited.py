"""Window propagation: keep the window an upstream operator already gave each record."""
from __future__ import annotations

from typing import ClassVar

from .base import Window, WindowOption


class InheritedWindows(WindowOption):
    """Used when an operator has no window option: each record carries ``window_start``/``window_end``."""

    kind: ClassVar[str] = "inherited"

    def assign(self, ts: int) -> list[Window]:
        raise TypeError("inherited windows come from the records, not from their timestamps")
