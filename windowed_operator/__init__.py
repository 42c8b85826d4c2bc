"""windowed-operator: Beam-style windowed operators for PySpark Structured Streaming.

The semantic core (windows, watermarks, triggers, accumulation modes, retractions) is pure Python;
the local runner drives it in-process and the Spark runner (``windowed_operator.spark``) inside
``transformWithStateInPandas``.  This module is the package's public surface: ``_EXPORTS`` names
each public name and its module, once; ``__all__`` is its keys.  Importing it does not import
pyspark (only ``windowed_operator.spark`` does).

Type checkers and IDEs see every name statically (the imports under ``TYPE_CHECKING``); at run time
a name's module is imported when the name is first used.  That keeps ``import windowed_operator``
free of the engine, numpy and pandas, which one process needs: before a query's first batch pyspark
unpickles each stateful operator in a fresh Python process on the driver only to declare its state
(``spark.deferred``), and loading the whole library there cost 0.8-1.0 s per operator
(``tests/spark/test_deferred_processor.py`` keeps it out).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .chain import Chain
    from .elements import BadElementError, TimestampedValue
    from .merge_operator import InputOptions, KeyedWindowedMergeOperator, WindowedMergeOperator
    from .operator import KeyedWindowedOperator, OperatorBase, WindowedOperator
    from .panes import DroppedElement, DropReason, PaneRecord, TimestampCombiner, Timing, WindowOverflowError
    from .time import MAX_TIMESTAMP, MIN_TIMESTAMP
    from .watermarks import (BoundedDisorderWatermark, FixedLagWatermark, UpstreamWatermark, bounded_disorder,
                             fixed_watermark, upstream_watermark)
    from .windows import (CumulativeWindows, GlobalWindow, SessionWindows, SlidingWindows, TimeWindows, Window,
                          WindowOption)

_EXPORTS = {
    # operators
    "KeyedWindowedOperator": "operator", "WindowedOperator": "operator", "OperatorBase": "operator",
    "KeyedWindowedMergeOperator": "merge_operator", "WindowedMergeOperator": "merge_operator",
    "InputOptions": "merge_operator", "Chain": "chain",
    # windows
    "TimeWindows": "windows", "SessionWindows": "windows", "SlidingWindows": "windows",
    "CumulativeWindows": "windows", "GlobalWindow": "windows", "Window": "windows", "WindowOption": "windows",
    # watermarks
    "UpstreamWatermark": "watermarks", "FixedLagWatermark": "watermarks", "BoundedDisorderWatermark": "watermarks",
    "upstream_watermark": "watermarks", "fixed_watermark": "watermarks", "bounded_disorder": "watermarks",
    # outputs and inputs
    "PaneRecord": "panes", "DroppedElement": "panes", "DropReason": "panes", "Timing": "panes",
    "TimestampCombiner": "panes", "WindowOverflowError": "panes",
    "TimestampedValue": "elements", "BadElementError": "elements",
    # time
    "MIN_TIMESTAMP": "time", "MAX_TIMESTAMP": "time",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'windowed_operator' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
