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
(``spark.worker.deferred``), and loading the whole library there cost 0.8-1.0 s per operator
(``tests/spark/test_deferred_processor.py`` keeps it out).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:  # (``X as X``: re-exported, for type checkers)
    from .chain import Chain as Chain
    from .elements import BadElementError as BadElementError, TimestampedValue as TimestampedValue
    from .merge_operator import (InputOptions as InputOptions, KeyedWindowedMergeOperator as KeyedWindowedMergeOperator,
                                 WindowedMergeOperator as WindowedMergeOperator)
    from .operator import (KeyedWindowedOperator as KeyedWindowedOperator, OperatorBase as OperatorBase,
                           WindowedOperator as WindowedOperator)
    from .panes import (DroppedElement as DroppedElement, DropReason as DropReason, PaneRecord as PaneRecord,
                        TimestampCombiner as TimestampCombiner, Timing as Timing,
                        WindowOverflowError as WindowOverflowError)
    from .time import MAX_TIMESTAMP as MAX_TIMESTAMP, MIN_TIMESTAMP as MIN_TIMESTAMP
    from .watermarks import (BoundedDisorderWatermark as BoundedDisorderWatermark,
                             FixedLagWatermark as FixedLagWatermark, UpstreamWatermark as UpstreamWatermark,
                             bounded_disorder as bounded_disorder, fixed_watermark as fixed_watermark,
                             upstream_watermark as upstream_watermark)
    from .windows import (CumulativeWindows as CumulativeWindows, GlobalWindow as GlobalWindow,
                          SessionWindows as SessionWindows, SlidingWindows as SlidingWindows,
                          TimeWindows as TimeWindows, Window as Window, WindowOption as WindowOption)

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

__all__ = ["__version__", *_EXPORTS]  # noqa: PLE0604 (the names of _EXPORTS, the one table)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'windowed_operator' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
