"""Tumbling and hopping (sliding by a period) windows aligned to an offset."""
from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import Field, ValidationInfo, field_validator

from ..config import Duration
from .base import Window, WindowOption
from .pane_layout import HoppingPaneLayout


class TimeWindows(WindowOption):
    """``TimeWindows(size)`` tumbles; ``TimeWindows(size).slide_by(period)`` hops.

    An element at ``ts`` belongs to every ``[s, s + size)`` with ``s ≡ offset (mod period)`` that
    contains it, so size/period windows when the period divides the size.
    """

    _positional: ClassVar[tuple[str, ...]] = ("size", "offset")
    size: Duration = Field(gt=0, description="window length in ms")
    offset: Duration = Field(default=0, description="alignment of window starts in ms")
    period: Optional[Duration] = Field(default=None, gt=0, description="hop between window starts in ms")

    @field_validator("period")
    @classmethod
    def _period_within_size(cls, period: Optional[int], info: ValidationInfo) -> Optional[int]:
        size = info.data.get("size")
        if period is not None and size is not None and period > size:
            raise ValueError(
                f"slide period {period} ms is larger than the window size {size} ms; "
                "elements between windows would belong to no window"
            )
        return period

    def slide_by(self, period: int) -> "TimeWindows":
        """Hopping windows: the same size, a new window every ``period`` ms (Beam's sliding windows).

        ``TimeWindows(60_000).slide_by(1_000)`` gives each element the 60 windows of 60 s that contain it.
        """
        return TimeWindows(size=self.size, offset=self.offset, period=period)

    @property
    def step(self) -> int:
        """The distance between window starts: ``period`` for hopping windows, else ``size``."""
        return self.period if self.period is not None else self.size

    def assign(self, ts: int) -> list[Window]:
        """Every ``[s, s + size)`` with ``s`` congruent to ``offset`` modulo the step that contains ``ts``."""
        step = self.step
        last_start = ts - (ts - self.offset) % step
        windows = []
        start = last_start
        while start > ts - self.size:
            windows.append(Window(start, start + self.size))
            start -= step
        windows.reverse()
        return windows

    def pane_layout(self) -> HoppingPaneLayout:
        return HoppingPaneLayout.of(self.size, self.step, self.offset)

    def assign_array(self, ts: Any) -> tuple[Any, Any, Any]:
        import numpy as np

        step = self.step
        last_start = ts - (ts - self.offset) % step
        per_element = -(-self.size // step)  # windows that can contain one timestamp
        hops = np.arange(per_element, dtype=np.int64)[:, None] * step
        starts = (last_start[None, :] - hops).ravel()
        index = np.tile(np.arange(len(ts), dtype=np.int64), per_element)
        keep = starts > ts[index] - self.size
        starts, index = starts[keep], index[keep]
        return starts, starts + self.size, index
