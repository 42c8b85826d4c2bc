"""Which columnar engine serves an operator: the pane table, the session table or the window table
(``columnar``, ``columnar_sessions``, ``columnar_windows``); their per-key records are
``state.records``."""
from __future__ import annotations

from typing import Any, Union

from .columnar import ColumnarCore, supports_columnar
from .columnar_sessions import ColumnarSessions, supports_columnar_sessions
from .columnar_windows import ColumnarWindows, supports_columnar_windows


def supports_columnar_path(window: Any, accumulation: Any, trigger: Any, timestamp_combiner: Any) -> bool:
    """Whether one of the columnar paths serves this operator (``spark.paths.table_engine`` chooses which)."""
    return (supports_columnar(window, accumulation, trigger, timestamp_combiner)
            or supports_columnar_sessions(window, accumulation, trigger, timestamp_combiner)
            or supports_columnar_windows(window, accumulation, trigger, timestamp_combiner))


Engine = Union[ColumnarCore, ColumnarSessions, ColumnarWindows]
