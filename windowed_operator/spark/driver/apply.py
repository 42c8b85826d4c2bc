"""``op.apply(df)``: wire an operator into a streaming query around ``transformWithStateInPandas``."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

from pyspark.sql import DataFrame
from pyspark.sql.types import IntegralType, LongType, StructField, StructType

from ...operator import OperatorBase
from ...windows.session_windows import element_gap
from .chain import apply_fed_operator
from ..base.clock import FileClock, SparkBatchClock
from ..base.connect_compat import map_in_arrow
from .feed import feed_of
from .inputs import (GAP_COLUMN, RawInput, check_state_encoding, choose_time_mode, needs_heartbeats, read_raw_input,
                     value_types)
from .stage import run_processor
from ..base.errors import SparkOperatorError
from ..scan.heartbeat import BEAT_COLUMN, Heartbeats, with_beat_column
from .key_groups import key_groups_for
from ..plan.paths import Facts, choose_paths
from ..plan import SparkPlan, build_plan
from .folds import FoldInput, build_fold, install_fold


def apply_operator(op: OperatorBase, df: DataFrame, *, key: Optional[str] = None, timestamp: Optional[str] = None,
                   value_type: Optional[str] = None, time_mode: str = "auto",
                   clock: Union[SparkBatchClock, FileClock, None] = None, key_groups: Optional[int] = None,
                   vectorized: bool = True, schema: Union[str, StructType, None] = None,
                   drop_counter: Any = None, preaggregate: bool = True,
                   end_of_input: Optional[str] = None, state_encoding: str = "json",
                   spark_event_time: bool = False, checkpoint: Optional[str] = None) -> DataFrame:
    """Return the streaming DataFrame of panes of ``op`` over the streaming DataFrame ``df``.

    ``key_groups``: how many state values the keys are hashed into, at most one task each (without
    ``checkpoint``: 16 whatever the session; kept by the checkpoint: a restart with another number is
    refused, like any change the stored state cannot follow, see ``windowed_operator.state.fingerprint``,
    until the stopped query's state is moved to it: ``windowed_operator.spark.rescale``);
    ``checkpoint``: the query's ``checkpointLocation``, told so that its parallelism follows the cluster
    (``driver.key_groups``): at its first start the key groups are chosen from the session's state
    partitions (``spark.sql.shuffle.partitions``, at least 16) and placed evenly over them, kept in the
    checkpoint and read back at every restart;
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
                                  spark_event_time=spark_event_time, vectorized=vectorized, checkpoint=checkpoint)
    check_state_encoding(state_encoding)
    raw = read_raw_input(op, df, key=key, timestamp=timestamp, schema=schema, end_of_input=end_of_input)
    input_type, resolved_value_type = value_types(raw, value_type)
    core_op = raw.core_operator()
    key_type = raw.type_of(raw.key_col)
    paths, value_column = choose_paths(Facts(
        op=core_op, vectorized=vectorized, preaggregate=preaggregate, key_type=key_type, input_type=input_type,
        rank_type=raw.type_of(getattr(core_op.core_accumulation(), "field", None))))
    plan = build_plan(
        core_op, paths, time_mode=choose_time_mode(raw.op, time_mode), value_type=resolved_value_type,
        key_type=key_type, clock=clock, **key_groups_for(df.sparkSession, key_groups, checkpoint).plan_fields(),
        drop_counter=drop_counter, state_encoding=state_encoding, event_time_output=spark_event_time,
        key_column=raw.key_col, time_column=raw.ts_col, value_column=value_column, state_key=raw.key_col,
        integral_columns=(raw.ts_col, *(f.name for f in raw.shape.fields if isinstance(f.dataType, IntegralType))))
    value_spark_type = input_type if value_column is not None else None  # the array path reads value_field
    projected, columns, plan = _stage_rows(raw, plan, value_spark_type)
    return run_processor(projected, plan, raw.key_col, columns)


def _stage_rows(raw: RawInput, plan: SparkPlan, value_type: Optional[str]) -> tuple[DataFrame, list[str], SparkPlan]:
    """The rows the stateful stage receives: folded in the scan stage (the plan's fold; it has no
    batch time to check ``max_future_skew`` against, which its rules account for), or the columns the
    processor reads; with heartbeats where an idle timeout or a per-partition watermark needs them."""
    projected, columns = raw.projected, raw.columns
    projected_schema: Optional[StructType] = None  # (known without analysis on the folding paths)
    if plan.folded_in_scan:
        fold = build_fold(plan.paths.fold, FoldInput(op=plan.operator, plan=plan, shape=raw.shape,
                                                     value_type=value_type))
        projected, columns, projected_schema = install_fold(fold, projected)
        plan = dataclasses.replace(plan, **fold.plan_updates())
    else:
        gap = element_gap(plan.operator.window)
        read = plan.columns_read(gap if isinstance(gap, str) else None) if not callable(gap) else None
        if read is not None and len(read) < len(columns):
            columns = [name for name in columns if name in read]
            projected = projected.select(*columns)
    if needs_heartbeats(plan.operator):
        if projected_schema is None:
            projected_schema = _plain_schema(projected, raw.declared, raw.shape, raw.ts_col, columns)
        partition = plan.partition_column  # (its rows' maxima, per partition, to every group)
        beats = Heartbeats(plan.groups(), time_column=raw.ts_col if partition else None,
                           partition_column=partition)
        projected = map_in_arrow(projected, beats, with_beat_column(projected_schema), columns)
        columns = [*columns, BEAT_COLUMN]
        plan = dataclasses.replace(plan, heartbeats=True)
    return projected, columns, plan


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
