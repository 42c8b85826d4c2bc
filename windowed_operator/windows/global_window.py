"""One window for all time; it closes only at the end of input (watermark at infinity)."""
from __future__ import annotations

from typing import Any

from ..time import END_OF_GLOBAL_WINDOW, MIN_TIMESTAMP
from .base import Window, WindowOption
from .pane_layout import GlobalPaneLayout

GLOBAL_WINDOW = Window(MIN_TIMESTAMP, END_OF_GLOBAL_WINDOW + 1)


class GlobalWindow(WindowOption):
    """One window for all time: it closes only at the end of input, so it needs a trigger that fires
    before then (early firings, or composite triggers) to emit anything earlier."""

    def assign(self, ts: int) -> list[Window]:
        """The global window, for every timestamp."""
        return [GLOBAL_WINDOW]

    def pane_layout(self) -> GlobalPaneLayout:
        return GlobalPaneLayout.of()

    def assign_array(self, ts: Any) -> tuple[Any, Any, Any]:
        import numpy as np

        n = len(ts)
        return (np.full(n, GLOBAL_WINDOW.start, dtype=np.int64), np.full(n, GLOBAL_WINDOW.end, dtype=np.int64),
                np.arange(n, dtype=np.int64))
