"""A key group's input rows bound to the engine the plan chose, and its panes back to output rows.

The store of the operator's layout runs the batch (``state.group_batch.LayoutStore``); what it runs
is an engine bound to the batch's rows: ``ObjectSteps`` reads them as the object core's work per key
(or, on the window log, as arrays of every key), ``TableSteps`` as one step of a table engine (pane,
session or window table) over the rows the store loads.  Each then turns the panes the store
returns into the call's output rows, by step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...elements import is_null
from ...engine.columnar import PaneTable, Panes
from ...engine.columnar_sessions import ColumnarSessions, SessionTable
from ...engine.range_ops import factorize
from ...panes import DroppedElement
from ...engine.fired_by import Phase
from ...state.group_batch import StoreResult, GroupBatch, KeyEngine, TableEngine
from ...windows.session_windows import element_gap, read_gaps
from ..plan.paths import Fold
from ..plan import SparkPlan
from ..scan.preaggregate import COUNT_COLUMN, PANE_COLUMN
from ..scan.prechain import FIRST_COLUMN, LAST_COLUMN, TIMES_COLUMN, VALUES_COLUMN, chain_elements
from .fed import FedReader
from .output_rows import columnar_rows, emission_rows, forwarded_rows
from .rows import RowReader


@dataclass
class Bound:
    """One call's engine, bound to its rows: the keys with elements, the rows rejected (an error or
    a dead letter), and what the steps record for the output (``forwarded``: a fed stage's rows
    passed on; ``late``: dropped rows kept for the late-data output; ``dropped``: their count where
    the engine counts them itself)."""
    engine: Any
    keys: list = field(default_factory=list)
    bad: list = field(default_factory=list)
    forwarded: Optional[pd.DataFrame] = None
    late: list = field(default_factory=list)
    dropped: int = 0


class ObjectSteps:
    """The object core (element or array path), per key or on the window log (``arrays``)."""

    def __init__(self, plan: SparkPlan, core: Any, rows: RowReader, fed: FedReader, arrays: bool) -> None:
        self.plan, self.core, self.rows, self.fed = plan, core, rows, fed
        #: The batch's elements of every key as arrays (the window log's, unless the scan weighed them).
        self.arrays = arrays and plan.paths.arrays and not plan.paths.fold.weighted

    def bind(self, frame: Optional[pd.DataFrame], meta: dict, watermark: int, processing_time: int) -> Bound:
        self.rows.unseen_drops = 0  # dropped rows a pre-selected row stood for (see ``RowReader.vectorized_work``)
        batch = GroupBatch()
        bound = Bound(KeyEngine(self.core, batch))
        frame, bound.forwarded = self.fed.split_forwarded(frame)
        if frame is None or not len(frame):
            return bound
        if self.plan.upstream is not None:
            self.fed.upstream_work(frame, meta, watermark, processing_time, batch, bound.bad)
            return bound
        if self.arrays:
            frame, bound.engine.arrays = self.rows.array_elements(frame)
        elif self.plan.paths.arrays:
            frame = self.rows.vectorized_work(frame, watermark, processing_time, batch.work)
        if len(frame):
            self.rows.record_work(frame, watermark, processing_time, batch.work, bound.bad)
        return bound

    def count_dropped(self, bound: Bound, result: StoreResult) -> int:
        return sum(len(part.dropped) for part in result.by_phase) + self.rows.unseen_drops

    def output(self, bound: Bound, result: StoreResult) -> list[dict[str, Any]]:
        """Each step's panes (and the elements step's rejected rows, and drops for the late-data
        output), then the rows a fed stage passes on."""
        plan = self.plan
        late = plan.side_outputs and plan.operator.late_data_output
        parts = []
        for phase, emission in zip(Phase, result.by_phase):
            rejected = bound.bad if phase is Phase.ELEMENTS and plan.side_outputs else []
            if emission.outputs or rejected or (late and emission.dropped):
                parts.append(emission_rows(plan, emission, rejected, phase))
        if bound.forwarded is not None:
            parts.append(forwarded_rows(plan, bound.forwarded))
        return parts


class TableSteps:
    """A table engine (pane, session or window table): on the watermark, on processing time, then the
    batch's rows, as the scan fold that made them says (``_folded``) or as raw rows (``_raw``)."""

    def __init__(self, plan: SparkPlan, table: Any, rows: RowReader) -> None:
        self.plan, self.table, self.rows = plan, table, rows
        #: How a batch's rows are read, by the scan fold that made them (others: ``_raw``).
        self._folded: dict[Fold, Any] = {Fold.PREAGGREGATE: self._partials, Fold.PRECHAIN: self._chains}

    def bind(self, frame: Optional[pd.DataFrame], meta: dict, watermark: int, processing_time: int) -> Bound:
        plan, engine = self.plan, self.table
        released, timed, panes = out = (Panes(), Panes(), Panes())
        keys: list = []
        if frame is not None and len(frame):
            keys = factorize(self.rows.keys(frame))[1].tolist()
            if plan.key_column is not None:
                keys = [k for k in keys if not is_null(k)]  # rows with a null key are rejected below
        bound = Bound(None, keys)

        def run(table: Any) -> Any:
            table = engine.on_watermark(table, watermark, released)  # (Phase.WATERMARK's panes)
            table = engine.on_processing_time(table, processing_time, timed)  # (Phase.PROCESSING_TIME's)
            if frame is None or not len(frame):
                return table
            folded = self._folded.get(plan.paths.fold)
            if folded is not None:  # (rows a scan fold made: never null, never kept)
                table, bound.dropped = folded(table, frame, watermark, processing_time, panes)
                return table
            dropped: list = []
            table = self._raw(table, frame, watermark, processing_time, panes, dropped, bound.bad)
            bound.dropped = len(dropped)
            bound.late = dropped if plan.operator.late_data_output else []
            return table

        bound.engine = TableEngine(run, out)
        return bound

    def count_dropped(self, bound: Bound, result: StoreResult) -> int:
        return bound.dropped

    def output(self, bound: Bound, result: StoreResult) -> list[dict[str, Any]]:
        """Each step's panes (and the elements step's late and bad rows)."""
        plan = self.plan
        side = [*bound.late, *bound.bad]
        return [columnar_rows(plan, panes, rows, phase)
                for phase, panes, rows in zip(Phase, result.by_phase, ([], [], side))
                if len(panes) or (plan.side_outputs and rows)]

    def _raw(self, table: PaneTable, frame: pd.DataFrame, watermark: int, processing_time: int, panes: Panes,
             dropped: list, bad: list[DroppedElement]) -> PaneTable:
        """Input rows: those with a null or a time out of range are rejected (an error or a dead
        letter), the rest folded."""
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
        return self.table.process(table, self.rows.keys(frame), frame[plan.time_column].to_numpy(dtype=np.int64),
                                  values, watermark, panes, dropped, self.rows.element_at(frame, values),
                                  processing_time=processing_time, **extra)

    def _partials(self, table: PaneTable, frame: pd.DataFrame, watermark: int, processing_time: int,
                  panes: Panes) -> tuple[PaneTable, int]:
        """Rows folded upstream per (key, pane) (``preaggregate``): never null, never kept."""
        aggregates = [frame[name].to_numpy() for name in self.plan.partial_columns]
        return self.table.process_partials(table, self.rows.keys(frame), frame[PANE_COLUMN].to_numpy(dtype=np.int64),
                                           frame[COUNT_COLUMN].to_numpy(dtype=np.int64), aggregates, watermark,
                                           panes, processing_time=processing_time)

    def _chains(self, table: SessionTable, frame: pd.DataFrame, watermark: int, processing_time: int,
                panes: Panes) -> tuple[SessionTable, int]:
        """Session elements chained upstream (``prechain``): never null, never kept."""
        plan = self.plan
        assert isinstance(self.table, ColumnarSessions)
        times = frame[TIMES_COLUMN].to_numpy()
        values = frame[VALUES_COLUMN].to_numpy() if plan.chain_values is not None else None

        def elements_of(i: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
            return chain_elements(times[i], values[i] if values is not None else None, plan.chain_values)

        return self.table.process_chains(
            table, self.rows.keys(frame), frame[FIRST_COLUMN].to_numpy(dtype=np.int64),
            frame[LAST_COLUMN].to_numpy(dtype=np.int64), frame[COUNT_COLUMN].to_numpy(dtype=np.int64),
            [frame[name].to_numpy() for name in plan.partial_columns], watermark, panes, elements_of,
            processing_time=processing_time)
