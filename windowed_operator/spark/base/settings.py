"""The library's own boolean Spark settings (``spark.windowed_operator.*``): one reading for all.

``true`` or ``false`` in any case; unset, the default.  Another value is refused, naming the
setting: read as the default, a typo in ``false`` would silently keep the path it was meant to
switch off.
"""
from __future__ import annotations

import sys
import warnings
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


#: Settings a release removed, and what now holds: their alternative won no measured case (issue 55,
#: docs/guides/settings.md), and a checkpoint written with it is moved in at restart
#: (``state.transitions``).  A job that still sets one is warned once per process, and runs.
REMOVED_CONFS: dict[str, str] = {
    "spark.windowed_operator.paneLog": "the default trigger with no allowed lateness always keeps its state in "
                                       "the pane log or the window log",
    "spark.windowed_operator.rowShards": "session and window rows are always kept in row shards",
    "spark.windowed_operator.keyShards": "per-key records are always kept in key shards",
}
_warned: set[str] = set()


def warn_removed_confs(df: Any) -> None:
    """Warn once per removed setting the session still sets (``REMOVED_CONFS``): it is ignored."""
    try:
        conf = df.sparkSession.conf
        found = [name for name in REMOVED_CONFS if name not in _warned and conf.get(name, None) is not None]
    except Exception:  # noqa: BLE001 - a session without a readable conf sets none
        return
    level, frame = 1, sys._getframe(0)  # (the warning names the user's line: the first frame outside the library)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("windowed_operator"):
        level, frame = level + 1, frame.f_back
    for name in found:
        _warned.add(name)
        warnings.warn(f"{name} was removed and is ignored: {REMOVED_CONFS[name]} (checkpoints written with it "
                      "restart; remove the setting from the job)", UserWarning, stacklevel=level)


def conf_flag(df: Any, name: str, default: bool = True) -> bool:
    """A boolean setting of the session (``settings.read_flag``; a conf that cannot be read: ``default``)."""
    try:
        conf = df.sparkSession.conf
    except Exception:  # noqa: BLE001 - a session without a readable conf keeps the default
        return default
    return read_flag(conf, name, default)
