"""A call's output rows as columns, one dict of lists or arrays per part (``output_frame`` joins them):
the panes and side rows of an emission or of the columnar paths, the side rows a chained stage hands
on, the call's count row, and the event-time column.  The columns are ``SparkPlan.processor_fields``;
times are epoch ms (the driver shows them as timestamps)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ...elements import element_json
from ...engine.core import Emission
from ...panes import INPUT_COLUMN, OUTPUT_COLUMNS, DroppedElement, PaneRecord, of_input
from ...engine.fired_by import Clauses, Phase, causes
from ...time import END_OF_INPUT
from ...watermarks import partition_label
from ..plan import (BAD_COUNT_COLUMN, EVENT_TIME_COLUMN, HELD_BY_COLUMN, HELD_LAG_COLUMN, LATE_COUNT_COLUMN,
                    PHASE_COLUMN, STAGE_COLUMN, WATERMARK_COLUMN, SparkPlan)


def emission_rows(plan: SparkPlan, emission: Emission, dead_letters: list[DroppedElement], phase: int) -> dict[str, list[Any]]:
    """Column lists for one pandas DataFrame of output rows, made by the step ``phase``."""
    names = list(OUTPUT_COLUMNS if plan.keyed else OUTPUT_COLUMNS[1:]) + plan.side_columns
    columns: dict[str, list[Any]] = {name: [] for name in names}
    for pane in emission.outputs:
        _add_pane(plan, columns, pane)
    if plan.side_outputs:
        late = emission.dropped if plan.operator.late_data_output else []
        for dropped in [*late, *dead_letters]:
            _add_dropped(plan, columns, dropped)
    columns[PHASE_COLUMN] = [phase] * len(columns["value"])
    for name in plan.count_columns:
        columns[name] = [None] * len(columns["value"])
    return columns


def columnar_rows(plan: SparkPlan, panes: Any, dropped: list[DroppedElement], phase: int) -> dict[str, Any]:
    """Columns from the columnar paths' panes: numpy arrays, or lists when side-output rows (with
    nulls) are appended.  Panes are stamped with the end of the window (the only combiner these
    paths take), retractions with that of the pane they retract."""
    ends = panes.ends
    columns: dict[str, Any] = {}
    if plan.keyed:
        columns["key"] = panes.keys
    columns.update({"window_start": panes.starts, "window_end": ends, "value": panes.values,
                    "timing": panes.timing, "pane_index": panes.pane_index.astype(np.int32),
                    "is_first": panes.is_first, "is_last": panes.is_last.astype(bool),
                    "is_retraction": panes.is_retraction, "timestamp": ends - 1})
    if plan.side_outputs:
        columns = {name: values.tolist() for name, values in columns.items()}
        for name in plan.side_columns:
            columns[name] = ["pane" if name == "record_type" else None] * len(ends)
        for item in dropped:
            _add_dropped(plan, columns, item)
    columns[PHASE_COLUMN] = np.full(len(columns["value"]), phase, dtype=np.int32)
    for name in plan.count_columns:
        columns[name] = np.full(len(columns["value"]), None, dtype=object)
    return columns


def forwarded_rows(plan: SparkPlan, rows: pd.DataFrame) -> dict[str, list[Any]]:
    """Side rows of the stages before this one, handed on as they came (each with its stage;
    the key where this stage keys by the upstream's key, whose type it shares)."""
    n = len(rows)
    columns: dict[str, list[Any]] = {name: [None] * n for name, _ in plan.processor_fields()
                                     if name != EVENT_TIME_COLUMN}
    columns["timestamp"] = [None] * n  # (the event-time output reads it)
    for name in plan.side_columns:
        columns[name] = [None if value is None or value != value else value for value in rows[name].tolist()]
    columns["element_timestamp"] = [None if t is None else int(t) for t in columns["element_timestamp"]]
    columns[STAGE_COLUMN] = [int(stage) for stage in columns[STAGE_COLUMN]]
    if plan.keyed and plan.key_column == "key":
        columns["key"] = [None if k is None or k != k else k for k in rows["key"].tolist()]
    columns[PHASE_COLUMN] = [int(Phase.ELEMENTS)] * n
    return columns


def count_row(plan: SparkPlan, late: int, bad: int, held: Optional[tuple[int, Optional[tuple[str, Any, int]]]] = None,
              ) -> dict[str, list[Any]]:
    """The one row that reports a call's drops: every output column null but the counts; with
    ``held`` (a per-partition watermark), the call's watermark and the input, partition and lag
    holding it back (``GroupTimers.holding_back``; None: none does)."""
    row: dict[str, list[Any]] = {name: [None] for name, _ in plan.processor_fields()}
    row[LATE_COUNT_COLUMN], row[BAD_COUNT_COLUMN] = [late], [bad]
    if held is not None:
        watermark, slowest = held
        row[WATERMARK_COLUMN] = [watermark]
        if slowest is not None:
            row[HELD_BY_COLUMN] = [held_label(slowest)]
            row[HELD_LAG_COLUMN] = [slowest[2]]
    return row


def held_label(slowest: Optional[tuple[str, Any, int]]) -> Optional[str]:
    """The partition holding a per-partition watermark back, as the output names it (after its
    input's name in a merge); None: none does."""
    return None if slowest is None else partition_label(slowest[0], slowest[1])


def add_firing(plan: SparkPlan, part: dict[str, Any], watermark: int, held_by: Optional[str],
               clauses: Clauses) -> None:
    """``fired_by``'s columns of one step's rows (``engine.fired_by``: null on rows that are no pane)."""
    if "fired_by" in part:  # (the side rows a chained stage hands on: ``forwarded_rows``, made with every column)
        return
    timings = [None if t is None or t != t else t for t in list(part["timing"])]
    n = len(timings)
    keys = list(part["key"]) if plan.keyed else [None] * n
    phase = int(part[PHASE_COLUMN][0]) if n else 0
    found = causes(list(zip(keys, list(part["window_start"]), list(part["window_end"]))), timings,
                   list(part["is_last"]), list(part["is_retraction"]), phase, watermark, clauses)
    part["fired_by"] = found
    part["firing_watermark"] = [None if c is None else watermark for c in found]
    part["held_back_by"] = [None if c is None else held_by for c in found]


def event_times(plan: SparkPlan, timestamps: Any, behind: int) -> pd.Series:
    """The event-time column: a pane's timestamp as its last microsecond (as Spark's
    ``window_time`` is a window's), so a pane stamped at the previous batch's watermark ``behind``
    is not behind it by Spark's rule (a row at or before the watermark is late); null where Spark
    would refuse the row (stamped before ``behind``: a window's LATE panes after the batch that
    fired it on time, and their retractions), beyond the end of event time here (``END_OF_INPUT``:
    the global window's panes) or for rows that are no pane (late data, dead letters, counts)."""
    stamps = pd.to_numeric(pd.Series(timestamps, dtype=object), errors="coerce").to_numpy(dtype=float)
    kept = ~np.isnan(stamps)
    kept[kept] = (stamps[kept] >= behind) & (stamps[kept] < END_OF_INPUT)
    micros = np.where(kept, stamps, 0).astype(np.int64) * 1000 + 999
    return pd.Series(pd.to_datetime(micros, unit="us", utc=True)).where(kept)


def _add_pane(plan: SparkPlan, columns: dict[str, list[Any]], pane: PaneRecord) -> None:
    if plan.keyed:
        columns["key"].append(pane.key)
    columns["window_start"].append(pane.window_start)
    columns["window_end"].append(pane.window_end)
    columns["value"].append(pane.value)
    columns["timing"].append(pane.timing.value)
    columns["pane_index"].append(pane.index)
    columns["is_first"].append(pane.is_first)
    columns["is_last"].append(pane.is_last)
    columns["is_retraction"].append(pane.is_retraction)
    columns["timestamp"].append(pane.timestamp)
    for name in plan.side_columns:
        columns[name].append("pane" if name == "record_type" else None)


def _add_dropped(plan: SparkPlan, columns: dict[str, list[Any]], dropped: DroppedElement) -> None:
    dropped = of_input(dropped)
    for name in columns:
        columns[name].append(None)
    if plan.keyed:
        columns["key"][-1] = dropped.key
    kind = "late" if dropped.reason.value in ("expired", "closed_window") else "dead_letter"
    columns["record_type"][-1] = kind
    columns["reason"][-1] = dropped.reason.value
    columns["element"][-1] = element_json(dropped.element, plan.integral_columns)
    columns["element_timestamp"][-1] = dropped.timestamp
    if plan.input_column:
        columns[INPUT_COLUMN][-1] = dropped.input
    if plan.stage_column:
        columns[STAGE_COLUMN][-1] = plan.stage
