"""One window for all time; it closes only at the end of input (watermark at infinity)."""
from __future__ import annotations

from ..time import END_OF_GLOBAL_WINDOW, MIN_TIMESTAMP
from .base import Window, WindowOption

GLOBAL_WINDOW = Window(MIN_TIMESTAMP, END_OF_GLOBAL_WINDOW + 1)


class GlobalWindow(WindowOption):
    def assign(self, ts: int) -> list[Window]:
        return [GLOBAL_WINDOW]
