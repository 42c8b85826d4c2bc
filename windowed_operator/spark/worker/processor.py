"""The StatefulProcessor: runs the core for the keys of one key group per call.

Spark groups the input by a *key group* (a hash of the key modulo ``key_groups``, as Flink does),
not by the key: one Python call and one timer serve all keys of the group in a micro-batch
(about 5 ms per call, measured: docs/contributing/architecture.md, "What Spark's stateful API gives
and costs").  Inside the group each key's state is its own
record in a MapState, read only when the batch has rows for the key or the group's due index says
it has work due (``windowed_operator.state.group_state``, ``spark.worker.group_store``): the calls a batch makes
follow the keys it touches, not the keys held.

Within a call, operators a columnar path serves (``paths.Engine``: chosen on the driver) run on a
table of the group's panes, sessions or windows; other windows assigned by timestamp with a
vectorized accumulation go through the core's array path (``windowed_operator.engine.vectorized``);
everything else element by element.  All give the same panes.  This class is the dispatcher: Spark's
callbacks, the layout its state keeps (chosen once, in ``init``), and one ``groups.GroupRunner``
that runs each call (its clocks in ``timers``, its rows in ``rows`` and ``fed``).
"""
from __future__ import annotations

from typing import Any, Iterator

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, StatefulProcessor, StatefulProcessorHandle,
                                                      TimerValues)

from ...engine.build import build_core
from ...state.codec import KeyStateCodec
from ...state.fingerprint import state_fingerprint
from ...state.layouts import PANE_LOG, STATE_VERSION, WINDOW_LOG, choose_layout
from ...state.pane_log import PaneLog, supports_pane_log
from ...state.records import columnar_records
from ...state.transitions import Stores
from ...state.window_log import WindowLog, supports_window_log
from ..handoff import Handoff
from ..paths import build_table
from ..plan import SparkPlan
from ..scan.packing import PACKED_POSITION, unpack_rows
from .gc_pause import collector_paused
from .group_store import SparkGroupStore
from .groups import GroupRunner, ObjectGroups, TableGroups
from .state_schemas import DeclaredState

class WindowedStatefulProcessor(StatefulProcessor):
    """The processor Spark calls (through ``deferred.DeferredProcessor``): one call per key group with
    rows or a timer, run by the group runner ``init`` chose."""

    def __init__(self, plan: SparkPlan) -> None:
        self.plan = plan

    # (called by the DeferredProcessor Spark runs, from its own init, with the state it declared)
    def init(self, handle: StatefulProcessorHandle, state: DeclaredState) -> None:  # type: ignore[override]
        """``state``: the variables the ``DeferredProcessor`` Spark runs declared in its own ``init``."""
        self.handle = handle
        self.core = build_core(self.plan.operator)
        self.reader = self.plan.record_reader()
        self.columnar: Any = None
        if self.plan.paths.engine.table:
            self.columnar = build_table(self.plan.paths.engine, self.plan.operator)
            self.records = columnar_records(self.columnar)
        self.codec = KeyStateCodec(allow_pickle=self.plan.state_encoding == "pickle")
        #: The state layout (``state.layouts``): the logs keep the default trigger's rows by pane and the
        #: object paths' windows by window; session and window rows are in row shards, others per key.
        chosen = choose_layout(
            records=self.records.kind if self.columnar is not None else None,
            by_pane=self.columnar is not None and supports_pane_log(self.columnar),
            by_window=self.columnar is None and self.plan.upstream is None and supports_window_log(self.core),
            event_time=self.plan.time_mode == "EventTime")
        self.layout, self.key_shards, layout = chosen.layout, chosen.key_shards, chosen.name
        self.pane_log = PaneLog(self.columnar) if self.layout is PANE_LOG else None
        self.window_log = WindowLog(self.core, self.codec) if self.layout is WINDOW_LOG else None
        self.row_shards = self.layout.domain == "rows"
        self.fingerprint = state_fingerprint(
            self.plan.operator, key_groups=self.plan.key_groups, time_mode=self.plan.time_mode,
            layout=layout,
            state_version=STATE_VERSION, key_column=self.plan.state_key)
        # (the pickled value of earlier versions is declared only to detect it)
        self.value_state = state.old_value
        self.store = SparkGroupStore(state, self.plan.key_type, handle)
        self.stores = Stores(self.store, self.core, self.codec, self.columnar,
                             self.records if self.columnar is not None else None)
        #: The one runner of this processor's groups, for the engine and the layout chosen above.
        self.groups: GroupRunner = (TableGroups if self.columnar is not None else ObjectGroups)(self)

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
            out = self._outputs(self.groups.run(frame, timerValues, None))
        yield from out

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        with collector_paused():
            out = self._outputs(self.groups.run(None, timerValues, expiredTimerInfo.getExpiryTimeInMs()))
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
