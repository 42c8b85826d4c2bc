"""A key group's input rows read in the worker, for the object and array engines and the tables.

Rows with a key, a time in range and a value go to the array paths as arrays (``vectorized_work``,
``array_elements``); the others go to the element reader one by one (``record_work``), which takes
each as the element path would, and rejects the bad ones with the reason (an error, or a dead letter).
"""
from __future__ import annotations

from typing import Any, Hashable, Optional

import numpy as np
import pandas as pd

from accumulations.merge import LEFT, RIGHT, SidedValues
from accumulations.rows import Rows

from ...elements import BadElementError, readable_value, rejected_row_error
from ...engine.core import CoreElement, Emission, WindowedCore
from ...engine.key_state import KeyState
from ...engine.range_ops import factorize, lexsort_ints
from ...engine.vectorized import process_batch_arrays
from ...merge_operator import MergeOperatorBase
from ...panes import DroppedElement, InputRow
from ...state.window_log import ArrayElements
from ...time import MIN_TIMESTAMP, event_time_in_range, latest_event_time
from ..plan.paths import WHOLE_ROWS, Fold
from ..plan import GROUP_COLUMN, PAYLOAD_COLUMNS, ROUTE_COLUMN, SIDE_COLUMN, SIDED_VALUES, SparkPlan
from ..scan.preselect import WEIGHT_COLUMN


def merge_operator(plan: SparkPlan) -> MergeOperatorBase:
    """The plan's operator, a merge's (called on a merge's paths only)."""
    operator = plan.operator
    assert isinstance(operator, MergeOperatorBase)
    return operator


class RowReader:
    """Reads one processor's input rows (``plan``) into the core's work; ``now`` is the batch's
    processing time (rows are checked against it), ``unseen_drops`` the dropped rows a pre-selected
    row stood for in this batch."""

    def __init__(self, plan: SparkPlan, core: WindowedCore, reader: Any) -> None:
        self.plan = plan
        self.core = core
        self.reader = reader
        self.now: Optional[int] = None
        self.unseen_drops = 0

    def keys(self, frame: pd.DataFrame) -> np.ndarray:
        if self.plan.key_column is None:
            return np.full(len(frame), None, dtype=object)
        return frame[self.plan.key_column].to_numpy(dtype=object)

    def clean(self, frame: pd.DataFrame, sided: Optional[SidedValues] = None) -> np.ndarray:
        """Rows the array paths take: a key, a time in range, a value and a partition where the
        watermark is per partition (the rest go to the reader;
        a merge's values are ``sided``).  Times are checked against the batch's own time (``now``), as
        the watermark helper column is."""
        plan = self.plan
        needed = [c for c in (plan.key_column, plan.time_column, plan.value_column, plan.partition_column)
                  if c not in (None, WHOLE_ROWS, SIDED_VALUES)]
        clean = np.ones(len(frame), dtype=bool)
        for column in needed:  # (column by column: a frame of the columns and its notna() cost more than this)
            clean &= frame[column].notna().to_numpy()
        if sided is not None:
            clean &= pd.notna(sided.values)
        times = frame[plan.time_column].to_numpy()
        latest = latest_event_time(self.now, plan.operator.max_future_skew)
        clean[clean] = event_time_in_range(times[clean].astype(np.int64), latest)
        return clean

    def records(self, frame: pd.DataFrame) -> list[dict]:
        """The rows as dicts, a null of an integral column as None (pandas holds a column of integers
        with a null as floats, the null as NaN), as Arrow's rows on the other paths show it: bad-element
        messages then say ``null (None)`` on every path."""
        floats = [name for name in self.plan.integral_columns
                  if name in frame.columns and frame[name].dtype.kind == "f" and frame[name].isna().any()]
        if floats:
            frame = frame.assign(**{name: frame[name].astype(object).where(frame[name].notna(), None)
                                    for name in floats})
        return frame.to_dict("records")

    def reject(self, record: dict, watermark: int, bad: list) -> None:
        record.pop(GROUP_COLUMN, None)
        error = rejected_row_error(self.reader, self.plan.value_column, record, self.now)
        if self.plan.operator.on_bad_element == "raise":
            raise error
        key = record.get(self.plan.key_column) if self.plan.key_column else None
        bad.append(DroppedElement(error.reason, error.element if self.plan.merge else record, key, None, watermark,
                                  error.detail, record.get(SIDE_COLUMN) if self.plan.merge else None))

    def vectorized_work(self, frame: pd.DataFrame, watermark: int, processing_time: int,
                         work: list) -> pd.DataFrame:
        """Rows with a key, a timestamp and a value go through the array path, key by key; the
        others are returned for the element path (which raises or dead-letters them)."""
        plan = self.plan
        frame, rest, values_all = self._split_clean(frame)
        if not len(frame):
            return rest
        ts_all = frame[plan.time_column].to_numpy(dtype=np.int64)
        element_at = self.element_at(frame, values_all)
        if plan.key_column is not None:
            codes, uniques = factorize(self.keys(frame))
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

    def _split_clean(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, Any]:
        """The rows the array paths take, the rest (for the element path, which raises or
        dead-letters them), and what the array path folds of the rows it takes (``_array_values``;
        a merge's values are read once, to judge the rows and to fold them)."""
        sided = self._sided_values(frame) if self.plan.value_column == SIDED_VALUES else None
        clean = self.clean(frame, sided)
        if clean.all():  # (most often: no copies)
            return frame, frame.iloc[:0], sided if sided is not None else self._array_values(frame)
        kept = frame[clean]
        return kept, frame[~clean], sided[clean] if sided is not None else self._array_values(kept)

    def array_elements(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, ArrayElements]:
        """The clean rows of every key as one batch of arrays (the window log adds them in one pass:
        ``WindowLog.add_arrays``); the other rows are returned for the element path."""
        frame, rest, values = self._split_clean(frame)
        codes, uniques = factorize(self.keys(frame))
        return rest, ArrayElements(uniques.tolist(), codes, frame[self.plan.time_column].to_numpy(dtype=np.int64),
                                   values, self.element_at(frame, values))

    def element_at(self, frame: pd.DataFrame, values: Any) -> Any:
        """Element i of the array path's rows as the element path reports a dropped one: a merge's
        input and its row (``InputRow``), another operator's row."""
        if isinstance(values, SidedValues):
            payloads = {side: frame[column].to_numpy() for side, column in PAYLOAD_COLUMNS.items()}

            def input_row(i: int) -> InputRow:
                side = LEFT if values.left[i] else RIGHT
                return InputRow(side, payloads[side][i])

            return input_row

        def row(i: int) -> dict:
            record = frame.iloc[i].to_dict()
            record.pop(GROUP_COLUMN, None)
            return record

        return row

    def _sided_values(self, frame: pd.DataFrame) -> SidedValues:
        """A merge's rows as the array path folds them: each row's value (its input's whole row, or the
        field or record of fields its input's value extractor names), marked by side; None where the
        element path would reject the row (a missing payload, a missing or null field)."""
        left = frame[SIDE_COLUMN].to_numpy() == LEFT
        values = np.where(left, frame[PAYLOAD_COLUMNS[LEFT]].to_numpy(), frame[PAYLOAD_COLUMNS[RIGHT]].to_numpy())
        for side, rows in ((LEFT, left), (RIGHT, ~left)):
            extractor = merge_operator(self.plan).side_extractor(side, "value")
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

    def record_work(self, frame: pd.DataFrame, watermark: int, processing_time: int, work: list,
                     bad: list[DroppedElement]) -> None:
        batches: dict[Optional[Hashable], list[tuple[CoreElement, Any]]] = {}
        merge = self.plan.merge
        for record in self.records(frame):
            record.pop(GROUP_COLUMN, None)
            record.pop(ROUTE_COLUMN, None)  # (a fed stage's phase column is popped by _upstream_work)
            record.pop(WEIGHT_COLUMN, None)  # (pre-selected rows are all clean: they take the array path)
            try:
                read = self.reader.read(record, MIN_TIMESTAMP, self.now)
            except BadElementError as exc:
                if self.plan.operator.on_bad_element == "raise":
                    raise
                key = record.get(self.plan.key_column) if self.plan.key_column else None
                element = exc.element if merge else record  # (a merge's: the input's row, not the union's)
                bad.append(DroppedElement(exc.reason, element, key, None, watermark, exc.detail,
                                          record[SIDE_COLUMN] if merge else None))
                continue
            # (what a dropped element reports: the row as it arrived, a merge's with its input)
            origin = InputRow(record[SIDE_COLUMN], record[PAYLOAD_COLUMNS[record[SIDE_COLUMN]]]) if merge else record
            batches.setdefault(read.key, []).append(((read.timestamp, read.value, read.window), origin))
        for key, pairs in batches.items():
            pairs.sort(key=lambda e: e[0][0])  # rows arrive in arrival order; sort so batches are deterministic

            def run(k: Any, state: KeyState, pairs: list = pairs) -> Emission:
                return self.core.process_batch(k, state, [e for e, _ in pairs], watermark, processing_time,
                                               [o for _, o in pairs])

            work.append((key, run))
