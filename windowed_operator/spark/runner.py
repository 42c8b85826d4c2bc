"""``op.apply(df)``: wire an operator into a streaming query around ``transformWithStateInPandas``."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

from pyspark.sql import DataFrame
from pyspark.sql.types import IntegralType, LongType, StructField, StructType

from ..operator import OperatorBase
from ..watermarks import BoundedDisorderWatermark
from ..windows.session_windows import element_gap
from .chain import apply_fed_operator
from .clock import FileClock, SparkBatchClock
from .connect_compat import map_in_arrow
from .driver.feed import feed_of
from .driver.inputs import (GAP_COLUMN, UNKNOWN_TYPE, check_state_encoding, choose_time_mode, declared_schema,
                            drop_end_of_input, end_of_input_marker, event_time_ms, idle_timeout_of, known_type,
                            refuse_derived_panes, require_streaming, resolve_column, resolve_key_groups,
                            with_gap_column, with_operator_watermark)
from .driver.stage import run_processor
from .errors import SparkOperatorError
from .heartbeat import BEAT_COLUMN, Heartbeats, with_beat_column
from .paths import Facts, choose_paths
from .plan import SparkPlan
from .scan_fold import FoldInput, build_fold, install_fold


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
    event_ms = event_time_ms(df, ts_col, shape)
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
    key_type = shape[key_col].dataType.simpleString() if key_col else None
    field = getattr(core_op.core_accumulation(), "field", None)
    rank_type = shape[field].dataType.simpleString() if isinstance(field, str) and field in shape.fieldNames() else None
    paths, value_column = choose_paths(Facts(op=core_op, vectorized=vectorized, preaggregate=preaggregate,
                                             key_type=key_type, input_type=input_type, rank_type=rank_type))
    plan = SparkPlan(
        operator=core_op, keyed=op.keyed, time_mode=mode, value_type=resolved_value_type, key_type=key_type,
        side_outputs=op.late_data_output or op.on_bad_element == "dead_letter",
        clock=clock or SparkBatchClock(), key_column=key_col, time_column=ts_col, value_column=value_column,
        paths=paths, key_groups=resolve_key_groups(key_groups), state_key=key_col,
        drop_counter=drop_counter, state_encoding=state_encoding, event_time_output=spark_event_time,
        integral_columns=(ts_col, *(f.name for f in shape.fields if isinstance(f.dataType, IntegralType))))
    projected_schema: Optional[StructType] = None  # (known without analysis on the folding paths)
    # (a scan fold runs in the scan stage, which has no batch time to check max_future_skew against)
    if paths.folded_in_scan:
        value_spark_type = input_type if value_column is not None else None  # the array path reads value_field
        fold = build_fold(paths.fold, FoldInput(op=core_op, plan=plan, shape=shape, value_type=value_spark_type))
        projected, columns, projected_schema = install_fold(fold, projected)
        plan = dataclasses.replace(plan, **fold.plan_updates())
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
