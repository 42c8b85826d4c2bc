"""Durations in user-facing configuration, and the one configuration base every option class uses.

``Config`` (frozen pydantic models that also take positional arguments, one rule for all) is
defined in ``accumulations.config``, the lowest package, and named here too for the library's
own option classes (windows, watermarks, operators).
"""
from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Union

from pydantic import BeforeValidator

from accumulations.config import REQUIRED, Config

from .time import to_duration_millis

__all__ = ["Config", "REQUIRED", "Duration", "DurationLike", "duration_text_millis"]


_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
#: Spark's interval words ("10 seconds", "1 minute": what ``session_window`` gap columns hold) read too.
_UNIT_WORDS = {"millisecond": "ms", "milliseconds": "ms", "second": "s", "seconds": "s", "sec": "s", "secs": "s",
               "minute": "m", "minutes": "m", "mins": "m", "hour": "h", "hours": "h", "day": "d", "days": "d"}
_DURATION_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d|" + "|".join(
    sorted(_UNIT_WORDS, key=len, reverse=True)) + r")\s*$", re.IGNORECASE)


def duration_text_millis(text: str) -> int:
    """Milliseconds of a text such as ``"10s"``, ``"500ms"``, ``"2h"`` or Spark's ``"10 seconds"``."""
    match = _DURATION_TEXT.match(text)
    if match is None:
        raise ValueError(f"duration {text!r} is not a number with a unit (ms, s, m, h, d, or seconds, minutes...), "
                         "e.g. '10s'")
    unit = match.group(2).lower()
    return round(float(match.group(1)) * _UNITS[_UNIT_WORDS.get(unit, unit)])


def _duration(value: Any) -> Any:
    """Milliseconds from an int, a ``timedelta`` or a text such as ``"10s"``, ``"500ms"``, ``"1m"``,
    ``"2h"`` (pipeline files); anything else is left for the int validator to reject."""
    if isinstance(value, str):
        return duration_text_millis(value)
    if isinstance(value, (timedelta, float)) and not isinstance(value, bool):
        try:
            return to_duration_millis(value)
        except TypeError:
            return value
    return value


#: Milliseconds; a ``timedelta`` is converted.  Range checks are added per field.
Duration = Annotated[int, BeforeValidator(_duration)]


#: What a duration parameter takes, for signatures: int ms, a ``timedelta`` or a text such as ``"10s"``.
DurationLike = Union[int, float, timedelta, str]
