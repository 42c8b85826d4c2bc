"""windowed-operator: Beam-style windowed operators for PySpark Structured Streaming.

The semantic core (windows, watermarks, triggers, accumulation modes, retractions) is pure Python;
the local runner drives it in-process and the Spark runner (``windowed_operator.spark``) inside
``transformWithStateInPandas``.  This module is the package's public surface: ``__all__`` lists it.
Importing it does not import pyspark (only ``windowed_operator.spark`` does).

``triggers`` builds on small modules of this package (``config``, ``time_rules``, ``windows``) and
the operators here build on ``triggers``: ``triggers/__init__.py`` therefore imports this package
first, so that whichever of the two a program imports first, each module runs to its end before
another uses it.
"""
from __future__ import annotations

from ._version import __version__
from .chain import Chain
from .elements import BadElementError, TimestampedValue
from .merge_operator import InputOptions, KeyedWindowedMergeOperator, WindowedMergeOperator
from .operator import KeyedWindowedOperator, OperatorBase, WindowedOperator
from .panes import DroppedElement, DropReason, PaneRecord, TimestampCombiner, Timing, WindowOverflowError
from .time import MAX_TIMESTAMP, MIN_TIMESTAMP
from .watermarks import (
    BoundedDisorderWatermark,
    FixedLagWatermark,
    UpstreamWatermark,
    bounded_disorder,
    fixed_watermark,
    upstream_watermark,
)
from .windows import CumulativeWindows, GlobalWindow, SessionWindows, SlidingWindows, TimeWindows, Window, WindowOption

__all__ = [
    "__version__",
    # operators
    "KeyedWindowedOperator", "WindowedOperator", "OperatorBase", "KeyedWindowedMergeOperator",
    "WindowedMergeOperator", "InputOptions", "Chain",
    # windows
    "TimeWindows", "SessionWindows", "SlidingWindows", "CumulativeWindows", "GlobalWindow", "Window", "WindowOption",
    # watermarks
    "UpstreamWatermark", "FixedLagWatermark", "BoundedDisorderWatermark", "upstream_watermark", "fixed_watermark",
    "bounded_disorder",
    # outputs and inputs
    "PaneRecord", "DroppedElement", "DropReason", "Timing", "TimestampCombiner", "WindowOverflowError",
    "TimestampedValue", "BadElementError",
    # time
    "MIN_TIMESTAMP", "MAX_TIMESTAMP",
]
