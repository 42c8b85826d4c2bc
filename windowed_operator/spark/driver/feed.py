"""What a stage's output carries for the next stage of a chain: its processor's pane rows (``Feed``).

``op.apply(df)`` returns its panes and keeps, beside them, the processor's own rows (times in epoch
ms, pane rows only, each tagged with the step of its batch that made it: ``engine.fired_by.Phase``);
``op2.apply(panes)`` reads them (``spark.driver.chain``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...operator import WindowingOptions
from ...panes import INPUT_COLUMN, OUTPUT_COLUMNS, SIDE_OUTPUT_COLUMNS
from ..plan import EVENT_TIME_COLUMN, LATE_COUNT_COLUMN, PHASE_COLUMN, STAGE_COLUMN, WATERMARK_COLUMN, SparkPlan

_FEED = "_windowed_operator_feed"


@dataclass(frozen=True)
class Feed:
    """What a downstream operator needs of an upstream one's output."""

    frame: DataFrame  # the processor's pane rows: times in epoch ms, PHASE_COLUMN
    operator: WindowingOptions
    end_of_input_watermark: int
    #: The operator's name among the query's observed metrics (``stage.observation_name``).
    observation: str = ""
    #: The same pane rows with ``EVENT_TIME_COLUMN`` declared as their event time (the upstream
    #: planned again with ``spark_event_time``), for a stage Spark aggregates itself (``native_stage``).
    event_time_frame: Optional[Callable[[], DataFrame]] = None
    #: The upstream's transformWithState time mode.
    time_mode: str = "EventTime"
    #: These are a native stage's panes (``native_stage``): no stage can read them as panes.
    native_stage: bool = False
    #: The window option the panes' windows come from (the operator's, or, where it keeps its
    #: upstream's windows, the one of the first stage that has one).
    windows: Any = None
    #: The operator's place in its chain (0: the first).
    stage: int = 0
    #: The next stage is one of a chain's (``handing_on``): its output tags side rows with their stage.
    in_chain: bool = False
    #: ``frame`` also holds side rows (``pane_rows``), which the next stage hands on (``handing_on``).
    side_rows: bool = False
    #: Those side rows name the merge input they came on (``SparkPlan.input_column``).
    input_column: bool = False
    #: The pane rows with the side rows, where the operator has side outputs (``pane_rows``).
    with_side_rows: Optional[DataFrame] = None
    #: ``frame`` also holds the operator's watermark rows (``SparkPlan.hands_on_watermark``): the
    #: next stage advances to exactly this watermark (``scan.heartbeat.WatermarkBeats``).
    watermark_rows: bool = False
    #: The operator planned again to hand its watermark on (its ``Feed``), where the next stage must
    #: follow it instead of Spark's own (a per-partition watermark, which Spark's runs ahead of).
    handing_on_watermark: Optional[Callable[[], "Feed"]] = None
    #: The operator's output with its watermark rows (the operator planned again where it does not
    #: report them: ``with_watermark``).
    watermark_output: Optional[Callable[[], DataFrame]] = None


def with_watermark(out: DataFrame) -> DataFrame:
    """``out`` (what an operator's, merge's or chain's ``apply()`` returned) with the operator's
    watermark rows: in every micro-batch each key group adds a row that has every output column
    null but ``__wo_watermark``, the watermark (epoch ms) the group fired the batch's panes at, and
    ``__wo_held_by``, under ``partition=`` the partition holding it back.  What a table sink reads
    to record completeness beside its table (``windowed_operator.sinks.completeness``): write this
    frame to ``foreachBatch(TableSink(..., operator=op))``.  The operator is planned again so that
    every key group runs in every batch the watermark advances (a few ms per group and batch), so
    that every group reports; start the query from this frame instead of ``out``."""
    feed = feed_of(out)
    if feed is None or feed.watermark_output is None:
        from ..base.errors import SparkOperatorError

        why = ("Spark aggregates a native stage itself, and its watermark is Spark's (apply() told a new "
               "checkpoint runs an eligible later stage natively: set spark.windowed_operator.nativeStages=false "
               "before a new query's apply() to keep it in Python)") \
            if feed is not None and feed.native_stage else "give it the DataFrame apply() returned, before any select"
        raise SparkOperatorError(f"with_watermark: not an operator's output that can report its watermark: {why}")
    return feed.watermark_output()


def handing_on(out: DataFrame) -> DataFrame:
    """``out`` (an operator's panes) for the next stage of a chain, which hands on the side rows of
    the stages before it: a chain's output has every stage's, while a stage applied to another's
    output alone leaves them in that output (a pipeline's sink of it)."""
    feed = feed_of(out)
    if feed is None:
        return out
    if feed.with_side_rows is None:
        return attach_feed(out, dataclasses.replace(feed, in_chain=True))
    return attach_feed(out, dataclasses.replace(feed, frame=feed.with_side_rows, side_rows=True, in_chain=True))


def attach_feed(panes: DataFrame, feed: Feed) -> DataFrame:
    # (set in __dict__ and read from it: a Spark Connect DataFrame answers any other attribute
    # name with a column)
    panes.__dict__[_FEED] = feed
    return panes


def feed_of(df: Any) -> Optional[Feed]:
    return getattr(df, "__dict__", {}).get(_FEED)


def pane_rows(out: DataFrame, plan: SparkPlan, event_time: bool = False, side_rows: bool = False) -> DataFrame:
    """The processor's pane rows (no late-data or dead-letter rows, no count rows: ``out`` is the
    processor's output), as the next stage reads them (``event_time``: with the event-time column,
    which ``plan`` must output).  ``side_rows`` (where ``plan`` has side outputs): its late data and
    dead letters too, its own and those it handed on, each tagged with its stage (``STAGE_COLUMN``),
    for a next stage of its chain to hand on to the chain's output, as the local chain keeps every
    stage's.  With ``plan.hands_on_watermark`` the count rows stay too, as watermark rows: every
    column null but ``WATERMARK_COLUMN``, the watermark the group ran at (null on the other rows)."""
    columns = [c for c in OUTPUT_COLUMNS if plan.keyed or c != "key"]
    kept = F.col(LATE_COUNT_COLUMN).isNull()
    if plan.side_outputs and not side_rows:
        kept = kept & (F.col("record_type") == "pane")
    marks = []
    if plan.hands_on_watermark:
        kept = kept | F.col(WATERMARK_COLUMN).isNotNull()
        marks = [F.col(WATERMARK_COLUMN)]
    out = out.where(kept)
    if plan.side_outputs and side_rows:
        stage = F.col(STAGE_COLUMN) if plan.stage_column else F.lit(0).cast("int").alias(STAGE_COLUMN)
        return out.select(*columns, *SIDE_OUTPUT_COLUMNS, *([INPUT_COLUMN] if plan.input_column else []), stage,
                          PHASE_COLUMN, *marks)
    return out.select(*columns, PHASE_COLUMN, *([EVENT_TIME_COLUMN] if event_time else []), *marks)
