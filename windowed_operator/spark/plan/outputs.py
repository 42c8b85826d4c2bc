"""An operator's output as two DataFrames: its panes, typed and non-null, and its late data and dead
letters (the side output, as Beam's tagged output), and a way to write both from one query.

With ``late_data_output=True`` or ``on_bad_element="dead_letter"`` the stateful operator's output
mixes pane rows and side rows (``record_type``, ``reason``, ``element``, ``element_timestamp``, and
``stage`` in a chain), so every pane column is nullable there, and ``toPandas()`` makes the flags
``object`` columns (``~df["is_retraction"]`` is then integer negation).  That mixed form stays what
``apply()`` returns: the operator's output schema is part of its checkpoint and of Spark's plan.
``split_outputs`` (or ``apply_outputs``) takes it apart, on the driver, with projections only:

- ``panes``: the pane rows with exactly the pane columns; ``key``, ``timing``, ``pane_index``,
  ``is_first``, ``is_last``, ``is_retraction`` (and ``window_start``, ``window_end``, ``timestamp``
  where the windows cannot be the global window, whose bounds show as null) are non-nullable in the
  schema; ``value`` keeps the accumulation's nullability;
- ``side``: the late-data and dead-letter rows: ``key`` (keyed operators; null for a dead letter
  without one), ``record_type`` (``late``/``dead_letter``), ``reason``, ``element`` (JSON),
  ``element_timestamp`` (null where the element had none), and ``stage`` in a chain: the columns
  ``run --local``'s side sinks write.

Two ``writeStream``s of ``panes`` and ``side`` are two streaming queries, each running the stateful
operator with its own checkpoint and state: correct, but the work twice.  ``Outputs.write`` builds
one query instead: a ``foreachBatch`` over the mixed output whose batch is persisted once and split
for each sink (a function ``(batch_df, batch_id)`` or a ``TableSink``), so a sink's exactly-once by
batch id (the table sink's progress row) holds as in a query of its own.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import DataStreamWriter

from ...panes import FIRING_COLUMNS, OUTPUT_COLUMNS, SIDE_OUTPUT_COLUMNS
from . import EVENT_TIME_COLUMN, SIDE_ROW_COLUMNS, STAGE_COLUMN, WATERMARK_COLUMN

#: What a sink of ``Outputs.write`` is: ``sink(batch_df, batch_id)`` (a ``TableSink`` is one).
BatchSink = Callable[[DataFrame, int], Any]

#: Pane columns never null on a pane row.
_ALWAYS_SET = ("key", "timing", "pane_index", "is_first", "is_last", "is_retraction", "fired_by")
#: Pane columns null on the global window's panes only (its bounds, its end-of-input pane's time).
_SET_BUT_GLOBAL = ("window_start", "window_end", "timestamp")
#: Side columns never null on a side row.
_SIDE_ALWAYS_SET = ("record_type", "reason", "element", STAGE_COLUMN)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _filler(data_type: T.DataType) -> Optional[Column]:
    """A non-null literal of ``data_type`` (None for types without a plain one): ``coalesce`` with
    it is how Spark's analyser learns a column is never null; it never replaces a value here,
    because it is used only on columns that are never null on the rows kept."""
    if isinstance(data_type, T.BooleanType):
        return F.lit(False)
    if isinstance(data_type, T.StringType):
        return F.lit("")
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType)):
        return F.lit(0).cast(data_type)
    if isinstance(data_type, T.TimestampType):
        return F.lit(_EPOCH)
    return None


def _non_null(name: str, data_type: T.DataType) -> Column:
    filler = _filler(data_type)
    column = F.col(name)
    return (F.coalesce(column, filler) if filler is not None else column).alias(name)


def may_be_global(operator: Any) -> bool:
    """Whether ``operator``'s panes may be the global window's (bounds shown as null): its windows
    are the global window, or are not known (None: no operator given; a stage keeping an upstream's
    windows that are not known here)."""
    stages = list(getattr(operator, "operators", None) or ([operator] if operator is not None else []))
    for stage in reversed(stages):  # (a chain's panes have the windows of its last stage that has some)
        window = getattr(stage, "window", None)
        if window is not None:
            from ...windows.global_window import GlobalWindow

            return isinstance(window, GlobalWindow)
    return True


@dataclass(frozen=True)
class OutputColumns:
    """Which columns an operator's mixed output has, and how its two parts are selected from it
    (the same projections for the streaming DataFrame and for each ``foreachBatch`` batch)."""

    schema: T.StructType
    global_windows: bool

    @classmethod
    def of(cls, df: DataFrame, operator: Any = None) -> "OutputColumns":
        names = set(df.columns)
        required = [c for c in OUTPUT_COLUMNS if c != "key"]
        if "record_type" in names:
            required += SIDE_OUTPUT_COLUMNS
        missing = [c for c in required if c not in names]
        if missing:
            raise ValueError(f"not an operator's output DataFrame: column(s) {', '.join(map(repr, missing))} missing "
                             f"(columns: {', '.join(df.columns)}); give split_outputs the DataFrame apply() returned, "
                             "before any select")
        return cls(schema=df.schema, global_windows=may_be_global(operator))

    @property
    def has_side(self) -> bool:
        return "record_type" in self.schema.fieldNames()

    @property
    def has_watermark_rows(self) -> bool:
        """The output carries the operator's watermark rows (``with_watermark``)."""
        return WATERMARK_COLUMN in self.schema.fieldNames()

    def _type(self, name: str) -> T.DataType:
        return self.schema[name].dataType

    def panes(self, df: DataFrame) -> DataFrame:
        names = self.schema.fieldNames()
        rows = df.where(F.col("record_type") == "pane") if self.has_side else df
        if self.has_watermark_rows:
            rows = rows.where(F.col(WATERMARK_COLUMN).isNull())
        columns = []
        for name in [*OUTPUT_COLUMNS, *FIRING_COLUMNS, EVENT_TIME_COLUMN]:
            if name not in names:
                continue
            set_always = name in _ALWAYS_SET or (name in _SET_BUT_GLOBAL and not self.global_windows)
            columns.append(_non_null(name, self._type(name)) if set_always else F.col(name))
        return rows.select(*columns)

    def side(self, df: DataFrame) -> DataFrame:
        names = self.schema.fieldNames()
        columns = [F.col("key")] if "key" in names else []
        for name in SIDE_ROW_COLUMNS:
            if name in names:
                columns.append(_non_null(name, self._type(name)) if name in _SIDE_ALWAYS_SET else F.col(name))
        return df.where(F.col("record_type") != "pane").select(*columns)


class SplitBatch:
    """The ``foreachBatch`` function of ``Outputs.write``: one batch of the mixed output, persisted
    once where both sinks read it, handed to each sink as its part, the panes first."""

    def __init__(self, layout: OutputColumns, panes: Optional[BatchSink], side: Optional[BatchSink]) -> None:
        self.layout, self.panes_sink, self.side_sink = layout, panes, side

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        both = self.panes_sink is not None and self.side_sink is not None
        if both:
            batch = batch.persist()
        try:
            if self.panes_sink is not None:  # (a table sink reads the watermark rows: ``reads_watermark``)
                whole = self.layout.has_watermark_rows and getattr(self.panes_sink, "reads_watermark", False)
                self.panes_sink(batch if whole else self.layout.panes(batch), batch_id)
            if self.side_sink is not None:
                self.side_sink(self.layout.side(batch), batch_id)
        finally:
            if both:
                batch.unpersist()


@dataclass(frozen=True)
class Outputs:
    """An operator's output taken apart: ``panes`` (typed, non-null pane columns) and ``side`` (its
    late data and dead letters; None where the operator has neither output), both derived from
    ``mixed`` (what ``apply()`` returned).  Starting a query on each runs the operator twice;
    ``write`` runs it once for both."""

    mixed: DataFrame
    panes: DataFrame
    side: Optional[DataFrame]
    layout: OutputColumns

    def write(self, panes: Optional[BatchSink] = None, side: Optional[BatchSink] = None) -> DataStreamWriter:
        """One streaming query writing the panes to ``panes`` and the late data and dead letters to
        ``side``: each a function ``(batch_df, batch_id)`` or a ``TableSink``, given its part of each
        micro-batch (possibly empty) with the batch id.  Returns the ``DataStreamWriter``: set its
        checkpoint location and trigger, then ``start()``.  A batch Spark replays after a failure
        reaches both sinks again with its id: the table sink skips one it applied.  Of an output
        ``with_watermark`` made, a table sink of the panes gets each batch whole, watermark rows
        included, to record its completeness (``sinks.completeness``)."""
        if panes is None and side is None:
            raise ValueError("Outputs.write needs panes=, side= or both (each a function (batch_df, batch_id) or a "
                             "TableSink)")
        for what, sink in (("panes", panes), ("side", side)):
            if sink is not None and not callable(sink):
                raise TypeError(f"{what}={sink!r} is not a function (batch_df, batch_id) or a TableSink")
        if side is not None and self.side is None:
            raise ValueError("side=: this operator has no late-data or dead-letter output (give it "
                             "late_data_output=True or on_bad_element='dead_letter')")
        return self.mixed.writeStream.foreachBatch(SplitBatch(self.layout, panes, side))


def split_outputs(df: DataFrame, operator: Any = None) -> Outputs:
    """``df`` (what an operator's, merge's or chain's ``apply()`` returned) as its panes and its side
    output.  ``operator``: the operator (or chain) it came from, where its windows tell that the
    panes' ``window_start``, ``window_end`` and ``timestamp`` are never null (not the global
    window); without it those stay nullable.  A DataFrame without an operator's columns is refused,
    naming the columns it lacks."""
    layout = OutputColumns.of(df, operator)
    return Outputs(mixed=df, panes=layout.panes(df), side=layout.side(df) if layout.has_side else None,
                   layout=layout)


def apply_outputs(operator: Any, *inputs: DataFrame, **apply_options: Any) -> Outputs:
    """``operator.apply(*inputs, **apply_options)`` (a one-input operator, a merge with its left and
    right inputs, or a chain; the options are ``apply``'s) taken apart by ``split_outputs``."""
    return split_outputs(operator.apply(*inputs, **apply_options), operator)


__all__ = ["BatchSink", "OutputColumns", "Outputs", "SplitBatch", "apply_outputs", "may_be_global", "split_outputs"]
