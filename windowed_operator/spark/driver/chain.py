"""Chained operators on Spark: an operator's panes feed the next operator in the same streaming query.

``op.apply(df)`` returns its panes and keeps, beside them, the processor's own rows (times in epoch
ms, pane rows only, each tagged with the step of its batch that made it: ``engine.fired_by.Phase``).
``op2.apply(panes)`` (or ``op.then(op2).apply(df)``) groups those rows by ``op2``'s key and runs
``op2`` on them as the local chain runs it (``windowed_operator.runners.chain.ChainRunner``):

- each row becomes the pane the local chain hands over (``panes.pane_from_row``: a retraction
  carries the output it undoes, so an invertible downstream folds it out) and goes through the
  downstream's own reader: its key, value and timestamp extractors (callables included), its
  windows (inherited from the pane without a window option), its bad-element rule;
- panes released by the upstream's watermark are taken at the downstream's watermark before this
  batch's, then the downstream's watermark advances, then the panes the upstream's elements made:
  an ON_TIME pane is never late downstream merely for being emitted at the watermark that fired it
  (Beam holds the output watermark for it; Spark has one watermark per batch, so the order of steps
  does it);
- Spark's watermark reaches every stateful operator of the query unchanged (measured: a second
  transformWithState sees the first's input watermark in each batch), so the downstream's watermark
  is the upstream's, as in the local chain; a downstream with its own watermark policy is refused;
- except after a per-partition watermark (``bounded_disorder(..., partition=...)``, a merge's too),
  which Spark's own runs ahead of: the upstream is planned again to hand its watermark on as rows
  (``following_watermark``), which reach every key group of the stage as heartbeats
  (``scan.heartbeat.WatermarkBeats``); the stage runs in processing-time mode, takes the batch's
  panes, then advances to that watermark (``SparkPlan.upstream_watermark_rows``), and hands it on in
  turn to the stage after it.

Where the key changes, Spark shuffles the panes by the new key: a key column of the panes is
grouped directly; a callable key is computed from each pane in a Python pass over the panes (its
Spark type given by the operator's ``key_type``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional, Union

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from ...chain import check_consumable
from ...elements import BadElementError
from ...operator import KeyedWindowedOperator, OperatorBase, WindowingOptions
from ...panes import panes_from_columns
from ...watermarks import UpstreamWatermark
from ...windows.session_windows import element_gap
from ..base.clock import FileClock, SparkBatchClock
from ..base.errors import SparkOperatorError
from ..base.connect_compat import map_in_arrow
from ..plan import (PANE_COLUMN_OF, PHASE_COLUMN, ROUTE_COLUMN, SIDE_ROW_COLUMNS, STAGE_COLUMN, WATERMARK_COLUMN,
                    build_plan, each_group)
from ..scan.heartbeat import BEAT_COLUMN, WatermarkBeats, with_beat_column
from .feed import Feed, attach_feed, feed_of, handing_on
from .inputs import check_state_encoding, choose_time_mode
from .key_groups import KeyGroups, key_groups_for
from .stage import observation_name, run_processor
from ..plan.paths import Engine, chained_paths
from .native_stage import NATIVE_STAGES_CONF, NativeStage, apply_native_stage, native_refusal
from .checkpoint_settings import native_stages_for


class RouteKeys:
    """Adds the downstream's key of each upstream pane (a callable's result; null where it fails:
    the downstream's reader then rejects that row with the reason)."""

    def __init__(self, operator: OperatorBase, upstream: WindowingOptions) -> None:
        self.reader = operator.build_reader()
        self.upstream = upstream

    def _key(self, pane: Any) -> Any:
        try:
            return self.reader.key_of(pane)
        except BadElementError:
            return None

    def __call__(self, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            keys = pd.Series(None, dtype=object, index=frame.index)
            is_pane = (frame["record_type"] == "pane" if STAGE_COLUMN in frame.columns
                       else pd.Series(True, index=frame.index))
            if BEAT_COLUMN in frame.columns:  # (heartbeats carrying the upstream's watermark: keyed by none)
                is_pane &= frame[BEAT_COLUMN].isna()
            panes_frame = frame[is_pane]  # (side rows are handed on, keyed by none)
            panes = panes_from_columns({c: panes_frame[c].to_numpy() for c in panes_frame.columns
                                        if c not in (*SIDE_ROW_COLUMNS, BEAT_COLUMN, WATERMARK_COLUMN)},
                                       self.upstream)
            keys[is_pane] = pd.Series([self._key(pane) for pane in panes], dtype=object, index=panes_frame.index)
            yield frame.assign(**{ROUTE_COLUMN: keys})


def _route(op: OperatorBase, feed: Feed, key_type: Optional[str]) -> tuple[DataFrame, Optional[str], Optional[str],
                                                                                Optional[str]]:
    """The rows grouped by the downstream's key: (frame, group column, key type, what the state is keyed by)."""
    frame = feed.frame
    if not op.keyed:
        return frame, None, None, None
    key = op.key if isinstance(op, KeyedWindowedOperator) else None  # (keyed: a KeyedWindowedOperator)
    if key is None:
        if not feed.operator.keyed:
            raise SparkOperatorError(
                f"{op.label()} is keyed but has no key, and its input {feed.operator.label()} is not keyed: give "
                "it key= (a pane attribute such as 'value', or a callable on the pane)")
        key = "key"
    if isinstance(key, str):
        column = PANE_COLUMN_OF.get(key)
        if column is None or column not in frame.columns:
            attributes = ", ".join(c for c in PANE_COLUMN_OF if PANE_COLUMN_OF[c] in frame.columns)
            raise SparkOperatorError(f"{op.label()}: key {key!r} is not an attribute of the panes it reads (they "
                                     f"have {attributes}); use a callable on the pane for anything else")
        return frame, column, key_type or frame.schema[column].dataType.simpleString(), f"pane {key}"
    if key_type is None:
        raise SparkOperatorError(f"{op.label()}: its key is a callable, whose Spark type cannot be known before it "
                                 "runs: give the operator key_type='<DDL type>' (e.g. key_type='string')")
    schema = StructType([*frame.schema.fields, StructField(ROUTE_COLUMN, _parse_datatype_string(key_type))])
    routed = frame.mapInPandas(RouteKeys(op, feed.operator), schema)
    return routed, ROUTE_COLUMN, key_type, f"callable {getattr(key, '__qualname__', repr(key))}"


def _input_type(op: OperatorBase, frame: DataFrame) -> Optional[str]:
    """The DDL type of what the downstream folds, when it reads a pane attribute (None for a callable)."""
    value = op.value
    if callable(value):
        return None
    if isinstance(value, dict):  # a record of fields: of the pane (a stage with key=), else of its value
        reads_pane = isinstance(op, KeyedWindowedOperator) and op.key is not None
        upstream_value = frame.schema["value"].dataType
        fields = []
        for name, field in value.items():
            if reads_pane:
                column = PANE_COLUMN_OF.get(field)
                if column is None or column not in frame.columns:
                    raise SparkOperatorError(f"{op.label()}: value field {name!r} reads {field!r}, which is not an "
                                             "attribute of the panes it reads; use a callable on the pane for "
                                             "anything else")
                data_type = frame.schema[column].dataType
            else:
                if not isinstance(upstream_value, StructType) or field not in upstream_value.fieldNames():
                    raise SparkOperatorError(f"{op.label()}: value field {name!r} reads field {field!r} of the "
                                             f"upstream's values, which are {upstream_value.simpleString()}")
                data_type = upstream_value[field].dataType
            fields.append(StructField(name, data_type, True))
        return StructType(fields).simpleString()
    # the reader folds the whole pane (as locally)
    if value is None and isinstance(op, KeyedWindowedOperator) and op.key is not None:
        return StructType([f for f in frame.schema.fields
                           if f.name not in (PHASE_COLUMN, WATERMARK_COLUMN, *SIDE_ROW_COLUMNS)]).simpleString()
    column = PANE_COLUMN_OF.get(value or "value")
    if column is None or column not in frame.columns:
        raise SparkOperatorError(f"{op.label()}: value {value!r} is not an attribute of the panes it reads; use a "
                                 "callable on the pane for anything else")
    data_type = frame.schema[column].dataType
    read_field = op.accumulation.input_field()
    if read_field is not None and value is None:
        if not isinstance(data_type, StructType) or read_field not in data_type.fieldNames():
            raise SparkOperatorError(f"{op.label()}: {type(op.accumulation).__name__} reads field {read_field!r} of the "
                                     f"upstream's values, which are {data_type.simpleString()}")
        data_type = data_type[read_field].dataType
    return data_type.simpleString()


def apply_fed_operator(op: OperatorBase, feed: Feed, *, value_type: Optional[str] = None, time_mode: str = "auto",
                       clock: Union[SparkBatchClock, FileClock, None] = None, key_groups: Optional[int] = None,
                       drop_counter: Any = None, state_encoding: str = "json",
                       spark_event_time: bool = False, vectorized: bool = True, native: bool = True,
                       checkpoint: Optional[str] = None) -> DataFrame:
    """``op`` over the panes of the operator behind ``feed``: see the module's docstring.
    ``native=False``: never as Spark's own aggregation (a stage another stage reads)."""
    check_state_encoding(state_encoding)
    if feed.native_stage:
        raise SparkOperatorError(
            f"{op.label()} reads the output of {feed.operator.label()}, which Spark runs as its own aggregation "
            f"({NATIVE_STAGES_CONF}=true, or apply() told a new checkpoint, which turns it on): that output is not "
            "an operator's panes; apply the stages as one chain (op1.then(op2).then(op3).apply(df): only its last "
            f"stage may run natively), set {NATIVE_STAGES_CONF}=false before a new query's apply(), or apply native "
            "Spark to it")
    check_consumable(feed.operator, op)
    gap = element_gap(op.window)
    if gap is not None and not isinstance(gap, str) and not callable(gap):
        raise SparkOperatorError(
            f"{op.label()} reads the panes of {feed.operator.label()}: its session gap must be a field of the pane "
            f"(gap='value') or a callable on it; a column expression ({gap}) needs the raw rows")
    if not isinstance(op.watermark, UpstreamWatermark):
        raise SparkOperatorError(
            f"{op.label()} reads the panes of {feed.operator.label()} and follows its watermark: give it no "
            f"watermark policy (it has {op.watermark.kind}); the upstream's policy decides the chain's watermark")
    feed = following_watermark(feed)
    mode = choose_time_mode(op, time_mode, watermark_rows=feed.watermark_rows)  # (checked on either plan)
    groups = key_groups_for(feed.frame.sparkSession, key_groups, checkpoint)
    frame, group_column, key_type, state_key = _route(op, _with_watermark_beats(op, feed, groups), op.key_type)
    input_type = _input_type(op, feed.frame)
    if input_type is not None and not callable(op.value):
        refusal = op.accumulation.input_type_refusal(input_type)
        if refusal is not None:
            raise SparkOperatorError(f"{op.label()}: {type(op.accumulation).__name__} cannot fold the upstream's "
                                     f"{op.value or 'value'} ({input_type}); {refusal}")
    resolved_value_type = (value_type or op.value_type
                           or (op.accumulation.output_type(input_type) if input_type is not None else None))
    if resolved_value_type is None:
        what = f"over {input_type}" if input_type is not None else "of a callable's values"
        raise SparkOperatorError(f"{op.label()}: cannot map the output of {type(op.accumulation).__name__} {what} "
                                 "to a Spark type; give the operator value_type='<DDL type>'")
    paths = chained_paths(op, vectorized, native=(
        native and not feed.side_rows  # (a native aggregation would not hand the side rows on)
        and native_stages_for(feed.frame.sparkSession, checkpoint)  # (``checkpoint_settings``)
        and native_refusal(op, feed, ansi=_ansi(feed)) is None))
    if paths.engine is Engine.NATIVE:
        stage = NativeStage(op=op, upstream=feed.operator, value_type=resolved_value_type, schema=feed.frame.schema)
        observation = observation_name(op)
        out = apply_native_stage(stage, feed, spark_event_time=spark_event_time, observation=observation)
        return attach_feed(out, Feed(frame=out, operator=op, end_of_input_watermark=feed.end_of_input_watermark,
                                     observation=observation, native_stage=True))
    plan = build_plan(
        op, paths, time_mode=mode, value_type=resolved_value_type, key_type=key_type,
        clock=clock, **groups.plan_fields(), drop_counter=drop_counter, state_encoding=state_encoding,
        event_time_output=spark_event_time, side_rows=feed.side_rows,
        stage=feed.stage + 1 if feed.in_chain else None, input_column=feed.side_rows and feed.input_column,
        key_column=group_column, time_column="timestamp", state_key=state_key,
        integral_columns=("window_start", "window_end", "timestamp", "pane_index"),
        upstream=feed.operator, inherited_end_of_input=feed.end_of_input_watermark,
        heartbeats=feed.watermark_rows, upstream_watermark_rows=feed.watermark_rows,
        hands_on_watermark=feed.watermark_rows)
    return run_processor(frame, plan, group_column, inherited_windows=feed.windows)


def following_watermark(feed: Feed) -> Feed:
    """``feed``, or, where the next stage must follow its operator's watermark rather than Spark's
    (a per-partition watermark: Spark's, the largest event time over all partitions less the delay,
    runs ahead of it, so its panes would come late), the operator planned again to hand its
    watermark on as rows (``SparkPlan.hands_on_watermark``), as ``feed`` reads it (``handing_on``)."""
    if feed.handing_on_watermark is None:
        return feed
    again = feed.handing_on_watermark()
    frame = again.with_side_rows if feed.side_rows else again.frame
    assert frame is not None  # (side rows where ``feed`` had them: the same plan)
    return dataclasses.replace(feed, frame=frame, with_side_rows=again.with_side_rows, watermark_rows=True,
                               handing_on_watermark=None, time_mode=again.time_mode)


def _with_watermark_beats(op: OperatorBase, feed: Feed, groups: KeyGroups) -> Feed:
    """``feed`` whose watermark rows (``Feed.watermark_rows``) are replaced by one heartbeat per key
    group of ``op`` (``groups``) carrying the upstream's watermark (``scan.heartbeat.WatermarkBeats``)."""
    if not feed.watermark_rows:
        return feed
    frame = feed.frame
    beats = WatermarkBeats(each_group(op.keyed, groups.count, groups.values), WATERMARK_COLUMN)
    return dataclasses.replace(feed, frame=map_in_arrow(frame, beats, with_beat_column(frame.schema), frame.columns))


def _ansi(feed: Feed) -> bool:
    """``spark.sql.ansi.enabled`` (true unless the session says false)."""
    try:
        return str(feed.frame.sparkSession.conf.get("spark.sql.ansi.enabled", "true")).strip().lower() != "false"
    except Exception:  # noqa: BLE001 - unreadable: assume off, which only keeps a Sum stage in Python
        return False


def apply_chain(operators: list[Any], df: DataFrame, *others: DataFrame, **options: Any) -> DataFrame:
    """The last operator's panes: the first applied to ``df`` (and ``others``: a merge's right input)
    with ``options``, each next one to the panes before it; ``spark_event_time`` goes to the last
    stage only (the chain's output is what native Spark reads)."""
    event_time = {"spark_event_time": options.pop("spark_event_time", False)}
    passed = {k: v for k, v in options.items()
              if k in ("time_mode", "clock", "key_groups", "state_encoding", "vectorized", "checkpoint")}
    *inner, last = operators
    if not inner:
        return last.apply(df, *others, **options, **event_time)
    out = inner[0].apply(df, *others, **options)
    for op in inner[1:]:  # (a stage the next one reads keeps its panes: never a native aggregation)
        out = apply_fed_operator(op, feed_of(handing_on(out)), native=False, **passed)  # type: ignore[arg-type]
    return last.apply(handing_on(out), **passed, **event_time)


__all__ = ["apply_fed_operator", "apply_chain"]
