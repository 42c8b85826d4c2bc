"""Per-key sessions that merge when an element's proto-session touches them.

The gap is fixed (``SessionWindows(30_000)``) or read from each element (``SessionWindows(gap=
"gap_ms")``, Flink's dynamic gap, Spark's gap column): an element makes ``[ts, ts + gap)`` either
way, and merging does not care where a proto-session's end came from (the merged session ends at
the largest end).
"""
from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any, ClassVar, Iterable, Optional

from pydantic import Field, model_validator

from ..config import Duration, duration_text_millis
from ..time import to_duration_millis
from .base import MergingWindowOption, Window

#: A text that reads as a duration: given as ``gap=`` it is almost surely a fixed gap, not a field.
_LOOKS_LIKE_DURATION = re.compile(r"^\s*\d")


class GapError(ValueError):
    """An element's session gap cannot be used (the message names the value and why)."""


def read_gap(raw: Any) -> int:
    """The session gap in ms of an element's gap value: a number of milliseconds, a ``timedelta``
    (Spark's day-time intervals arrive as such) or a text such as ``"10s"`` / ``"10 seconds"``; it
    must be positive, since a proto-session must contain its element."""
    if raw is None or (isinstance(raw, float) and math.isnan(raw)) or type(raw).__name__ == "NaTType":
        raise GapError(f"the session gap is null ({raw!r})")
    if isinstance(raw, bool):
        raise GapError(f"the session gap {raw!r} is a boolean, not a duration")
    try:
        if isinstance(raw, str):
            gap = duration_text_millis(raw)
        elif hasattr(raw, "to_pytimedelta"):  # pandas / numpy timedeltas
            gap = to_duration_millis(raw.to_pytimedelta())
        elif type(raw).__name__ == "timedelta64":
            gap = to_duration_millis(timedelta(microseconds=int(raw.astype("timedelta64[us]").astype("int64"))))
        elif isinstance(raw, float):
            if not math.isfinite(raw):
                raise GapError(f"the session gap {raw!r} is not finite")
            gap = math.ceil(raw)  # fractional milliseconds: the proto-session still contains its element
        elif hasattr(raw, "__index__"):
            gap = int(raw)
        else:
            gap = to_duration_millis(raw)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, GapError):
            raise
        raise GapError(f"the session gap {raw!r} is not a duration (ms, a timedelta or a text such as '10s'): "
                       f"{exc}") from None
    if gap <= 0:
        shown = f"{raw!r}" if str(raw) == str(gap) else f"{raw!r} ({gap} ms)"
        raise GapError(f"the session gap {shown} is not positive: a session must contain its element")
    return gap


def read_gaps(raw: Any) -> tuple[Any, Any]:
    """``read_gap`` for a column of gaps (a numpy array): the gaps in ms, and which were readable
    (the others are bad elements: the reader says why).  Numbers and timedeltas are read with array
    operations by ``read_gap``'s rules (fractional milliseconds rounded up, timedeltas in whole
    milliseconds, positive); other values one by one."""
    import numpy as np

    values = np.asarray(raw)
    gaps = np.zeros(len(values), dtype=np.int64)
    if values.dtype.kind in "iu":
        ok = values > 0
        gaps[ok] = values[ok]
    elif values.dtype.kind == "f":
        ok = np.isfinite(values) & (np.ceil(np.where(np.isfinite(values), values, 0)) > 0)
        gaps[ok] = np.ceil(values[ok])
    elif values.dtype.kind == "m":
        nanos = values.astype("timedelta64[ns]").astype(np.int64)
        ok = ~np.isnat(values)
        gaps[ok] = nanos[ok] // 1_000_000  # (whole milliseconds, as ``read_gap`` reads a timedelta)
        ok &= gaps > 0
    else:
        ok = np.zeros(len(values), dtype=bool)
        for i, value in enumerate(values.tolist()):
            try:
                gaps[i] = read_gap(value)
                ok[i] = True
            except GapError:
                pass
    return gaps, ok


class SessionWindows(MergingWindowOption):
    """An element makes ``[ts, ts + gap)``; it joins a session containing that interval, merges
    every session it overlaps, or stands alone.  Merging is per bundle (``merge_windows``).

    ``min_gap``: one gap for every element.  ``gap``: each element's own gap, read like the key
    and timestamp: a field or column name, a callable on the element, or on Spark a column
    expression (``F.when(...)``); its values are milliseconds, timedeltas or texts like ``"10s"``.
    An element whose gap is null, not a duration or not positive is a bad element
    (``invalid_gap``)."""

    _positional: ClassVar[tuple[str, ...]] = ("min_gap",)
    _misuse_hint: ClassVar[str] = "give one gap: SessionWindows(30_000) or SessionWindows(gap='<field>')"
    min_gap: Optional[Duration] = Field(default=None, gt=0, description="inactivity gap in ms that closes a session")
    gap: Any = Field(default=None, description="each element's gap: a field or column name, a callable on the "
                                               "element, or a Spark column expression")

    @model_validator(mode="after")
    def _one_gap(self) -> "SessionWindows":
        if (self.min_gap is None) == (self.gap is None):
            raise ValueError("SessionWindows needs exactly one of min_gap (one gap for every element, "
                             "SessionWindows(30_000)) and gap (each element's, SessionWindows(gap='gap_ms'))"
                             + (f"; got min_gap={self.min_gap} and gap={self.gap!r}" if self.gap is not None else ""))
        gap = self.gap
        if gap is None:
            return self
        if isinstance(gap, str):
            if _LOOKS_LIKE_DURATION.match(gap):
                raise ValueError(f"gap={gap!r} names the field holding each element's gap; for one gap for every "
                                 f"element write SessionWindows({gap!r}) (min_gap)")
            if not gap.strip():
                raise ValueError("gap='' names no field: give the field or column holding each element's gap")
        elif isinstance(gap, (bool, int, float, timedelta)):
            raise ValueError(f"gap={gap!r} is a fixed gap: write SessionWindows({gap!r}) (min_gap); gap= reads each "
                             "element's gap from a field, a callable or a Spark column")
        elif not callable(gap) and not type(gap).__module__.startswith("pyspark"):
            raise ValueError(f"gap={gap!r} ({type(gap).__name__}) is not a field name, a callable or a Spark column")
        return self

    def __repr_args__(self) -> Any:
        """Only the gap given (a fixed-gap repr is what checkpoints' fingerprints of it always held)."""
        return [(name, value) for name, value in super().__repr_args__() if value is not None]

    def describe(self) -> str:
        """The option's repr, for messages."""
        return repr(self)

    @property
    def dynamic(self) -> bool:
        """Whether each element carries its own gap (``ElementReader`` reads it into the proto-session)."""
        return self.gap is not None

    def assign(self, ts: int) -> list[Window]:
        """The proto-session ``[ts, ts + min_gap)`` (a gap per element is read from the element: ``proto_session``)."""
        if self.min_gap is None:
            raise TypeError("sessions with per-element gaps are assigned from the element (proto_session), "
                            "not from its timestamp alone")
        return [Window(ts, ts + self.min_gap)]

    @staticmethod
    def proto_session(ts: int, gap: int) -> Window:
        """The proto-session of an element at ``ts`` with its own ``gap``: ``[ts, ts + gap)``."""
        return Window(ts, ts + gap)

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


def element_gap(window: Any) -> Any:
    """The per-element gap extractor of a window option (None: the window needs no field of the element)."""
    return window.gap if isinstance(window, SessionWindows) and window.dynamic else None
