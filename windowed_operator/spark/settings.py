"""The library's own boolean Spark settings (``spark.windowed_operator.*``): one reading for all.

``true`` or ``false`` in any case; unset, the default.  Another value is refused, naming the
setting: read as the default, a typo in ``false`` would silently keep the path it was meant to
switch off.
"""
from __future__ import annotations

from typing import Any

from .errors import SparkOperatorError


def read_flag(conf: Any, name: str, default: bool = True) -> bool:
    """``conf``: a session's ``RuntimeConfig`` (classic or Connect)."""
    value = conf.get(name, None)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise SparkOperatorError(f"{name} must be true or false, not {value!r}")
    return text == "true"
