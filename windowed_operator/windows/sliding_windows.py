"""Per-record sliding windows (Kafka Streams KIP-450): each element defines ``[ts - size, ts]``."""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from ..config import Duration
from .base import Window, WindowOption


class SlidingWindows(WindowOption):
    """Kafka Streams' per-record sliding window (KIP-450): each element ``ts`` defines the window
    ``[ts - size, ts]``.  Not Beam's sliding windows: windows of ``size`` starting every ``period``
    are ``TimeWindows(size).slide_by(period)``.

    Both bounds inclusive; stored half-open as ``[ts - size, ts + 1)``.

    The window's aggregate covers every element of the key inside it, including elements that
    arrive later out of order; an element therefore also updates the existing windows of later
    elements within ``size`` of it.
    """

    kind: ClassVar[str] = "per_record"
    _positional: ClassVar[tuple[str, ...]] = ("size",)
    _misuse_hint: ClassVar[str] = ("SlidingWindows is Kafka Streams' per-record window (KIP-450); for Beam's "
                                   "sliding windows of a size every period use TimeWindows(size).slide_by(period)")
    size: Duration = Field(ge=0, description="time difference in ms covered before each element")

    @model_validator(mode="before")
    @classmethod
    def _refuse_a_period(cls, data: Any) -> Any:
        given = [k for k in ("period", "slide", "every", "advance") if isinstance(data, dict) and k in data]
        if given:
            raise TypeError(f"SlidingWindows takes no {given[0]!r}: {cls._misuse_hint}")
        return data

    def assign(self, ts: int) -> list[Window]:
        """The one window of the record at ``ts``: ``[ts - size, ts]``, inclusive (``end`` is ``ts + 1``)."""
        return [Window(ts - self.size, ts + 1)]

    def window_of(self, ts: int) -> Window:
        """The window of the record at ``ts``, as ``assign`` gives it."""
        return Window(ts - self.size, ts + 1)

    def last_window_max_timestamp(self, ts: int) -> int:
        """The latest window an element at ``ts`` can belong to ends at ``ts + size``."""
        return ts + self.size
