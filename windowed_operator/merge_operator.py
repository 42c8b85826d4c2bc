"""Windowed merge operators: two inputs, one window option, one state per key and window.

Both inputs feed the same core: each element becomes ``(side, value)`` and a ``SidedAccumulation``
routes it to ``accumulate1`` or ``accumulate2``.  Windows, triggers, lateness, accumulation modes and
session merges (across both sides) are therefore exactly those of the one-input operator.  The only
new rule is the watermark: the minimum over the inputs that are not idle
(``TwoInputWatermarkTracker``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Hashable, Literal, Optional, Union, overload

from pydantic import Field

from accumulations.base import Accumulation
from accumulations.merge import LEFT, SIDES, MergeAccumulation, SidedAccumulation
from triggers.base import Trigger
from triggers.option import TriggerOption

from .config import REQUIRED, Config, Duration, DurationLike
from .elements import ElementReader, ReadElement
from .operator import Extractor, OnBadElement, ValueExtractor, ValueOption, WatermarkOption, WindowingOptions
from .panes import PaneRecord, TimestampCombiner
from .windows.base import WindowOption
from .watermarks import partition_of
from .windows.session_windows import element_gap

if TYPE_CHECKING:
    from pyspark.sql import DataFrame  # the Spark runner's type; pyspark is imported there only

    from .facade import MergeRunner


class InputOptions(Config):
    """How to read one input of a merge; unset fields fall back to the operator's own."""

    key: Extractor = None
    timestamp: Extractor = None
    value: ValueExtractor = None


class SidedReader:
    """Reads an element of one input and tags its value with the side."""

    def __init__(self, side: str, reader: ElementReader) -> None:
        self.side = side
        self.reader = reader

    def read(self, element: Any, default_timestamp: int, now: Optional[int] = None,
             partition: Optional[Hashable] = None) -> ReadElement:
        read = self.reader.read(element, default_timestamp, now, partition)
        return ReadElement(read.key, read.timestamp, (self.side, read.value), read.window, read.partition)


class MergeOperatorBase(WindowingOptions):
    """What the two merge operators (``WindowedMergeOperator``, ``KeyedWindowedMergeOperator``)
    share: a two-input accumulation (a join or a cogroup, ``accumulations.merge``), each input's
    options (``left``, ``right``: how its key, event time and value are read) and the idle timeout
    after which a quiet input stops holding the watermark back.  The core folds the two inputs as
    one, each element tagged with its side (``SidedAccumulation``)."""

    accumulation: MergeAccumulation
    left: InputOptions = Field(default_factory=InputOptions)
    right: InputOptions = Field(default_factory=InputOptions)
    idle_timeout: Optional[Duration] = Field(
        default=None, gt=0,
        description="ms of processing time without elements after which an input stops holding the watermark back")

    def core_accumulation(self) -> Accumulation:
        return SidedAccumulation(inner=self.accumulation)

    def input_options(self, side: str) -> InputOptions:
        """The ``InputOptions`` of one side, ``'left'`` or ``'right'``."""
        if side not in SIDES:
            raise ValueError(f"side must be 'left' or 'right', got {side!r}")
        return self.left if side == LEFT else self.right

    @overload
    def side_extractor(self, side: str, name: Literal["key", "timestamp"]) -> Extractor: ...

    @overload
    def side_extractor(self, side: str, name: Literal["value"]) -> Union[Extractor, dict[str, str]]: ...

    def side_extractor(self, side: str, name: str) -> Union[Extractor, dict[str, str]]:
        """One side's ``name`` option (``key``, ``timestamp``, ``value``): its own, or else the operator's."""
        own = getattr(self.input_options(side), name)
        return own if own is not None else getattr(self, name, None)

    def build_reader(self, side: str, *, payload: Optional[str] = None, key: Extractor = None,
                     timestamp: Extractor = None) -> SidedReader:
        """``payload``/``key``/``timestamp`` let a runner read rows where the element sits in a column
        beside the key and time it computed (the Spark runner's union of both inputs)."""
        return SidedReader(side, ElementReader(
            keyed=self.keyed, key=key if key is not None else self.side_extractor(side, "key"),
            timestamp=timestamp if timestamp is not None else self.side_extractor(side, "timestamp"),
            value=self.side_extractor(side, "value"), inherit_windows=self.window is None, payload=payload,
            max_future_skew=self.max_future_skew, gap=element_gap(self.window),
            partition=partition_of(self.watermark)))

    def local_runner(self, processing_time: Any = 0) -> "MergeRunner":
        """A local runner of two inputs (``add_elements('left', ...)``, ``advance_watermark_to('right', ...)``,
        ``mark_idle``); each call returns the panes it emitted.
        """
        from .facade import merge_local_runner

        return merge_local_runner(self, processing_time)

    def run_local(self, stream: Any, finish: bool = True) -> list[PaneRecord]:
        """Every output record for a ``TwoInputTestStream``, in emission order."""
        return self.local_runner().run(stream, finish=finish)

    def apply(self, left: DataFrame, right: DataFrame, *, left_key: Optional[str] = None,
              right_key: Optional[str] = None, left_timestamp: Optional[str] = None,
              right_timestamp: Optional[str] = None, key: Optional[str] = None, timestamp: Optional[str] = None,
              value_type: Optional[str] = None, time_mode: str = "auto", clock: Any = None,
              key_groups: Optional[int] = None, drop_counter: Any = None, end_of_input: Optional[str] = None,
              state_encoding: str = "json", spark_event_time: bool = False,
              checkpoint: Optional[str] = None) -> DataFrame:
        """The streaming DataFrame of this merge's panes over two streaming DataFrames (each input
        keeps its own watermark; Spark takes their minimum).  ``left_key``/``right_key`` and
        ``left_timestamp``/``right_timestamp`` override one input's columns, ``key``/``timestamp``
        both; the other options are the one-input ``apply``'s (see
        ``windowed_operator.spark.driver.merge.apply_merge_operator``)."""
        from .facade import spark_apply_merge

        return spark_apply_merge(self, left, right, left_key=left_key, right_key=right_key,
                                 left_timestamp=left_timestamp, right_timestamp=right_timestamp, key=key,
                                 timestamp=timestamp, value_type=value_type, time_mode=time_mode, clock=clock,
                                 key_groups=key_groups, drop_counter=drop_counter, end_of_input=end_of_input,
                                 state_encoding=state_encoding, spark_event_time=spark_event_time,
                                 checkpoint=checkpoint)


class WindowedMergeOperator(MergeOperatorBase):
    """Non-keyed: all elements of both inputs share one state per window; outputs have ``key=None``.
    ``WindowedMergeOperator(window, accumulation, ...)`` takes the options of
    ``KeyedWindowedMergeOperator`` but ``key``."""

    def __init__(
        self, window: Optional[WindowOption] = None, accumulation: MergeAccumulation = REQUIRED, *,
        left: Optional[InputOptions] = None, right: Optional[InputOptions] = None,
        idle_timeout: Optional[DurationLike] = None, trigger: Union[TriggerOption, Trigger, None] = None,
        allowed_lateness: DurationLike = 0, timestamp: Extractor = None, value: ValueOption = None,
        watermark: Optional[WatermarkOption] = None,
        timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW, late_data_output: bool = False,
        fired_by: bool = False,
        on_bad_element: OnBadElement = "raise", max_future_skew: Optional[DurationLike] = None,
        name: Optional[str] = None, key_type: Optional[str] = None, value_type: Optional[str] = None,
    ) -> None:
        self._init_given(locals())


class KeyedWindowedMergeOperator(MergeOperatorBase):
    """Keyed: both inputs are keyed the same way (``key=``, per input ``left=InputOptions(key=...)``,
    or ``(key, value)`` pairs); only elements with equal keys meet.

    ``KeyedWindowedMergeOperator(window, accumulation, ...)``: ``accumulation`` is a merge
    accumulation (``InnerJoin``, ``LeftOuterJoin``, ``FullOuterJoin``, ``Cogroup``); ``left`` and
    ``right`` (``InputOptions``) read each input where it differs from the operator's ``key``,
    ``timestamp`` and ``value``; ``idle_timeout`` (ms) lets an input without elements stop holding
    the watermark back; the other options are ``KeyedWindowedOperator``'s."""

    keyed: ClassVar[bool] = True
    key: Extractor = Field(default=None, description="field name or callable giving each element's key")

    def __init__(
        self, window: Optional[WindowOption] = None, accumulation: MergeAccumulation = REQUIRED, *,
        key: Extractor = None, left: Optional[InputOptions] = None, right: Optional[InputOptions] = None,
        idle_timeout: Optional[DurationLike] = None, trigger: Union[TriggerOption, Trigger, None] = None,
        allowed_lateness: DurationLike = 0, timestamp: Extractor = None, value: ValueOption = None,
        watermark: Optional[WatermarkOption] = None,
        timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW, late_data_output: bool = False,
        fired_by: bool = False,
        on_bad_element: OnBadElement = "raise", max_future_skew: Optional[DurationLike] = None,
        name: Optional[str] = None, key_type: Optional[str] = None, value_type: Optional[str] = None,
    ) -> None:
        self._init_given(locals())
