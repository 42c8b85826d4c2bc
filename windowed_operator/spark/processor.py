"""The StatefulProcessor: runs the core for every key of one key group per call.

Spark groups the input by a *key group* (a hash of the key modulo ``key_groups``, as Flink does),
not by the key: one call, one state read, one state write and one timer serve all keys of the
group in a micro-batch.  SPARK_NOTES.md measured that the cost of transformWithStateInPandas
follows keys x batches (about 5 ms per key and batch, mostly per-call and state round trips);
grouping keys divides that by the group size.  The state value of a group holds a pickled dict
``key -> KeyState`` and a little bookkeeping (the watermark last applied, the timer registered).

Within a call, rows of windows assigned by timestamp with a vectorized accumulation go through the
core's array path (``windowed_operator.vectorized``); everything else element by element.  Both
give the same panes.
"""
from __future__ import annotations

import pickle
from typing import Any, Hashable, Iterator, Optional

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, StatefulProcessor, StatefulProcessorHandle,
                                                      TimerValues)

from ..core import CoreElement, Emission
from ..elements import BadElementError, rejected_row_error
from ..fingerprint import check_restart, state_fingerprint
from ..columnar import ColumnarCore, PaneTable, Panes
from ..panes import DroppedElement
from ..range_ops import factorize
from ..state import KeyState
from ..time import (END_OF_INPUT_WATERMARK, MAX_TIMESTAMP, MIN_TIMESTAMP, event_time_in_range,
                    latest_event_time)
from ..vectorized import process_batch_arrays
from ..watermarks import FixedLagWatermark
from .plan import SparkPlan
from .preaggregate import COUNT_COLUMN, PANE_COLUMN

STATE_NAME = "windowed_operator_state"
GROUP_COLUMN = "__wo_group"
STATE_SCHEMA = "blob binary"
#: 4: end-of-window timers are due at max_timestamp + 1 (Beam's rule); windows carry on_time_hold.
#: 5: every group's bookkeeping carries the fingerprint of the operator that wrote it.
STATE_VERSION = 5


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

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.value_state = handle.getValueState(STATE_NAME, STATE_SCHEMA)
        self.core = self.plan.operator.build_core()
        self.reader = self.plan.record_reader()
        self.now: Optional[int] = None  # the batch's processing time, set per call
        self.columnar = None
        self.fingerprint = state_fingerprint(
            self.plan.operator, key_groups=self.plan.key_groups, time_mode=self.plan.time_mode,
            layout="columnar pane table" if self.plan.columnar else "windows per key", state_version=STATE_VERSION,
            key_column=self.plan.state_key)
        if self.plan.columnar:
            op = self.plan.operator
            self.columnar = ColumnarCore(op.window, op.core_accumulation(), op.trigger, op.allowed_lateness,
                                         label=op.label(), column=op.value_column())

    # -- Spark callbacks ------------------------------------------------------------------------
    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        names = list(self.plan.input_columns)
        if names and list(frame.columns) != names and len(frame.columns) == len(names):
            frame.columns = names  # struct columns in the input make pyspark name columns _0, _1, ...
        yield from self._run(frame, timerValues, None)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        yield from self._run(None, timerValues, expiredTimerInfo.getExpiryTimeInMs())

    def close(self) -> None:
        pass

    # -- one key group --------------------------------------------------------------------------
    def _run(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
             fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        if self.columnar is not None:
            yield from self._run_columnar(frame, timer_values, fired_timer)
            return
        states, meta = self._load()
        if fired_timer is not None and meta.get("timer") == fired_timer:
            meta["timer"] = None
        spark_now = self.now = timer_values.getCurrentProcessingTimeInMs()
        processing_time = self.plan.clock.now(spark_now)
        watermark = self._watermark(timer_values, meta, processing_time)
        emission = Emission()
        bad: list[DroppedElement] = []
        seen: set = set()
        if frame is not None and len(frame):
            if self.plan.vectorized:
                frame = self._run_vectorized(frame, states, watermark, processing_time, emission, seen)
            if len(frame):
                self._run_records(frame, states, watermark, processing_time, emission, bad, seen)
        for key in list(states):  # keys of the group without rows: whatever their timers made due
            if key not in seen and self._is_due(states[key], watermark, processing_time):
                emission.extend(self.core.process_batch(key, states[key], [], watermark, processing_time))
        for key in [k for k, s in states.items() if s.is_empty()]:
            del states[key]
        meta["wm"] = watermark
        if emission.dropped and self.plan.drop_counter is not None:
            self.plan.drop_counter.add(len(emission.dropped))
        self._schedule(states, meta, spark_now)
        self._save(states, meta)
        if emission.outputs or (self.plan.side_outputs and (bad or (emission.dropped and
                                                                     self.plan.operator.late_data_output))):
            columns = self.plan.rows(emission, bad)
            if columns and next(iter(columns.values())):
                yield pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in columns.items()})
        yield from self._counts(len(emission.dropped), len(bad))

    def _run_columnar(self, frame: Optional[pd.DataFrame], timer_values: TimerValues,
                      fired_timer: Optional[int]) -> Iterator[pd.DataFrame]:
        """The whole key group as arrays (default trigger; see ``windowed_operator.columnar``)."""
        plan = self.plan
        assert self.columnar is not None
        table, meta = self._load()
        if fired_timer is not None and meta.get("timer") == fired_timer:
            meta["timer"] = None
        spark_now = self.now = timer_values.getCurrentProcessingTimeInMs()
        watermark = self._watermark(timer_values, meta, plan.clock.now(spark_now))
        panes, dropped, bad = Panes(), [], []
        if frame is None or not len(frame):
            table, n_dropped = self.columnar.on_watermark(table, watermark, panes), 0
        elif plan.preaggregated:
            table, n_dropped = self._run_partials(table, frame, watermark, panes)
        else:
            table = self._run_rows(table, frame, watermark, panes, dropped, bad)
            n_dropped = len(dropped)
        meta["wm"] = watermark
        if n_dropped and plan.drop_counter is not None:
            plan.drop_counter.add(n_dropped)
        self._schedule(table, meta, spark_now)
        self._save(table, meta)
        late = dropped if plan.operator.late_data_output else []
        if len(panes) or (plan.side_outputs and (bad or late)):
            columns = plan.columnar_rows(panes, [*late, *bad])
            if plan.side_outputs:  # columns mixing values and nulls: keep Python objects
                yield pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in columns.items()})
            else:  # every cell set: typed columns convert to Arrow much faster than object ones
                yield pd.DataFrame(columns)
        yield from self._counts(n_dropped, len(bad))

    def _counts(self, late: int, bad: int) -> Iterator[pd.DataFrame]:
        if late or bad:
            yield pd.DataFrame({name: pd.Series(values, dtype=object)
                                for name, values in self.plan.count_row(late, bad).items()})

    def _keys(self, frame: pd.DataFrame) -> np.ndarray:
        if self.plan.key_column is None:
            return np.full(len(frame), None, dtype=object)
        return frame[self.plan.key_column].to_numpy(dtype=object)

    def _run_rows(self, table: PaneTable, frame: pd.DataFrame, watermark: int, panes: Panes, dropped: list,
                  bad: list) -> PaneTable:
        """Input rows: those with a null or a time out of range are rejected (an error or a dead
        letter), the rest folded."""
        assert self.columnar is not None
        plan = self.plan
        clean = self._clean(frame)
        for record in frame[~clean].to_dict("records"):
            self._reject(record, watermark, bad)
        frame = frame[clean]
        values = frame[plan.value_column].to_numpy() if plan.value_column is not None else None

        def element_of(i: int) -> Any:
            record = frame.iloc[i].to_dict()
            record.pop(GROUP_COLUMN, None)
            return record

        return self.columnar.process(table, self._keys(frame), frame[plan.time_column].to_numpy(dtype=np.int64),
                                     values, watermark, panes, dropped, element_of)

    def _run_partials(self, table: PaneTable, frame: pd.DataFrame, watermark: int,
                      panes: Panes) -> tuple[PaneTable, int]:
        """Rows folded upstream per (key, pane) (``preaggregate``): never null, never kept."""
        assert self.columnar is not None
        aggregates = [frame[name].to_numpy() for name in self.plan.partial_columns]
        return self.columnar.process_partials(table, self._keys(frame), frame[PANE_COLUMN].to_numpy(dtype=np.int64),
                                              frame[COUNT_COLUMN].to_numpy(dtype=np.int64), aggregates, watermark,
                                              panes)

    def _clean(self, frame: pd.DataFrame) -> np.ndarray:
        """Rows the array paths take: a key, a time in range and a value (the rest go to the reader).
        Times are checked against the batch's own time (``now``), as the watermark helper column is."""
        plan = self.plan
        needed = [c for c in (plan.key_column, plan.time_column, plan.value_column) if c is not None]
        clean = frame[needed].notna().all(axis=1).to_numpy()
        times = frame[plan.time_column].to_numpy()
        latest = latest_event_time(self.now, plan.operator.max_future_skew)
        clean[clean] = event_time_in_range(times[clean].astype(np.int64), latest)
        return clean

    def _reject(self, record: dict, watermark: int, bad: list) -> None:
        record.pop(GROUP_COLUMN, None)
        error = rejected_row_error(self.reader, self.plan.value_column, record, self.now)
        if self.plan.operator.on_bad_element == "raise":
            raise error
        key = record.get(self.plan.key_column) if self.plan.key_column else None
        bad.append(DroppedElement(error.reason, record, key, None, watermark, error.detail))

    def _is_due(self, state: KeyState, watermark: int, processing_time: int) -> bool:
        return (self.core.event_time_work_due(state, watermark)
                or self.core.processing_time_work_due(state, processing_time))

    def _run_vectorized(self, frame: pd.DataFrame, states: dict, watermark: int, processing_time: int,
                        emission: Emission, seen: set) -> pd.DataFrame:
        """Rows with a key, a timestamp and a value go through the array path, key by key; the
        others are returned for the element path (which raises or dead-letters them)."""
        plan = self.plan
        clean = self._clean(frame)
        rest = frame[~clean]
        frame = frame[clean]
        if not len(frame):
            return rest
        ts_all = frame[plan.time_column].to_numpy(dtype=np.int64)
        values_all = frame[plan.value_column].to_numpy() if plan.value_column is not None else None
        if plan.key_column is not None:
            codes, uniques = factorize(self._keys(frame))
            keys: list[Hashable] = uniques.tolist()
            order = np.argsort(codes, kind="stable")
            bounds = np.concatenate(([0], np.flatnonzero(np.diff(codes[order])) + 1, [len(order)]))
        else:
            keys, order, bounds = [None], np.arange(len(frame)), np.array([0, len(frame)])
        for i, key in enumerate(keys):
            rows = order[bounds[i]:bounds[i + 1]]
            state = states.setdefault(key, KeyState())
            seen.add(key)
            values = values_all[rows] if values_all is not None else None

            def element_of(j: int, rows: np.ndarray = rows) -> Any:
                record = frame.iloc[int(rows[j])].to_dict()
                record.pop(GROUP_COLUMN, None)
                return record

            emission.extend(process_batch_arrays(self.core, key, state, ts_all[rows], values, watermark,
                                                 processing_time, element_of))
        return rest

    def _run_records(self, frame: pd.DataFrame, states: dict, watermark: int, processing_time: int,
                     emission: Emission, bad: list[DroppedElement], seen: set) -> None:
        batches: dict[Optional[Hashable], list[CoreElement]] = {}
        for record in frame.to_dict("records"):
            record.pop(GROUP_COLUMN, None)
            try:
                read = self.reader.read(record, MIN_TIMESTAMP, self.now)
            except BadElementError as exc:
                if self.plan.operator.on_bad_element == "raise":
                    raise
                key = record.get(self.plan.key_column) if self.plan.key_column else None
                bad.append(DroppedElement(exc.reason, record, key, None, watermark, exc.detail))
                continue
            batches.setdefault(read.key, []).append((read.timestamp, read.value, read.window))
        for key, elements in batches.items():
            elements.sort(key=lambda e: e[0])  # rows arrive in arrival order; sort so batches are deterministic
            seen.add(key)
            state = states.setdefault(key, KeyState())
            emission.extend(self.core.process_batch(key, state, elements, watermark, processing_time))

    def _watermark(self, timer_values: TimerValues, meta: dict, processing_time: int) -> int:
        policy = self.plan.operator.watermark
        if isinstance(policy, FixedLagWatermark):
            candidate = processing_time - policy.lag
        else:
            spark_wm = timer_values.getCurrentWatermarkInMs()
            candidate = spark_wm if spark_wm > 0 else MIN_TIMESTAMP  # Spark reports 0 before any watermark
            if candidate >= self.plan.end_of_input_watermark:  # an end-of-input marker went through
                candidate = MAX_TIMESTAMP
        return max(meta.get("wm", MIN_TIMESTAMP), candidate)

    def _schedule(self, states: Any, meta: dict, spark_now: int) -> None:
        """Keep exactly one timer per key group: the earliest next event time of its keys (EventTime
        mode) or the next batch (ProcessingTime mode, where the group polls its keys)."""
        current = meta.get("timer")
        if not len(states):
            wanted = None
        elif self.plan.time_mode == "EventTime":
            if self.columnar is not None:
                wanted = self.columnar.next_event_time(states)
            else:
                times = [t for t in (self.core.next_event_time(s) for s in states.values()) if t is not None]
                wanted = min(times) if times else None
            if wanted is not None:
                wanted = spark_timer(wanted, self.plan.end_of_input_watermark)
        else:
            wanted = current if current is not None and current > spark_now else spark_now + self.plan.poll_ms
        if wanted == current:
            return
        if current is not None:
            self.handle.deleteTimer(current)
        if wanted is not None:
            self.handle.registerTimer(wanted)
        meta["timer"] = wanted

    def _load(self) -> tuple[Any, dict]:
        if not self.value_state.exists():
            return (PaneTable() if self.columnar is not None else {}), {}
        (blob,) = self.value_state.get()
        version, states, meta = pickle.loads(blob)
        if version != STATE_VERSION:
            raise RuntimeError(f"windowed-operator state version {version} is not {STATE_VERSION}; "
                               "start from a new checkpoint")
        check_restart(meta.get("fingerprint"), self.fingerprint, self.plan.operator.label())
        return states, meta

    def _save(self, states: Any, meta: dict) -> None:
        if not len(states) and meta.get("timer") is None:
            self.value_state.clear()
            return
        meta["fingerprint"] = self.fingerprint
        self.value_state.update((pickle.dumps((STATE_VERSION, states, meta), protocol=pickle.HIGHEST_PROTOCOL),))
