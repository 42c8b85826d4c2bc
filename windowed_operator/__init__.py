"""windowed-operator: Beam-style windowed operators for PySpark Structured Streaming.

The semantic core (windows, watermarks, triggers, accumulation modes, retractions) is pure Python;
the local runner drives it in-process and the Spark runner (``windowed_operator.spark``) inside
``transformWithStateInPandas``.

Names are exported lazily: ``triggers`` and ``accumulations`` import small modules of this package
(``config``, ``windows``), and an eager import of the operators here would make that a cycle.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "KeyedWindowedOperator": "operator", "WindowedOperator": "operator", "OperatorBase": "operator",
    "KeyedWindowedMergeOperator": "merge_operator", "WindowedMergeOperator": "merge_operator",
    "InputOptions": "merge_operator", "Chain": "chain",
    "PaneRecord": "panes", "DroppedElement": "panes", "DropReason": "panes", "Timing": "panes",
    "TimestampCombiner": "panes", "WindowOverflowError": "panes",
    "TimestampedValue": "elements", "BadElementError": "elements",
    "GlobalWindow": "windows", "TimeWindows": "windows", "SessionWindows": "windows", "SlidingWindows": "windows",
    "CumulativeWindows": "windows", "Window": "windows", "WindowOption": "windows",
    "UpstreamWatermark": "watermarks", "FixedLagWatermark": "watermarks", "BoundedDisorderWatermark": "watermarks",
    "upstream_watermark": "watermarks", "fixed_watermark": "watermarks", "bounded_disorder": "watermarks",
    "MIN_TIMESTAMP": "time", "MAX_TIMESTAMP": "time",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'windowed_operator' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
