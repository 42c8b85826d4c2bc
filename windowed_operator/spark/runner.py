"""``op.apply(df)``: wire an operator into a streaming query around ``transformWithStateInPandas``."""
from __future__ import annotations

import dataclasses
import sys
import warnings
from typing import Any, Optional, Union

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, IntegerType, IntegralType, LongType, StructField, StructType, TimestampNTZType,
                               TimestampType)

from ..columnar import columnar_form
from ..columnar_records import supports_columnar_path
from ..columnar_triggers import row_trigger
from ..operator import OperatorBase, WindowingOptions
from ..time import MAX_SHOWN_TIME, MIN_SHOWN_TIME, event_time_in_range, latest_event_time
from ..watermarks import BoundedDisorderWatermark, FixedLagWatermark, check_runs_on_spark, needs_processing_time
from ..windows.session_windows import SessionWindows, element_gap
from .clock import FileClock, SparkBatchClock
from .chain import Feed, apply_fed_operator, attach_feed, feed_of, pane_rows
from .errors import SparkOperatorError
from .connect_compat import is_connect, map_in_arrow, parse_ddl_schema, transform_with_state
from .plan import (BAD_COUNT_COLUMN, COUNT_COLUMNS, END_OF_INPUT, EVENT_TIME_COLUMN, LATE_COUNT_COLUMN,
                   PHASE_COLUMN, STAGE_COLUMN, WHOLE_ROWS, SparkPlan, array_values, vector_value_column)
from .preaggregate import PreAggregation, preaggregable
from .prechain import PreChaining
from .heartbeat import BEAT_COLUMN, Heartbeats, with_beat_column
from .session import check_session
from .packed_input import PACKED_COLUMN, PackRows, packing_conf
from .prefold import PreFolding, prefoldable
from .preselect import WEIGHT_COLUMN, PreSelection, preselectable
from .deferred import DeferredProcessor
from .settings import read_flag
from .processor import GROUP_COLUMN

_WATERMARK_HELPER = "__wo_event_time"
_GROUP_COLUMN = GROUP_COLUMN

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
    return "ProcessingTime" if needs_processing_time(op.trigger, op.watermark, idle_timeout_of(op)) else "EventTime"


def idle_timeout_of(op: WindowingOptions) -> Optional[int]:
    """The watermark's idle timeout (``watermarks.idle_advanced``), or a merge's for its inputs: it
    needs processing time, so the query runs in ProcessingTime mode, where a ``processingTime``
    trigger runs batches without data."""
    return getattr(op.watermark, "idle_timeout", None) or getattr(op, "idle_timeout", None)


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
    column for bounded disorder; the input's own watermark for ``upstream``; nothing for a fixed lag
    (the processor computes it from the batch clock).

    The helper holds each row's event time, except that an end-of-input marker row holds
    ``END_OF_INPUT`` and a row at or after it holds null: such a row is a bad element (the
    processor rejects it), and it must not move the watermark to the end of time; so does a row more
    than ``max_future_skew`` ahead of the batch's time."""
    check_runs_on_spark(op.watermark, op.label(), SparkOperatorError)
    if marker is not None and isinstance(op.watermark, FixedLagWatermark):
        raise SparkOperatorError("end_of_input needs an event-time watermark (bounded_disorder or upstream): a "
                                 "fixed-lag watermark follows processing time, which no marker row can move")
    if isinstance(op.watermark, BoundedDisorderWatermark):
        event_ms = _event_time_ms(df, ts_col, schema)
        latest = F.lit(latest_event_time())
        if op.max_future_skew is not None:  # against the batch's time, as the processor checks it
            latest = F.least(latest, F.unix_millis(F.current_timestamp()) + F.lit(op.max_future_skew))
        helper = F.when(event_time_in_range(event_ms, latest), F.timestamp_millis(event_ms))
        if marker is not None:
            helper = F.when(marker, F.timestamp_millis(F.lit(END_OF_INPUT))).otherwise(helper)
        return df.withColumn(_WATERMARK_HELPER, helper).withWatermark(
            _WATERMARK_HELPER, f"{op.watermark.max_disorder} milliseconds")
    if not isinstance(op.watermark, FixedLagWatermark) and not _has_event_time_watermark(df):
        raise SparkOperatorError(
            "the operator uses the upstream watermark but the DataFrame has none: call "
            f"df.withWatermark({ts_col!r}, '<delay>') first, or give the operator watermark=bounded_disorder(ms); "
            "without a watermark no window would ever fire")
    return df


def drop_end_of_input(df: DataFrame, ts_ms_col: str, has_helper: bool, marker: Optional[Column],
                      marker_column: Optional[str]) -> DataFrame:
    """Remove the end-of-input marker rows (they only move the watermark), the marker column and
    the watermark helper.

    The filter references the watermarked column, so that Spark cannot push it below the watermark
    (the marker row must still move the watermark): the helper, which only a marker sets to
    ``END_OF_INPUT``; or, under an upstream watermark, the event time (a marker keeps a row out
    unless its time is null, and a marker without a time ends nothing: the processor rejects it)."""
    if has_helper:
        df = df.where(F.col(_WATERMARK_HELPER).isNull()
                      | (F.col(_WATERMARK_HELPER) < F.timestamp_millis(F.lit(END_OF_INPUT))))
        df = df.drop(_WATERMARK_HELPER)
    elif marker is not None:
        df = df.where(~marker | F.col(ts_ms_col).isNull())
    return df.drop(marker_column) if marker_column is not None else df


#: Key groups when apply() is not told: a constant, never derived from the session (a restart
#: with another ``spark.sql.shuffle.partitions`` must find every key in the group it left it in).
#: On local[2], 8 to 16 groups ran fastest (benchmarks/run.py: 8 groups 1.5x faster than 64); on
#: a cluster, pass about 4 x the cores the query should use.
DEFAULT_KEY_GROUPS = 16


def resolve_key_groups(key_groups: Optional[int]) -> int:
    """The number of key groups: fixed for the life of a checkpoint (its state's fingerprint holds
    it, and a restart with another number is refused)."""
    if key_groups is None:
        return DEFAULT_KEY_GROUPS
    if isinstance(key_groups, bool) or not isinstance(key_groups, int) or key_groups < 1:
        raise SparkOperatorError(f"key_groups must be a positive integer, got {key_groups!r}")
    return key_groups


_observed_names: dict[str, int] = {}


def observation_name(op: WindowingOptions) -> str:
    """The name of the operator's counts in ``query.lastProgress.observedMetrics``: its ``name``, or
    its description numbered by how many operators of this process share it (names must be unique
    within a query)."""
    base = f"windowed_operator {op.name}" if op.name else f"windowed_operator {op.label()}"
    seen = _observed_names.get(base, 0)
    _observed_names[base] = seen + 1
    return base if op.name or not seen else f"{base} #{seen + 1}"


def observe_drops(out: DataFrame, plan: SparkPlan, name: str) -> DataFrame:
    """Sum the processor's count rows into observed metrics (``name``), per micro-batch, then drop
    them: late elements dropped and bad elements show in the query's progress, late-data output or not."""
    late, bad = F.col(LATE_COUNT_COLUMN), F.col(BAD_COUNT_COLUMN)
    observed = out.observe(name,
                           F.coalesce(F.sum(late), F.lit(0)).alias("late_rows_dropped"),
                           F.coalesce(F.sum(bad), F.lit(0)).alias("bad_rows"),
                           F.count(F.when(late.isNull() & F.col("window_start").isNotNull(), 1)).alias("panes"))
    return observed.where(late.isNull()).drop(*COUNT_COLUMNS)


def shown_timestamp(column: str) -> Column:
    """An epoch-ms column as a timestamp, null beyond what Python can hold (``time.shown_time``)."""
    ms = F.col(column)
    return F.when(ms.between(MIN_SHOWN_TIME, MAX_SHOWN_TIME), F.timestamp_millis(ms)).alias(column)


#: ``false`` keeps each key's record in its own state entry instead of in key shards (``SparkPlan.key_shards``).
KEY_SHARDS_CONF = "spark.windowed_operator.keyShards"
#: Settings a release removed, and what now holds: their alternative won no measured case (issue 55,
#: docs/guides/settings.md), and a checkpoint written with it is moved in at restart
#: (``state.transitions``).  A job that still sets one is warned once per process, and runs.
REMOVED_CONFS: dict[str, str] = {
    "spark.windowed_operator.paneLog": "the default trigger with no allowed lateness always keeps its state in "
                                       "the pane log or the window log",
    "spark.windowed_operator.rowShards": "session and window rows are always kept in row shards",
}
_warned: set[str] = set()


def warn_removed_confs(df: DataFrame) -> None:
    """Warn once per removed setting the session still sets (``REMOVED_CONFS``): it is ignored."""
    try:
        conf = df.sparkSession.conf
        found = [name for name in REMOVED_CONFS if name not in _warned and conf.get(name, None) is not None]
    except Exception:  # noqa: BLE001 - a session without a readable conf sets none
        return
    level, frame = 1, sys._getframe(0)  # (the warning names the user's line: the first frame outside the library)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("windowed_operator"):
        level, frame = level + 1, frame.f_back
    for name in found:
        _warned.add(name)
        warnings.warn(f"{name} was removed and is ignored: {REMOVED_CONFS[name]} (checkpoints written with it "
                      "restart; remove the setting from the job)", UserWarning, stacklevel=level)


def conf_flag(df: DataFrame, name: str, default: bool = True) -> bool:
    """A boolean setting of the session (``settings.read_flag``; a conf that cannot be read: ``default``)."""
    try:
        conf = df.sparkSession.conf
    except Exception:  # noqa: BLE001 - a session without a readable conf keeps the default
        return default
    return read_flag(conf, name, default)


def run_processor(projected: DataFrame, plan: SparkPlan, key_col: Optional[str],
                  columns: Optional[list[str]] = None, observation: Optional[str] = None,
                  inherited_windows: Any = None) -> DataFrame:
    """Group by key group, run the processor, convert times to timestamps.

    The key group is ``pmod(xxhash64(key), key_groups)``: a fixed function of the key, so a
    restarted query finds each key's state where it left it (do not change ``key_groups`` between
    runs of one checkpoint: the state's fingerprint refuses it).  ``observation``: the name of its
    observed metrics (``observation_name`` when not given); ``inherited_windows``: where the operator
    keeps its upstream's windows, the window option they come from (``Feed.windows``)."""
    source, source_plan, source_columns = projected, plan, columns
    group = F.lit(0) if key_col is None else F.pmod(F.xxhash64(F.col(key_col)), F.lit(plan.key_groups))
    if plan.heartbeats:  # a heartbeat row names its group (``heartbeat``)
        group = F.coalesce(F.col(BEAT_COLUMN), group)
    projected = projected.withColumn(_GROUP_COLUMN, group)
    columns = [*(columns if columns is not None else projected.columns)]
    if _GROUP_COLUMN not in columns:
        columns.append(_GROUP_COLUMN)
    packed, timezone = packing_conf(projected)
    # A scan-stage fold already hands few rows (partials, chains, pre-selected rows): packing them is
    # one more Python pass for little (Nexmark, runs interleaved: q7 0.92x with it, q5 1.01x, q11's
    # chains 0.92x; where no fold runs, q11 1.09x, q5r 1.13x; those runs are in git history,
    # the current figures in benchmarks/results/nexmark_q8_bound_and_packing.txt).
    packed = packed and not plan.folded_in_scan
    plan = dataclasses.replace(plan, input_columns=tuple(columns), packed_input=packed, timezone=timezone,
                               key_shards=conf_flag(projected, KEY_SHARDS_CONF))
    warn_removed_confs(projected)
    if packed:  # one row per key group and scan chunk instead of pyspark's row-by-row handoff
        # (the group column keeps its type: pmod of xxhash64 is a bigint, the unkeyed group an int)
        group_type = LongType() if key_col is not None else IntegerType()
        packed_schema = StructType([StructField(_GROUP_COLUMN, group_type, True),
                                    StructField(PACKED_COLUMN, BinaryType(), True)])
        projected = map_in_arrow(projected, PackRows(_GROUP_COLUMN), packed_schema, columns)
        columns = [_GROUP_COLUMN, PACKED_COLUMN]
    event_time_column = EVENT_TIME_COLUMN if plan.event_time_output else ""
    if is_connect(projected):  # build the plan without analysis requests (Spark Declarative Pipelines)
        out = transform_with_state(projected, _GROUP_COLUMN, DeferredProcessor.of(plan),
                                   parse_ddl_schema(plan.processor_schema()), plan.time_mode, columns,
                                   event_time_column)
    else:
        out = projected.groupBy(_GROUP_COLUMN).transformWithStateInPandas(
            statefulProcessor=DeferredProcessor.of(plan), outputStructType=plan.processor_schema(),
            outputMode="Append", timeMode=plan.time_mode, eventTimeColumnName=event_time_column)
    observation = observation or observation_name(plan.operator)
    out = observe_drops(out, plan, observation)
    frame = pane_rows(out, plan)

    def event_time_frame() -> DataFrame:  # the pane rows with their event time (the stage planned again)
        if plan.event_time_output:
            return pane_rows(out, plan, event_time=True)
        again = run_processor(source, dataclasses.replace(source_plan, event_time_output=True), key_col,
                              source_columns, observation=observation, inherited_windows=inherited_windows)
        return feed_of(again).event_time_frame()  # type: ignore[union-attr,misc]

    feed = Feed(frame=frame, operator=plan.operator, end_of_input_watermark=plan.end_of_input_watermark,
                observation=observation, event_time_frame=event_time_frame, time_mode=plan.time_mode,
                windows=plan.operator.window if plan.operator.window is not None else inherited_windows,
                stage=plan.stage or 0,
                with_side_rows=pane_rows(out, plan, side_rows=True) if plan.side_outputs else None)
    shown: list[Column] = []
    if plan.keyed:
        shown.append(F.col("key"))
    shown += [shown_timestamp("window_start"), shown_timestamp("window_end"), F.col("value"), F.col("timing"),
                F.col("pane_index"), F.col("is_first"), F.col("is_last"), F.col("is_retraction"),
                shown_timestamp("timestamp")]
    if plan.side_outputs:
        shown += [F.col("record_type"), F.col("reason"), F.col("element"), shown_timestamp("element_timestamp")]
    if plan.stage_column:
        shown.append(F.col(STAGE_COLUMN))
    if plan.event_time_output:
        shown.append(F.col(EVENT_TIME_COLUMN))
    return attach_feed(out.select(*shown), feed)


def apply_operator(op: OperatorBase, df: DataFrame, *, key: Optional[str] = None, timestamp: Optional[str] = None,
                   value_type: Optional[str] = None, time_mode: str = "auto",
                   clock: Union[SparkBatchClock, FileClock, None] = None, key_groups: Optional[int] = None,
                   vectorized: bool = True, schema: Union[str, StructType, None] = None,
                   drop_counter: Any = None, preaggregate: bool = True,
                   end_of_input: Optional[str] = None, state_encoding: str = "json",
                   spark_event_time: bool = False) -> DataFrame:
    """Return the streaming DataFrame of panes of ``op`` over the streaming DataFrame ``df``.

    ``key_groups``: how many state values the keys are hashed into (default ``DEFAULT_KEY_GROUPS``,
    whatever the session; fixed for the life of a checkpoint: a restart with another number is
    refused, like any change the stored state cannot follow, see ``windowed_operator.fingerprint``);
    ``vectorized=False`` forces the element-by-element path (the array path is used when the
    windows are assigned by timestamp and the accumulation has ``fold_array``);
    ``schema`` (DDL or StructType) declares the input's schema so that apply() never analyses the
    DataFrame — needed inside Spark Declarative Pipelines query functions, where analysis is
    forbidden; the DataFrame is then trusted to be streaming and to match it;
    ``drop_counter`` (``spark.sparkContext.accumulator(0)``) counts the late elements dropped;
    ``preaggregate=False`` hands the stateful operator every row instead of partials folded per
    (key, pane) in the scan stage (``preaggregate.py``; only with the columnar path and no
    late-data or dead-letter output);
    ``state_encoding="pickle"`` lets the state hold values that are not plain data (a custom
    accumulator's objects), pickled: reading such a checkpoint runs code, so only for a trusted
    checkpoint location (the default "json" refuses them with the type named);
    ``end_of_input`` names a boolean column: a row where it is true ends the input (every window
    closes, the global one included) and is not data; with ``bounded_disorder`` its event time does
    not matter, under an upstream watermark it must carry ``END_OF_INPUT`` in the watermarked
    column.  Without it no row ends the input, and no event time does: times at or after
    ``END_OF_INPUT`` (2255-03-14) are bad elements, and do not move a bounded-disorder watermark.
    ``spark_event_time=True`` adds an ``event_time`` column (timestamp) declared as the output's
    event-time column (``eventTimeColumnName``), so that a native windowed aggregation or
    stream-stream join can follow in the same query under Spark's watermark: a pane's timestamp plus
    999 microseconds, null where Spark would call the row late (a pane stamped behind the previous
    batch's watermark: a window's LATE panes after the batch that fired it on time) and on the global
    window's panes; filter ``event_time IS NOT NULL`` (and on ``timing``/``is_retraction`` as the
    consumer needs) before the native operator.

    Output columns: ``key`` (keyed operators), ``window_start``, ``window_end`` (timestamps),
    ``value`` (typed by the accumulation), ``timing``, ``pane_index``, ``is_first``, ``is_last``,
    ``is_retraction``, ``timestamp``; plus ``record_type``, ``reason``, ``element``,
    ``element_timestamp`` when the operator has a late-data output or dead letters; a chained stage
    whose stages have any adds ``stage`` (0: the first) and hands on the side rows of the stages
    before it.
    """
    feed = feed_of(df)
    if feed is not None:  # the panes of an operator: a chained stage
        refused = {"key": key, "timestamp": timestamp, "schema": schema, "end_of_input": end_of_input}
        given = [name for name, v in refused.items() if v is not None]
        if given:
            raise SparkOperatorError(
                f"{op.label()} reads the panes of {feed.operator.label()}: {', '.join(given)} cannot be given to "
                "apply() (its key and value come from the operator's options, its time is the pane's, and its "
                "input ends when the upstream's does)")
        return apply_fed_operator(op, feed, value_type=value_type, time_mode=time_mode, clock=clock,
                                  key_groups=key_groups, drop_counter=drop_counter, state_encoding=state_encoding,
                                  spark_event_time=spark_event_time, vectorized=vectorized)
    check_state_encoding(state_encoding)
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

    op, df, columns = with_gap_column(op, df, columns, analyse=declared is None)
    event_ms = _event_time_ms(df, ts_col, shape)
    mode = choose_time_mode(op, time_mode)
    marker = end_of_input_marker(df, end_of_input, columns)
    df = with_operator_watermark(op, df, ts_col, shape, marker)
    # Casting the event-time column to epoch ms (and dropping the helper) keeps Spark from dropping
    # rows behind its watermark before the operator: lateness is decided in the core.
    has_helper = isinstance(op.watermark, BoundedDisorderWatermark)
    projected = drop_end_of_input(df.withColumn(ts_col, event_ms), ts_col, has_helper, marker, end_of_input)
    if end_of_input is not None:
        shape = StructType([f for f in shape.fields if f.name != end_of_input])
        columns = [name for name in columns if name != end_of_input]

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
    resolved_value_type = value_type or op.value_type or known_type(op.accumulation.output_type(input_type))
    if resolved_value_type is None:
        what = "the results of a callable value extractor" if input_type == UNKNOWN_TYPE else f"input type {input_type}"
        raise SparkOperatorError(
            f"cannot map the output of {type(op.accumulation).__name__} over {what} to a Spark type; "
            "pass value_type='<DDL type>' to apply()")

    updates: dict[str, Any] = {"timestamp": ts_col}
    if op.keyed:
        updates["key"] = key_col
    core_op = op.model_copy(update=updates)
    use_arrays, value_column = vector_value_column(core_op)
    folds_arrays, array_column = array_values(core_op)
    columnar = vectorized and folds_arrays and supports_columnar_path(
        core_op.window, core_op.accumulation, core_op.trigger, core_op.timestamp_combiner)
    if columnar:
        value_column = array_column
    plan = SparkPlan(
        operator=core_op, keyed=op.keyed, time_mode=mode, value_type=resolved_value_type,
        key_type=shape[key_col].dataType.simpleString() if key_col else None,
        side_outputs=op.late_data_output or op.on_bad_element == "dead_letter",
        clock=clock or SparkBatchClock(), key_column=key_col, time_column=ts_col, value_column=value_column,
        vectorized=vectorized and use_arrays, key_groups=resolve_key_groups(key_groups), state_key=key_col,
        drop_counter=drop_counter, state_encoding=state_encoding, event_time_output=spark_event_time,
        integral_columns=(ts_col, *(f.name for f in shape.fields if isinstance(f.dataType, IntegralType))),
        columnar=columnar)
    value_spark_type = input_type if value_column is not None else None  # the array path reads value_field
    projected_schema: Optional[StructType] = None  # (known without analysis on the folding paths)
    # (pre-aggregation runs in the scan stage, which has no batch time to check max_future_skew against)
    if (preaggregate and plan.columnar and folds_before_shuffle(core_op, counts_carried=True)
            and preaggregable(plan.key_type, value_spark_type)):
        form = columnar_form(core_op.core_accumulation())
        assert form is not None  # (plan.columnar: the accumulation has a columnar form)
        folding = PreAggregation(layout=core_op.window_option.pane_layout(), form=form,
                                 key_column=key_col, time_column=ts_col, value_column=value_column,
                                 key_type=plan.key_type, value_type=value_spark_type, reader=plan.record_reader())
        projected_schema = parse_ddl_schema(folding.schema())
        projected = map_in_arrow(projected, folding, projected_schema, list(folding.input_columns))
        columns = [name for name, _ in folding.fields()]
        plan = dataclasses.replace(plan, preaggregated=True, partial_columns=tuple(folding.aggregate_columns()))
    elif preaggregate and plan.columnar and _prechains(core_op, plan.key_type, value_spark_type):
        sessions, form = core_op.window, columnar_form(core_op.core_accumulation())
        # (_prechains: sessions with a fixed gap; plan.columnar: a columnar form)
        assert isinstance(sessions, SessionWindows) and sessions.min_gap is not None and form is not None
        chaining = PreChaining(gap=int(sessions.min_gap), form=form,
                               key_column=key_col, time_column=ts_col, value_column=value_column,
                               key_type=plan.key_type, value_type=value_spark_type, reader=plan.record_reader())
        projected_schema = parse_ddl_schema(chaining.schema())
        projected = map_in_arrow(projected, chaining, projected_schema, list(chaining.input_columns))
        columns = [name for name, _ in chaining.fields()]
        plan = dataclasses.replace(plan, prechained=True, partial_columns=tuple(chaining.aggregate_columns()),
                                   chain_values=chaining.values_dtype)
    elif preaggregate and plan.vectorized and plan.value_column == WHOLE_ROWS and _preselects(core_op, shape):
        selection = PreSelection(layout=core_op.window_option.pane_layout(), accumulation=core_op.core_accumulation(),
                                 key_column=key_col, time_column=ts_col, reader=plan.record_reader())
        # (the projection's schema from the declared one, without analysing it: see ``schema``)
        schema = StructType([StructField(f.name, LongType() if f.name == ts_col else f.dataType, f.nullable)
                             for f in shape.fields] + [StructField(WEIGHT_COLUMN, LongType(), False)])
        projected = map_in_arrow(projected, selection, schema, [f.name for f in shape.fields])
        columns = [f.name for f in schema.fields]
        plan = dataclasses.replace(plan, preselected=True)
        projected_schema = schema
    elif preaggregate and plan.vectorized and _prefolds(core_op, plan.value_column, value_spark_type):
        prefolding = PreFolding(layout=core_op.window_option.pane_layout(), accumulation=core_op.core_accumulation(),
                                key_column=key_col, time_column=ts_col, value_column=str(plan.value_column),
                                reader=plan.record_reader())
        schema = prefolding.schema(shape[key_col].dataType if key_col else None)
        projected = map_in_arrow(projected, prefolding, schema,
                                 [f.name for f in schema.fields if f.name != WEIGHT_COLUMN])
        columns = [f.name for f in schema.fields]
        plan = dataclasses.replace(plan, prefolded=True)
        projected_schema = schema
    if not plan.folded_in_scan:
        gap = element_gap(core_op.window)
        read = plan.columns_read(gap if isinstance(gap, str) else None) if not callable(gap) else None
        if read is not None and len(read) < len(columns):
            columns = [name for name in columns if name in read]
            projected = projected.select(*columns)
    if idle_timeout_of(core_op) is not None:
        if projected_schema is None:
            projected_schema = _plain_schema(projected, declared, shape, ts_col, columns)
        projected = map_in_arrow(projected, Heartbeats(plan.key_groups if op.keyed else 1),
                                 with_beat_column(projected_schema), columns)
        columns = [*columns, BEAT_COLUMN]
        plan = dataclasses.replace(plan, heartbeats=True)
    return run_processor(projected, plan, key_col, columns)


def _plain_schema(projected: DataFrame, declared: Optional[StructType], shape: StructType, ts_col: str,
                  columns: list[str]) -> StructType:
    """The schema of the rows handed to the processor (``columns``): asked of the DataFrame, or built
    from the declared one without analysis (event time as epoch ms)."""
    if declared is None:
        full = projected.schema
        return StructType([full[name] for name in columns])
    if GAP_COLUMN in columns:
        raise SparkOperatorError("a session gap expression with a declared schema and an idle timeout: the gap's type "
                                 "is not known without analysing the DataFrame; add the gap as a column of the input "
                                 "and name it (SessionWindows(gap='<column>'))")
    return StructType([StructField(name, LongType() if name == ts_col else shape[name].dataType, True)
                       for name in columns])


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


def folds_before_shuffle(op: WindowingOptions, *, counts_carried: bool = False) -> bool:
    """What every scan-stage fold by pane (pre-aggregation, pre-selection, pre-folding) needs: Beam's
    default trigger (it does not count elements) or, where the folded rows carry their element counts
    to the trigger (``counts_carried``: the columnar paths), ``AfterWatermark`` firing by count or by
    processing time (all of a batch's elements arrive at its processing time); windows that are unions
    of panes, and what every scan-stage fold needs (``_scan_stage_may_fold``)."""
    trigger = op.trigger.kind == "default" or (counts_carried and row_trigger(op.trigger) is not None)
    return trigger and op.window_option.pane_layout() is not None and _scan_stage_may_fold(op)


def _scan_stage_may_fold(op: WindowingOptions) -> bool:
    """No element kept aside (no late-data or dead-letter output: a bad row raises the processor's
    error in the scan stage) and no skew check (the scan stage has no batch time)."""
    return not op.late_data_output and op.on_bad_element == "raise" and op.max_future_skew is None


def _prechains(op: WindowingOptions, key_type: Optional[str], value_type: Optional[str]) -> bool:
    """Whether a batch's session elements can be chained before the shuffle (``prechain``): sessions
    with a fixed gap on the columnar path (whose triggers take a chain's element count), keys and
    values Arrow reads as the processor does, and what every scan-stage fold needs."""
    window = op.window
    return (isinstance(window, SessionWindows) and window.min_gap is not None  # (a fixed gap)
            and row_trigger(op.trigger) is not None and _scan_stage_may_fold(op)
            and preaggregable(key_type, value_type))


def _prefolds(op: WindowingOptions, value_column: Optional[str], value_type: Optional[str]) -> bool:
    """Whether each (key, pane) can be folded into one sketch before the shuffle (``prefold``): a
    sketch accumulation over a column of a plain type other than the event time (the fold's rows
    carry the pane's start in that column), a trigger that does not count elements,
    windows with a pane layout, panes stamped with the window's end, and no element kept aside and
    no skew check (the scan stage has no batch time)."""
    from ..panes import TimestampCombiner

    return (value_column is not None and value_column not in (WHOLE_ROWS, op.timestamp) and folds_before_shuffle(op)
            and op.timestamp_combiner == TimestampCombiner.END_OF_WINDOW
            and prefoldable(op.core_accumulation(), value_type))


def _preselects(op: WindowingOptions, shape: StructType) -> bool:
    """Whether rows can be pre-selected (``preselect``): an accumulation that keeps the top rows by a
    numeric column, a trigger that does not count elements, windows with a pane layout, and no
    element kept aside (late data, dead letters) and no skew check (the scan stage has no batch time)."""
    accumulation = op.core_accumulation()
    field = getattr(accumulation, "field", None)
    rank_type = shape[field].dataType.simpleString() if field in shape.fieldNames() else None
    return folds_before_shuffle(op) and preselectable(accumulation, rank_type)
