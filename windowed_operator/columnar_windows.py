"""Windows assigned by timestamp under early/late firings, as arrays: one row per (key, window).

The pane-sharing path (``columnar``) serves Beam's default trigger without retractions, where no
window needs state of its own.  Early and late firings (every N elements or D ms of processing
time), the accumulating-and-retracting mode and only-updated panes do need it (a count and a due
time per window, the last pane's value), so this path keeps a key group's windows as one table,
sorted by key, start and end: accumulator columns, the pane bookkeeping of ``WindowState``
(``columnar_panes``) and the trigger's state (``columnar_triggers``).  A micro-batch is a few array operations for all keys at once, in
the order of ``WindowedCore.run_batch``:

1. the watermark step: windows whose end-of-window timer is due fire (finishing if the trigger has
   no late firings, or if they also expire); expired windows are purged, those with elements since
   their last pane firing a last pane first (Beam's garbage collection, FIRE_IF_NON_EMPTY);
2. the bundle: each element (or partial folded upstream) is assigned its windows with array
   arithmetic; an element all of whose windows expired is dropped (EXPIRED), one all of whose live
   windows finished is dropped as arriving in a closed window (CLOSED_WINDOW); the others fold into
   their open windows; every window the bundle touched is asked once whether to fire.

``tests/test_columnar_windows.py`` runs this path against ``WindowedCore`` on random streams with
times and watermarks at and around window ends and expiries.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from accumulations.base import Accumulation
from triggers.option import TriggerOption

from .columnar import Panes
from .columnar_triggers import NOT_SET, RowTable, TriggeredRows, supports_triggered_rows
from .panes import DropReason, DroppedElement
from .range_ops import factorize
from .time_rules import is_end_reached, is_expired
from .windows.base import WindowOption


#: A key group's windows (``columnar_triggers.RowTable``).
WindowTable = RowTable


def supports_columnar_windows(window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                              timestamp_combiner: Any) -> bool:
    """Windows assigned by timestamp, with what every triggered table needs
    (``columnar_triggers.supports_triggered_rows``)."""
    return window.kind == "assigned" and supports_triggered_rows(accumulation, trigger, timestamp_combiner)


class ColumnarWindows(TriggeredRows):
    def __init__(self, window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                 allowed_lateness: int, *, label: str = "operator", column: Optional[str] = None) -> None:
        super().__init__(accumulation, trigger, allowed_lateness, label=label, column=column)
        self.window = window

    # -- a bundle -------------------------------------------------------------------------------
    def process(self, table: WindowTable, keys: np.ndarray, timestamps: np.ndarray, values: Optional[np.ndarray],
                watermark: int, out: Panes, dropped: list, element_of: Callable[[int], Any], *,
                processing_time: int) -> WindowTable:
        """One batch of a key group (``keys``, ``timestamps``, ``values`` aligned), in the core's order."""
        table = self.on_processing_time(self.on_watermark(table, watermark, out), processing_time, out)
        if not len(timestamps):
            return table
        timestamps = np.asarray(timestamps, dtype=np.int64)
        ones = np.ones(len(timestamps), dtype=np.int64)
        partials = self.form.from_partials(ones, [values] * len(self.form.partial_aggregates))
        table, accepted, live = self._add(table, keys, timestamps, partials, ones, watermark, processing_time, out)
        for i in np.flatnonzero(~accepted).tolist():
            reason = DropReason.CLOSED_WINDOW if live[i] else DropReason.EXPIRED
            dropped.append(DroppedElement(reason, element_of(i), keys[i], int(timestamps[i]), watermark))
        return table

    def process_partials(self, table: WindowTable, keys: np.ndarray, panes: np.ndarray, counts: np.ndarray,
                         aggregates: list[np.ndarray], watermark: int, out: Panes, *,
                         processing_time: int) -> tuple[WindowTable, int]:
        """One batch folded upstream per (key, pane) (rows may repeat a (key, pane)); returns the table
        and how many elements were dropped.  Every element of a pane has the pane's windows, so each
        partial is assigned, judged and counted (its elements count for the count trigger) as its
        elements would be."""
        table = self.on_processing_time(self.on_watermark(table, watermark, out), processing_time, out)
        if not len(panes):
            return table, 0
        counts = np.asarray(counts, dtype=np.int64)
        partials = self.form.from_partials(counts, aggregates)
        table, accepted, _ = self._add(table, keys, np.asarray(panes, dtype=np.int64), partials, counts, watermark,
                                       processing_time, out)
        return table, int(counts[~accepted].sum())

    def _add(self, table: WindowTable, keys: np.ndarray, timestamps: np.ndarray, partials: list[np.ndarray],
             counts: np.ndarray, watermark: int, processing_time: int,
             out: Panes) -> tuple[WindowTable, np.ndarray, np.ndarray]:
        """Fold a bundle's partials (``counts`` elements each) into their windows and fire what is
        ready; returns the table, which partials went into some window, and which had a live one."""
        n_rows, n_items = len(table), len(timestamps)
        starts, ends, item = self.window.assign_array(timestamps)
        alive = ~is_expired(ends - 1, self.lateness, watermark)
        starts, ends, item = starts[alive], ends[alive], item[alive]
        live = np.bincount(item, minlength=n_items) > 0
        codes, uniques = factorize(np.concatenate([table.keys, keys]))
        # Every window occurrence: the table's rows (row r as r), then the bundle's pairs (pair j as -1 - j).
        member = np.concatenate([np.arange(n_rows), -1 - np.arange(len(item))])
        all_codes = np.concatenate([codes[:n_rows], codes[n_rows:][item]])
        all_starts = np.concatenate([table.starts, starts])
        all_ends = np.concatenate([table.ends, ends])
        order = np.lexsort((all_ends, all_starts, all_codes))
        all_codes, all_starts, all_ends, member = all_codes[order], all_starts[order], all_ends[order], member[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (all_codes[1:] != all_codes[:-1]) | (all_starts[1:] != all_starts[:-1]) | \
            (all_ends[1:] != all_ends[:-1])
        group_of = np.cumsum(new) - 1
        is_row = member >= 0
        n_groups = int(group_of[-1]) + 1 if len(order) else 0
        row_of_group = np.full(n_groups, -1, dtype=np.int64)
        row_of_group[group_of[is_row]] = member[is_row]
        closed = np.zeros(n_groups, dtype=bool)
        if n_rows:
            has_row = row_of_group >= 0
            closed[has_row] = table.closed[row_of_group[has_row]]
        # Pairs into finished windows are not added; an element with no other window is dropped.
        keep = is_row | ~closed[group_of]
        pair = -1 - member[keep & ~is_row]
        accepted = np.bincount(item[pair], minlength=n_items) > 0
        if not len(pair):
            return table, accepted, live  # (nothing to add: the table is unchanged)
        member, group_of, is_row = member[keep], group_of[keep], is_row[keep]
        first = np.flatnonzero(np.concatenate(([True], group_of[1:] != group_of[:-1])))
        rows = np.where(is_row, member, 0)
        pairs = np.where(is_row, 0, -1 - member)
        pair_item = item[pairs]
        if n_rows:
            columns = [np.where(is_row, column[rows], partial[pair_item]) for column, partial in zip(table.acc, partials)]
        else:
            columns = [partial[pair_item] for partial in partials]
        arrived = np.add.reduceat(np.where(is_row, 0, counts[pair_item]), first)
        row = row_of_group[group_of[first]]
        g_ends = all_ends[keep][first]

        def carried(column: np.ndarray, fresh: Any) -> np.ndarray:
            """A window's stored value of ``column``; ``fresh`` for a window the bundle opens."""
            if not n_rows:
                return np.full(len(first), fresh, dtype=column.dtype)
            return np.where(row >= 0, column[np.maximum(row, 0)], fresh).astype(column.dtype)

        touched = arrived > 0
        result = WindowTable(
            keys=uniques[all_codes[keep][first]], starts=all_starts[keep][first], ends=g_ends,
            acc=self.form.reduce_segments(columns, first), pending=carried(table.pending, 0) + arrived,
            hold=carried(table.hold, False) | (touched & ~is_end_reached(g_ends - 1, watermark)),
            nonspeculative=carried(table.nonspeculative, 0), index=carried(table.index, 0),
            last=carried(table.last, None),
            late=carried(table.late, False), count=carried(table.count, 0) + arrived,
            fire_at=carried(table.fire_at, NOT_SET), closed=carried(table.closed, False), watermark=table.watermark)
        self.on_elements(result, np.flatnonzero(touched & ~result.closed), watermark, processing_time, out)
        return result, accepted, live


__all__ = ["ColumnarWindows", "WindowTable", "supports_columnar_windows"]
