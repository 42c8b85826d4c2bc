"""Cumulative windows (Flink's CUMULATE): growing windows that share a start, reset every max_size."""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator

from ..config import Duration
from .base import Window, WindowOption
from .pane_layout import CumulativePaneLayout


class CumulativeWindows(WindowOption):
    """Windows ``[s, s + step)``, ``[s, s + 2·step)``, …, ``[s, s + max_size)`` for each ``s`` aligned to max_size."""

    _positional: ClassVar[tuple[str, ...]] = ("max_size", "step")
    max_size: Duration = Field(gt=0, description="length of the largest window in ms")
    step: Duration = Field(gt=0, description="growth of each successive window in ms")
    offset: Duration = Field(default=0, description="alignment of window starts in ms")

    @field_validator("step")
    @classmethod
    def _step_divides_max_size(cls, step: int, info: ValidationInfo) -> int:
        max_size = info.data.get("max_size")
        if max_size is not None and step > max_size:
            raise ValueError(f"step {step} ms is larger than max_size {max_size} ms")
        if max_size is not None and max_size % step:
            raise ValueError(f"step {step} ms does not divide max_size {max_size} ms")
        return step

    def assign(self, ts: int) -> list[Window]:
        """The windows ``[s, s + k * step)`` of the cycle starting at ``s`` that contain ``ts`` (Flink's CUMULATE)."""
        start = ts - (ts - self.offset) % self.max_size
        first = (ts - start) // self.step + 1
        return [Window(start, start + k * self.step) for k in range(first, self.max_size // self.step + 1)]

    def pane_layout(self) -> CumulativePaneLayout:
        return CumulativePaneLayout.of(self.max_size, self.step, self.offset)

    def assign_array(self, ts: Any) -> tuple[Any, Any, Any]:
        import numpy as np

        start = ts - (ts - self.offset) % self.max_size
        first = (ts - start) // self.step + 1
        count = self.max_size // self.step
        ks = np.arange(1, count + 1, dtype=np.int64)[:, None]
        index = np.tile(np.arange(len(ts), dtype=np.int64), count)
        keep = (ks >= first[None, :]).ravel()
        ends = (start[None, :] + ks * self.step).ravel()
        return start[index[keep]], ends[keep], index[keep]
