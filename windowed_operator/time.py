"""Time inside the core is integer milliseconds since the epoch (UTC).

Public APIs accept ``datetime``/``timedelta`` too; conversion happens once, at the edge, so the
core never has to wonder which unit a number is in.  The bounds follow Beam's: they are the
largest millisecond values whose microsecond form still fits in a signed 64-bit integer, which
keeps them representable as Spark ``TimestampType`` values.
"""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any, Optional

MIN_TIMESTAMP: int = -9_223_372_036_854_775
MAX_TIMESTAMP: int = 9_223_372_036_854_775
#: Beam ends the global window one day before the end of time, so that its expiry timer can still fire.
END_OF_GLOBAL_WINDOW: int = MAX_TIMESTAMP - 86_400_000

#: The times a Python ``datetime`` (and so a collected Spark timestamp) can hold: years 1 to 9999.
#: Spark stores the bounds above, but cannot hand them to Python (measured: collecting a global
#: window's pane fails with a long overflow), so output times outside are shown as null.
MIN_SHOWN_TIME: int = -62_135_596_800_000
MAX_SHOWN_TIME: int = 253_402_300_799_999

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def shown_time(ms: Optional[int]) -> Optional[int]:
    """An output time as rows show it: None beyond what a timestamp can hold (the global window's
    bounds and the timestamp of its end-of-time pane)."""
    return ms if ms is not None and MIN_SHOWN_TIME <= ms <= MAX_SHOWN_TIME else None


def shown_datetime(ms: Optional[int]) -> Optional[datetime]:
    """An output time as a UTC datetime, as rows show it (None beyond what a timestamp holds)."""
    shown = shown_time(ms)
    return None if shown is None else datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=shown)


def time_text(ms: int) -> str:
    """A time as the CLI shows it to people: UTC, ``2026-01-01 00:00:30.000`` (ISO-8601's date and
    time, to the millisecond); the bounds of time and of the global window by name, and anything
    else a ``datetime`` cannot hold as its epoch milliseconds."""
    named = {MIN_TIMESTAMP: "the start of time", MAX_TIMESTAMP: "the end of time",
             END_OF_GLOBAL_WINDOW: "the end of the global window"}
    if ms in named:
        return named[ms]
    if shown_time(ms) is None:
        return f"{ms} ms"
    return (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


class TimestampError(ValueError):
    """A value that cannot be read as an event time."""


def to_millis(value: Any) -> int:
    """Read an instant (int ms, float ms, datetime, date, ISO-8601 string) as int milliseconds."""
    if isinstance(value, bool):
        raise TimestampError(f"cannot use a boolean {value!r} as a timestamp")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TimestampError(f"cannot use {value!r} as a timestamp")
        return int(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if isinstance(value, date):
        return to_millis(datetime(value.year, value.month, value.day, tzinfo=timezone.utc))
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return to_millis(datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            raise TimestampError(f"cannot parse {value!r} as a timestamp (int ms or ISO-8601 expected)") from None
    if hasattr(value, "to_pydatetime"):  # pandas.Timestamp without importing pandas
        return to_millis(value.to_pydatetime())
    raise TimestampError(f"cannot use {type(value).__name__} {value!r} as a timestamp")


def to_duration_millis(value: Any) -> int:
    """Read a duration (int ms or timedelta) as int milliseconds."""
    if isinstance(value, bool):
        raise TypeError(f"cannot use a boolean {value!r} as a duration")
    if isinstance(value, timedelta):
        return (value.days * 86_400 + value.seconds) * 1000 + value.microseconds // 1000
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a duration (int ms or timedelta expected)")


#: The end of event time here (9e12 ms, 2255-03-14; larger values overflow the nanosecond
#: timestamps pandas uses): an element at or after it is a bad element (``event_time_in_range``),
#: and on Spark the end-of-input marker row (``apply(end_of_input=<column>)``) moves the watermark
#: to it, past every window a real element can have.
END_OF_INPUT = 9_000_000_000_000
#: The longest watermark delay an end-of-input marker can see through under an *upstream*
#: watermark (whose delay the operator does not know): Spark's watermark after the marker is
#: ``END_OF_INPUT - delay``, and every watermark from ``END_OF_INPUT_WATERMARK`` on is taken as the
#: end of input (MAX_TIMESTAMP), which closes every window, the global one included.
MAX_END_OF_INPUT_DELAY = 366 * 86_400_000
END_OF_INPUT_WATERMARK = END_OF_INPUT - MAX_END_OF_INPUT_DELAY


def latest_event_time(now: Optional[int] = None, max_future_skew: Optional[int] = None) -> int:
    """The latest event time an element may have: before ``END_OF_INPUT``, and, when the operator
    sets ``max_future_skew``, at most that far ahead of processing time ``now``."""
    if now is None or max_future_skew is None:
        return END_OF_INPUT - 1
    return min(END_OF_INPUT - 1, now + max_future_skew)


def event_time_in_range(ts: Any, latest: Any = END_OF_INPUT - 1) -> Any:
    """Whether an element's event time (int ms, or an int64 array) is one this library handles (see
    ``latest_event_time``).  The rule for every path; later times are bad elements."""
    return ts <= latest
