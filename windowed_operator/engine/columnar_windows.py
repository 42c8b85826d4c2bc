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
2. firings due by processing time (``TriggeredRows.on_processing_time``);
3. the bundle: an element (or partial folded upstream) all of whose windows expired is dropped
   (EXPIRED), one all of whose live windows finished is dropped as arriving in a closed window
   (CLOSED_WINDOW); the others fold per (key, pane) (``windows/pane_layout.py``: windows are unions
   of panes), and each window over the bundle's panes takes the fold of its run of panes, as the
   pane-sharing path computes a window's value; every window the bundle touched is asked once
   whether to fire.

``tests/test_columnar_windows.py`` runs this path against ``WindowedCore`` on random streams with
times and watermarks at and around window ends and expiries.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from accumulations.base import Accumulation
from triggers.option import TriggerOption

from ..panes import DropReason, DroppedElement
from ..time_rules import is_expired, latest_max_timestamp_expired, sets_element_hold
from ..windows.base import WindowOption
from .columnar import Panes
from .columnar_triggers import NOT_SET, RowTable, TriggeredRows, supports_triggered_rows
from .range_ops import expand_ends, factorize, lex_searchsorted, lexsort_ints, range_sums, run_starts


#: A key group's windows (``columnar_triggers.RowTable``).
WindowTable = RowTable


def supports_columnar_windows(window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                              timestamp_combiner: Any) -> bool:
    """Windows assigned by timestamp that are unions of panes (``windows/pane_layout.py``), with what
    every triggered table needs (``columnar_triggers.supports_triggered_rows``)."""
    return (window.kind == "assigned" and window.pane_layout() is not None
            and supports_triggered_rows(accumulation, trigger, timestamp_combiner))


class ColumnarWindows(TriggeredRows):
    """The window table: windows assigned by timestamp under early or late firings, or with
    retractions, as one row per (key, window) with accumulator columns and the row trigger's state
    (``columnar_triggers``), where each window needs state of its own."""

    def __init__(self, window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                 allowed_lateness: int, *, label: str = "operator", column: Optional[str] = None) -> None:
        super().__init__(accumulation, trigger, allowed_lateness, label=label, column=column)
        self.window = window
        self.layout = window.pane_layout()
        assert self.layout is not None

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
        """Fold a bundle's partials (``counts`` elements each, at ``timestamps`` or pane starts) into
        their open windows and fire what is ready; returns the table, which partials went into some
        window, and which had a live one.

        Every partial of a pane has the pane's windows, so the partials fold per (key, pane) first and
        each window the bundle touched takes the fold of its run of panes (``range_ops``: prefix-sum
        differences, a sparse table for min/max): the work follows the panes and windows touched, not
        the panes times the windows over each (60 for hopping windows of 60 s every 1 s)."""
        layout = self.layout
        panes = layout.pane_start(timestamps)
        lo, hi = layout.end_range(panes)  # the ends of the pane's windows, ``step`` apart
        live = ~is_expired(hi - 1, self.lateness, watermark)
        lo = np.maximum(lo, layout.first_end_after(latest_max_timestamp_expired(watermark, self.lateness)))
        codes, uniques = factorize(np.concatenate([table.keys, keys]))
        row_codes, codes = codes[:len(table)], codes[len(table):]
        accepted = live & ~self._only_finished(table, row_codes, codes, lo, hi)
        if not accepted.any():
            return table, accepted, live
        codes, panes, lo, hi = codes[accepted], panes[accepted], lo[accepted], hi[accepted]
        order = lexsort_ints((panes, codes))
        codes, panes = codes[order], panes[order]
        first = run_starts(codes, panes)
        pane_acc = self.form.reduce_segments([c[accepted][order] for c in partials], first)
        pane_counts = np.add.reduceat(counts[accepted][order], first)
        codes, panes, lo, hi = codes[first], panes[first], lo[order][first], hi[order][first]
        w_codes, w_ends = expand_ends(codes, lo, hi, layout.step)
        w_starts = layout.window_start(w_ends)
        at = lex_searchsorted(codes, panes, w_codes, w_starts)
        to = lex_searchsorted(codes, panes, w_codes, w_ends)
        table = self._merge(table, row_codes, uniques, w_codes, w_starts, w_ends,
                            self.form.range_values(pane_acc, at, to), range_sums(pane_counts, at, to), watermark,
                            processing_time, out)
        return table, accepted, live

    def _only_finished(self, table: WindowTable, row_codes: np.ndarray, codes: np.ndarray, lo: np.ndarray,
                       hi: np.ndarray) -> np.ndarray:
        """Which partials have live windows (ends in [lo, hi]) that all finished: their elements are
        dropped as arriving in a closed window."""
        finished = np.flatnonzero(table.closed)
        if not len(finished):
            return np.zeros(len(codes), dtype=bool)
        f_codes, f_ends = row_codes[finished], table.ends[finished]
        order = lexsort_ints((f_ends, f_codes))
        f_codes, f_ends = f_codes[order], f_ends[order]
        n_finished = lex_searchsorted(f_codes, f_ends, codes, hi + 1) - lex_searchsorted(f_codes, f_ends, codes, lo)
        n_live = np.where(lo <= hi, (hi - lo) // self.layout.step + 1, 0)
        return (n_live > 0) & (n_finished >= n_live)

    def _merge(self, table: WindowTable, row_codes: np.ndarray, uniques: np.ndarray, w_codes: np.ndarray,
               w_starts: np.ndarray, w_ends: np.ndarray, w_acc: list[np.ndarray], arrived: np.ndarray, watermark: int,
               processing_time: int, out: Panes) -> WindowTable:
        """Fold each touched window's new partial (``arrived`` elements) into its row, or open a row
        for it; a window whose trigger finished takes nothing.  Then ask each window that took
        elements whether to fire."""
        n_rows = len(table)
        # Every window: the table's rows (row r as r), then the bundle's windows (window j as -1 - j).
        member = np.concatenate([np.arange(n_rows), -1 - np.arange(len(w_ends))])
        all_codes = np.concatenate([row_codes, w_codes])
        all_starts = np.concatenate([table.starts, w_starts])
        all_ends = np.concatenate([table.ends, w_ends])
        order = lexsort_ints((all_ends, all_starts, all_codes))
        all_codes, all_starts, all_ends, member = all_codes[order], all_starts[order], all_ends[order], member[order]
        is_row = member >= 0
        rows, windows = np.where(is_row, member, 0), np.where(is_row, 0, -1 - member)
        if n_rows:  # (a window already in the table is its row followed by the bundle's window)
            finished = np.zeros(len(order), dtype=bool)
            finished[1:] = is_row[:-1] & ~is_row[1:] & table.closed[rows[:-1]] & (all_ends[1:] == all_ends[:-1]) & \
                (all_codes[1:] == all_codes[:-1])
            if finished.any():
                keep = ~finished
                all_codes, all_starts, all_ends = all_codes[keep], all_starts[keep], all_ends[keep]
                is_row, rows, windows = is_row[keep], rows[keep], windows[keep]
        first = run_starts(all_codes, all_ends)  # (a window's end names it within its key)
        if n_rows:
            columns = [np.where(is_row, column[rows], partial[windows]) for column, partial in zip(table.acc, w_acc)]
        else:
            columns = [partial[windows] for partial in w_acc]
        g_arrived = np.add.reduceat(np.where(is_row, 0, arrived[windows]), first)
        row = np.where(is_row[first], rows[first], -1)
        g_ends = all_ends[first]

        def carried(column: np.ndarray, fresh: Any) -> np.ndarray:
            """A window's stored value of ``column``; ``fresh`` for a window the bundle opens."""
            if not n_rows:
                return np.full(len(first), fresh, dtype=column.dtype)
            return np.where(row >= 0, column[np.maximum(row, 0)], fresh).astype(column.dtype)

        touched = g_arrived > 0
        result = WindowTable(
            keys=uniques[all_codes[first]], starts=all_starts[first], ends=g_ends,
            acc=self.form.reduce_segments(columns, first), pending=carried(table.pending, 0) + g_arrived,
            hold=carried(table.hold, False) | (touched & sets_element_hold(g_ends - 1, watermark)),
            nonspeculative=carried(table.nonspeculative, 0), index=carried(table.index, 0),
            last=carried(table.last, None),
            late=carried(table.late, False), count=carried(table.count, 0) + g_arrived,
            fire_at=carried(table.fire_at, NOT_SET), closed=carried(table.closed, False), watermark=table.watermark)
        self.on_elements(result, np.flatnonzero(touched & ~result.closed), watermark, processing_time, out)
        return result


__all__ = ["ColumnarWindows", "WindowTable", "supports_columnar_windows"]
