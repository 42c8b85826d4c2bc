"""One stateful stage of a query: the rows grouped by key group, the processor run, the panes shown.

``run_processor`` is where every operator's plan becomes a ``transformWithStateInPandas`` stage
(one input, a merge's union, a chained stage's panes): it chooses the handoff (``handoff``),
reads the state settings, and attaches the ``Feed`` a next stage reads.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from ...operator import WindowingOptions
from ...time import MAX_SHOWN_TIME, MIN_SHOWN_TIME
from ..base.connect_compat import is_connect, map_in_arrow, parse_ddl_schema, transform_with_state
from ..worker.deferred import DeferredProcessor
from ..base.handoff import Handoff, choose_handoff
from ..scan.heartbeat import BEAT_COLUMN
from ..scan.packing import PACKED_COLUMN, PackRows
from ..plan import (BAD_COUNT_COLUMN, EVENT_TIME_COLUMN, GROUP_COLUMN, HELD_BY_COLUMN, HELD_LAG_COLUMN,
                    LATE_COUNT_COLUMN, WATERMARK_COLUMN, SparkPlan)
from ..base.progress import OBSERVATION_PREFIX
from ..base.settings import warn_removed_confs
from .feed import Feed, attach_feed, feed_of, pane_rows

_observed_names: dict[str, int] = {}


def observation_name(op: WindowingOptions) -> str:
    """The name of the operator's counts in ``query.lastProgress.observedMetrics``: its ``name``, or
    its description numbered by how many operators of this process share it (names must be unique
    within a query)."""
    base = f"{OBSERVATION_PREFIX}{op.name}" if op.name else f"{OBSERVATION_PREFIX}{op.label()}"
    seen = _observed_names.get(base, 0)
    _observed_names[base] = seen + 1
    return base if op.name or not seen else f"{base} #{seen + 1}"


def observe_drops(out: DataFrame, plan: SparkPlan, name: str) -> DataFrame:
    """Sum the processor's count rows into observed metrics (``name``), per micro-batch (the rows
    stay: ``without_counts`` drops them from the output, ``feed.pane_rows`` from the pane rows): late elements dropped and bad elements show in the query's progress, late-data output or not;
    under a per-partition watermark so do the operator's watermark and the partition holding it back
    (``watermark_ms``, ``held_back_by``: the partition, after its input's name in a merge,
    ``held_back_lag_ms``: its lag behind the most advanced partition)."""
    late, bad = F.col(LATE_COUNT_COLUMN), F.col(BAD_COUNT_COLUMN)
    partitioned = []
    if plan.reports_watermark:  # (every group computes the same: one value per batch)
        partitioned = [F.max(WATERMARK_COLUMN).alias("watermark_ms"), F.max(HELD_BY_COLUMN).alias("held_back_by"),
                       F.max(HELD_LAG_COLUMN).alias("held_back_lag_ms")]
    observed = out.observe(name,
                           F.coalesce(F.sum(late), F.lit(0)).alias("late_rows_dropped"),
                           F.coalesce(F.sum(bad), F.lit(0)).alias("bad_rows"),
                           F.count(F.when(late.isNull() & F.col("window_start").isNotNull(), 1)).alias("panes"),
                           *partitioned)
    return observed


def without_counts(out: DataFrame, plan: SparkPlan) -> DataFrame:
    """The processor's rows without its count rows and their columns."""
    return out.where(F.col(LATE_COUNT_COLUMN).isNull()).drop(*plan.count_columns)


def shown_timestamp(column: str) -> Column:
    """An epoch-ms column as a timestamp, null beyond what Python can hold (``time.shown_time``)."""
    ms = F.col(column)
    return F.when(ms.between(MIN_SHOWN_TIME, MAX_SHOWN_TIME), F.timestamp_millis(ms)).alias(column)


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
    projected, columns = _grouped(projected, plan, key_col, columns)
    handoff, timezone = choose_handoff(projected, plan.folded_in_scan)
    packed = handoff is Handoff.PACKED
    plan = dataclasses.replace(plan, paths=dataclasses.replace(plan.paths, handoff=handoff))
    plan = dataclasses.replace(plan, input_columns=tuple(columns), timezone=timezone)
    warn_removed_confs(projected)
    if packed:  # one row per key group and scan chunk instead of pyspark's row-by-row handoff
        projected, columns = _packed(projected, key_col, columns, plan.group_values is not None)
    out = _transformed(projected, plan, columns)
    observation = observation or observation_name(plan.operator)
    out = observe_drops(out, plan, observation)  # (the pane rows and the output below: one stateful stage)
    frame = pane_rows(out, plan)

    def event_time_frame() -> DataFrame:  # the pane rows with their event time (the stage planned again)
        if plan.event_time_output:
            return pane_rows(out, plan, event_time=True)
        again = run_processor(source, dataclasses.replace(source_plan, event_time_output=True), key_col,
                              source_columns, observation=observation, inherited_windows=inherited_windows)
        return feed_of(again).event_time_frame()  # type: ignore[union-attr,misc]

    def handing_on_watermark() -> Feed:  # the stage planned again, handing its watermark on
        again = run_processor(source, dataclasses.replace(source_plan, hands_on_watermark=True), key_col,
                              source_columns, observation=observation, inherited_windows=inherited_windows)
        return feed_of(again)  # type: ignore[return-value]

    def watermark_output() -> DataFrame:  # the output with every group's watermark rows
        if not plan.hands_on_watermark:
            return handing_on_watermark().watermark_output()  # type: ignore[misc]
        kept = F.col(LATE_COUNT_COLUMN).isNull() | F.col(WATERMARK_COLUMN).isNotNull()
        return out.where(kept).select(*_shown_columns(plan), F.col(WATERMARK_COLUMN), F.col(HELD_BY_COLUMN))

    feed = Feed(frame=frame, operator=plan.operator, end_of_input_watermark=plan.end_of_input_watermark,
                observation=observation, event_time_frame=event_time_frame, time_mode=plan.time_mode,
                windows=plan.operator.window if plan.operator.window is not None else inherited_windows,
                stage=plan.stage or 0, input_column=plan.input_column,
                with_side_rows=pane_rows(out, plan, side_rows=True) if plan.side_outputs else None,
                watermark_rows=plan.hands_on_watermark,
                handing_on_watermark=(handing_on_watermark if plan.runs_behind_sparks_watermark
                                      and not plan.hands_on_watermark else None),
                watermark_output=watermark_output)
    return attach_feed(without_counts(out, plan).select(*_shown_columns(plan)), feed)


def _grouped(projected: DataFrame, plan: SparkPlan, key_col: Optional[str],
             columns: Optional[list[str]]) -> tuple[DataFrame, list[str]]:
    """The rows with their key group (``GROUP_COLUMN``; a heartbeat row names its own: ``heartbeat``)."""
    group = F.lit(0) if key_col is None else F.pmod(F.xxhash64(F.col(key_col)), F.lit(plan.key_groups))
    if key_col is not None and plan.group_values is not None:  # (a balanced placement: ``key_groups``)
        group = F.element_at(F.array(*[F.lit(v) for v in plan.group_values]), (group + 1).cast("int"))
    if plan.heartbeats:
        group = F.coalesce(F.col(BEAT_COLUMN), group)
    projected = projected.withColumn(GROUP_COLUMN, group)
    columns = [*(columns if columns is not None else projected.columns)]
    if GROUP_COLUMN not in columns:
        columns.append(GROUP_COLUMN)
    return projected, columns


def _packed(projected: DataFrame, key_col: Optional[str], columns: list[str],
            balanced: bool) -> tuple[DataFrame, list[str]]:
    """The rows packed per key group and scan chunk (``scan.packing``); the group column keeps its
    type (pmod of xxhash64 is a bigint; the unkeyed group and a balanced placement's, an int)."""
    group_type = LongType() if key_col is not None and not balanced else IntegerType()
    packed_schema = StructType([StructField(GROUP_COLUMN, group_type, True),
                                StructField(PACKED_COLUMN, BinaryType(), True)])
    return map_in_arrow(projected, PackRows(GROUP_COLUMN), packed_schema, columns), [GROUP_COLUMN, PACKED_COLUMN]


def _transformed(projected: DataFrame, plan: SparkPlan, columns: list[str]) -> DataFrame:
    """The processor's rows: ``transformWithStateInPandas`` grouped by key group (on Spark Connect,
    built without analysis requests, as Spark Declarative Pipelines need)."""
    event_time_column = EVENT_TIME_COLUMN if plan.event_time_output else ""
    if is_connect(projected):
        return transform_with_state(projected, GROUP_COLUMN, DeferredProcessor.of(plan),
                                    parse_ddl_schema(plan.processor_schema()), plan.time_mode, columns,
                                    event_time_column)
    return projected.groupBy(GROUP_COLUMN).transformWithStateInPandas(
        statefulProcessor=DeferredProcessor.of(plan), outputStructType=plan.processor_schema(),
        outputMode="Append", timeMode=plan.time_mode, eventTimeColumnName=event_time_column)


def _shown_columns(plan: SparkPlan) -> list[Column]:
    """The output's columns: times as timestamps (null beyond what Python holds)."""
    shown: list[Column] = []
    if plan.keyed:
        shown.append(F.col("key"))
    shown += [shown_timestamp("window_start"), shown_timestamp("window_end"), F.col("value"), F.col("timing"),
              F.col("pane_index"), F.col("is_first"), F.col("is_last"), F.col("is_retraction"),
              shown_timestamp("timestamp")]
    if plan.fired_by:
        shown += [F.col("fired_by"), shown_timestamp("firing_watermark"), F.col("held_back_by")]
    shown += [shown_timestamp(name) if name == "element_timestamp" else F.col(name) for name in plan.side_columns]
    if plan.event_time_output:
        shown.append(F.col(EVENT_TIME_COLUMN))
    return shown
