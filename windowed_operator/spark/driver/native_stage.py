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

- every pane of the upstream carries an event time Spark accepts (``worker.output_rows.event_times``): no
  allowed lateness upstream (so no LATE pane behind the watermark that fired the window), windows
  that end (tumbling, hopping, cumulative: not the global window, whose panes have none, nor
  merging sessions, whose retracted windows would become groups of their own), panes stamped at the
  window's end (one event time per window, which the aggregation groups by), event-time mode;
- the downstream fires exactly one ON_TIME pane per window once the watermark reaches its end,
  index 0, first and last (Beam's default trigger, no allowed lateness, the window's end as
  timestamp), which is what Spark's append mode emits for a group;
- a retraction's value is already the negation of the output it undoes (``get_retraction``), so
  ``sum(value)`` folds it out as ``Sum.subtract`` does, and ``Count`` counts it as -1;
- the stage reads the panes only by attribute or record (no callable, no time or skew of its own),
  keys them by an attribute a retraction shares with the pane it undoes (its key, its window), and
  under a retracting upstream sums or counts its values only;
- where the Python stage fails on a pane (a null or NaN in a field it reads is a bad element under
  "raise"; a null value fails its fold), Spark's aggregates would skip the row: the native plan stops
  the query with ``raise_error`` naming the stage, the field and the window instead.

``AllMax`` keeps every record tied for the top; the Python stage lists them in arrival order,
which for panes follows Spark's partitioning; the native stage sorts them (a deterministic order).

A checkpoint keeps the plan it started with: the setting ``spark.windowed_operator.nativeStages``
decides for new queries, and switching it on a running checkpoint makes Spark refuse the restart
(its stateful operators changed).  So where the library is told the checkpoint before the query
starts (``apply(df, checkpoint=...)``, pipeline files) it takes the setting from it, on for a new
one (``checkpoint_settings``); elsewhere it is the session's, off by default, so that an upgrade
finds the stateful operators a chain's checkpoint holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DoubleType, FloatType, StructField, StructType

from accumulations import AllMax, Count, Max, Min, Sum
from accumulations.base import Accumulation
from triggers.option import AccumulationMode

from ...operator import OperatorBase, WindowingOptions
from ...panes import TimestampCombiner
from ...windows import CumulativeWindows, TimeWindows
from .feed import Feed
from .stage import shown_timestamp
from ..plan import EVENT_TIME_COLUMN, PANE_COLUMN_OF

#: ``true`` plans an eligible chained stage as Spark's own aggregation (``native_refusal``).
NATIVE_STAGES_CONF = "spark.windowed_operator.nativeStages"

_NATIVE_ACCUMULATIONS = (Sum, Count, Min, Max, AllMax)
_VALUE = "__wo_native_value"
_KEY = "__wo_native_key"


def _upstream_refusal(upstream: WindowingOptions, windows: Any, time_mode: str) -> Optional[str]:
    if not isinstance(windows, (TimeWindows, CumulativeWindows)):
        return "the upstream's windows are not tumbling, hopping or cumulative ones"
    if upstream.allowed_lateness:
        return "the upstream has allowed lateness (its late panes can be behind Spark's watermark)"
    if upstream.timestamp_combiner != TimestampCombiner.END_OF_WINDOW:
        return "the upstream's panes are not stamped at their window's end"
    if time_mode != "EventTime":
        return "the upstream runs in processing-time mode"
    return None


#: Pane attributes a native stage may key by: a retraction carries the same ones as the pane it
#: undoes (the Python stage reads a retraction as that pane), and none is ever null.
_NATIVE_KEYS = (None, "key", "window_start", "window_end")


def _reads_pane(op: OperatorBase) -> bool:
    """A stage with a key of its own reads the pane's attributes; one without reads the pane's value."""
    return op.keyed and getattr(op, "key", None) is not None


def _stage_refusal(op: OperatorBase, upstream: WindowingOptions) -> Optional[str]:
    accumulation = op.accumulation
    key = getattr(op, "key", None)
    if op.window is not None:
        return "the stage has windows of its own"
    if not op.trigger.fires_once_at_end(op.allowed_lateness) or op.trigger.kind != "default":
        # (a bare at_watermark() fires once too, but a checkpoint of this setting may hold such a
        # stage's state in Python: planning it natively now would make Spark refuse its restart)
        return "the stage's trigger is not Beam's default with no allowed lateness"
    if op.timestamp_combiner != TimestampCombiner.END_OF_WINDOW:
        return "the stage's panes are not stamped at their window's end"
    if op.late_data_output or op.on_bad_element != "raise":
        return "the stage keeps late data or dead letters"
    if op.fired_by:
        return "the stage's panes say why they fired (fired_by)"
    if op.timestamp is not None or op.max_future_skew is not None:
        return "the stage reads a time of its own or checks skew (the pane's timestamp is the rule here)"
    if op.value_type is not None:
        return "the stage declares its output type (the Python stage converts its values through Arrow)"
    if type(accumulation) not in _NATIVE_ACCUMULATIONS:
        return f"Spark has no aggregate for {type(accumulation).__name__}"
    if isinstance(accumulation, AllMax) and (accumulation.field is None or accumulation.key is not None):
        return "AllMax ranks by a callable"
    if callable(op.value) or callable(key):
        return "the stage reads the panes with a callable"
    if op.keyed and key not in _NATIVE_KEYS:
        return f"the stage keys by the pane's {key!r} (natively: its key or its window's start or end)"
    if _reads_pane(op) and op.value is None:
        return "the stage folds whole panes"
    if op.keyed and key is None and not upstream.keyed:
        return "the stage has no key and its upstream none to keep"
    if isinstance(op.value, str) and not _reads_pane(op):
        return "the stage picks a field of the upstream's values"
    if upstream.trigger.mode == AccumulationMode.ACCUMULATING_AND_RETRACTING:
        # the Python stage reads a retraction as the pane it undoes and subtracts what it reads; the
        # pane rows hold the undone output negated in ``value`` only, and count each retraction as one
        if isinstance(accumulation, Count):
            return None
        reads_value = (op.value is None and not _reads_pane(op)) or (_reads_pane(op) and op.value == "value")
        if not isinstance(accumulation, Sum) or accumulation.input_field() is not None or not reads_value:
            return "the upstream retracts and the stage folds something other than a Sum or Count of its values"
        if type(upstream.core_accumulation()).get_retraction is not Accumulation.get_retraction:
            return "the upstream retracts with a get_retraction of its own (sum(value) folds out negations only)"
    return None


def _type_refusal(op: OperatorBase, upstream: WindowingOptions, schema: StructType) -> Optional[str]:
    """What Spark cannot do with the pane rows' types: sort records holding a map (AllMax's ties)."""
    if isinstance(op.accumulation, AllMax):
        if "map<" in NativeStage(op, upstream, "", schema).element_type().simpleString():
            return "AllMax's records hold a map, which Spark cannot sort"
    return None


def _field_type(data_type: DataType, field: str) -> Optional[DataType]:
    """A struct's field's type (None where ``data_type`` has no such field: Spark's analysis names it)."""
    if isinstance(data_type, StructType) and field in data_type.fieldNames():
        return data_type[field].dataType
    return None


def _null(column: Column, data_type: Optional[DataType]) -> Column:
    """Null as the Python stage's reader sees it (``elements.is_null``): None, or NaN in a float."""
    if isinstance(data_type, (FloatType, DoubleType)):
        return column.isNull() | F.isnan(column)
    return column.isNull()


def native_refusal(op: OperatorBase, feed: Feed, ansi: bool = True) -> Optional[str]:
    """Why ``op`` over ``feed``'s panes must run as a transformWithState (see the module's
    docstring), or None when Spark's aggregation gives the same panes (``ansi``: the session's
    ``spark.sql.ansi.enabled``)."""
    if feed.event_time_frame is None:
        return "the upstream's panes cannot carry an event time"
    if not ansi and isinstance(op.accumulation, Sum):
        return "ANSI mode is off: Spark's sum would wrap past 64 bits, where the Python stage's sum is an error"
    return (_upstream_refusal(feed.operator, feed.windows, feed.time_mode) or _stage_refusal(op, feed.operator)
            or _type_refusal(op, feed.operator, feed.frame.schema))


@dataclass(frozen=True)
class NativeStage:
    """How ``op`` reads the pane rows (``schema``: their columns, times in ms), as Spark columns."""

    op: OperatorBase
    upstream: WindowingOptions
    value_type: str
    schema: StructType

    def key(self) -> Optional[Column]:
        if not self.op.keyed:
            return None
        return F.col(PANE_COLUMN_OF[getattr(self.op, "key", None) or "key"])

    def _reads(self) -> list[tuple[str, str, Column, Optional[DataType]]]:
        """Every field the stage reads from a pane, as (output name, what it is, column, type; None: Spark's
        analysis names a missing field): a pane attribute, the pane's value, or a field of that value."""
        value = self.op.value
        if _reads_pane(self.op):
            assert isinstance(value, (str, dict))  # (_stage_refusal: a stage reading the pane names what it reads)
            fields = value if isinstance(value, dict) else {"": value}
            return [(name, f"attribute {field!r}", F.col(PANE_COLUMN_OF[field]),
                     self.schema[PANE_COLUMN_OF[field]].dataType) for name, field in fields.items()]
        value_type = self.schema["value"].dataType
        if isinstance(value, dict):
            return [(name, f"value field {field!r}", F.col("value")[field], _field_type(value_type, field))
                    for name, field in value.items()]
        return [("", "value", F.col("value"), value_type)]

    def element(self) -> Column:
        """What the stage folds from each pane: one read, or a record of them."""
        reads = self._reads()
        if isinstance(self.op.value, dict):
            return F.struct(*[column.alias(name) for name, _, column, _ in reads])
        return reads[0][2]

    def element_type(self) -> DataType:
        reads = self._reads()
        if isinstance(self.op.value, dict):
            # (a field the upstream's values lack has no type: pyspark's StructField refuses the None, as it did)
            return StructType([StructField(name, data_type, True)  # type: ignore[arg-type]
                               for name, _, _, data_type in reads])
        data_type = reads[0][3]
        assert data_type is not None  # (a pane attribute's or the value's own type: never None)
        return data_type

    def folded(self) -> Optional[Column]:
        """The value the aggregate reads (None for Count, which reads none)."""
        accumulation = self.op.accumulation
        if isinstance(accumulation, Count):
            return None
        element = self.element()
        field = accumulation.input_field()
        return element if field is None or isinstance(accumulation, AllMax) else element[field]

    def checks(self) -> list[Column]:
        """One condition per field the stage reads, each stopping the query where the field is null
        (or NaN) with a message naming the stage, the field and the window: where the Python stage
        finds a bad element (which on_bad_element='raise' refuses), Spark's aggregates would skip the row."""
        reads = [(what, column, data_type) for _, what, column, data_type in self._reads()]
        field = self.op.accumulation.input_field()
        if field is not None:
            reads.append((f"field {field!r} of what it folds", self.element()[field],
                          _field_type(self.element_type(), field)))
        return [F.when(_null(column, data_type), F.raise_error(self._message(what))).otherwise(F.lit(True))
                for what, column, data_type in reads]

    def _message(self, what: str) -> Column:
        return F.concat(F.lit(f"{self.op.label()}: a pane of {self.upstream.label()} has a null {what} (window "),
                        F.col("window_start").cast("string"), F.lit(", "), F.col("window_end").cast("string"),
                        F.lit(" ms): a bad element, which on_bad_element='raise' refuses"))

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
        assert isinstance(accumulation, AllMax)  # (_NATIVE_ACCUMULATIONS: the last one)
        field = str(accumulation.field)
        top = F.max(value[field])
        return F.array_sort(F.filter(F.collect_list(value), lambda record: record[field] == top))


def apply_native_stage(stage: NativeStage, feed: Feed, *, spark_event_time: bool, observation: str) -> DataFrame:
    """The stage's panes, as the runner's output columns, from Spark's aggregation of the upstream's
    pane rows (times in ms) grouped by window, their one event time, and the stage's key; its
    counts observed as ``observation`` (``stage.observation_name``)."""
    rows = feed.event_time_frame()  # type: ignore[misc]
    message = (f"{stage.op.label()}: a pane of {stage.upstream.label()} has no event time; planned natively "
               f"({NATIVE_STAGES_CONF}) on the rule that every pane has one")
    rows = rows.where(F.when(F.col(EVENT_TIME_COLUMN).isNull(), F.raise_error(F.lit(message))).otherwise(F.lit(True)))
    for check in stage.checks():
        rows = rows.where(check)
    key = stage.key()
    folded = stage.folded()
    columns = [F.col(EVENT_TIME_COLUMN), F.col("window_start"), F.col("window_end"), F.col("timestamp"),
               F.col("is_retraction")]
    if key is not None:
        columns.append(key.alias(_KEY))
    if folded is not None:
        columns.append(folded.alias(_VALUE))
    # (a window's panes share one timestamp, its end's, as the stage's pane does: grouping by it keeps it)
    groups = [EVENT_TIME_COLUMN, "window_start", "window_end", "timestamp", *([_KEY] if key is not None else [])]
    aggregated = (rows.select(*columns).groupBy(*groups)
                  .agg(stage.aggregate().cast(stage.value_type).alias("value")))
    out: list[Column] = [F.col(_KEY).alias("key")] if key is not None else []
    out += [shown_timestamp("window_start"), shown_timestamp("window_end"), F.col("value"),
            F.lit("ON_TIME").alias("timing"), F.lit(0).alias("pane_index"), F.lit(True).alias("is_first"),
            F.lit(True).alias("is_last"), F.lit(False).alias("is_retraction"),
            shown_timestamp("timestamp")]
    if spark_event_time:
        out.append(F.col(EVENT_TIME_COLUMN))
    panes = aggregated.select(*out)
    # the Python stage's observed metrics, so that progress reports read the same (nothing is dropped here:
    # the conditions leave no pane late and a null stops the query)
    return panes.observe(observation, F.lit(0).cast("bigint").alias("late_rows_dropped"),
                         F.lit(0).cast("bigint").alias("bad_rows"), F.count(F.lit(1)).alias("panes"))


__all__ = ["NATIVE_STAGES_CONF", "NativeStage", "native_refusal", "apply_native_stage"]
