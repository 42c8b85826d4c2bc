"""The StatefulProcessor: Spark's callbacks, each one call of a key group's runner.

Spark groups the input by a *key group* (a hash of the key modulo ``key_groups``, as Flink does),
not by the key: one Python call and one timer serve all keys of the group in a micro-batch
(about 5 ms per call, measured: docs/contributing/measured-design.md, "What Spark's stateful API gives
and costs").  Inside the group each key's state is its own record in a MapState, or rows kept by
pane, window or shard, read only when the batch has rows for them or the group's due index says
they have work due (``windowed_operator.state``, ``spark.worker.group_store``): the calls a batch
makes follow the keys it touches, not the keys held.  This class hands Spark's callbacks to the
group runner ``init`` opens (``groups.GroupRunner``: the engine and the state layout, chosen once)
and sends each call's writes.
"""
from __future__ import annotations

from typing import Any, Iterator

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, StatefulProcessor, StatefulProcessorHandle,
                                                      TimerValues)

from ..base.handoff import Handoff
from ..plan import SparkPlan
from ..scan.packing import PACKED_POSITION, unpack_rows
from .gc_pause import collector_paused
from .groups import GroupRunner
from .state_schemas import DeclaredState


class WindowedStatefulProcessor(StatefulProcessor):
    """The processor Spark calls (through ``deferred.DeferredProcessor``): one call per key group with
    rows or a timer, run by the group runner ``init`` opens."""

    def __init__(self, plan: SparkPlan) -> None:
        self.plan = plan

    # (called by the DeferredProcessor Spark runs, from its own init, with the state it declared)
    def init(self, handle: StatefulProcessorHandle, state: DeclaredState) -> None:  # type: ignore[override]
        """``state``: the variables the ``DeferredProcessor`` Spark runs declared in its own ``init``."""
        self.handle = handle
        self.groups = GroupRunner(self.plan, handle, state)
        self.store = self.groups.spark_store

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
