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
everything else element by element.  All give the same panes.  This class is the dispatcher: Spark's
callbacks, the layout its state keeps (chosen once, in ``init``), and one ``groups.GroupRunner``
that runs each call (its clocks in ``timers``, its rows in ``rows`` and ``fed``).
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, StatefulProcessor, StatefulProcessorHandle,
                                                      TimerValues)

from ...columnar_records import RowRecords, columnar_records
from ...fingerprint import in_key_shards, state_fingerprint
from ...gc_pause import collector_paused
from ...pane_log import LAYOUT as PANE_LOG, PaneLog, supports_pane_log
from ...row_shards import LAYOUTS as ROW_SHARDS_LAYOUTS
from ...state_codec import KeyStateCodec
from ...window_log import LAYOUT as WINDOW_LOG, WindowLog, supports_window_log
from ..handoff import Handoff
from ..paths import build_table
from ..plan import SparkPlan
from ..scan.packing import PACKED_POSITION, unpack_rows
from .group_store import SparkGroupStore
from .groups import GroupRunner, ObjectGroups, TableGroups
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


class WindowedStatefulProcessor(StatefulProcessor):
    """The processor Spark calls (through ``deferred.DeferredProcessor``): one call per key group with
    rows or a timer, run by the group runner ``init`` chose."""

    def __init__(self, plan: SparkPlan) -> None:
        self.plan = plan

    # (called by the DeferredProcessor Spark runs, from its own init, with the state it declared)
    def init(self, handle: StatefulProcessorHandle, state: DeclaredState) -> None:  # type: ignore[override]
        """``state``: the variables the ``DeferredProcessor`` Spark runs declared in its own ``init``."""
        self.handle = handle
        self.core = self.plan.operator.build_core()
        self.reader = self.plan.record_reader()
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
