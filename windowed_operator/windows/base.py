"""The window value type and the protocol every window family answers."""
from __future__ import annotations

from typing import Any, ClassVar, Iterable, NamedTuple

from ..config import Config


class Window(NamedTuple):
    """Half-open interval ``[start, end)`` of event time in milliseconds."""

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """The window's last timestamp, ``end - 1``: its end is reached once the watermark is past it (``time_rules``)."""
        return self.end - 1

    def contains(self, ts: int) -> bool:
        """Whether ``ts`` lies in ``[start, end)``."""
        return self.start <= ts < self.end

    def intersects(self, other: "Window") -> bool:
        """Whether the two windows share a timestamp (sessions merge when their windows intersect)."""
        return self.start < other.end and other.start < self.end

    def span(self, other: "Window") -> "Window":
        """The smallest window covering both: what two merging sessions become."""
        return Window(min(self.start, other.start), max(self.end, other.end))


class WindowOption(Config):
    """Which windows an element belongs to.

    ``kind`` tells the core how windows are held: ``assigned`` families map a timestamp to a
    fixed set of windows; ``merging`` families (sessions) merge windows as elements arrive;
    ``per_record`` windows (KIP-450 sliding) are defined by the elements themselves.
    """

    kind: ClassVar[str] = "assigned"

    def assign(self, ts: int) -> list[Window]:
        """The windows an element at ``ts`` (int ms) belongs to.

        The core calls it for every element of an operator that assigns windows by timestamp; the
        array and columnar paths use ``assign_array`` and the pane layout where a family has them, and
        must give the same windows.
        """
        raise NotImplementedError

    def assign_array(self, ts: Any) -> tuple[Any, Any, Any]:
        """``assign`` for a numpy array of timestamps: ``(starts, ends, element_index)``, one entry per
        (element, window) pair.  This default loops over distinct timestamps; families override it
        with array arithmetic."""
        import numpy as np

        distinct, inverse = np.unique(ts, return_inverse=True)
        starts, ends, index = [], [], []
        members = [np.flatnonzero(inverse == i) for i in range(len(distinct))]
        for value, idx in zip(distinct.tolist(), members):
            for window in self.assign(value):
                starts.append(np.full(len(idx), window.start, dtype=np.int64))
                ends.append(np.full(len(idx), window.end, dtype=np.int64))
                index.append(idx)
        if not index:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        return np.concatenate(starts), np.concatenate(ends), np.concatenate(index)

    def pane_layout(self) -> Any:
        """The family's ``PaneLayout`` (``windows/pane_layout.py``) when its windows are unions of
        fixed panes; None otherwise."""
        return None

    def describe(self) -> str:
        """A short text naming the family and its parameters, for messages and the pane timeline's title."""
        fields = ", ".join(f"{k}={v}" for k, v in self.model_dump().items())
        return f"{type(self).__name__}({fields})"


class MergingWindowOption(WindowOption):
    kind: ClassVar[str] = "merging"

    def merge_windows(self, windows: Iterable[Window]) -> list[tuple[list[Window], Window]]:
        """Beam's ``WindowFn.mergeWindows``: the groups of ``windows`` (a bundle's proto-windows and
        the key's active windows) that become one window, each as ``(members, result)``; windows
        that merge with nothing are left out."""
        raise NotImplementedError
