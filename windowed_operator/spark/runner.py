"""``op.apply(df)``: wire an operator into a streaming query around ``transformWithStateInPandas``."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType, StructType, TimestampNTZType, TimestampType

from ..columnar import columnar_form, supports_columnar
from ..operator import OperatorBase, WindowingOptions
from ..watermarks import BoundedDisorderWatermark, FixedLagWatermark
from .clock import FileClock, SparkBatchClock
from .connect_compat import is_connect, parse_ddl_schema, transform_with_state
from .plan import END_OF_INPUT, SparkPlan, vector_value_column
from .preaggregate import PreAggregation, preaggregable
from .processor import GROUP_COLUMN, WindowedStatefulProcessor

_WATERMARK_HELPER = "__wo_event_time"
_GROUP_COLUMN = GROUP_COLUMN


class SparkOperatorError(ValueError):
    """A DataFrame or operator that the Spark runner cannot run, with the column or type at fault."""


def _has_event_time_watermark(df: DataFrame) -> bool:
    try:
        return "EventTimeWatermark" in df._jdf.queryExecution().logical().toString()
    except Exception:  # Spark Connect has no _jdf: trust the caller
        return True


def _event_time_ms(df: DataFrame, column: str, schema: Optional[StructType] = None) -> Column:
    data_type = (schema or df.schema)[column].dataType
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return F.unix_millis(F.col(column))
    if isinstance(data_type, IntegralType):
        return F.col(column).cast("bigint")
    raise SparkOperatorError(
        f"timestamp column {column!r} has type {data_type.simpleString()}; expected timestamp or epoch milliseconds "
        "(an integral type)")


def choose_time_mode(op: WindowingOptions, requested: str = "auto") -> str:
    """ProcessingTime when processing time matters (processing-time triggers, fixed-lag watermark),
    EventTime otherwise: one mode per query (SPARK_NOTES.md)."""
    if requested in ("EventTime", "ProcessingTime"):
        return requested
    if requested != "auto":
        raise SparkOperatorError(f"time_mode {requested!r} is not one of 'auto', 'EventTime', 'ProcessingTime'")
    if op.trigger.to_trigger().uses_processing_time() or isinstance(op.watermark, FixedLagWatermark):
        return "ProcessingTime"
    return "EventTime"


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
    if not isinstance(df, DataFrame) and not type(df).__name__ == "DataFrame":
        raise SparkOperatorError(f"{what} takes a Spark DataFrame, got {type(df).__name__}")
    if not trusted and not df.isStreaming:
        raise SparkOperatorError(f"{what} needs a streaming DataFrame (spark.readStream...); this DataFrame is not "
                                 "streaming. For a finite batch, use op.run_local() or read it with readStream.")


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


def with_operator_watermark(op: WindowingOptions, df: DataFrame, ts_col: str,
                            schema: Optional[StructType] = None) -> DataFrame:
    """Apply the operator's watermark policy to one input: Spark's ``withWatermark`` on a helper
    column for bounded disorder; the input's own watermark for ``upstream``; nothing for a fixed lag
    (the processor computes it from the batch clock)."""
    if isinstance(op.watermark, BoundedDisorderWatermark):
        return df.withColumn(_WATERMARK_HELPER, F.timestamp_millis(_event_time_ms(df, ts_col, schema))).withWatermark(
            _WATERMARK_HELPER, f"{op.watermark.max_disorder} milliseconds")
    if not isinstance(op.watermark, FixedLagWatermark) and not _has_event_time_watermark(df):
        raise SparkOperatorError(
            "the operator uses the upstream watermark but the DataFrame has none: call "
            f"df.withWatermark({ts_col!r}, '<delay>') first, or give the operator watermark=bounded_disorder(ms); "
            "without a watermark no window would ever fire")
    return df


def drop_end_of_input(df: DataFrame, ts_ms_col: str, has_helper: Optional[bool] = None) -> DataFrame:
    """Remove END_OF_INPUT sentinel rows (they only move the watermark) and the watermark helper.

    The filter references the watermarked column so that Spark cannot push it below the watermark
    (the sentinel row must still move the watermark)."""
    if has_helper is None:
        has_helper = _WATERMARK_HELPER in df.columns
    if has_helper:
        df = df.where(F.col(_WATERMARK_HELPER).isNull()
                      | (F.col(_WATERMARK_HELPER) < F.timestamp_millis(F.lit(END_OF_INPUT))))
        return df.drop(_WATERMARK_HELPER)
    return df.where(F.col(ts_ms_col).isNull() | (F.col(ts_ms_col) < F.lit(END_OF_INPUT)))


def resolve_key_groups(df: DataFrame, key_groups: Optional[int]) -> int:
    """Four groups per shuffle partition by default: few enough that each micro-batch makes few
    Python calls and state round trips (benchmarks/run.py: 8 groups ran 1.5x faster than 64 on
    local[2]), enough to keep every partition busy."""
    if key_groups is not None:
        if key_groups < 1:
            raise SparkOperatorError(f"key_groups must be at least 1, got {key_groups}")
        return key_groups
    try:
        partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    except Exception:  # pragma: no cover - an unusual session: fall back to a fixed number
        partitions = 16
    return 4 * max(1, partitions)


def run_processor(projected: DataFrame, plan: SparkPlan, key_col: Optional[str],
                  columns: Optional[list[str]] = None) -> DataFrame:
    """Group by key group, run the processor, convert times to timestamps.

    The key group is ``pmod(xxhash64(key), key_groups)``: a fixed function of the key, so a
    restarted query finds each key's state where it left it (do not change ``key_groups`` between
    runs of one checkpoint)."""
    if key_col is None:
        projected = projected.withColumn(_GROUP_COLUMN, F.lit(0))
    else:
        projected = projected.withColumn(_GROUP_COLUMN, F.pmod(F.xxhash64(F.col(key_col)), F.lit(plan.key_groups)))
    columns = [*(columns if columns is not None else projected.columns)]
    if _GROUP_COLUMN not in columns:
        columns.append(_GROUP_COLUMN)
    plan = dataclasses.replace(plan, input_columns=tuple(columns))
    if is_connect(projected):  # build the plan without analysis requests (Spark Declarative Pipelines)
        out = transform_with_state(projected, _GROUP_COLUMN, WindowedStatefulProcessor(plan),
                                   parse_ddl_schema(plan.processor_schema()), plan.time_mode, columns)
    else:
        out = projected.groupBy(_GROUP_COLUMN).transformWithStateInPandas(
            statefulProcessor=WindowedStatefulProcessor(plan), outputStructType=plan.processor_schema(),
            outputMode="Append", timeMode=plan.time_mode)
    columns: list[Column] = []
    if plan.keyed:
        columns.append(F.col("key"))
    columns += [F.timestamp_millis("window_start").alias("window_start"),
                F.timestamp_millis("window_end").alias("window_end"), F.col("value"), F.col("timing"),
                F.col("pane_index"), F.col("is_first"), F.col("is_last"), F.col("is_retraction"),
                F.timestamp_millis("timestamp").alias("timestamp")]
    if plan.side_outputs:
        columns += [F.col("record_type"), F.col("reason"), F.col("element"),
                    F.timestamp_millis("element_timestamp").alias("element_timestamp")]
    return out.select(*columns)


def apply_operator(op: OperatorBase, df: DataFrame, *, key: Optional[str] = None, timestamp: Optional[str] = None,
                   value_type: Optional[str] = None, time_mode: str = "auto",
                   clock: Union[SparkBatchClock, FileClock, None] = None, key_groups: Optional[int] = None,
                   vectorized: bool = True, schema: Union[str, StructType, None] = None,
                   drop_counter: Any = None, preaggregate: bool = True) -> DataFrame:
    """Return the streaming DataFrame of panes of ``op`` over the streaming DataFrame ``df``.

    ``key_groups``: how many state values the keys are hashed into (default: 4 x
    ``spark.sql.shuffle.partitions``, itself fixed per checkpoint; keep it fixed too);
    ``vectorized=False`` forces the element-by-element path (the array path is used when the
    windows are assigned by timestamp and the accumulation has ``fold_array``);
    ``schema`` (DDL or StructType) declares the input's schema so that apply() never analyses the
    DataFrame — needed inside Spark Declarative Pipelines query functions, where analysis is
    forbidden; the DataFrame is then trusted to be streaming and to match it;
    ``drop_counter`` (``spark.sparkContext.accumulator(0)``) counts the late elements dropped;
    ``preaggregate=False`` hands the stateful operator every row instead of partials folded per
    (key, pane) in the scan stage (``preaggregate.py``; only with the columnar path and no
    late-data or dead-letter output).

    Output columns: ``key`` (keyed operators), ``window_start``, ``window_end`` (timestamps),
    ``value`` (typed by the accumulation), ``timing``, ``pane_index``, ``is_first``, ``is_last``,
    ``is_retraction``, ``timestamp``; plus ``record_type``, ``reason``, ``element``,
    ``element_timestamp`` when the operator has a late-data output or dead letters.
    Rows with event time >= ``END_OF_INPUT`` only move the watermark (to flush a finite input).
    """
    declared = declared_schema(schema)
    require_streaming(df, trusted=declared is not None)
    shape = declared if declared is not None else df.schema
    columns = [f.name for f in shape.fields]
    ts_col = resolve_column(df, timestamp, op.timestamp, "timestamp", "timestamp", columns)
    key_col = resolve_column(df, key, getattr(op, "key", None), "key", "key", columns) if op.keyed else None
    if op.window is None:
        raise SparkOperatorError("window propagation on Spark is not supported yet: give the operator a window option")

    event_ms = _event_time_ms(df, ts_col, shape)
    mode = choose_time_mode(op, time_mode)
    df = with_operator_watermark(op, df, ts_col, shape)
    # Casting the event-time column to epoch ms (and dropping the helper) keeps Spark from dropping
    # rows behind its watermark before the operator: lateness is decided in the core.
    has_helper = isinstance(op.watermark, BoundedDisorderWatermark)
    projected = drop_end_of_input(df.withColumn(ts_col, event_ms), ts_col, has_helper)

    value_field = op.value if isinstance(op.value, str) else op.accumulation.input_field()
    if value_field is not None and value_field not in columns:
        raise SparkOperatorError(f"value column {value_field!r} is not in the DataFrame (columns: {columns})")
    input_type = (shape[value_field].dataType.simpleString() if value_field is not None and value_field != ts_col
                  else "bigint" if value_field is not None else shape.simpleString())
    resolved_value_type = value_type or op.accumulation.output_type(input_type)
    if resolved_value_type is None:
        raise SparkOperatorError(
            f"cannot map the output of {type(op.accumulation).__name__} over input type {input_type} to a Spark type; "
            "pass value_type='<DDL type>' to apply()")

    updates: dict[str, Any] = {"timestamp": ts_col}
    if op.keyed:
        updates["key"] = key_col
    core_op = op.model_copy(update=updates)
    use_arrays, value_column = vector_value_column(core_op)
    plan = SparkPlan(
        operator=core_op, keyed=op.keyed, time_mode=mode, value_type=resolved_value_type,
        key_type=shape[key_col].dataType.simpleString() if key_col else None,
        side_outputs=op.late_data_output or op.on_bad_element == "dead_letter",
        clock=clock or SparkBatchClock(), key_column=key_col, time_column=ts_col, value_column=value_column,
        vectorized=vectorized and use_arrays, key_groups=resolve_key_groups(df, key_groups),
        drop_counter=drop_counter,
        integral_columns=(ts_col, *(f.name for f in shape.fields if isinstance(f.dataType, IntegralType))),
        columnar=vectorized and use_arrays and supports_columnar(core_op.window, core_op.accumulation, core_op.trigger,
                                                                 core_op.timestamp_combiner))
    value_spark_type = input_type if value_column is not None else None  # the array path reads value_field
    if preaggregate and plan.columnar and not plan.side_outputs and preaggregable(plan.key_type, value_spark_type):
        folding = PreAggregation(layout=core_op.window.pane_layout(), form=columnar_form(core_op.core_accumulation()),
                                 key_column=key_col, time_column=ts_col, value_column=value_column,
                                 key_type=plan.key_type, value_type=value_spark_type, reader=plan.record_reader())
        projected = projected.select(*folding.input_columns).mapInArrow(folding, folding.schema())
        columns = [name for name, _ in folding.fields()]
        plan = dataclasses.replace(plan, preaggregated=True, partial_columns=tuple(folding.aggregate_columns()))
    return run_processor(projected, plan, key_col, columns)
