"""Which columnar engine serves an operator: the pane table, the session table or the window table
(``columnar``, ``columnar_sessions``, ``columnar_windows``); their per-key records are
``state.records``."""
from __future__ import annotations

from typing import Any, Optional, Union

from ..panes import TimestampCombiner
from ..windows.session_windows import SessionWindows
from .columnar import ColumnarCore, supports_columnar
from .columnar_sessions import ColumnarSessions, supports_columnar_sessions
from .columnar_windows import ColumnarWindows, supports_columnar_windows


def supports_columnar_path(window: Any, accumulation: Any, trigger: Any, timestamp_combiner: Any) -> bool:
    """Whether one of the columnar paths serves this operator (``columnar_engine`` builds it)."""
    return (supports_columnar(window, accumulation, trigger, timestamp_combiner)
            or supports_columnar_sessions(window, accumulation, trigger, timestamp_combiner)
            or supports_columnar_windows(window, accumulation, trigger, timestamp_combiner))


Engine = Union[ColumnarCore, ColumnarSessions, ColumnarWindows]


def columnar_engine(window: Any, accumulation: Any, trigger: Any, allowed_lateness: int, *, label: str,
                    column: Optional[str]) -> Engine:
    """The pane table where no window needs state of its own (the default trigger without
    retractions: pane sharing), the session table for sessions, the window table otherwise."""
    engine: type
    if isinstance(window, SessionWindows):
        engine = ColumnarSessions
    elif supports_columnar(window, accumulation, trigger, TimestampCombiner.END_OF_WINDOW):
        engine = ColumnarCore
    else:
        engine = ColumnarWindows
    return engine(window, accumulation, trigger, allowed_lateness, label=label, column=column)
