"""Base for user-facing configuration: frozen pydantic models that also take positional arguments.

``TimeWindows(10_000)`` reads better than ``TimeWindows(size=10_000)``; pydantic models only take
keywords, so each model lists the fields its positional arguments fill.
"""
from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict

from .time import to_duration_millis


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


class _OptionClass(type(BaseModel)):  # type: ignore[misc]  # pydantic's model metaclass
    def __dir__(cls) -> list[str]:
        """``help()`` of an option class shows its own API (its signature, docstring and the
        methods the library defines), not the ~400 lines of pydantic internals and BaseModel
        methods every model inherits; they still work (``model_dump``, ``model_copy``...) and an
        instance's ``dir()`` still lists them."""
        names = {"__init__"}
        for klass in cls.__mro__:
            if klass not in (BaseModel, object):
                names.update(name for name in vars(klass) if not name.startswith("_") and name != "model_config")
        return sorted(names)


class Config(BaseModel, metaclass=_OptionClass):
    """Frozen, strict-about-extra-fields model with positional-argument support."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    _positional: ClassVar[tuple[str, ...]] = ()
    #: Said when a call gives more positional arguments than the class takes (what was probably meant).
    _misuse_hint: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(self._positional):
            raise TypeError(
                f"{type(self).__name__} takes at most {len(self._positional)} positional argument(s) "
                f"({', '.join(self._positional) or 'none'}), got {len(args)}"
                + (f": {self._misuse_hint}" if self._misuse_hint else "")
            )
        for name, value in zip(self._positional, args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__} got {name!r} both positionally and by keyword")
            kwargs[name] = value
        super().__init__(**kwargs)
