"""windowed-operator: Beam-style windowed operators for PySpark Structured Streaming.

The semantic core (windows, watermarks, triggers, accumulation modes, retractions) is pure Python;
the local runner drives it in-process and the Spark runner (``windowed_operator.spark``) inside
``transformWithStateInPandas``.  This module is the package's public surface: ``_EXPORTS`` names
each public name and its module, once; ``__all__`` is its keys.  Importing it does not import
pyspark (only ``windowed_operator.spark`` does).

Type checkers and IDEs see every name statically (the imports under ``TYPE_CHECKING``); at run time
a name's module is imported when the name is first used.  That keeps ``import windowed_operator``
light, which one process needs: before a query's first batch pyspark unpickles each stateful
operator in a fresh Python process on the driver only to declare its state
(``spark.worker.deferred``), and that process imports this package (the parent of the deferred
processor's module) and nothing more (``tests/spark/test_deferred_processor.py``).  Plain static
imports were measured once the engine left the model (2026-11-29, ``python -X importtime``): they
load no engine, state, runner, pandas or pyarrow module any more, but the operators are pydantic
models and ``accumulations`` imports numpy (its ``collections``), so ``import windowed_operator``
would load pydantic and numpy, 0.16-0.69 s against under 0.01 s lazily, per declaring process;
the lazy form stays.
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
