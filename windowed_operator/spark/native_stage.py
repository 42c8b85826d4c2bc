"""A chained stage run as Spark's own streaming aggregation instead of a second transformWithState.

A later stage of a chain that keeps its upstream's windows, fires once per window (Beam's default
trigger, no allowed lateness) and folds the panes with an aggregate Spark has (``Sum``, ``Count``,
``Min``, ``Max``, ``AllMax`` by a field) computes nothing a ``groupBy`` over the upstream's pane
rows cannot: one row per (key, window) once the watermark passes the window. Run in Python, it
costs a transformWithState every micro-batch (its workers, its state calls, a driver pre-init at
the query's start) for an aggregation the JVM does alone: Nexmark q5 with its second stage native
ran at 1.31x our two-stage chain (``benchmarks/nexmark/native_stage.py``).

Whether the two plans give the same panes rests on the upstream's panes reaching Spark's
aggregation exactly as they reach the Python stage, which holds under the conditions
``native_refusal`` checks:

- every pane of the upstream carries an event time Spark accepts (``SparkPlan.event_times``): no
  allowed lateness upstream (so no LATE pane behind the watermark that fired the window), windows
  that end (tumbling, hopping, cumulative: not the global window, whose panes have none, nor
  merging sessions, whose retracted windows would become groups of their own), panes stamped at the
  window's end (one event time per window, which the aggregation groups by), event-time mode;
- the downstream fires exactly one ON_TIME pane per window once the watermark reaches its end,
  index 0, first and last (Beam's default trigger, no allowed lateness, the window's end as
  timestamp), which is what Spark's append mode emits for a group;
- a retraction's value is already the negation of the output it undoes (``get_retraction``), so
  ``sum(value)`` folds it out as ``Sum.subtract`` does, and ``Count`` counts it as -1;
- the Python stage refuses a null value (its bad-element rule, "raise"); Spark's aggregates skip
  nulls, so the native plan stops the query with ``raise_error`` naming the window instead.

``AllMax`` keeps every record tied for the top; the Python stage lists them in arrival order,
which for panes follows Spark's partitioning; the native stage sorts them (a deterministic order).

A checkpoint keeps the plan it started with: the setting ``spark.windowed_operator.nativeStages``
(off by default, so that an upgrade finds the stateful operators a chain's checkpoint holds) decides
for new queries; switching it on a running checkpoint makes Spark refuse the restart (its stateful
operators changed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from accumulations import AllMax, Count, Max, Min, Sum
from accumulations.base import Accumulation
from triggers.option import AccumulationMode

from ..operator import OperatorBase, WindowingOptions
from ..panes import TimestampCombiner
from ..windows import CumulativeWindows, TimeWindows
from .plan import EVENT_TIME_COLUMN

if TYPE_CHECKING:
    from .chain import Feed

#: ``true`` plans an eligible chained stage as Spark's own aggregation (``native_refusal``).
NATIVE_STAGES_CONF = "spark.windowed_operator.nativeStages"

_NATIVE_ACCUMULATIONS = (Sum, Count, Min, Max, AllMax)
#: What a pane's attributes are called among the pane rows' columns (``index`` is ``pane_index``).
_PANE_COLUMNS = {"key": "key", "window_start": "window_start", "window_end": "window_end", "value": "value",
                 "timing": "timing", "index": "pane_index", "is_first": "is_first", "is_last": "is_last",
                 "is_retraction": "is_retraction", "timestamp": "timestamp"}
_VALUE = "__wo_native_value"
_KEY = "__wo_native_key"


def _upstream_refusal(upstream: WindowingOptions, time_mode: str) -> Optional[str]:
    if not isinstance(upstream.window, (TimeWindows, CumulativeWindows)):
        return "the upstream's windows are not tumbling, hopping or cumulative ones"
    if upstream.allowed_lateness:
        return "the upstream has allowed lateness (its late panes can be behind Spark's watermark)"
    if upstream.timestamp_combiner != TimestampCombiner.END_OF_WINDOW:
        return "the upstream's panes are not stamped at their window's end"
    if time_mode != "EventTime":
        return "the upstream runs in processing-time mode"
    return None


def _stage_refusal(op: OperatorBase, upstream: WindowingOptions) -> Optional[str]:
    accumulation = op.accumulation
    if op.window is not None:
        return "the stage has windows of its own"
    if op.trigger.kind != "default" or op.allowed_lateness:
        return "the stage's trigger is not Beam's default with no allowed lateness"
    if op.timestamp_combiner != TimestampCombiner.END_OF_WINDOW:
        return "the stage's panes are not stamped at their window's end"
    if op.late_data_output or op.on_bad_element != "raise":
        return "the stage keeps late data or dead letters"
    if type(accumulation) not in _NATIVE_ACCUMULATIONS:
        return f"Spark has no aggregate for {type(accumulation).__name__}"
    if isinstance(accumulation, AllMax) and (accumulation.field is None or accumulation.key is not None):
        return "AllMax ranks by a callable"
    if callable(op.value) or callable(getattr(op, "key", None)):
        return "the stage reads the panes with a callable"
    reads_pane = op.keyed and getattr(op, "key", None) is not None
    if reads_pane and op.value is None:
        return "the stage folds whole panes"
    if op.keyed and getattr(op, "key", None) is None and not upstream.keyed:
        return "the stage has no key and its upstream none to keep"
    if isinstance(op.value, str) and not reads_pane:
        return "the stage picks a field of the upstream's values"
    retracting = upstream.trigger.mode == AccumulationMode.ACCUMULATING_AND_RETRACTING
    if retracting and (type(accumulation) not in (Sum, Count) or accumulation.input_field() is not None
                       or isinstance(op.value, dict)):
        return "the upstream retracts and the stage's aggregate cannot fold a retraction out natively"
    negates = type(upstream.core_accumulation()).get_retraction is Accumulation.get_retraction
    if retracting and isinstance(accumulation, Sum) and not negates:
        return "the upstream retracts with a get_retraction of its own (sum(value) folds out negations only)"
    return None


def native_refusal(op: OperatorBase, feed: "Feed") -> Optional[str]:
    """Why ``op`` over ``feed``'s panes must run as a transformWithState (see the module's
    docstring), or None when Spark's aggregation gives the same panes."""
    if feed.event_time_frame is None:
        return "the upstream's panes cannot carry an event time"
    return _upstream_refusal(feed.operator, feed.time_mode) or _stage_refusal(op, feed.operator)


@dataclass(frozen=True)
class NativeStage:
    """How ``op`` reads the pane rows, as Spark columns."""

    op: OperatorBase
    upstream: WindowingOptions
    value_type: str

    def key(self) -> Optional[Column]:
        if not self.op.keyed:
            return None
        return F.col(_PANE_COLUMNS[getattr(self.op, "key", None) or "key"])

    def element(self) -> Column:
        """What the stage folds from each pane: a pane attribute, or a record of them."""
        value = self.op.value
        if isinstance(value, dict):  # of the pane (a stage with a key of its own), else of its value
            reads_pane = self.op.keyed and getattr(self.op, "key", None) is not None
            return F.struct(*[(F.col(_PANE_COLUMNS[field]) if reads_pane else F.col("value")[field]).alias(name)
                              for name, field in value.items()])
        return F.col(_PANE_COLUMNS[value or "value"])

    def folded(self) -> Optional[Column]:
        """The value the aggregate reads (None for Count, which reads none)."""
        accumulation = self.op.accumulation
        if isinstance(accumulation, Count):
            return None
        element = self.element()
        field = accumulation.input_field()
        return element if field is None or isinstance(accumulation, AllMax) else element[field]

    def checked(self, folded: Column) -> Column:
        """``folded``, or the query stopped naming the window where it (or AllMax's rank) is null:
        the Python stage's bad-element rule, where Spark's aggregates would skip the row."""
        accumulation = self.op.accumulation
        rank = folded[accumulation.field] if isinstance(accumulation, AllMax) else folded
        what = (f"field {accumulation.field!r} of the value" if isinstance(accumulation, AllMax)
                else f"field {accumulation.input_field()!r} of the value" if accumulation.input_field() else "value")
        message = F.concat(F.lit(f"{self.op.label()}: a pane of {self.upstream.label()} has a null {what} (window "),
                           F.col("window_start").cast("string"), F.lit(", "), F.col("window_end").cast("string"),
                           F.lit(" ms): a bad element, which on_bad_element='raise' refuses"))
        return F.when(rank.isNull(), F.raise_error(message)).otherwise(folded)

    def aggregate(self) -> Column:
        accumulation = self.op.accumulation
        value = F.col(_VALUE)
        if isinstance(accumulation, Count):
            return F.sum(F.when(F.col("is_retraction"), F.lit(-1)).otherwise(F.lit(1)))
        if isinstance(accumulation, Sum):
            return F.sum(value)
        if isinstance(accumulation, Min):
            return F.min(value)
        if isinstance(accumulation, Max):
            return F.max(value)
        # AllMax: every record whose rank equals the largest, in a deterministic order
        field = str(accumulation.field)
        top = F.max(value[field])
        return F.array_sort(F.filter(F.collect_list(value), lambda record: record[field] == top))


def apply_native_stage(stage: NativeStage, feed: "Feed", *, spark_event_time: bool, observation: str) -> DataFrame:
    """The stage's panes, as the runner's output columns, from Spark's aggregation of the upstream's
    pane rows (times in ms) grouped by window, their one event time, and the stage's key; its
    counts observed as ``observation`` (``runner.observation_name``)."""
    from .runner import shown_timestamp

    rows = feed.event_time_frame()  # type: ignore[misc]
    message = (f"{stage.op.label()}: a pane of {stage.upstream.label()} has no event time; planned natively "
               f"({NATIVE_STAGES_CONF}) on the rule that every pane has one")
    rows = rows.where(F.when(F.col(EVENT_TIME_COLUMN).isNull(), F.raise_error(F.lit(message))).otherwise(F.lit(True)))
    key = stage.key()
    folded = stage.folded()
    columns = [F.col(EVENT_TIME_COLUMN), F.col("window_start"), F.col("window_end"), F.col("is_retraction")]
    if key is not None:
        columns.append(key.alias(_KEY))
    if folded is not None:
        columns.append(stage.checked(folded).alias(_VALUE))
    groups = [EVENT_TIME_COLUMN, "window_start", "window_end", *([_KEY] if key is not None else [])]
    aggregated = (rows.select(*columns).groupBy(*groups)
                  .agg(stage.aggregate().cast(stage.value_type).alias("value")))
    out: list[Column] = [F.col(_KEY).alias("key")] if key is not None else []
    out += [shown_timestamp("window_start"), shown_timestamp("window_end"), F.col("value"),
            F.lit("ON_TIME").alias("timing"), F.lit(0).alias("pane_index"), F.lit(True).alias("is_first"),
            F.lit(True).alias("is_last"), F.lit(False).alias("is_retraction"),
            shown_timestamp("timestamp")]
    if spark_event_time:
        out.append(F.col(EVENT_TIME_COLUMN))
    panes = aggregated.withColumn("timestamp", F.col("window_end") - F.lit(1)).select(*out)
    # the Python stage's observed metrics, so that progress reports read the same (nothing is dropped here:
    # the conditions leave no pane late and a null stops the query)
    return panes.observe(observation, F.lit(0).cast("bigint").alias("late_rows_dropped"),
                         F.lit(0).cast("bigint").alias("bad_rows"), F.count(F.lit(1)).alias("panes"))


__all__ = ["NATIVE_STAGES_CONF", "NativeStage", "native_refusal", "apply_native_stage"]
