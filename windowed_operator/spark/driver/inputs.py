"""The driver's reading of an operator's inputs: columns, event time, watermark, end of input, key groups.

What ``apply()`` checks and builds before any plan: each refusal names the option and its value
(``SparkOperatorError``); nothing here decides a path (``paths``) or wires a stage (``stage``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Optional, Union

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType, LongType, StructField, StructType, TimestampNTZType, TimestampType

from ...operator import OperatorBase, WindowingOptions
from ...time import event_time_in_range, latest_event_time
from ...watermarks import BoundedDisorderWatermark, FixedLagWatermark, needs_processing_time, partition_of
from ...windows.session_windows import element_gap
from ..base.errors import SparkOperatorError
from ..plan import END_OF_INPUT, PHASE_COLUMN
from ..base.progress import MARKER_ROWS, OBSERVATION_PREFIX
from ..base.session import check_session

#: The column holding each row's event time for Spark's ``withWatermark`` (bounded disorder).
WATERMARK_HELPER = "__wo_event_time"

#: The type of a callable value extractor's results, not known before it runs: an output type built
#: from it is not known either (``known_type``), and the user names it with ``value_type=``.
UNKNOWN_TYPE = "<unknown>"


def known_type(found: Optional[str]) -> Optional[str]:
    """An accumulation's output type, or None where it names a type not known here (``UNKNOWN_TYPE``)."""
    return None if found is None or UNKNOWN_TYPE in found else found


def _logical_plan(df: DataFrame) -> Optional[str]:
    """The DataFrame's logical plan as text, or None on Spark Connect (no _jdf, and no analysis
    request is wanted): checks that read it then trust the caller."""
    try:
        return df._jdf.queryExecution().logical().toString()
    except Exception:
        return None


def _has_event_time_watermark(df: DataFrame) -> bool:
    plan = _logical_plan(df)
    return plan is None or "EventTimeWatermark" in plan


def event_time_ms(df: DataFrame, column: str, schema: Optional[StructType] = None) -> Column:
    data_type = (schema or df.schema)[column].dataType
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return F.unix_millis(F.col(column))
    if isinstance(data_type, IntegralType):
        return F.col(column).cast("bigint")
    raise SparkOperatorError(
        f"timestamp column {column!r} has type {data_type.simpleString()}; expected timestamp or epoch milliseconds "
        "(an integral type)")


def choose_time_mode(op: WindowingOptions, requested: str = "auto", watermark_rows: bool = False) -> str:
    """ProcessingTime when processing time matters (processing-time triggers, fixed-lag watermark,
    idle timeouts) or the operator computes its watermark from the heartbeats (a per-partition one:
    Spark's event-time timers follow Spark's watermark, which runs ahead of it) or takes it from its
    upstream's watermark rows (``watermark_rows``: a chained stage after a per-partition watermark),
    EventTime otherwise: one mode per query (docs/contributing/measured-design.md, "What Spark's stateful
    API gives and costs")."""
    if requested not in ("auto", "EventTime", "ProcessingTime"):
        raise SparkOperatorError(f"time_mode {requested!r} is not one of 'auto', 'EventTime', 'ProcessingTime'")
    if watermark_rows and requested == "EventTime":
        raise SparkOperatorError(
            f"{op.label()}: time_mode 'EventTime' cannot be given to a stage after a per-partition watermark "
            "(bounded_disorder(..., partition=...)): it follows its upstream's watermark, which reaches it as rows, "
            "in processing-time mode; give time_mode='auto' or 'ProcessingTime'")
    if requested != "auto":
        return requested
    return "ProcessingTime" if (needs_processing_time(op.trigger, op.watermark, idle_timeout_of(op))
                                or partition_of(op.watermark) is not None or watermark_rows) else "EventTime"


def idle_timeout_of(op: WindowingOptions) -> Optional[int]:
    """The watermark's idle timeout (``watermarks.idle_advanced``), or a merge's for its inputs: it
    needs processing time, so the query runs in ProcessingTime mode, where a ``processingTime``
    trigger runs batches without data."""
    return getattr(op.watermark, "idle_timeout", None) or getattr(op, "idle_timeout", None)


def check_partition_column(op: WindowingOptions, columns: list[str], where: str = "the DataFrame") -> None:
    """A per-partition watermark's column (``bounded_disorder(partition=...)``) is one of ``columns``."""
    partition = partition_of(op.watermark)
    if partition is not None and partition not in columns:
        raise SparkOperatorError(f"{op.label()}: watermark=bounded_disorder(..., partition={partition!r}) names a "
                                 f"column that is not in {where} (columns: {columns})")


def needs_heartbeats(op: WindowingOptions) -> bool:
    """Whether every key group must learn of every batch's input (``scan.heartbeat``): an idle timeout
    (the stream's or a merge input's), or a per-partition watermark (each partition's largest event
    time)."""
    return idle_timeout_of(op) is not None or partition_of(op.watermark) is not None


def refuse_derived_panes(df: DataFrame, op: WindowingOptions) -> None:
    """Rows derived from an operator's panes (filtered, selected...) have lost what a chained stage
    needs (the step of the batch that made each pane, times in ms): refused, rather than read as
    raw rows whose watermark Spark has already moved past."""
    plan = _logical_plan(df)
    if plan is not None and PHASE_COLUMN in plan:
        raise SparkOperatorError(
            f"{op.label()} is applied to rows derived from a stateful operator's output: apply it to the operator's "
            "panes themselves (op2.apply(op1.apply(df)) or op1.then(op2).apply(df)), and filter after it")


def declared_schema(schema: Union[str, StructType, None]) -> Optional[StructType]:
    """A schema given to apply() instead of asking the DataFrame (which analyses it: Spark
    Declarative Pipelines forbid that inside query functions)."""
    if schema is None or isinstance(schema, StructType):
        return schema
    from pyspark.sql.types import _parse_datatype_string

    parsed = _parse_datatype_string(schema)
    if not isinstance(parsed, StructType):
        raise SparkOperatorError(f"schema {schema!r} is not a struct (give 'name type, name type, ...')")
    return parsed


def require_streaming(df: Any, what: str = "apply()", trusted: bool = False) -> None:
    """A streaming DataFrame of a session that can run the operator (``session.check_session``);
    ``trusted``: a declared schema (Spark Declarative Pipelines), where nothing is asked of it."""
    if not isinstance(df, DataFrame) and not type(df).__name__ == "DataFrame":
        raise SparkOperatorError(f"{what} takes a Spark DataFrame, got {type(df).__name__}")
    if not trusted:
        check_session(df.sparkSession)
    if not trusted and not df.isStreaming:
        raise SparkOperatorError(
            f"{what} needs a streaming DataFrame; this one is a batch DataFrame. Read the same data with "
            "spark.readStream (same format and schema; run the query with trigger(availableNow=True) to stop when "
            "the files end), or, for a small batch, replay its rows locally: op.run_local(TestStream()"
            ".add_elements(*[r.asDict() for r in df.collect()]).advance_watermark_to_infinity()) "
            "(windowed_operator.testing.TestStream).")


def check_state_encoding(state_encoding: str) -> None:
    if state_encoding not in ("json", "pickle"):
        raise SparkOperatorError(f"state_encoding {state_encoding!r} is not one of 'json' (data only, the default) "
                                 "or 'pickle' (values of any type; the checkpoint must be trusted)")


def resolve_column(df: DataFrame, given: Optional[str], configured: Any, role: str, setting: str,
                   columns: Optional[list[str]] = None) -> str:
    """The column playing ``role`` (timestamp, key): passed to apply() or named on the operator."""
    name = given or (configured if isinstance(configured, str) else None)
    if name is None:
        raise SparkOperatorError(f"the operator needs a {role} column on Spark: set {setting}='<column>' on the "
                                 f"operator or pass {setting}= to apply()")
    columns = columns if columns is not None else df.columns
    if name not in columns:
        raise SparkOperatorError(f"{role} column {name!r} is not in the DataFrame (columns: {columns})")
    return name


def end_of_input_marker(df: DataFrame, column: Optional[str], columns: Optional[list[str]] = None) -> Optional[Column]:
    """The condition that makes a row an end-of-input marker: the boolean column the caller named
    (None: no row ends the input; no event time does, however large)."""
    if column is None:
        return None
    columns = columns if columns is not None else df.columns
    if column not in columns:
        raise SparkOperatorError(f"end_of_input column {column!r} is not in the DataFrame (columns: {columns})")
    return F.coalesce(F.col(column).cast("boolean"), F.lit(False))


def with_operator_watermark(op: WindowingOptions, df: DataFrame, ts_col: str, schema: Optional[StructType] = None,
                            marker: Optional[Column] = None) -> DataFrame:
    """Apply the operator's watermark policy to one input: Spark's ``withWatermark`` on a helper
    column for bounded disorder (per partition too: there Spark's only tells the end of input, the
    processor computes the watermark from the heartbeats); the input's own watermark for
    ``upstream``; nothing for a fixed lag (the processor computes it from the batch clock).

    The helper holds each row's event time, except that an end-of-input marker row holds
    ``END_OF_INPUT`` and a row at or after it holds null: such a row is a bad element (the
    processor rejects it), and it must not move the watermark to the end of time; so does a row more
    than ``max_future_skew`` ahead of the batch's time."""
    if marker is not None and isinstance(op.watermark, FixedLagWatermark):
        raise SparkOperatorError("end_of_input needs an event-time watermark (bounded_disorder or upstream): a "
                                 "fixed-lag watermark follows processing time, which no marker row can move")
    if isinstance(op.watermark, BoundedDisorderWatermark):
        event_ms = event_time_ms(df, ts_col, schema)
        latest = F.lit(latest_event_time())
        if op.max_future_skew is not None:  # against the batch's time, as the processor checks it
            latest = F.least(latest, F.unix_millis(F.current_timestamp()) + F.lit(op.max_future_skew))
        helper = F.when(event_time_in_range(event_ms, latest), F.timestamp_millis(event_ms))
        if marker is not None:
            helper = F.when(marker, F.timestamp_millis(F.lit(END_OF_INPUT))).otherwise(helper)
        return df.withColumn(WATERMARK_HELPER, helper).withWatermark(
            WATERMARK_HELPER, f"{op.watermark.max_disorder} milliseconds")
    if not isinstance(op.watermark, FixedLagWatermark) and not _has_event_time_watermark(df):
        raise SparkOperatorError(
            "the operator uses the upstream watermark but the DataFrame has none: call "
            f"df.withWatermark({ts_col!r}, '<delay>') first, or give the operator watermark=bounded_disorder(ms); "
            "without a watermark no window would ever fire")
    return df


_marker_counts = itertools.count(1)  # (observation names are unique in a session's queries)


def drop_end_of_input(df: DataFrame, ts_ms_col: str, has_helper: bool, marker: Optional[Column],
                      marker_column: Optional[str]) -> DataFrame:
    """Remove the end-of-input marker rows (they only move the watermark), the marker column and
    the watermark helper.

    The filter references the watermarked column, so that Spark cannot push it below the watermark
    (the marker row must still move the watermark): the helper, which only a marker sets to
    ``END_OF_INPUT``; or, under an upstream watermark, the event time (a marker keeps a row out
    unless its time is null, and a marker without a time ends nothing: the processor rejects it)."""
    if marker is not None:  # (counted, so that a batch's "rows in" leaves the marker out: ``progress``)
        df = df.observe(f"{OBSERVATION_PREFIX}end of input {next(_marker_counts)}",
                        F.count(F.when(marker, 1)).alias(MARKER_ROWS))
    if has_helper:
        df = df.where(F.col(WATERMARK_HELPER).isNull()
                      | (F.col(WATERMARK_HELPER) < F.timestamp_millis(F.lit(END_OF_INPUT))))
        df = df.drop(WATERMARK_HELPER)
    elif marker is not None:
        df = df.where(~marker | F.col(ts_ms_col).isNull())
    return df.drop(marker_column) if marker_column is not None else df


#: The column a gap expression of ``SessionWindows(gap=<Column>)`` is computed into.
GAP_COLUMN = "__wo_gap"


def resolved_gap(op: WindowingOptions, df: DataFrame, gap: Any, columns: list[str], where: str = "the DataFrame",
                 analyse: bool = True) -> Column:
    """A session gap given as a column name or a column expression, checked against ``df`` (``where``
    names it in errors): the column, or the expression.  ``analyse=False`` (a declared schema): an
    expression is trusted to resolve."""
    if isinstance(gap, str):
        if gap not in columns:
            raise SparkOperatorError(f"{op.label()}: session gap column {gap!r} is not in {where} (columns: {columns})")
        return F.col(gap)
    if not isinstance(gap, Column):
        raise SparkOperatorError(f"{op.label()}: session gap {gap!r} is not a column name, a Column or a callable")
    try:
        selected = df.select(gap)  # (classic Spark analyses here; Spark Connect only when asked)
        if analyse:
            _ = selected.schema
    except Exception as exc:  # an expression over columns the DataFrame lacks, or of an unknown function
        raise SparkOperatorError(f"{op.label()}: session gap expression {gap} does not resolve on {where}: "
                                 f"{str(exc).splitlines()[0]}") from None
    return gap


def with_gap_column(op: OperatorBase, df: DataFrame, columns: list[str],
                    analyse: bool = True) -> tuple[OperatorBase, DataFrame, list[str]]:
    """Sessions whose gap is each row's: a named column is read as it is; a column expression is
    computed into ``GAP_COLUMN``, which the operator then reads (a callable reads each row as a dict)."""
    gap = element_gap(op.window)
    if gap is None or callable(gap):
        return op, df, columns
    expression = resolved_gap(op, df, gap, columns, analyse=analyse)
    if isinstance(gap, str):
        return op, df, columns
    assert op.window is not None  # (element_gap found a gap: the operator's own session windows)
    op = op.model_copy(update={"window": op.window.model_copy(update={"gap": GAP_COLUMN})})
    return op, df.withColumn(GAP_COLUMN, expression), [*columns, GAP_COLUMN]


@dataclass(frozen=True)
class RawInput:
    """One operator's raw input, read and checked for its stage: the operator (with a gap column where
    its sessions need one), the rows (event time as epoch ms, watermarked, end-of-input rows dropped),
    their schema and columns (without the end-of-input column), the event-time and key columns, and
    the schema ``apply()`` was given (None: the DataFrame's)."""

    op: OperatorBase
    projected: DataFrame
    shape: StructType
    columns: list[str]
    ts_col: str
    key_col: Optional[str]
    declared: Optional[StructType]

    def core_operator(self) -> OperatorBase:
        """The operator reading the resolved columns (what the processor and the plan hold)."""
        updates: dict[str, Any] = {"timestamp": self.ts_col}
        if self.op.keyed:
            updates["key"] = self.key_col
        return self.op.model_copy(update=updates)

    def type_of(self, column: Any) -> Optional[str]:
        """The Spark type of a column of the input (None: no such column)."""
        return self.shape[column].dataType.simpleString() if isinstance(column, str) \
            and column in self.shape.fieldNames() else None


def read_raw_input(op: OperatorBase, df: DataFrame, *, key: Optional[str], timestamp: Optional[str],
                   schema: Union[str, StructType, None], end_of_input: Optional[str]) -> RawInput:
    """``df`` checked and read for ``op``: the columns named, the watermark applied, the end-of-input
    rows dropped.  Casting the event-time column to epoch ms (and dropping the helper) keeps Spark
    from dropping rows behind its watermark before the operator: lateness is decided in the core."""
    declared = declared_schema(schema)
    require_streaming(df, trusted=declared is not None)
    if declared is None:
        refuse_derived_panes(df, op)
    shape = declared if declared is not None else df.schema
    columns = [f.name for f in shape.fields]
    ts_col = resolve_column(df, timestamp, op.timestamp, "timestamp", "timestamp", columns)
    key_col = resolve_column(df, key, getattr(op, "key", None), "key", "key", columns) if op.keyed else None
    if op.window is None:
        raise SparkOperatorError(
            f"{op.label()} has no window option: it keeps the windows of an upstream operator's panes, so apply it "
            "to that operator's output (op2.apply(op1.apply(df)), or op1.then(op2).apply(df)); on other rows give "
            "it a window option")
    check_partition_column(op, columns)
    op, df, columns = with_gap_column(op, df, columns, analyse=declared is None)
    event_ms = event_time_ms(df, ts_col, shape)
    marker = end_of_input_marker(df, end_of_input, columns)
    df = with_operator_watermark(op, df, ts_col, shape, marker)
    has_helper = isinstance(op.watermark, BoundedDisorderWatermark)
    projected = drop_end_of_input(df.withColumn(ts_col, event_ms), ts_col, has_helper, marker, end_of_input)
    if end_of_input is not None:
        shape = StructType([f for f in shape.fields if f.name != end_of_input])
        columns = [name for name in columns if name != end_of_input]
    return RawInput(op, projected, shape, columns, ts_col, key_col, declared)


def value_types(raw: RawInput, value_type: Optional[str]) -> tuple[str, str]:
    """The Spark type of what the accumulation folds (a column, a record of columns, whole rows, or
    ``UNKNOWN_TYPE`` for a callable's results) and of its output (``value_type`` where given);
    an input the accumulation cannot fold, or an output type not known, is refused."""
    op, shape, columns, ts_col = raw.op, raw.shape, raw.columns, raw.ts_col
    record = op.value if isinstance(op.value, dict) else None
    value_field = None if record is not None else op.value if isinstance(op.value, str) else \
        op.accumulation.input_field()
    if value_field is not None and value_field not in columns:
        raise SparkOperatorError(f"value column {value_field!r} is not in the DataFrame (columns: {columns})")
    input_type = (shape[value_field].dataType.simpleString() if value_field is not None and value_field != ts_col
                  else "bigint" if value_field is not None else UNKNOWN_TYPE if callable(op.value)
                  else shape.simpleString())
    if record is not None:  # a record of columns: a struct of them (the event time as epoch ms)
        missing = {name: column for name, column in record.items() if column not in columns}
        if missing:
            raise SparkOperatorError(f"{op.label()}: value record fields {missing} name columns that are not in the "
                                     f"DataFrame (columns: {columns})")
        input_type = StructType([StructField(name, LongType() if column == ts_col else shape[column].dataType, True)
                                 for name, column in record.items()]).simpleString()
    if not callable(op.value):  # (a callable's output type is not known here)
        refusal = op.accumulation.input_type_refusal(input_type)
        if refusal is not None:
            what = f"column {value_field!r} of type {input_type}" if value_field is not None else \
                f"whole rows ({input_type}): name a column with value= or the accumulation's field"
            raise SparkOperatorError(f"{op.label()}: {type(op.accumulation).__name__} cannot fold {what}; {refusal}")
    resolved = value_type or op.value_type or known_type(op.accumulation.output_type(input_type))
    if resolved is None:
        what = "the results of a callable value extractor" if input_type == UNKNOWN_TYPE else f"input type {input_type}"
        raise SparkOperatorError(
            f"cannot map the output of {type(op.accumulation).__name__} over {what} to a Spark type; "
            "pass value_type='<DDL type>' to apply()")
    return input_type, resolved
