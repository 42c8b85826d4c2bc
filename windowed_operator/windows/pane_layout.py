"""Panes: the slices of event time that windows of an assigned family are unions of.

Hopping windows of size 60 s every 1 s overlap 60-fold, but each is the union of 60 one-second
slices, and every slice belongs to the same run of windows.  Keeping one partial per slice (a
*pane*, of length gcd(size, slide)) instead of one per window divides state and per-element work by
size/slide; a window's value is combined from its panes when it fires.  Cumulative windows are
unions of their step-long panes; tumbling windows are their own single pane; the global window is
one pane.

A layout answers, for arrays of timestamps or pane starts, the three questions the pane-sharing
path asks (``windowed_operator.engine.columnar``): which pane holds a timestamp, which window ends cover a
pane (always a run of ends ``step`` apart), and where the window with a given end starts.  The
family's own ``assign`` stays the definition; ``tests/test_windows.py`` checks the layouts
against it.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Any

import numpy as np

from ..time import END_OF_GLOBAL_WINDOW, MIN_TIMESTAMP


@dataclass(frozen=True)
class PaneLayout:
    """Panes are ``pane`` long, aligned to ``offset``; window ends are the integers congruent to
    ``phase`` modulo ``step``."""

    pane: int
    step: int
    phase: int
    offset: int

    def pane_start(self, ts: np.ndarray) -> np.ndarray:
        return ts - (ts - self.offset) % self.pane

    def end_range(self, pane_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last end of the windows that contain the pane (inclusive, ``step`` apart)."""
        raise NotImplementedError

    def window_start(self, end: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def window_length(self) -> int:
        """The longest window's length, a whole number of panes (the pane log keeps a window's
        length of panes in one bucket: ``windowed_operator.state.pane_log``)."""
        raise NotImplementedError

    def align_up(self, x: Any) -> Any:
        """The smallest window end >= x."""
        return x + (self.phase - x) % self.step

    def align_down(self, x: Any) -> Any:
        """The largest window end <= x."""
        return x - (x - self.phase) % self.step

    def first_end_after(self, max_timestamp: Any) -> Any:
        """The smallest window end whose max timestamp (end - 1) is after ``max_timestamp``."""
        return self.align_up(max_timestamp + 2)

    def last_end_up_to(self, max_timestamp: Any) -> Any:
        """The largest window end whose max timestamp is at most ``max_timestamp``."""
        return self.align_down(max_timestamp + 1)


@dataclass(frozen=True)
class HoppingPaneLayout(PaneLayout):
    """``TimeWindows(size, offset).slide_by(slide)`` (tumbling when slide == size)."""

    size: int

    @classmethod
    def of(cls, size: int, slide: int, offset: int) -> "HoppingPaneLayout":
        return cls(pane=gcd(size, slide), step=slide, phase=(offset + size) % slide, offset=offset, size=size)

    def end_range(self, pane_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.align_up(pane_start + self.pane), self.align_down(pane_start + self.size)

    def window_start(self, end: np.ndarray) -> np.ndarray:
        return end - self.size

    @property
    def window_length(self) -> int:
        return self.size


@dataclass(frozen=True)
class CumulativePaneLayout(PaneLayout):
    """``CumulativeWindows(max_size, step, offset)``: windows grow by ``step`` from a start aligned to max_size."""

    max_size: int

    @classmethod
    def of(cls, max_size: int, step: int, offset: int) -> "CumulativePaneLayout":
        return cls(pane=step, step=step, phase=offset % step, offset=offset, max_size=max_size)

    def end_range(self, pane_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        block = pane_start - (pane_start - self.offset) % self.max_size
        return pane_start + self.pane, block + self.max_size

    def window_start(self, end: np.ndarray) -> np.ndarray:
        last = end - 1
        return last - (last - self.offset) % self.max_size

    @property
    def window_length(self) -> int:
        return self.max_size


@dataclass(frozen=True)
class GlobalPaneLayout(PaneLayout):
    """The global window: one pane, one window, ending after END_OF_GLOBAL_WINDOW."""

    @classmethod
    def of(cls) -> "GlobalPaneLayout":
        return cls(pane=1, step=1, phase=0, offset=0)

    def pane_start(self, ts: np.ndarray) -> np.ndarray:
        return np.full(len(ts), MIN_TIMESTAMP, dtype=np.int64)

    def end_range(self, pane_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        end = np.full(len(pane_start), END_OF_GLOBAL_WINDOW + 1, dtype=np.int64)
        return end, end

    def window_start(self, end: np.ndarray) -> np.ndarray:
        return np.full(len(end), MIN_TIMESTAMP, dtype=np.int64)

    @property
    def window_length(self) -> int:
        return self.pane  # (its one pane starts at MIN_TIMESTAMP: one bucket whatever the length)
