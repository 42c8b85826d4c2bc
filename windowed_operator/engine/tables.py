"""The three table engines, one import for whoever builds or names them: the pane table
(``columnar.ColumnarCore``), the session table (``columnar_sessions.ColumnarSessions``) and the window
table (``columnar_windows.ColumnarWindows``), by the records they keep (``state.layouts.Layout.records``),
with what each serves.  Which one runs an operator is ``spark.plan.paths.table_engine``'s choice; their
per-key records are ``state.records``."""
from __future__ import annotations

from typing import Any, Union

from .columnar import ColumnarCore, supports_columnar
from .columnar_sessions import ColumnarSessions, supports_columnar_sessions
from .columnar_windows import ColumnarWindows, supports_columnar_windows

#: Each table engine's class, by the records it keeps.
TABLE_CLASSES: dict[str, type] = {"panes": ColumnarCore, "sessions": ColumnarSessions, "windows": ColumnarWindows}

Engine = Union[ColumnarCore, ColumnarSessions, ColumnarWindows]


def supports_columnar_path(window: Any, accumulation: Any, trigger: Any, timestamp_combiner: Any) -> bool:
    """Whether one of the table engines serves this operator (``spark.plan.paths.table_engine`` chooses which)."""
    return (supports_columnar(window, accumulation, trigger, timestamp_combiner)
            or supports_columnar_sessions(window, accumulation, trigger, timestamp_combiner)
            or supports_columnar_windows(window, accumulation, trigger, timestamp_combiner))


__all__ = ["TABLE_CLASSES", "Engine", "supports_columnar", "supports_columnar_path"]
