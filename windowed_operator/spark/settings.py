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


#: ``false`` keeps the default trigger's state per key instead of in the pane log or the window log
#: (``SparkPlan.pane_log``).
PANE_LOG_CONF = "spark.windowed_operator.paneLog"
#: ``false`` keeps each key's record in its own state entry instead of in key shards (``SparkPlan.key_shards``).
KEY_SHARDS_CONF = "spark.windowed_operator.keyShards"
#: ``false`` keeps session and window rows in per-key records instead of row shards (``SparkPlan.row_shards``).
ROW_SHARDS_CONF = "spark.windowed_operator.rowShards"


def conf_flag(df: Any, name: str, default: bool = True) -> bool:
    """A boolean setting of the session (``settings.read_flag``; a conf that cannot be read: ``default``)."""
    try:
        conf = df.sparkSession.conf
    except Exception:  # noqa: BLE001 - a session without a readable conf keeps the default
        return default
    return read_flag(conf, name, default)
