"""``merge_op.apply(left, right)``: two streaming DataFrames into one stateful operator.

Spark has no two-input transformWithState, so each input is projected to a common shape (key,
event time in ms, side tag, the input's row as a struct) and the two are unioned before one
``groupBy(key).transformWithStateInPandas`` (docs/contributing/measured-design.md, "What Spark's stateful
API gives and costs").  Each input keeps its
own watermark node, and Spark's global watermark is their minimum
(``spark.sql.streaming.multipleWatermarkPolicy=min``, the default): the slower input holds firing
back, as the core's ``TwoInputWatermarkTracker`` does in the local runner.  With an idle timeout
(an input that stops holding the watermark back, or a quiet stream's advance) the processor keeps
each input's bounded-disorder watermark itself, from heartbeats carrying each input's largest event
time per batch (``heartbeat``), and Spark's minimum only tells when both inputs have ended.  So
with a per-partition watermark (``bounded_disorder(partition=...)``): each input's partition column
goes along as ``MERGE_PARTITION_COLUMN`` (a string: the inputs' types may differ), and the
heartbeats carry each input's partitions' largest event times.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from accumulations.merge import LEFT, RIGHT, SIDES

from ...merge_operator import MergeOperatorBase
from ...watermarks import BoundedDisorderWatermark
from ...windows.session_windows import element_gap
from ..base.clock import FileClock, SparkBatchClock
from .feed import feed_of
from .key_groups import key_groups_for
from .inputs import (GAP_COLUMN, UNKNOWN_TYPE, WATERMARK_HELPER, check_partition_column, check_state_encoding,
                            choose_time_mode, drop_end_of_input, end_of_input_marker, event_time_ms, known_type,
                            needs_heartbeats,
                            refuse_derived_panes, require_streaming, resolve_column, resolved_gap,
                            with_operator_watermark)
from .stage import run_processor
from ..base.errors import SparkOperatorError
from ..scan.heartbeat import Heartbeats, with_beat_column
from ..plan.paths import merge_paths
from ..plan import (MERGE_KEY_COLUMN, MERGE_PARTITION_COLUMN, MERGE_TIME_COLUMN, PAYLOAD_COLUMNS, SIDE_COLUMN,
                    SIDED_VALUES, build_plan)
from ...watermarks import partition_of


def _side_type(op: MergeOperatorBase, side: str, df: DataFrame, end_of_input: Optional[str]) -> Optional[str]:
    """The DDL type of what one input contributes: its value column, the struct of its value record's
    fields, or its whole row without the end-of-input marker (``_project`` leaves it out of the
    payload); None for a callable extractor (its result's type is not known here)."""
    value = op.side_extractor(side, "value")
    if callable(value):
        return None
    if isinstance(value, str):
        if value not in df.columns:
            raise SparkOperatorError(f"{side} value column {value!r} is not in the {side} DataFrame "
                                     f"(columns: {df.columns})")
        return df.schema[value].dataType.simpleString()
    if isinstance(value, dict):
        missing = {name: field for name, field in value.items() if field not in df.columns}
        if missing:
            raise SparkOperatorError(f"{op.label()}: {side} value record fields {missing} name columns that are not "
                                     f"in the {side} DataFrame (columns: {df.columns})")
        return StructType([StructField(name, df.schema[field].dataType, True)
                           for name, field in value.items()]).simpleString()
    return StructType([field for field in df.schema.fields if field.name != end_of_input]).simpleString()


def _output_type(op: MergeOperatorBase, left_type: Optional[str], right_type: Optional[str]) -> Optional[str]:
    """The accumulation's output type over the two inputs' types, or None where it depends on a type
    not known here (a join function without ``result_type``, or an input read by a callable)."""
    return known_type(op.accumulation.output_type(left_type or UNKNOWN_TYPE, right_type or UNKNOWN_TYPE))


def _project(op: MergeOperatorBase, side: str, df: DataFrame, key: Optional[str], timestamp: Optional[str],
             end_of_input: Optional[str], gap: Any = None) -> tuple[DataFrame, Optional[str], str]:
    """``gap``: the session gap as given (a column name or expression: computed here, on this input)."""
    require_streaming(df, f"apply() ({side} input)")
    ts_col = resolve_column(df, timestamp, op.side_extractor(side, "timestamp"), f"{side} timestamp",
                            f"{side}_timestamp")
    key_col = None
    if op.keyed:
        key_col = resolve_column(df, key, op.side_extractor(side, "key"), f"{side} key", f"{side}_key")
    marker_column = end_of_input if end_of_input in df.columns else None  # an input without it never ends
    marker = end_of_input_marker(df, marker_column)
    payload = F.struct(*[F.col(c) for c in df.columns if c != marker_column]).alias(PAYLOAD_COLUMNS[side])
    event_ms = event_time_ms(df, ts_col)
    watermarked = with_operator_watermark(op, df, ts_col, marker=marker)
    kept = drop_end_of_input(watermarked, ts_col, WATERMARK_HELPER in watermarked.columns, marker, marker_column)
    columns = [F.lit(side).alias(SIDE_COLUMN), event_ms.alias(MERGE_TIME_COLUMN), payload]
    if gap is not None and not callable(gap):
        columns.append(resolved_gap(op, df, gap, df.columns, f"the {side} DataFrame").alias(GAP_COLUMN))
    partition = partition_of(op.watermark)
    if partition is not None:
        check_partition_column(op, df.columns, f"the {side} DataFrame")
        columns.append(F.col(partition).cast("string").alias(MERGE_PARTITION_COLUMN))
    if key_col is not None:
        columns.insert(0, F.col(key_col).alias(MERGE_KEY_COLUMN))
    return kept.select(*columns), key_col, ts_col


def apply_merge_operator(op: MergeOperatorBase, left: DataFrame, right: DataFrame, *,
                         left_key: Optional[str] = None, right_key: Optional[str] = None,
                         left_timestamp: Optional[str] = None, right_timestamp: Optional[str] = None,
                         key: Optional[str] = None, timestamp: Optional[str] = None,
                         value_type: Optional[str] = None, time_mode: str = "auto",
                         clock: Union[SparkBatchClock, FileClock, None] = None, key_groups: Optional[int] = None,
                         drop_counter: Any = None, end_of_input: Optional[str] = None,
                         state_encoding: str = "json", spark_event_time: bool = False,
                         checkpoint: Optional[str] = None) -> DataFrame:
    """The streaming DataFrame of panes of a merge operator over two streaming DataFrames.

    Columns as for one-input operators (``key`` for keyed merges).  ``key``/``timestamp`` name the
    column in both inputs; ``left_key``/``right_key``/``left_timestamp``/``right_timestamp`` one input's.
    ``end_of_input`` names the boolean marker column (see ``apply_operator``) in the inputs that have
    it; the watermark of the two is their minimum, so both must end for every window to close.
    """
    idle = _checked_inputs(op, left, right, end_of_input, state_encoding)
    assert op.window is not None  # (checked: a merge takes raw inputs, with a window option)
    gap = element_gap(op.window)
    if gap is not None and not callable(gap):  # each input's gap, beside its row (``_project``)
        op = op.model_copy(update={"window": op.window.model_copy(update={"gap": GAP_COLUMN})})
    projected_left, left_key_col, left_ts_col = _project(op, LEFT, left, left_key or key,
                                                         left_timestamp or timestamp, end_of_input, gap)
    projected_right, right_key_col, right_ts_col = _project(op, RIGHT, right, right_key or key,
                                                            right_timestamp or timestamp, end_of_input, gap)
    key_type = _key_type(op, projected_left, projected_right, left_key_col, right_key_col)
    union = projected_left.unionByName(projected_right, allowMissingColumns=True)

    types = {side: _side_type(op, side, df, end_of_input) for side, df in ((LEFT, left), (RIGHT, right))}
    resolved_value_type = value_type or _output_type(op, types[LEFT], types[RIGHT])
    if resolved_value_type is None:
        raise SparkOperatorError(
            f"cannot map the output of {type(op.accumulation).__name__} over inputs "
            f"{types[LEFT] or 'of a callable value extractor'} and {types[RIGHT] or 'of a callable value extractor'} "
            "to a Spark type; pass value_type='<DDL type>' to apply()")
    paths = merge_paths(op)
    plan = build_plan(
        op, paths, time_mode=choose_time_mode(op, time_mode), value_type=resolved_value_type, key_type=key_type,
        clock=clock, **key_groups_for(left.sparkSession, key_groups, checkpoint).plan_fields(),
        drop_counter=drop_counter, state_encoding=state_encoding, event_time_output=spark_event_time,
        input_column=True,  # (its side rows, where it has side outputs, name their input)
        merge=True, key_column=MERGE_KEY_COLUMN if op.keyed else None, time_column=MERGE_TIME_COLUMN,
        value_column=SIDED_VALUES if paths.arrays else None, integral_columns=(MERGE_TIME_COLUMN,),
        state_key=f"left {left_key_col}, right {right_key_col}" if op.keyed else None,
        merge_names=((LEFT, MERGE_TIME_COLUMN, left_ts_col), (RIGHT, MERGE_TIME_COLUMN, right_ts_col),
                     *(((LEFT, MERGE_KEY_COLUMN, str(left_key_col)), (RIGHT, MERGE_KEY_COLUMN, str(right_key_col)))
                       if op.keyed else ())))
    assert set(PAYLOAD_COLUMNS) == set(SIDES)
    columns = None
    if idle:  # each group learns each input's batches and largest event times (``heartbeat``)
        beats = Heartbeats(plan.groups(), SIDE_COLUMN, MERGE_TIME_COLUMN, plan.partition_column)
        union = union.mapInArrow(beats, with_beat_column(union.schema))
        columns = union.columns
        plan = dataclasses.replace(plan, heartbeats=True)
    return run_processor(union, plan, MERGE_KEY_COLUMN if op.keyed else None, columns)


def _checked_inputs(op: MergeOperatorBase, left: DataFrame, right: DataFrame, end_of_input: Optional[str],
                    state_encoding: str) -> bool:
    """The merge's inputs and options checked (raw inputs, a window option, idle timeouts under a
    bounded-disorder watermark, an end-of-input column in one of them); whether an idle timeout
    needs heartbeats."""
    check_state_encoding(state_encoding)
    for side, df in ((LEFT, left), (RIGHT, right)):
        if feed_of(df) is not None:
            raise SparkOperatorError(
                f"{op.label()}: its {side} input is an operator's panes; a merge operator takes raw inputs (a chain "
                "starts with the merge: merge.then(op), as in the local runner)")
        refuse_derived_panes(df, op)
    if op.window is None:
        raise SparkOperatorError(f"{op.label()} has no window option: a merge operator takes raw inputs, which "
                                 "carry no windows to keep; give it a window option")
    idle = needs_heartbeats(op)
    if idle and not isinstance(op.watermark, BoundedDisorderWatermark):
        raise SparkOperatorError(
            f"{op.label()}: idle timeouts on Spark need watermark=bounded_disorder(...): the operator then keeps each "
            "input's watermark itself, from its rows; an upstream watermark on two inputs is Spark's own minimum "
            f"over them, which cannot skip an idle input (the watermark is {op.watermark.kind})")
    if end_of_input is not None and end_of_input not in left.columns and end_of_input not in right.columns:
        raise SparkOperatorError(f"end_of_input column {end_of_input!r} is in neither input (left: {left.columns}, "
                                 f"right: {right.columns})")
    return idle


def _key_type(op: MergeOperatorBase, left: DataFrame, right: DataFrame, left_key: Optional[str],
              right_key: Optional[str]) -> Optional[str]:
    """The key's Spark type, the same in both inputs (None: not keyed)."""
    key_type = None
    if op.keyed:
        left_type = left.schema[MERGE_KEY_COLUMN].dataType
        right_type = right.schema[MERGE_KEY_COLUMN].dataType
        if left_type != right_type:
            raise SparkOperatorError(
                f"the key columns differ in type: left {left_key!r} is {left_type.simpleString()}, right "
                f"{right_key!r} is {right_type.simpleString()}; cast one of them")
        key_type = left_type.simpleString()
    return key_type
