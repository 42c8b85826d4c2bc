"""windowed-operator: Beam-style windowed operators for PySpark Structured Streaming.

The semantic core (windows, watermarks, triggers, accumulation modes, retractions) is pure Python;
the local runner drives it in-process and the Spark runner (``windowed_operator.spark``) inside
``transformWithStateInPandas``.
"""
from .chain import Chain
from .elements import BadElementError, TimestampedValue
from .operator import KeyedWindowedOperator, OperatorBase, WindowedOperator
from .panes import DropReason, DroppedElement, PaneRecord, TimestampCombiner, Timing
from .time import MAX_TIMESTAMP, MIN_TIMESTAMP
from .watermarks import (BoundedDisorderWatermark, FixedLagWatermark, UpstreamWatermark, bounded_disorder,
                         fixed_watermark, upstream_watermark)
from .windows import (CumulativeWindows, GlobalWindow, SessionWindows, SlidingWindows, TimeWindows, Window,
                      WindowOption)

__all__ = [
    "KeyedWindowedOperator", "WindowedOperator", "OperatorBase", "Chain", "PaneRecord", "DroppedElement",
    "DropReason", "Timing", "TimestampCombiner", "TimestampedValue", "BadElementError", "GlobalWindow",
    "TimeWindows", "SessionWindows", "SlidingWindows", "CumulativeWindows", "Window", "WindowOption",
    "UpstreamWatermark", "FixedLagWatermark", "BoundedDisorderWatermark", "upstream_watermark", "fixed_watermark",
    "bounded_disorder", "MIN_TIMESTAMP", "MAX_TIMESTAMP",
]
