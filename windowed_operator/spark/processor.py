"""The StatefulProcessor: runs the core for the keys of one key group per call.

Spark groups the input by a *key group* (a hash of the key modulo ``key_groups``, as Flink does),
not by the key: one Python call and one timer serve all keys of the group in a micro-batch
(SPARK_NOTES.md measured about 5 ms per call).  Inside the group each key's state is its own
record in a MapState, read only when the batch has rows for the key or the group's due index says
it has work due (``windowed_operator.group_state``, ``spark.group_store``): the calls a batch makes
follow the keys it touches, not the keys held.

Within a call, operators a columnar path serves (``paths.Engine``: chosen on the driver) run on a
table of the group's panes, sessions or windows; other windows assigned by timestamp with a
vectorized accumulation go through the core's array path (``windowed_operator.vectorized``);
everything else element by element.  All give the same panes.
"""
from __future__ import annotations

from typing import Any, Hashable, Iterator, Optional

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, StatefulProcessor, StatefulProcessorHandle,
                                                      TimerValues)

from accumulations.merge import LEFT, RIGHT, SIDES, SidedValues
from accumulations.rows import Rows

from ..core import CoreElement, Emission
from ..elements import BadElementError, is_null, readable_value, rejected_row_error
from ..fingerprint import IncompatibleRestartError, in_key_shards, state_fingerprint
from ..group_batch import GroupBatch, Phase, PhasedEmission, next_due, run_group_steps
from ..group_state import GroupState
from ..columnar import PaneTable, Panes
from ..columnar_records import RowRecords, columnar_records, run_columnar_batch
from ..columnar_sessions import ColumnarSessions, SessionTable
from ..columnar_panes import object_array
from ..gc_pause import collector_paused
from ..pane_columns import PaneColumns, read_pane_columns
from ..pane_log import LAYOUT as PANE_LOG, PaneLog, supports_pane_log
from ..part_log import held_buckets, run_part_log_batch
from ..merge_operator import MergeOperatorBase
from ..pane_log_migration import key_records_to_pane_log, pane_log_to_key_records, stored_layout
from ..panes import DroppedElement, RetractedValue, panes_from_columns
from ..range_ops import factorize, lexsort_ints
from ..row_shards import (LAYOUTS as ROW_SHARDS_LAYOUTS, META as ROW_SHARDS, RowShards, key_records_to_row_shards,
                          row_shards_to_key_records, run_row_shards_batch)
from ..state import KeyState
from ..state_codec import KeyStateCodec
from ..time import (END_OF_INPUT_WATERMARK, MAX_TIMESTAMP, MIN_TIMESTAMP, event_time_in_range,
                    latest_event_time)
from ..vectorized import process_batch_arrays
from ..window_log import LAYOUT as WINDOW_LOG, ArrayElements, WindowLog, run_window_log_batch, supports_window_log
from ..window_log_migration import key_windows_to_window_log, window_log_to_key_windows
from ..watermarks import FixedLagWatermark, idle_advanced, input_is_idle, two_input_watermark
from ..windows.session_windows import element_gap, read_gaps
from .heartbeat import max_known, split_beats
from .group_store import SparkGroupStore
from .output_frame import output_frame
from .handoff import Handoff
from .packed_input import PACKED_POSITION, unpack_rows
from .paths import WHOLE_ROWS, Fold, build_table
from .plan import (EVENT_TIME_COLUMN, GROUP_COLUMN, ROUTE_COLUMN, MERGE_TIME_COLUMN, PAYLOAD_COLUMNS, PHASE_COLUMN, SIDE_COLUMN, SIDE_OUTPUT_COLUMNS,
                   SIDED_VALUES, STAGE_COLUMN, SparkPlan)
from .preaggregate import COUNT_COLUMN, PANE_COLUMN
from .prechain import FIRST_COLUMN, LAST_COLUMN, TIMES_COLUMN, VALUES_COLUMN, chain_elements
from .preselect import WEIGHT_COLUMN
from .state_schemas import DeclaredState

#: 4: end-of-window timers are due at max_timestamp + 1 (Beam's rule); windows carry on_time_hold.
#: 5: every group's bookkeeping carries the fingerprint of the operator that wrote it.
#: 6: each key's state is a JSON record in a MapState (windows, or pane rows or session rows on
#:    the columnar paths), with a due index; nothing is pickled.  (Sessions under the default trigger
#:    moved from windows to session rows within version 6: their records are migrated as read.)
#: 7: records are lists by position (``group_state.record_text``, ``columnar_records``), not objects of
#:    named fields; version 6 records are read, and rewritten in the new form when their key is written.
#: 8: the window log's parts of a join or cogroup keep its inputs by column (``record_columns``);
#:    version 7's parts (every accumulator by value) are read beside them and folded as before.
STATE_VERSION = 8
#: The object and array paths' layout when the window log does not serve them.
PER_KEY_WINDOWS = "per-key windows"


def spark_timer(due: int, end_of_input_watermark: int = END_OF_INPUT_WATERMARK) -> int:
    """The Spark event-time timer for an event time at which a key group has work.

    Spark's watermark starts at 0 and never goes below it (1970), and its timer index never reaches
    a timer below 0 once later ones exist (measured: such a key group never fired again, and its
    other keys with it), so a due time before 1970 is registered at 1: the group wakes when the
    watermark passes 1970.  Spark's watermark stops at END_OF_INPUT - delay after the end-of-input
    marker: a later due time is registered there, where the processor takes the input as ended.
    """
    return max(1, min(due, end_of_input_watermark))


class WindowedStatefulProcessor(StatefulProcessor):
    def __init__(self, plan: SparkPlan) -> None:
        self.plan = plan

    # (called by the DeferredProcessor Spark runs, from its own init, with the state it declared)
    def init(self, handle: StatefulProcessorHandle, state: DeclaredState) -> None:  # type: ignore[override]
        """``state``: the variables the ``DeferredProcessor`` Spark runs declared in its own ``init``."""
        self.handle = handle
        self.core = self.plan.operator.build_core()
        self.reader = self.plan.record_reader()
        self.now: Optional[int] = None  # the batch's processing time, set per call
        self.columnar: Any = None
        if self.plan.paths.engine.table:
            self.columnar = build_table(self.plan.paths.engine, self.plan.operator)
            self.records = columnar_records(self.columnar)
        #: The default trigger with no allowed lateness keeps its rows by pane (``pane_log``).
        self.pane_log = PaneLog(self.columnar) if self.columnar is not None and supports_pane_log(self.columnar) \
            and self.plan.time_mode == "EventTime" and self.plan.pane_log else None
        self.codec = KeyStateCodec(allow_pickle=self.plan.state_encoding == "pickle")
        #: ... and the object and array paths keep their windows' accumulators by window (``window_log``).
        self.window_log = WindowLog(self.core, self.codec) if self.columnar is None and self.plan.upstream is None \
            and supports_window_log(self.core) and self.plan.time_mode == "EventTime" and self.plan.pane_log else None
        #: Session and window rows are kept in row shards (``row_shards``), or per key.
        self.row_shards = self.columnar is not None and self.pane_log is None and self.plan.row_shards \
            and isinstance(self.records, RowRecords)
        layout = PANE_LOG if self.pane_log is not None else ROW_SHARDS_LAYOUTS[self.records.codec.kind] \
            if self.row_shards else self.records.layout if self.columnar is not None else \
            WINDOW_LOG if self.window_log is not None else PER_KEY_WINDOWS
        #: Per-key layouts keep their records in key shards (or not: a restart moves them); the logs
        #: and row shards keep none after moving in, so their groups read records as stored.
        self.key_shards: Optional[bool] = None if layout in (PANE_LOG, WINDOW_LOG) or self.row_shards \
            else self.plan.key_shards
        if self.key_shards:
            layout = in_key_shards(layout)
        self.fingerprint = state_fingerprint(
            self.plan.operator, key_groups=self.plan.key_groups, time_mode=self.plan.time_mode,
            layout=layout,
            state_version=STATE_VERSION, key_column=self.plan.state_key)
        # (the pickled value of earlier versions is declared only to detect it)
        self.value_state = state.old_value
        self.store = SparkGroupStore(state, self.plan.key_type, handle)
        #: How a table engine reads a batch's rows, by the scan fold that made them (other rows: ``_run_rows``).
        self._fold_readers: dict[Fold, Any] = {Fold.PREAGGREGATE: self._run_partials, Fold.PRECHAIN: self._run_chains}

    # -- Spark callbacks ------------------------------------------------------------------------
    # (transformWithStateInPandas passes pandas DataFrames only; the base class also types the Row API's rows)
    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # type: ignore[override]
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        if self.plan.paths.handoff is Handoff.PACKED:
            # (by position: pyspark names the columns _0, _1, as a namedtuple renames underscored names)
            frame = unpack_rows(frame.iloc[:, PACKED_POSITION].tolist(), self.plan.timezone)
        names = list(self.plan.input_columns)
        if names and list(frame.columns) != names and len(frame.columns) == len(names):
            frame.columns = names  # struct columns in the input make pyspark name columns _0, _1, ...
        with collector_paused():  # (see gc_pause: the batch's many small objects hold no cycles)
            out = self._outputs(self._run(frame, timerValues, None))
        yield from out

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        with collector_paused():
            out = self._outputs(self._run(None, timerValues, expiredTimerInfo.getExpiryTimeInMs()))
        yield from out

    def close(self) -> None:
        pass

    def _outputs(self, frames: Iterator[pd.DataFrame]) -> list[pd.DataFrame]:
        """A group's output frames, with its writes sent: the store holds them until then
        (``pipelined_map.PendingWrites``), and drops them if the call fails."""
        try:
            out = list(frames)
        except BaseException:
            self.store.discard()
            raise
        self.store.flush()
        return out

    # -- one key group --------------------------------------------------------------------------
    def _run(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
             fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        if self.columnar is not None:
            yield from self._run_columnar(frame, timer_values, fired_timer)
            return
        group = self._group(self.codec)
        self.unseen_drops = 0  # dropped rows a pre-selected row stood for (see _vectorized_work)
        frame, beats = self._split_beats(frame)
        meta = group.meta
        if fired_timer is not None and meta.get("timer") == fired_timer:
            meta["timer"] = None
        spark_now = self.now = timer_values.getCurrentProcessingTimeInMs()
        processing_time = self.plan.clock.now(spark_now)
        watermark = self._watermark(timer_values, meta, processing_time)
        behind = meta.get("wm", watermark)  # the previous batch's watermark (a new group: this one's)
        bad: list[DroppedElement] = []
        batch = GroupBatch()
        arrays: Optional[ArrayElements] = None
        frame, forwarded = self._split_forwarded(frame)
        if frame is not None and len(frame):
            if self.plan.upstream is not None:
                self._upstream_work(frame, meta, watermark, processing_time, batch, bad)
            else:
                if self.plan.paths.arrays and self.window_log is not None and not self._weighted():
                    frame, arrays = self._array_elements(frame)
                elif self.plan.paths.arrays:
                    frame = self._vectorized_work(frame, watermark, processing_time, batch.work)
                if len(frame):
                    self._record_work(frame, watermark, processing_time, batch.work, bad)
        if self.window_log is not None:
            phased = self._window_log_steps(group, batch, watermark, processing_time, spark_now, arrays)
        else:
            if stored_layout(group) == WINDOW_LOG:
                batch.keys += window_log_to_key_windows(group, WindowLog(self.core, self.codec), self.store,
                                                        processing_time)
            phased = run_group_steps(self.core, group, batch, watermark, processing_time)
            group.commit(next_due(self.core))
            self._schedule_group(group, spark_now, watermark)
        dropped = [item for part in phased.by_phase for item in part.dropped]
        n_dropped = len(dropped) + self.unseen_drops
        if n_dropped and self.plan.drop_counter is not None:
            self.plan.drop_counter.add(n_dropped)
        self._note_input(meta, beats, processing_time)
        group.save(wm=watermark, **({"pt": processing_time} if self.plan.upstream is not None else {}))
        late = self.plan.side_outputs and self.plan.operator.late_data_output
        parts = []
        for phase, emission in zip(Phase, phased.by_phase):
            rejected = bad if phase is Phase.ELEMENTS and self.plan.side_outputs else []
            if emission.outputs or rejected or (late and emission.dropped):
                parts.append(self.plan.rows(emission, rejected, phase))
        if forwarded is not None:
            parts.append(self.plan.forwarded_rows(forwarded))
        yield from self._frame(parts, behind, n_dropped, len(bad))

    def _split_forwarded(self, frame: Optional[pd.DataFrame]) -> tuple[Optional[pd.DataFrame], Optional[pd.DataFrame]]:
        """A chained stage's input: the upstream's panes, and the side rows of the stages before (late
        data, dead letters), which it hands on unchanged (None: there are none)."""
        if frame is None or self.plan.upstream is None or STAGE_COLUMN not in frame.columns:
            return frame, None
        side = frame["record_type"].to_numpy() != "pane"
        forwarded = frame[side] if side.any() else None
        return frame[~side].drop(columns=[*SIDE_OUTPUT_COLUMNS, STAGE_COLUMN]), forwarded

    def _window_log_steps(self, group: GroupState, batch: GroupBatch, watermark: int, processing_time: int,
                          spark_now: int, arrays: Optional[ArrayElements]) -> PhasedEmission:
        """The batch on the window log: the windows due fire from their buckets, the elements (as
        arrays of every key, then as work) run on empty key states and are appended
        (``window_log``); a group stored per key moves first."""
        assert self.window_log is not None
        released = Emission()
        if stored_layout(group) not in (None, WINDOW_LOG):
            released.extend(key_windows_to_window_log(group, self.window_log, self.store, watermark,
                                                      processing_time))
        fired, added, due = run_window_log_batch(self.window_log, self.store, group.meta, batch.work, watermark,
                                                 processing_time, arrays)
        released.extend(fired)
        self._schedule_group(group, spark_now, watermark, due=due,
                             has_due=bool(held_buckets(self.window_log, group.meta)))
        return PhasedEmission((released, Emission(), added))

    def _run_columnar(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
                      fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        """The keys a batch touches and the keys due, as one table of panes, sessions or windows
        (see ``windowed_operator.columnar``, ``columnar_sessions``, ``columnar_windows`` and
        ``columnar_records``)."""
        plan = self.plan
        assert self.columnar is not None
        group = self._group(self.records.codec)
        frame, beats = self._split_beats(frame)
        meta = group.meta
        if fired_timer is not None and meta.get("timer") == fired_timer:
            meta["timer"] = None
        spark_now = self.now = timer_values.getCurrentProcessingTimeInMs()
        processing_time = plan.clock.now(spark_now)
        watermark = self._watermark(timer_values, meta, processing_time)
        behind = meta.get("wm", watermark)
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

        if self.pane_log is not None:
            if stored_layout(group) not in (None, PANE_LOG):
                key_records_to_pane_log(group, self.pane_log, self.store)
            due = run_part_log_batch(self.pane_log, self.store, meta, watermark, run)
            self._schedule_group(group, spark_now, watermark, due=due, has_due=bool(held_buckets(self.pane_log, meta)))
        else:
            keys = factorize(self._keys(frame))[1].tolist() if frame is not None and len(frame) else []
            if plan.key_column is not None:
                keys = [k for k in keys if not is_null(k)]  # rows with a null key are rejected below
            if self.row_shards:
                self._row_shards_batch(group, keys, watermark, processing_time, run)
            else:
                if stored_layout(group) == PANE_LOG:
                    keys += pane_log_to_key_records(group, self.records, PaneLog(self.columnar), self.store)
                if ROW_SHARDS in meta:
                    keys += row_shards_to_key_records(group, self.records, self._shards(group))
                run_columnar_batch(self.records, group, keys, watermark, processing_time, run)
            self._schedule_group(group, spark_now, watermark)
        if n_dropped and plan.drop_counter is not None:
            plan.drop_counter.add(n_dropped)
        self._note_input(meta, beats, processing_time)
        group.save(wm=watermark)
        late = dropped if plan.operator.late_data_output else []
        parts = [plan.columnar_rows(made, side, phase)
                 for phase, made, side in ((Phase.WATERMARK, released, []), (Phase.PROCESSING_TIME, timed, []),
                                           (Phase.ELEMENTS, panes, [*late, *bad]))
                 if len(made) or (plan.side_outputs and side)]
        yield from self._frame(parts, behind, n_dropped, len(bad))

    def _shards(self, group: GroupState) -> RowShards:
        return RowShards(group, self.store, self.columnar, self.records.codec.kind)

    def _row_shards_batch(self, group: GroupState, keys: list, watermark: int, processing_time: int,
                          run: Any) -> None:
        """The batch on row shards; a group stored per key (before row shards, or by a run with
        ``rowShards=false``) moves its rows in first, with the batch."""
        assert isinstance(self.records, RowRecords)
        moved = key_records_to_row_shards(group, self.records) \
            if group.meta and ROW_SHARDS not in group.meta else None
        run_row_shards_batch(self._shards(group), keys, watermark, processing_time, run, moved)

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
        counts of late and bad rows where it has any; with the event-time output, each pane's time
        for Spark's watermark (``SparkPlan.event_times``: ``behind`` is the previous batch's
        watermark; the count row's is null)."""
        plan = self.plan
        if late or bad:
            parts = [*parts, plan.count_row(late, bad)]
        frame = output_frame(plan.processor_fields(), parts, EVENT_TIME_COLUMN if plan.event_time_output else None,
                             lambda timestamps: plan.event_times(timestamps, behind))
        if frame is not None:
            yield frame

    def _keys(self, frame: pd.DataFrame) -> np.ndarray:
        if self.plan.key_column is None:
            return np.full(len(frame), None, dtype=object)
        return frame[self.plan.key_column].to_numpy(dtype=object)

    def _run_rows(self, table: PaneTable, frame: pd.DataFrame, watermark: int, processing_time: int, panes: Panes,
                  dropped: list, bad: list) -> PaneTable:
        """Input rows: those with a null or a time out of range are rejected (an error or a dead
        letter), the rest folded."""
        assert self.columnar is not None
        plan = self.plan
        clean = self._clean(frame)
        gap = element_gap(plan.operator.window)  # (sessions whose gap is a column: the columnar path reads it)
        gaps = None
        if gap is not None:
            gaps, readable = read_gaps(frame[gap].to_numpy())
            clean &= readable  # (the others: the reader's invalid_gap error or dead letter)
        for record in self._records(frame[~clean]):
            self._reject(record, watermark, bad)
        frame = frame[clean]
        values = frame[plan.value_column].to_numpy() if plan.value_column is not None else None
        extra = {"gaps": gaps[clean]} if gaps is not None else {}
        return self.columnar.process(table, self._keys(frame), frame[plan.time_column].to_numpy(dtype=np.int64),
                                     values, watermark, panes, dropped, self._element_at(frame, values),
                                     processing_time=processing_time, **extra)

    def _run_partials(self, table: PaneTable, frame: pd.DataFrame, watermark: int, processing_time: int,
                      panes: Panes) -> tuple[PaneTable, int]:
        """Rows folded upstream per (key, pane) (``preaggregate``): never null, never kept."""
        assert self.columnar is not None
        aggregates = [frame[name].to_numpy() for name in self.plan.partial_columns]
        return self.columnar.process_partials(table, self._keys(frame), frame[PANE_COLUMN].to_numpy(dtype=np.int64),
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
            table, self._keys(frame), frame[FIRST_COLUMN].to_numpy(dtype=np.int64),
            frame[LAST_COLUMN].to_numpy(dtype=np.int64), frame[COUNT_COLUMN].to_numpy(dtype=np.int64),
            [frame[name].to_numpy() for name in plan.partial_columns], watermark, panes, elements_of,
            processing_time=processing_time)

    def _clean(self, frame: pd.DataFrame, sided: Optional[SidedValues] = None) -> np.ndarray:
        """Rows the array paths take: a key, a time in range and a value (the rest go to the reader;
        a merge's values are ``sided``).  Times are checked against the batch's own time (``now``), as
        the watermark helper column is."""
        plan = self.plan
        needed = [c for c in (plan.key_column, plan.time_column, plan.value_column)
                  if c not in (None, WHOLE_ROWS, SIDED_VALUES)]
        clean = frame[needed].notna().all(axis=1).to_numpy()
        if sided is not None:
            clean &= pd.notna(sided.values)
        times = frame[plan.time_column].to_numpy()
        latest = latest_event_time(self.now, plan.operator.max_future_skew)
        clean[clean] = event_time_in_range(times[clean].astype(np.int64), latest)
        return clean

    def _records(self, frame: pd.DataFrame) -> list[dict]:
        """The rows as dicts, a null of an integral column as None (pandas holds a column of integers
        with a null as floats, the null as NaN), as Arrow's rows on the other paths show it: bad-element
        messages then say ``null (None)`` on every path."""
        floats = [name for name in self.plan.integral_columns
                  if name in frame.columns and frame[name].dtype.kind == "f" and frame[name].isna().any()]
        if floats:
            frame = frame.assign(**{name: frame[name].astype(object).where(frame[name].notna(), None)
                                    for name in floats})
        return frame.to_dict("records")

    def _reject(self, record: dict, watermark: int, bad: list) -> None:
        record.pop(GROUP_COLUMN, None)
        error = rejected_row_error(self.reader, self.plan.value_column, record, self.now)
        if self.plan.operator.on_bad_element == "raise":
            raise error
        key = record.get(self.plan.key_column) if self.plan.key_column else None
        bad.append(DroppedElement(error.reason, record, key, None, watermark, error.detail))

    def _vectorized_work(self, frame: pd.DataFrame, watermark: int, processing_time: int,
                         work: list) -> pd.DataFrame:
        """Rows with a key, a timestamp and a value go through the array path, key by key; the
        others are returned for the element path (which raises or dead-letters them)."""
        plan = self.plan
        frame, rest, values_all = self._split_clean(frame)
        if not len(frame):
            return rest
        ts_all = frame[plan.time_column].to_numpy(dtype=np.int64)
        element_at = self._element_at(frame, values_all)
        if plan.key_column is not None:
            codes, uniques = factorize(self._keys(frame))
            keys: list[Hashable] = uniques.tolist()
            order = lexsort_ints((ts_all, codes))  # by key, then time (the element path's order: _record_work)
            bounds = np.concatenate(([0], np.flatnonzero(np.diff(codes[order])) + 1, [len(order)]))
        else:
            keys, order, bounds = [None], np.argsort(ts_all, kind="stable"), np.array([0, len(frame)])
        weights = frame[WEIGHT_COLUMN].to_numpy() if plan.paths.fold.weighted else None
        partial_weights = weights if plan.paths.fold is Fold.PREFOLD else None  # (pre-folded values are sketches to merge)
        for i, key in enumerate(keys):
            rows = order[bounds[i]:bounds[i + 1]]
            values = values_all[rows] if values_all is not None else None

            def element_of(j: int, rows: np.ndarray = rows) -> Any:
                # (called once per dropped element: a pre-selected row counts the rows it stands for)
                element = element_at(int(rows[j]))
                if weights is not None:
                    self.unseen_drops += int(element.pop(WEIGHT_COLUMN)) - 1
                return element

            def run(k: Any, state: KeyState, rows: np.ndarray = rows, values: Any = values,
                    element_of: Any = element_of) -> Emission:
                return process_batch_arrays(self.core, k, state, ts_all[rows], values, watermark, processing_time,
                                            element_of, weights=partial_weights[rows]
                                            if partial_weights is not None else None)

            work.append((key, run))
        return rest

    def _weighted(self) -> bool:
        """Rows stand for many elements (pre-selected or pre-folded before the shuffle)."""
        return self.plan.paths.fold.weighted

    def _split_clean(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, Any]:
        """The rows the array paths take, the rest (for the element path, which raises or
        dead-letters them), and what the array path folds of the rows it takes (``_array_values``;
        a merge's values are read once, to judge the rows and to fold them)."""
        sided = self._sided_values(frame) if self.plan.value_column == SIDED_VALUES else None
        clean = self._clean(frame, sided)
        kept = frame[clean]
        return kept, frame[~clean], sided[clean] if sided is not None else self._array_values(kept)

    def _array_elements(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, ArrayElements]:
        """The clean rows of every key as one batch of arrays (the window log adds them in one pass:
        ``WindowLog.add_arrays``); the other rows are returned for the element path."""
        frame, rest, values = self._split_clean(frame)
        codes, uniques = factorize(self._keys(frame))
        return rest, ArrayElements(uniques.tolist(), codes, frame[self.plan.time_column].to_numpy(dtype=np.int64),
                                   values, self._element_at(frame, values))

    def _element_at(self, frame: pd.DataFrame, values: Any) -> Any:
        """Element i of the array path's rows as the element path reports a dropped one: a merge's
        ``(side, value)``, another operator's row."""
        if isinstance(values, SidedValues):
            return lambda i: (LEFT if values.left[i] else RIGHT, values.values[i])

        def row(i: int) -> dict:
            record = frame.iloc[i].to_dict()
            record.pop(GROUP_COLUMN, None)
            return record

        return row

    def _merge_operator(self) -> MergeOperatorBase:
        operator = self.plan.operator
        assert isinstance(operator, MergeOperatorBase)  # (called on a merge's paths only)
        return operator

    def _sided_values(self, frame: pd.DataFrame) -> SidedValues:
        """A merge's rows as the array path folds them: each row's value (its input's whole row, or the
        field or record of fields its input's value extractor names), marked by side; None where the
        element path would reject the row (a missing payload, a missing or null field)."""
        left = frame[SIDE_COLUMN].to_numpy() == LEFT
        values = np.where(left, frame[PAYLOAD_COLUMNS[LEFT]].to_numpy(), frame[PAYLOAD_COLUMNS[RIGHT]].to_numpy())
        for side, rows in ((LEFT, left), (RIGHT, ~left)):
            extractor = self._merge_operator().side_extractor(side, "value")
            if extractor is not None:
                assert not callable(extractor)  # (SIDED_VALUES: each input's value is a field or a record of fields)
                for i in np.flatnonzero(rows).tolist():
                    payload = values[i]
                    values[i] = None if payload is None else readable_value(payload, extractor)
        return SidedValues(left, values)

    def _array_values(self, frame: pd.DataFrame) -> Any:
        """What the array path folds: one column, the whole rows (as the element path reads them: every
        input column but the processor's own) or nothing (Count); a merge's values are read by
        ``_sided_values``."""
        column = self.plan.value_column
        if column == WHOLE_ROWS:
            own = (GROUP_COLUMN, ROUTE_COLUMN, WEIGHT_COLUMN)
            return Rows.of_frame(frame, [c for c in frame.columns if c not in own])
        return frame[column].to_numpy() if column is not None else None

    def _upstream_work(self, frame: pd.DataFrame, meta: dict, watermark: int, processing_time: int,
                       batch: GroupBatch, bad: list[DroppedElement]) -> None:
        """Rows of an upstream stage's panes, each taken at the step the local chain hands it over
        (``group_batch.Phase``): panes its watermark released at the watermark before this batch's
        (the group's last: exact, since a fed stage's groups wake at every advance, see
        ``_schedule_group``), panes of its processing-time step before processing time advances
        here, panes of its elements last."""
        before_wm = meta.get("wm", MIN_TIMESTAMP)
        before_pt = meta.get("pt", processing_time)
        phases = frame.pop(PHASE_COLUMN).to_numpy()
        for phase, wm, pt, work in ((Phase.WATERMARK, before_wm, before_pt, batch.released),
                                    (Phase.PROCESSING_TIME, watermark, before_pt, batch.timed),
                                    (Phase.ELEMENTS, watermark, processing_time, batch.work)):
            rows = frame[phases == phase]
            if len(rows) and not self._fed_array_work(rows, wm, pt, work):
                self._record_work(rows, wm, pt, work, bad)

    def _fed_array_work(self, frame: pd.DataFrame, watermark: int, processing_time: int, work: list) -> bool:
        """One step's upstream panes on the array path, key by key (False: the element path takes
        them all). Each row is read as the element path reads it (``UpstreamPaneReader``: the pane,
        its key, value and window; as columns where the stage reads nothing but the pane's own
        fields, ``pane_columns``); what is saved is the per-element window bookkeeping and trigger
        calls: values are folded per window at once (``vectorized.process_arrays``), retractions
        folded out with the accumulation's inverse. Steps holding a row the reader rejects go the
        element path (which rejects it with the reason)."""
        if not self.plan.paths.arrays:
            return False
        upstream = self.plan.upstream
        assert upstream is not None  # (called for a fed stage's rows only)
        read = read_pane_columns({c: frame[c].to_numpy() for c in frame.columns}, self.reader.reader,
                                 upstream.keyed, upstream.core_accumulation().get_retraction)
        if read is None:
            read = self._read_fed_rows(frame)
        if read is None:
            return False
        n = len(read.timestamps)
        has_retractions = bool(read.retracted.any())
        codes, uniques = factorize(read.keys)
        order = lexsort_ints((read.timestamps, codes))  # by key, then time (the element path's order: _record_work)
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(codes[order])) + 1, [n]))
        stamps, values, windows, retracted = read.timestamps, read.values, read.windows, read.retracted
        for i, key in enumerate(uniques.tolist()):
            rows = order[bounds[i]:bounds[i + 1]]

            def run(k: Any, state: KeyState, rows: np.ndarray = rows) -> Emission:
                return process_batch_arrays(
                    self.core, k, state, stamps[rows], values[rows], watermark, processing_time,
                    lambda j: read.element(rows[j]),  # (what the element path's drops carry: the value read)
                    None if windows is None else (windows[0][rows], windows[1][rows]),
                    retracted=retracted[rows] if has_retractions else None)

            work.append((key, run))
        return True

    def _read_fed_rows(self, frame: pd.DataFrame) -> Optional[PaneColumns]:
        """The rows read one by one (None if the reader rejects one)."""
        reads = []
        read_pane = self.reader.reader.read  # (the panes built column by column: ``panes.panes_from_columns``)
        for pane in panes_from_columns({c: frame[c].to_numpy() for c in frame.columns}, self.plan.upstream):
            try:
                reads.append(read_pane(pane, MIN_TIMESTAMP, self.now))
            except BadElementError:
                return None
        n = len(reads)
        read_values = [r.value for r in reads]
        retracted = np.fromiter((isinstance(v, RetractedValue) for v in read_values), dtype=bool, count=n)
        windows = None
        if self.core.kind == "inherited":
            windows = (np.fromiter((r.window.start for r in reads), dtype=np.int64, count=n),
                       np.fromiter((r.window.end for r in reads), dtype=np.int64, count=n))
        return PaneColumns(keys=np.array([r.key for r in reads] + [None], dtype=object)[:n],
                           timestamps=np.fromiter((r.timestamp for r in reads), dtype=np.int64, count=n),
                           values=_value_array([v.value if undo else v for v, undo in zip(read_values,
                                                                                          retracted.tolist())]),
                           retracted=retracted, windows=windows)

    def _record_work(self, frame: pd.DataFrame, watermark: int, processing_time: int, work: list,
                     bad: list[DroppedElement]) -> None:
        batches: dict[Optional[Hashable], list[CoreElement]] = {}
        for record in self._records(frame):
            record.pop(GROUP_COLUMN, None)
            record.pop(ROUTE_COLUMN, None)  # (a fed stage's phase column is popped by _upstream_work)
            record.pop(WEIGHT_COLUMN, None)  # (pre-selected rows are all clean: they take the array path)
            try:
                read = self.reader.read(record, MIN_TIMESTAMP, self.now)
            except BadElementError as exc:
                if self.plan.operator.on_bad_element == "raise":
                    raise
                key = record.get(self.plan.key_column) if self.plan.key_column else None
                element = exc.element if self.plan.merge else record  # (a merge's: the input's row, not the union's)
                bad.append(DroppedElement(exc.reason, element, key, None, watermark, exc.detail))
                continue
            batches.setdefault(read.key, []).append((read.timestamp, read.value, read.window))
        for key, elements in batches.items():
            elements.sort(key=lambda e: e[0])  # rows arrive in arrival order; sort so batches are deterministic

            def run(k: Any, state: KeyState, elements: list = elements) -> Emission:
                return self.core.process_batch(k, state, elements, watermark, processing_time)

            work.append((key, run))

    # -- the watermark ----------------------------------------------------------------------------
    def _split_beats(self, frame: Optional[pd.DataFrame]) -> tuple[Optional[pd.DataFrame], dict]:
        if not self.plan.heartbeats:
            return frame, {}
        if self.plan.merge:
            return split_beats(frame, SIDE_COLUMN, MERGE_TIME_COLUMN)
        return split_beats(frame)

    @staticmethod
    def _note_input(meta: dict, beats: dict, processing_time: int) -> None:
        """After this batch's watermark: what came in counts from the next batch, as Spark's own
        watermark takes a batch's event times from the next batch on.  ``meta["input"]``: the last
        batch with any input; ``meta["sides"]``: each input's last batch with input and largest
        event time (a merge's inputs' watermarks, kept here)."""
        if not beats:
            return
        meta["input"] = processing_time
        if "" in beats:
            return
        sides = meta.setdefault("sides", {})
        for side, ts in beats.items():
            sides[side] = {"input": processing_time, "max": max_known(sides.get(side, {}).get("max"), ts)}

    def _watermark(self, timer_values: TimerValues, meta: dict, processing_time: int) -> int:
        policy = self.plan.operator.watermark
        if isinstance(policy, FixedLagWatermark):
            candidate = processing_time - policy.lag
        else:
            spark_wm = timer_values.getCurrentWatermarkInMs()
            candidate = spark_wm if spark_wm > 0 else MIN_TIMESTAMP  # Spark reports 0 before any watermark
            if candidate >= self.plan.end_of_input_watermark:  # an end-of-input marker went through
                candidate = MAX_TIMESTAMP
            elif self.plan.merge and self.plan.heartbeats:
                candidate = self._inputs_watermark(meta, policy, processing_time)
            else:  # (meta "input": the last batch with input, from the heartbeats)
                candidate = idle_advanced(candidate, meta.get("input"), getattr(policy, "idle_timeout", None),
                                          processing_time)
        return max(meta.get("wm", MIN_TIMESTAMP), candidate)

    def _inputs_watermark(self, meta: dict, policy: Any, processing_time: int) -> int:
        """A merge's watermark from each input's own (bounded disorder over its rows, advancing when
        quiet), skipping inputs idle for the operator's ``idle_timeout``, as ``MergeRunner`` does; an
        input that never sent anything counts as active since the first batch with input."""
        sides = meta.get("sides", {})
        start = meta.setdefault("start", processing_time)
        marks, idle = {}, {}
        for side in SIDES:
            info = sides.get(side, {})
            event = policy.candidate(MIN_TIMESTAMP, processing_time, info.get("max"))
            marks[side] = idle_advanced(max(MIN_TIMESTAMP, event), info.get("input"), policy.idle_timeout,
                                        processing_time)
            idle[side] = input_is_idle(info.get("input", start), self._merge_operator().idle_timeout, processing_time)
        return two_input_watermark(marks, idle)

    def _schedule_group(self, group: GroupState, spark_now: int, watermark: int, *,
                        due: Optional[int] = None, has_due: Optional[bool] = None) -> None:
        """The per-key layout's timer: the earliest due time in the group's event-time index
        (EventTime mode), or the next batch while any key is indexed (ProcessingTime mode, where the
        group polls its due indexes).  The pane log passes its own (``due``: its earliest due pane;
        ``has_due``: whether it holds any).

        With ``SparkPlan.wakes_every_batch`` (a chained stage, the event-time output) the group also
        wakes at every advance of the watermark (every batch, in ProcessingTime mode), so that its last
        watermark is always the previous batch's."""
        if self.plan.time_mode == "EventTime":
            due = group.next_event_time() if has_due is None else due
            if self.plan.wakes_every_batch and watermark < MAX_TIMESTAMP:
                due = watermark + 1 if due is None else min(due, watermark + 1)
            wanted = spark_timer(due, self.plan.end_of_input_watermark) if due is not None else None
        else:
            indexed = group.has_due() if has_due is None else has_due
            wanted = self._poll(group.meta.get("timer"), spark_now) if indexed or self.plan.wakes_every_batch else None
        self._set_timer(group.meta, wanted)

    def _poll(self, current: Optional[int], spark_now: int) -> int:
        return current if current is not None and current > spark_now else spark_now + self.plan.poll_ms

    def _set_timer(self, meta: dict, wanted: Optional[int]) -> None:
        current = meta.get("timer")
        if wanted == current:
            return
        if current is not None:
            self.store.delete_timer(current)
        if wanted is not None:
            self.store.register_timer(wanted)
        meta["timer"] = wanted



def _value_array(values: list) -> np.ndarray:
    """Values read from the rows as one array: numbers as a numeric array (numpy folds them),
    anything else as Python objects, one per row."""
    if values and all(type(v) in (int, float) for v in values):
        array = np.asarray(values)
        if array.dtype.kind in "if":
            return array
    return object_array(values)
