"""A key group's call in the worker: one runner for every engine and layout.

The runner is opened once per operator (``WindowedStatefulProcessor.init``): the engine the plan
chose, bound to each call's rows (``engines``), and the store of the state layout the operator keeps,
opened from the layouts' registry (``state.stores.open_store``).  Each call reads the group's record
and clocks, moves the group in from a layout an earlier run stored (``state.transitions.move_in``),
has the store run the batch on the engine (``LayoutStore.run_batch``: the one protocol of every
layout), schedules the group's timer and returns one output frame.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle, TimerValues

from ...engine.build import build_core
from ...engine.fired_by import Clauses
from ...state.stores import open_state
from ...time import MAX_TIMESTAMP
from ..plan.paths import build_table
from ..plan import EVENT_TIME_COLUMN, SparkPlan
from .engines import ObjectSteps, TableSteps
from .fed import FedReader
from .group_store import SparkGroupStore
from .output_frame import output_frame
from .output_rows import add_firing, count_row, event_times, held_label
from .rows import RowReader
from .state_schemas import DeclaredState
from .timers import GroupTimers


class GroupRunner:
    """Runs each call of one operator's processor: its engine (``steps``), its state (``state``: the
    layout and its store), the group's clocks (``timers``) and its input rows (``rows``)."""

    def __init__(self, plan: SparkPlan, handle: StatefulProcessorHandle, state: DeclaredState) -> None:
        self.plan = plan
        core = build_core(plan.operator)
        self.rows = RowReader(plan, core, plan.record_reader())
        table = build_table(plan.paths.engine, plan.operator) if plan.paths.engine.table else None
        self.spark_store = SparkGroupStore(state, plan.key_type, handle)
        self.state = open_state(self.spark_store, plan.operator, core, table, layout=plan.paths.layout,
                                time_mode=plan.time_mode, key_groups=plan.key_groups, key_column=plan.state_key,
                                allow_pickle=plan.state_encoding == "pickle")
        self.old_value = state.old_value  # (the pickled value of earlier versions is declared only to detect it)
        self.steps = (TableSteps(plan, table, self.rows) if table is not None else
                      ObjectSteps(plan, core, self.rows, FedReader(plan, self.rows), self.state.by_window))
        self.timers = GroupTimers(plan, self.spark_store)
        #: Under a per-partition watermark: the call's watermark and what holds it back (``count_row``).
        self.held: Optional[tuple[int, Optional[tuple[str, Any, int]]]] = None
        #: The names of the trigger's clauses, where each pane says why it fired (``fired_by``).
        self.clauses = Clauses.of(plan.operator.trigger) if plan.fired_by else None

    def run(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
            fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        """One call's output frames: the group's batch (``frame``: its rows, None on a timer)."""
        plan = self.plan
        group = self.state.group(self.old_value)
        meta = group.meta
        frame, beats = self.timers.split_beats(frame, meta)
        spark_now, processing_time, watermark, behind = self._begin(meta, timer_values, fired_timer, beats)
        bound = self.steps.bind(frame, meta, watermark, processing_time)
        result = self.state.run_batch(group, bound.keys, watermark, processing_time, bound.engine)
        self.timers.schedule_group(meta, spark_now, watermark, due=result.due, has_due=bool(result.held))
        n_dropped = self.steps.count_dropped(bound, result)
        if n_dropped and plan.drop_counter is not None:
            plan.drop_counter.add(n_dropped)
        self.timers.note_input(meta, beats, processing_time)
        group.save(wm=watermark, **({"pt": processing_time} if plan.upstream is not None else {}))
        parts = self.steps.output(bound, result)
        if self.clauses is not None:
            held_by = held_label(self.held[1]) if self.held is not None else None
            for part in parts:
                add_firing(plan, part, watermark, held_by, self.clauses)
        yield from self._frame(parts, behind, n_dropped, len(bound.bad))

    def _begin(self, meta: dict, timer_values: TimerValues, fired_timer: Optional[int],
               beats: Any) -> tuple[int, int, int, int]:
        """The batch's clocks: Spark's processing time, the operator's, the watermark (``beats``: what
        the group's heartbeats say), and the previous batch's watermark (a new group: this one's); a
        timer that fired is forgotten."""
        if fired_timer is not None and meta.get("timer") == fired_timer:
            meta["timer"] = None
        spark_now = self.rows.now = timer_values.getCurrentProcessingTimeInMs()
        processing_time = self.plan.clock.now(spark_now)
        watermark = self.timers.watermark(timer_values, meta, processing_time, beats)
        if self.plan.reports_watermark:  # (reported on the call's count row: ``_frame``; none holds back the end)
            self.held = (watermark, self.timers.holding_back(meta, processing_time) if watermark < MAX_TIMESTAMP
                         else None)
        return spark_now, processing_time, watermark, meta.get("wm", watermark)

    def _frame(self, parts: list[dict[str, Any]], behind: int, late: int, bad: int) -> Iterator[pd.DataFrame]:
        """The call's one output frame (``output_frame``): its phases' rows, then the row of its
        counts of late and bad rows where it has any (and always under a per-partition watermark,
        with the watermark and the partition holding it back, or where the group's watermark is handed
        on or read from the upstream's rows: ``SparkPlan.reports_watermark``); with the event-time output, each pane's time
        for Spark's watermark (``output_rows.event_times``: ``behind`` is the previous batch's
        watermark; the count row's is null)."""
        plan = self.plan
        if late or bad or plan.reports_watermark:
            parts = [*parts, count_row(plan, late, bad, self.held)]
        frame = output_frame(plan.processor_fields(), parts, EVENT_TIME_COLUMN if plan.event_time_output else None,
                             lambda timestamps: event_times(plan, timestamps, behind))
        if frame is not None:
            yield frame
