"""A key group's batch in the worker, one runner per engine: the object path or a table.

The processor chooses the runner once (``WindowedStatefulProcessor.init``: the plan's engine and
the state layout it keeps) and hands it each call: ``ObjectGroups`` runs the core element by element
or on arrays over per-key windows or the window log; ``TableGroups`` runs a columnar engine over
per-key rows, the pane log or row shards.  A group stored in another layout (an earlier run's)
moves in with its batch.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import TimerValues

from ...elements import is_null
from ...engine.columnar import PaneTable, Panes
from ...engine.columnar_sessions import ColumnarSessions, SessionTable
from ...engine.core import Emission
from ...engine.range_ops import factorize
from ...panes import DroppedElement
from ...state.fingerprint import IncompatibleRestartError
from ...state.group_batch import GroupBatch, Phase, PhasedEmission, next_due, run_group_steps
from ...state.group_state import GroupState
from ...state.part_log import held_buckets, run_part_log_batch
from ...state.records import run_columnar_batch
from ...state.row_shards import RowShards, run_row_shards_batch
from ...state.transitions import move_in
from ...state.window_log import ArrayElements, run_window_log_batch
from ...time import MAX_TIMESTAMP
from ...windows.session_windows import element_gap, read_gaps
from ..paths import Fold
from ..plan import EVENT_TIME_COLUMN
from ..scan.preaggregate import COUNT_COLUMN, PANE_COLUMN
from ..scan.prechain import FIRST_COLUMN, LAST_COLUMN, TIMES_COLUMN, VALUES_COLUMN, chain_elements
from .fed import FedReader
from .output_frame import output_frame
from .output_rows import columnar_rows, count_row, emission_rows, event_times, forwarded_rows
from .rows import RowReader
from .timers import GroupTimers


class GroupRunner:
    """What both runners share: the layout the processor chose (read here by the names it set), the
    group's clocks (``timers``), its input rows (``rows``, ``fed``) and its output frame."""

    def __init__(self, processor: Any) -> None:
        self.plan = processor.plan
        self.core = processor.core
        self.store = processor.store
        self.codec = processor.codec
        self.fingerprint = processor.fingerprint
        self.key_shards = processor.key_shards
        self.value_state = processor.value_state
        self.pane_log = processor.pane_log
        self.window_log = processor.window_log
        self.columnar = processor.columnar
        self.records: Any = getattr(processor, "records", None)  # (a table engine's: ``columnar_records``)
        self.row_shards = processor.row_shards
        self.layout = processor.layout
        self.stores = processor.stores
        self.timers = GroupTimers(self.plan, self.store)
        self.rows = RowReader(self.plan, self.core, processor.reader)
        self.fed = FedReader(self.plan, self.rows)
        #: Under a per-partition watermark: the call's watermark and what holds it back (``count_row``).
        self.held: Optional[tuple[int, Optional[tuple[str, Any, int]]]] = None

    def run(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
            fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        """One call's output frames: the group's batch (``frame``: its rows, None on a timer)."""
        raise NotImplementedError

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

    def _schedule_group(self, group: GroupState, spark_now: int, watermark: int, *,
                        due: Optional[int] = None, has_due: Optional[bool] = None) -> None:
        self.timers.schedule_group(group, spark_now, watermark, due=due, has_due=has_due)

    def _group(self, codec: Any) -> GroupState:
        """The group's per-key state; a checkpoint of the pickled layout (version 5 and before) is refused."""
        group = GroupState(self.store, codec, self.fingerprint, self.plan.operator.label(), sharded=self.key_shards)
        if not group.meta and self.value_state.exists():
            raise IncompatibleRestartError(
                f"{self.plan.operator.label()}: the checkpoint holds state in the pickled layout of version 5 or "
                "earlier, which this version does not read (reading it would run code from the checkpoint): start "
                "a new checkpoint")
        return group

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


class ObjectGroups(GroupRunner):
    """The object and array engines, over per-key windows or the window log."""

    def run(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
            fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        group = self._group(self.codec)
        self.rows.unseen_drops = 0  # dropped rows a pre-selected row stood for (see ``RowReader.vectorized_work``)
        meta = group.meta
        frame, beats = self.timers.split_beats(frame, meta)
        spark_now, processing_time, watermark, behind = self._begin(meta, timer_values, fired_timer, beats)
        bad: list[DroppedElement] = []
        batch = GroupBatch()
        arrays: Optional[ArrayElements] = None
        frame, forwarded = self.fed.split_forwarded(frame)
        if frame is not None and len(frame):
            if self.plan.upstream is not None:
                self.fed.upstream_work(frame, meta, watermark, processing_time, batch, bad)
            else:
                if self.plan.paths.arrays and self.window_log is not None and not self.plan.paths.fold.weighted:
                    frame, arrays = self.rows.array_elements(frame)
                elif self.plan.paths.arrays:
                    frame = self.rows.vectorized_work(frame, watermark, processing_time, batch.work)
                if len(frame):
                    self.rows.record_work(frame, watermark, processing_time, batch.work, bad)
        moved = move_in(group, self.layout, self.stores, watermark, processing_time)  # (a restart changed layouts)
        if self.window_log is not None:
            phased = self._window_log_steps(group, batch, watermark, processing_time, spark_now, arrays,
                                            moved.released)
        else:
            phased = run_group_steps(self.core, group, batch, watermark, processing_time)
            group.commit(next_due(self.core))
            self._schedule_group(group, spark_now, watermark)
        dropped = [item for part in phased.by_phase for item in part.dropped]
        n_dropped = len(dropped) + self.rows.unseen_drops
        if n_dropped and self.plan.drop_counter is not None:
            self.plan.drop_counter.add(n_dropped)
        self.timers.note_input(meta, beats, processing_time)
        group.save(wm=watermark, **({"pt": processing_time} if self.plan.upstream is not None else {}))
        late = self.plan.side_outputs and self.plan.operator.late_data_output
        parts = []
        for phase, emission in zip(Phase, phased.by_phase):
            rejected = bad if phase is Phase.ELEMENTS and self.plan.side_outputs else []
            if emission.outputs or rejected or (late and emission.dropped):
                parts.append(emission_rows(self.plan, emission, rejected, phase))
        if forwarded is not None:
            parts.append(forwarded_rows(self.plan, forwarded))
        yield from self._frame(parts, behind, n_dropped, len(bad))

    def _window_log_steps(self, group: GroupState, batch: GroupBatch, watermark: int, processing_time: int,
                          spark_now: int, arrays: Optional[ArrayElements], released: Emission) -> PhasedEmission:
        """The batch on the window log: the windows due fire from their buckets, the elements (as
        arrays of every key, then as work) run on empty key states and are appended
        (``window_log``), after ``released`` (panes a group stored per key fired as it moved in)."""
        assert self.window_log is not None
        fired, added, due = run_window_log_batch(self.window_log, self.store, group.meta, batch.work, watermark,
                                                 processing_time, arrays)
        released.extend(fired)
        self._schedule_group(group, spark_now, watermark, due=due,
                             has_due=bool(held_buckets(self.window_log, group.meta)))
        return PhasedEmission((released, Emission(), added))


class TableGroups(GroupRunner):
    """The columnar engines (pane, session or window table), over per-key rows, the pane log or row shards."""

    def __init__(self, processor: Any) -> None:
        super().__init__(processor)
        #: How a table engine reads a batch's rows, by the scan fold that made them (other rows: ``_run_rows``).
        self._fold_readers: dict[Fold, Any] = {Fold.PREAGGREGATE: self._run_partials, Fold.PRECHAIN: self._run_chains}

    def run(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
            fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        """The keys a batch touches and the keys due, as one table of panes, sessions or windows
        (see ``windowed_operator.engine.columnar``, ``columnar_sessions``, ``columnar_windows`` and
        ``columnar_records``)."""
        plan = self.plan
        assert self.columnar is not None
        group = self._group(self.records.codec)
        meta = group.meta
        frame, beats = self.timers.split_beats(frame, meta)
        spark_now, processing_time, watermark, behind = self._begin(meta, timer_values, fired_timer, beats)
        released, timed, panes = Panes(), Panes(), Panes()
        dropped: list = []
        bad: list = []
        n_dropped = 0

        def run(table: Any) -> Any:
            nonlocal n_dropped
            table = self.columnar.on_watermark(table, watermark, released)  # (Phase.WATERMARK's panes)
            table = self.columnar.on_processing_time(table, processing_time, timed)  # (Phase.PROCESSING_TIME's)
            if frame is None or not len(frame):
                return table
            folded = self._fold_readers.get(plan.paths.fold)
            if folded is not None:  # (rows a scan fold made: never null, never kept)
                table, n_dropped = folded(table, frame, watermark, processing_time, panes)
                return table
            table = self._run_rows(table, frame, watermark, processing_time, panes, dropped, bad)
            n_dropped = len(dropped)
            return table

        moved = move_in(group, self.layout, self.stores, watermark, processing_time)  # (a restart changed layouts)
        if self.pane_log is not None:
            due = run_part_log_batch(self.pane_log, self.store, meta, watermark, run)
            self._schedule_group(group, spark_now, watermark, due=due, has_due=bool(held_buckets(self.pane_log, meta)))
        else:
            keys = factorize(self.rows.keys(frame))[1].tolist() if frame is not None and len(frame) else []
            if plan.key_column is not None:
                keys = [k for k in keys if not is_null(k)]  # rows with a null key are rejected below
            if self.row_shards:
                run_row_shards_batch(self._shards(group), keys, watermark, processing_time, run, moved.rows)
            else:
                run_columnar_batch(self.records, group, keys, watermark, processing_time, run)
            self._schedule_group(group, spark_now, watermark)
        if n_dropped and plan.drop_counter is not None:
            plan.drop_counter.add(n_dropped)
        self.timers.note_input(meta, beats, processing_time)
        group.save(wm=watermark)
        late = dropped if plan.operator.late_data_output else []
        yield from self._frame(self._rows_of((released, timed, panes), [*late, *bad]), behind, n_dropped, len(bad))

    def _rows_of(self, made: tuple[Panes, Panes, Panes], side: list) -> list[dict[str, Any]]:
        """The output rows of each step's panes (``side``: the elements step's late and bad rows)."""
        plan = self.plan
        return [columnar_rows(plan, panes, rows, phase)
                for phase, panes, rows in zip(Phase, made, ([], [], side))
                if len(panes) or (plan.side_outputs and rows)]

    def _shards(self, group: GroupState) -> RowShards:
        return RowShards(group, self.store, self.columnar, self.records.codec.kind)

    def _run_rows(self, table: PaneTable, frame: pd.DataFrame, watermark: int, processing_time: int, panes: Panes,
                  dropped: list, bad: list) -> PaneTable:
        """Input rows: those with a null or a time out of range are rejected (an error or a dead
        letter), the rest folded."""
        assert self.columnar is not None
        plan = self.plan
        clean = self.rows.clean(frame)
        gap = element_gap(plan.operator.window)  # (sessions whose gap is a column: the columnar path reads it)
        gaps = None
        if gap is not None:
            gaps, readable = read_gaps(frame[gap].to_numpy())
            clean &= readable  # (the others: the reader's invalid_gap error or dead letter)
        for record in self.rows.records(frame[~clean]):
            self.rows.reject(record, watermark, bad)
        frame = frame[clean]
        values = frame[plan.value_column].to_numpy() if plan.value_column is not None else None
        extra = {"gaps": gaps[clean]} if gaps is not None else {}
        return self.columnar.process(table, self.rows.keys(frame), frame[plan.time_column].to_numpy(dtype=np.int64),
                                     values, watermark, panes, dropped, self.rows.element_at(frame, values),
                                     processing_time=processing_time, **extra)

    def _run_partials(self, table: PaneTable, frame: pd.DataFrame, watermark: int, processing_time: int,
                      panes: Panes) -> tuple[PaneTable, int]:
        """Rows folded upstream per (key, pane) (``preaggregate``): never null, never kept."""
        assert self.columnar is not None
        aggregates = [frame[name].to_numpy() for name in self.plan.partial_columns]
        return self.columnar.process_partials(table, self.rows.keys(frame), frame[PANE_COLUMN].to_numpy(dtype=np.int64),
                                              frame[COUNT_COLUMN].to_numpy(dtype=np.int64), aggregates, watermark,
                                              panes, processing_time=processing_time)

    def _run_chains(self, table: SessionTable, frame: pd.DataFrame, watermark: int, processing_time: int,
                    panes: Panes) -> tuple[SessionTable, int]:
        """Session elements chained upstream (``prechain``): never null, never kept."""
        plan = self.plan
        assert isinstance(self.columnar, ColumnarSessions)
        times = frame[TIMES_COLUMN].to_numpy()
        values = frame[VALUES_COLUMN].to_numpy() if plan.chain_values is not None else None

        def elements_of(i: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
            return chain_elements(times[i], values[i] if values is not None else None, plan.chain_values)

        return self.columnar.process_chains(
            table, self.rows.keys(frame), frame[FIRST_COLUMN].to_numpy(dtype=np.int64),
            frame[LAST_COLUMN].to_numpy(dtype=np.int64), frame[COUNT_COLUMN].to_numpy(dtype=np.int64),
            [frame[name].to_numpy() for name in plan.partial_columns], watermark, panes, elements_of,
            processing_time=processing_time)
