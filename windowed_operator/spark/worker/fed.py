"""A chained stage's input in the worker: the upstream's pane rows, each taken at its step.

Each row is the pane the local chain hands over (``panes.panes_from_columns``), read by the stage's
own reader; as columns where the stage reads nothing but the pane's own fields (``pane_columns``).
The side rows of the stages before are handed on unchanged (``split_forwarded``).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ...elements import BadElementError
from ...engine.columnar_panes import object_array
from ...engine.core import Emission
from ...engine.key_state import KeyState
from ...engine.pane_columns import PaneColumns, read_pane_columns
from ...engine.range_ops import factorize, lexsort_ints
from ...engine.vectorized import process_batch_arrays
from ...panes import DroppedElement, RetractedValue, panes_from_columns
from ...engine.fired_by import Phase
from ...state.group_batch import GroupBatch
from ...time import MIN_TIMESTAMP
from ..plan import PHASE_COLUMN, SIDE_ROW_COLUMNS, STAGE_COLUMN, SparkPlan
from .rows import RowReader


class FedReader:
    """Reads a chained stage's upstream pane rows (``plan.upstream``) into the core's work, with the
    element reader of ``rows`` for what the array path does not take."""

    def __init__(self, plan: SparkPlan, rows: RowReader) -> None:
        self.plan = plan
        self.rows = rows

    def split_forwarded(self, frame: Optional[pd.DataFrame]) -> tuple[Optional[pd.DataFrame], Optional[pd.DataFrame]]:
        """A chained stage's input: the upstream's panes, and the side rows of the stages before (late
        data, dead letters), which it hands on unchanged (None: there are none)."""
        if frame is None or self.plan.upstream is None or STAGE_COLUMN not in frame.columns:
            return frame, None
        side = frame["record_type"].to_numpy() != "pane"
        forwarded = frame[side] if side.any() else None
        return frame[~side].drop(columns=[c for c in SIDE_ROW_COLUMNS if c in frame.columns]), forwarded

    def upstream_work(self, frame: pd.DataFrame, meta: dict, watermark: int, processing_time: int,
                       batch: GroupBatch, bad: list[DroppedElement]) -> None:
        """Rows of an upstream stage's panes, each taken at the step the local chain hands it over
        (``engine.fired_by.Phase``): panes its watermark released at the watermark before this batch's
        (the group's last: exact, since a fed stage's groups wake at every advance, see
        ``_schedule_group``), panes of its processing-time step before processing time advances
        here, panes of its elements last."""
        before_wm = meta.get("wm", MIN_TIMESTAMP)
        before_pt = meta.get("pt", processing_time)
        phases = frame.pop(PHASE_COLUMN).to_numpy()
        only = phases[0] if len(phases) and (phases == phases[0]).all() else None  # (one step's rows, most often)
        for phase, wm, pt, work in ((Phase.WATERMARK, before_wm, before_pt, batch.released),
                                    (Phase.PROCESSING_TIME, watermark, before_pt, batch.timed),
                                    (Phase.ELEMENTS, watermark, processing_time, batch.work)):
            if only is not None and only != phase:
                continue
            rows = frame if only is not None else frame[phases == phase]
            if len(rows) and not self._fed_array_work(rows, wm, pt, work):
                self.rows.record_work(rows, wm, pt, work, bad)

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
        read = read_pane_columns({c: frame[c].to_numpy() for c in frame.columns}, self.rows.reader.reader,
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
                    self.rows.core, k, state, stamps[rows], values[rows], watermark, processing_time,
                    lambda j: read.element(rows[j]),  # (what the element path's drops carry: the value read)
                    None if windows is None else (windows[0][rows], windows[1][rows]),
                    retracted=retracted[rows] if has_retractions else None)

            work.append((key, run))
        return True

    def _read_fed_rows(self, frame: pd.DataFrame) -> Optional[PaneColumns]:
        """The rows read one by one (None if the reader rejects one)."""
        reads = []
        read_pane = self.rows.reader.reader.read  # (the panes built column by column: ``panes.panes_from_columns``)
        for pane in panes_from_columns({c: frame[c].to_numpy() for c in frame.columns}, self.plan.upstream):
            try:
                reads.append(read_pane(pane, MIN_TIMESTAMP, self.rows.now))
            except BadElementError:
                return None
        n = len(reads)
        read_values = [r.value for r in reads]
        retracted = np.fromiter((isinstance(v, RetractedValue) for v in read_values), dtype=bool, count=n)
        windows = None
        if self.rows.core.kind == "inherited":
            windows = (np.fromiter((r.window.start for r in reads), dtype=np.int64, count=n),
                       np.fromiter((r.window.end for r in reads), dtype=np.int64, count=n))
        return PaneColumns(keys=np.array([r.key for r in reads] + [None], dtype=object)[:n],
                           timestamps=np.fromiter((r.timestamp for r in reads), dtype=np.int64, count=n),
                           values=_value_array([v.value if undo else v for v, undo in zip(read_values,
                                                                                          retracted.tolist())]),
                           retracted=retracted, windows=windows)


def _value_array(values: list) -> np.ndarray:
    """Values read from the rows as one array: numbers as a numeric array (numpy folds them),
    anything else as Python objects, one per row."""
    if values and all(type(v) in (int, float) for v in values):
        array = np.asarray(values)
        if array.dtype.kind in "if":
            return array
    return object_array(values)
