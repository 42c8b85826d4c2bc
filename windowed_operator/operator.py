"""The user-facing operators: a validated description of what to compute (``engine.build`` builds its core).

``KeyedWindowedOperator`` keeps state per key and window; ``WindowedOperator`` per window (every
element under one key).  An operator without a window option keeps the windows of the records an
upstream operator gave it (window propagation).
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Optional, Union

from pydantic import AfterValidator, Field, field_validator, model_validator
from typing_extensions import Annotated

from accumulations.base import Accumulation
from triggers.base import Trigger
from triggers.option import TriggerOption

from .config import REQUIRED, Config, Duration, DurationLike
from .elements import ElementReader
from .panes import PaneRecord, TimestampCombiner
from .testing import TestStream
from .watermarks import BoundedDisorderWatermark, FixedLagWatermark, UpstreamWatermark, partition_of
from .windows.base import WindowOption
from .windows.inherited import InheritedWindows
from .windows.session_windows import element_gap

if TYPE_CHECKING:
    from pyspark.sql import DataFrame  # the Spark runner's type; pyspark is imported there only

    from accumulations.merge import MergeAccumulation

    from .chain import Chain
    from .facade import LocalRunner

Extractor = Optional[Union[str, Callable[[Any], Any]]]


def _checked_record(value: Any) -> Any:
    if isinstance(value, dict):
        if not value:
            raise ValueError("a value record needs at least one field: {output field: field read}")
        for name, field in value.items():
            if not name or not field:
                raise ValueError(f"a value record maps non-empty names to non-empty field names, got {name!r}: "
                                 f"{field!r}")
    return value


#: What is accumulated: a field, a callable, or a *record* of fields (``{"auction": "key", "num":
#: "value"}``: output field -> the element's field read), which runners can read as columns where a
#: callable must be called per element.
ValueExtractor = Annotated[Optional[Union[str, dict[str, str], Callable[[Any], Any]]], AfterValidator(_checked_record)]
#: What ``value=`` takes, for signatures.
ValueOption = Optional[Union[str, dict[str, str], Callable[[Any], Any]]]
WatermarkOption = Union[UpstreamWatermark, FixedLagWatermark, BoundedDisorderWatermark]
OnBadElement = Literal["raise", "dead_letter"]


class WindowingOptions(Config):
    """What every windowed operator (one input or a merge of two) shares: windows, trigger,
    lateness, watermark, outputs for dropped data.  Subclasses say what they accumulate and how they
    read elements; the core they build is the same."""

    _positional: ClassVar[tuple[str, ...]] = ("window", "accumulation")
    keyed: ClassVar[bool] = False
    if TYPE_CHECKING:  # each subclass declares the field, with its own type (not a field here)
        accumulation: Union[Accumulation, MergeAccumulation]

    window: Optional[WindowOption] = Field(default=None, description="None keeps upstream windows")
    trigger: TriggerOption = Field(default_factory=TriggerOption)
    allowed_lateness: Duration = Field(default=0, ge=0, description="ms a window stays open after the watermark passes it")
    timestamp: Extractor = Field(default=None, description="field name or callable giving each element's event time")
    value: ValueExtractor = Field(
        default=None, description="field name, record of field names ({output field: field}) or callable giving what "
                                  "is accumulated")
    watermark: WatermarkOption = Field(default_factory=UpstreamWatermark, discriminator="kind")
    timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW
    late_data_output: bool = Field(default=False, description="send dropped late elements to the late-data output")
    fired_by: bool = Field(default=False, description="give each pane why it fired, the input watermark then and the "
                                                      "partition holding it back (fired_by, firing_watermark, "
                                                      "held_back_by)")
    on_bad_element: OnBadElement = "raise"
    max_future_skew: Optional[Duration] = Field(
        default=None, gt=0, description="ms an element's event time may be ahead of processing time; later ones are "
                                        "bad elements (invalid_timestamp) and move no bounded-disorder watermark")
    name: Optional[str] = None
    key_type: Optional[str] = Field(
        default=None, description="Spark runner: the DDL type of the key a callable key gives (a chained stage)")
    value_type: Optional[str] = Field(
        default=None, description="Spark runner: the DDL type of the output value, when the accumulation's "
                                  "input type cannot tell it (a callable value, Combine, custom accumulations)")

    @field_validator("trigger", mode="before")
    @classmethod
    def _wrap_trigger(cls, value: Any) -> Any:
        if isinstance(value, Trigger):
            return TriggerOption.of(value)
        return value

    @model_validator(mode="after")
    def _warn_on_data_loss(self) -> "WindowingOptions":
        if self.allowed_lateness > 0 and self.trigger.to_trigger().may_finish():
            warnings.warn(
                f"trigger {self.trigger.to_trigger().describe()} can finish before allowed_lateness "
                f"({self.allowed_lateness} ms) ends; late elements after it are dropped as closed_window "
                "(add late firings to keep them)", stacklevel=3)
        return self

    # -- building blocks ----------------------------------------------------------------------
    @property
    def window_option(self) -> WindowOption:
        """The window option the core assigns with: ``window``, or the upstream's windows when it is None."""
        return self.window if self.window is not None else InheritedWindows()

    def core_accumulation(self) -> Accumulation:
        """The one-input accumulation the core folds with."""
        raise NotImplementedError

    def label(self) -> str:
        """How errors name this operator: its name, else what it computes over which windows."""
        if self.name:
            return f"operator {self.name!r}"
        window = self.window.describe() if self.window is not None else "inherited windows"
        return f"{type(self).__name__}({window}, {type(self.core_accumulation()).__name__})"

    def value_column(self) -> Optional[str]:
        """The field or column whose values are folded, when there is one."""
        return self.value if isinstance(self.value, str) else self.core_accumulation().input_field()

    def describe(self) -> str:
        """A one-line description (windows, accumulation, trigger, allowed lateness) for messages."""
        window = self.window.describe() if self.window is not None else "inherited windows"
        return (f"{type(self).__name__}({window}, {type(self.accumulation).__name__}, {self.trigger.describe()}, "
                f"allowed_lateness={self.allowed_lateness} ms)")

    def then(self, downstream: "OperatorBase") -> "Chain":
        """A ``Chain`` of this operator and ``downstream``: each pane of this one is an element of the next.

        Refused, with the reason, when ``downstream`` cannot fold a retracting stage's panes (an
        accumulation without an inverse, per-record sliding windows); see the chains guide.
        """
        from .chain import Chain

        return Chain(operators=[self, downstream])


class OperatorBase(WindowingOptions):
    """A windowed operator over one input."""

    accumulation: Accumulation

    def core_accumulation(self) -> Accumulation:
        return self.accumulation

    def build_reader(self) -> ElementReader:
        """The reader that turns each input element into its key, event time, value and gap (and decides
        which elements are bad), for every path.
        """
        return ElementReader(keyed=self.keyed, key=getattr(self, "key", None), timestamp=self.timestamp,
                             value=self.value, inherit_windows=self.window is None,
                             value_field=self.accumulation.input_field(), max_future_skew=self.max_future_skew,
                             gap=element_gap(self.window), whole_value_read=self.accumulation.folds_whole_input(),
                             partition=partition_of(self.watermark))

    # -- running ------------------------------------------------------------------------------
    def local_runner(self, processing_time: Any = 0) -> "LocalRunner":
        """A local runner for this operator; ``processing_time`` is its clock's start (ms or datetime).

        Each call of the runner (``add_elements``, ``advance_watermark_to``, ``advance_processing_time``,
        ``finish``) returns the panes it emitted.
        """
        from .facade import local_runner

        return local_runner(self, processing_time)

    def run_local(self, stream: TestStream, finish: bool = True) -> list[PaneRecord]:
        """Every output record for the stream, in emission order (the watermark ends at infinity)."""
        return self.local_runner().run(stream, finish=finish)

    def apply(self, df: DataFrame, *, key: Optional[str] = None, timestamp: Optional[str] = None,
              value_type: Optional[str] = None, time_mode: str = "auto", clock: Any = None,
              key_groups: Optional[int] = None, vectorized: bool = True, schema: Any = None,
              drop_counter: Any = None, preaggregate: bool = True, end_of_input: Optional[str] = None,
              state_encoding: str = "json", spark_event_time: bool = False,
              checkpoint: Optional[str] = None) -> DataFrame:
        """The streaming DataFrame of this operator's panes over the streaming DataFrame ``df``.

        ``key``/``timestamp`` override the operator's columns; ``value_type`` (DDL) types the value
        column of an accumulation Spark cannot infer (``Combine``, custom ones); ``end_of_input``
        names a boolean column whose true rows end the input; ``schema`` declares the input's schema
        without analysing ``df`` (Spark Declarative Pipelines); ``key_groups``, ``vectorized``,
        ``preaggregate``, ``time_mode``, ``clock``, ``drop_counter`` and ``state_encoding`` tune the
        Spark runner; ``spark_event_time`` adds an ``event_time`` column declared as the output's
        event-time column, so native Spark windows and joins can follow; ``checkpoint`` (the query's
        ``checkpointLocation``) lets its parallelism follow the cluster (key groups chosen at its first
        start, kept in the checkpoint): each is described at ``windowed_operator.spark.apply_operator``."""
        from .facade import spark_apply

        return spark_apply(self, df, key=key, timestamp=timestamp, value_type=value_type, time_mode=time_mode,
                           clock=clock, key_groups=key_groups, vectorized=vectorized, schema=schema,
                           drop_counter=drop_counter, preaggregate=preaggregate, end_of_input=end_of_input,
                           state_encoding=state_encoding, spark_event_time=spark_event_time, checkpoint=checkpoint)


class WindowedOperator(OperatorBase):
    """Non-keyed: all elements share one state per window; outputs have ``key=None``.
    ``WindowedOperator(window, accumulation, ...)`` takes the options of ``KeyedWindowedOperator``
    but ``key``."""

    def __init__(
        self, window: Optional[WindowOption] = None, accumulation: Accumulation = REQUIRED, *,
        trigger: Union[TriggerOption, Trigger, None] = None, allowed_lateness: DurationLike = 0,
        timestamp: Extractor = None, value: ValueOption = None, watermark: Optional[WatermarkOption] = None,
        timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW, late_data_output: bool = False,
        fired_by: bool = False,
        on_bad_element: OnBadElement = "raise", max_future_skew: Optional[DurationLike] = None,
        name: Optional[str] = None, key_type: Optional[str] = None, value_type: Optional[str] = None,
    ) -> None:
        self._init_given(locals())


class KeyedWindowedOperator(OperatorBase):
    """Windows, triggers and accumulates per key: ``KeyedWindowedOperator(window, accumulation, ...)``.

    Elements are ``(key, value)`` pairs, or ``key=`` names a field (a column on Spark) or gives a
    callable.  Options (times in ms, or durations such as ``"30s"``):

    - ``window``: ``TimeWindows``, ``SessionWindows``, ``SlidingWindows`` (per record),
      ``CumulativeWindows``, ``GlobalWindow``; None keeps the windows of an upstream operator's panes.
    - ``accumulation``: ``Sum``, ``Count``, ``Mean``, ``Min``, ``Max``, ``TopN``, ``ToList``, ``Combine``...
    - ``trigger``: a ``TriggerOption`` (``TriggerOption.at_watermark().with_early_firings_at_every(count=5)``)
      or a composite trigger (``Repeatedly(AfterCount(2))``); Beam's default when omitted.
    - ``allowed_lateness``; ``watermark``: ``upstream_watermark()`` (default), ``bounded_disorder(ms)``,
      ``fixed_watermark(ms)``.
    - ``key``, ``timestamp``, ``value``: field names or callables.
    - ``late_data_output``, ``on_bad_element`` ("raise" or "dead_letter"), ``max_future_skew``,
      ``timestamp_combiner``, ``name``; ``fired_by=True``: each pane says why it fired
      (``windowed_operator.engine.fired_by``).

    Run it with ``run_local(stream)`` / ``local_runner()`` or on Spark with ``apply(df)``; chain with
    ``then(other)``."""

    keyed: ClassVar[bool] = True
    key: Extractor = Field(default=None, description="field name or callable giving each element's key")

    def __init__(
        self, window: Optional[WindowOption] = None, accumulation: Accumulation = REQUIRED, *,
        key: Extractor = None, trigger: Union[TriggerOption, Trigger, None] = None,
        allowed_lateness: DurationLike = 0, timestamp: Extractor = None, value: ValueOption = None,
        watermark: Optional[WatermarkOption] = None,
        timestamp_combiner: TimestampCombiner = TimestampCombiner.END_OF_WINDOW, late_data_output: bool = False,
        fired_by: bool = False,
        on_bad_element: OnBadElement = "raise", max_future_skew: Optional[DurationLike] = None,
        name: Optional[str] = None, key_type: Optional[str] = None, value_type: Optional[str] = None,
    ) -> None:
        self._init_given(locals())
