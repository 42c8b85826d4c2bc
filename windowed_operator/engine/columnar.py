"""The columnar path: a key group's panes as arrays, for Beam's default trigger.

Most windowed aggregations use the default trigger: one ON_TIME pane when the watermark passes the
end of the window, then one LATE pane per bundle of late elements within allowed lateness.  For
that trigger no window needs trigger state or timers, so a whole key group can live in a few
arrays and a micro-batch is a handful of array operations for all keys at once, instead of Python
objects per window.

State is one partial per (key, pane) — pane sharing: a pane is the slice of event time that
windows are unions of (``windows/pane_layout.py``: gcd(size, slide) for hopping windows, the step
for cumulative ones, the window itself for tumbling ones).  An element touches one pane, not
size/slide windows, and state is O(panes).  A window's value is folded from its run of panes when
it fires (``range_ops``: prefix-sum differences for sum/count/mean — subtract-on-evict as array
arithmetic — and a sparse table for min/max, which cannot subtract).  Which windows exist needs no
state either: the windows that hold data are the union of the window ends covering the key's panes.

The time rules are ``time_rules``' (end reached, expired), applied to arrays of window ends; what
this trigger does with them (``tests/test_columnar.py`` runs this path against ``WindowedCore`` on
random streams with watermarks at window boundaries):

- watermark step from W0 to W: each window with data whose end is reached at W but was not at W0
  fires ON_TIME (its last pane if it also expires at W; the end-of-window timer its data set held it:
  ``time_rules``); a pane is dropped once every window over it has expired;
- elements: an element whose every window has expired is dropped (EXPIRED); the others go into
  their pane; every live window whose end is reached and that got elements fires a LATE pane per
  bundle, with the bundle's elements only (discarding) or all of them (accumulating).  Its pane
  index is 1 if it fired ON_TIME — it did iff one of its panes first got data before its end was
  reached — plus the LATE panes before, counted per window only for windows that had one.

Float sums folded by prefix differences can differ from element-by-element sums in the last bits.
Retracting mode, other triggers and other accumulations keep the object path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from accumulations.base import Accumulation
from accumulations.int64 import exact
from accumulations.numeric import Count, Max, Mean, Min, Sum
from triggers.option import TriggerOption

from ..panes import DropReason, DroppedElement
from ..time import MAX_TIMESTAMP, MIN_TIMESTAMP
from ..time_rules import (end_of_window_due, expiry_due, is_end_reached, is_expired, latest_max_timestamp_expired,
                         latest_max_timestamp_reached)
from ..windows.base import Window, WindowOption
from .pane_rules import TIMING_VALUES, check_outputs, every_value_a_result, timing_code
from .range_ops import expand_ends, factorize, lex_searchsorted, lexsort_ints, range_reduce, range_sums, run_starts


@dataclass(frozen=True)
class ColumnarForm:
    """An accumulation as arrays: accumulator columns folded with one ufunc each.  An element is
    the partial of one (count 1, its value as every aggregate)."""

    kind: str  # "sum", "count", "min", "max", "mean"

    def reduce_segments(self, cols: list[np.ndarray], first: np.ndarray) -> list[np.ndarray]:
        if self.kind == "min":
            return [np.minimum.reduceat(cols[0], first)]
        if self.kind == "max":
            return [np.maximum.reduceat(cols[0], first)]
        return [np.add.reduceat(exact(c), first) for c in cols]  # Python integers where int64 could wrap

    @property
    def partial_aggregates(self) -> list[str]:
        """What an upstream pre-aggregation computes over the value column per (key, pane), besides
        the element count (Arrow / SQL aggregate names)."""
        return {"sum": ["sum"], "count": [], "min": ["min"], "max": ["max"], "mean": ["sum"]}[self.kind]

    def from_partials(self, counts: np.ndarray, aggregates: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        """Accumulator columns from an upstream pre-aggregation (``partial_aggregates`` + counts)."""
        if self.kind == "count":
            return [counts.astype(np.int64)]
        aggregate = aggregates[0]
        assert aggregate is not None  # (every kind but count folds a value column)
        if self.kind == "mean":
            return [aggregate, counts.astype(np.int64)]
        return [aggregate]

    def range_values(self, cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        """The fold of rows ``lo:hi`` of each column, for many non-empty ranges at once."""
        if self.kind == "min":
            return [range_reduce(np.minimum, cols[0], lo, hi)]
        if self.kind == "max":
            return [range_reduce(np.maximum, cols[0], lo, hi)]
        return [range_sums(exact(c), lo, hi) for c in cols]

    @property
    def width(self) -> int:
        """How many accumulator columns."""
        return 2 if self.kind == "mean" else 1

    def columns_of(self, accumulator: Any) -> list[Any]:
        """The object path's accumulator as this form's column values (migrating stored state)."""
        return list(accumulator) if self.kind == "mean" else [accumulator]

    def outputs(self, cols: list[np.ndarray]) -> np.ndarray:
        if self.kind == "mean":
            return cols[0] / cols[1]
        return cols[0]


def columnar_form(accumulation: Accumulation) -> Optional[ColumnarForm]:
    for cls, kind in ((Sum, "sum"), (Count, "count"), (Min, "min"), (Max, "max"), (Mean, "mean")):
        if type(accumulation) is cls:
            return ColumnarForm(kind)
    return None


def supports_columnar(window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                      timestamp_combiner: Any) -> bool:
    """Whether the pane table serves the operator: windows of a pane layout under Beam's default
    trigger, a built-in fold whose every value is a result (``pane_rules.every_value_a_result``: the
    table keeps no window's state to suppress a pane with), panes stamped at the window's end."""
    from ..panes import TimestampCombiner

    form = columnar_form(accumulation)
    return (window.kind == "assigned" and trigger.kind == "default" and not trigger.retracting
            and not trigger.only_updated_panes and form is not None and every_value_a_result(accumulation)
            and window.pane_layout() is not None
            and timestamp_combiner == TimestampCombiner.END_OF_WINDOW)


class Panes:
    """Output rows as column arrays (what the Spark processor turns into one typed DataFrame: typed
    columns convert to Arrow several times faster than lists of Python objects)."""

    _FIELDS = ("keys", "starts", "ends", "values", "timing", "pane_index", "is_last", "is_retraction")

    def __init__(self) -> None:
        self._chunks: list[tuple[np.ndarray, ...]] = []

    def add(self, keys: np.ndarray, starts: np.ndarray, ends: np.ndarray, values: np.ndarray,
            timing: np.ndarray, pane_index: np.ndarray, is_last: np.ndarray, *,
            is_retraction: bool = False) -> None:
        """Rows of a timing each (an array of their values: ``pane_rules.TIMING_VALUES``)."""
        if len(ends):
            self._chunks.append((keys, starts, ends, np.asarray(values), timing, pane_index, is_last,
                                 np.full(len(ends), is_retraction)))

    def _column(self, name: str) -> np.ndarray:
        i = self._FIELDS.index(name)
        if not self._chunks:
            return np.empty(0, dtype=object if name in ("keys", "timing") else
                            bool if name in ("is_last", "is_retraction") else np.int64)
        return np.concatenate([chunk[i] for chunk in self._chunks])

    keys = property(lambda self: self._column("keys"))
    starts = property(lambda self: self._column("starts"))
    ends = property(lambda self: self._column("ends"))
    values = property(lambda self: self._column("values"))
    timing = property(lambda self: self._column("timing"))
    pane_index = property(lambda self: self._column("pane_index"))
    is_last = property(lambda self: self._column("is_last"))
    is_retraction = property(lambda self: self._column("is_retraction"))
    is_first = property(lambda self: (self._column("pane_index") == 0) & ~self._column("is_retraction"))

    def __len__(self) -> int:
        return sum(len(chunk[2]) for chunk in self._chunks)


@dataclass
class PaneTable:
    """A key group's state: one row per (key, pane) holding data, sorted by key code then pane start."""

    keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=object))
    starts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    acc: list = field(default_factory=list)  # accumulator columns
    first_watermark: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # when data first came
    watermark: int = MIN_TIMESTAMP  # the last watermark applied
    late_panes: dict = field(default_factory=dict)  # (key, window end) -> LATE panes fired so far

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, mask: np.ndarray) -> "PaneTable":
        return PaneTable(self.keys[mask], self.starts[mask], [c[mask] for c in self.acc], self.first_watermark[mask],
                         self.watermark, self.late_panes)


@dataclass
class _Windows:
    """Windows to fire: key code, start, end, and the row range of their panes in a sorted table."""

    codes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


class ColumnarCore:
    """The pane table: windows assigned by timestamp under Beam's default trigger, as a table of
    (key, pane start) rows with accumulator columns (``PaneTable``).  A window's value is the fold of
    the panes under it (pane sharing), so elements only add to their pane's row; the watermark fires
    and expires whole windows at once.  Gives the object engine's panes for every operator it serves."""

    def __init__(self, window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                 allowed_lateness: int, *, label: str = "operator", column: Optional[str] = None) -> None:
        form = columnar_form(accumulation)
        assert form is not None
        self.layout = window.pane_layout()
        assert self.layout is not None
        self.form = form
        self.discarding = trigger.discarding
        self.lateness = allowed_lateness
        self.label, self.column = label, column

    # -- windows over a sorted pane table --------------------------------------------------------
    def _windows(self, codes: np.ndarray, starts: np.ndarray, lo_end: np.ndarray, hi_end: np.ndarray) -> _Windows:
        """The windows with an end in [lo_end, hi_end] of some pane row (codes/starts sorted)."""
        w_codes, w_ends = expand_ends(codes, lo_end, hi_end, self.layout.step)
        w_starts = self.layout.window_start(w_ends)
        lo = lex_searchsorted(codes, starts, w_codes, w_starts)
        hi = lex_searchsorted(codes, starts, w_codes, w_ends)
        return _Windows(w_codes, w_starts, w_ends, lo, hi)

    def _values(self, table_acc: list, windows: _Windows, keys: np.ndarray) -> np.ndarray:
        """The windows' values; an integer that does not fit int64 is an error naming its window."""
        return check_outputs(self.form.outputs(self.form.range_values(table_acc, windows.lo, windows.hi)),
                             self.label, self.column, lambda i: keys[windows.codes[i]],
                             lambda i: Window(int(windows.starts[i]), int(windows.ends[i])))

    def due_per_row(self, table: PaneTable) -> np.ndarray:
        """When each pane row next has something to do: its next window's ON_TIME pane, or its
        expiry."""
        lo, hi = self.layout.end_range(table.starts)
        next_end = np.maximum(lo, self.layout.first_end_after(latest_max_timestamp_reached(table.watermark)))
        return np.minimum(np.where(next_end <= hi, end_of_window_due(next_end - 1), MAX_TIMESTAMP),
                          expiry_due(hi - 1, self.lateness))

    def next_event_time(self, table: PaneTable) -> Optional[int]:
        """When the group next has something to do: an ON_TIME pane or a pane to drop."""
        return int(self.due_per_row(table).min()) if len(table) else None

    def next_processing_time(self, table: PaneTable) -> Optional[int]:
        return None  # (the default trigger waits on the watermark only)

    def on_processing_time(self, table: PaneTable, processing_time: int, out: Panes) -> PaneTable:
        return table

    def on_watermark(self, table: PaneTable, watermark: int, out: Panes) -> PaneTable:
        if watermark <= table.watermark:
            return table
        ended = watermark >= MAX_TIMESTAMP
        if len(table):
            codes, uniques = factorize(table.keys)
            lo, hi = self.layout.end_range(table.starts)
            # Windows whose end is reached at ``watermark`` and was not at the last one applied.
            due_lo = np.maximum(lo, self.layout.first_end_after(latest_max_timestamp_reached(table.watermark)))
            due_hi = hi if ended else np.minimum(hi, self.layout.last_end_up_to(latest_max_timestamp_reached(watermark)))
            due = self._windows(codes, table.starts, due_lo, due_hi)
            if len(due.ends):
                expired = is_expired(due.ends - 1, self.lateness, watermark)
                # (each window's first pane, at its end, held there by its end-of-window timer: ON_TIME)
                timing = TIMING_VALUES[timing_code(due.ends - 1, watermark, 0, True)]
                out.add(uniques[due.codes], due.starts, due.ends, self._values(table.acc, due, uniques), timing,
                        np.zeros(len(due.ends), dtype=np.int64), expired)
            gone = is_expired(hi - 1, self.lateness, watermark)
            if gone.any():
                table = table.take(~gone)
        if table.late_panes:
            table.late_panes = {k: n for k, n in table.late_panes.items()
                                if not is_expired(k[1] - 1, self.lateness, watermark)}
        table.watermark = watermark
        return table

    def _live(self, pane: np.ndarray, watermark: int) -> np.ndarray:
        """Rows whose pane still has a live window: the last window over it has not expired."""
        return ~is_expired(self.layout.end_range(pane)[1] - 1, self.lateness, watermark)

    def process(self, table: PaneTable, keys: np.ndarray, timestamps: np.ndarray, values: Optional[np.ndarray],
                watermark: int, out: Panes, dropped: list, element_of: Callable[[int], Any], *,
                processing_time: int) -> PaneTable:
        """One batch of a key group (``keys``, ``timestamps``, ``values`` aligned), in the core's order
        (the default trigger has no processing-time firings: ``processing_time`` changes nothing)."""
        table = self.on_watermark(table, watermark, out)
        if not len(timestamps):
            return table
        pane = self.layout.pane_start(timestamps)
        live = self._live(pane, watermark)
        for i in np.flatnonzero(~live).tolist():
            dropped.append(DroppedElement(DropReason.EXPIRED, element_of(i), keys[i], int(timestamps[i]), watermark))
        columns = self.form.from_partials(np.ones(len(pane), dtype=np.int64),
                                          [values] * len(self.form.partial_aggregates))
        return self._fold_bundle(table, keys, pane, columns, live, watermark, out)

    def process_partials(self, table: PaneTable, keys: np.ndarray, panes: np.ndarray, counts: np.ndarray,
                         aggregates: list[np.ndarray], watermark: int, out: Panes, *,
                         processing_time: int) -> tuple[PaneTable, int]:
        """One batch already folded per (key, pane) upstream (``ColumnarForm.partial_aggregates``; rows
        may repeat a (key, pane)); returns the table and how many elements were dropped as expired.
        Panes never split windows, so lateness decided per partial is lateness per element."""
        table = self.on_watermark(table, watermark, out)
        if not len(panes):
            return table, 0
        live = self._live(panes, watermark)
        columns = self.form.from_partials(counts, aggregates)
        return self._fold_bundle(table, keys, panes, columns, live, watermark, out), int(counts[~live].sum())

    def _fold_bundle(self, table: PaneTable, keys: np.ndarray, panes: np.ndarray, columns: list[np.ndarray],
                     live: np.ndarray, watermark: int, out: Panes) -> PaneTable:
        """Fold a bundle's live partials into one per (key, pane), then into the table."""
        if not live.all():
            keys, panes, columns = keys[live], panes[live], [c[live] for c in columns]
        if not len(panes):
            return table
        codes, uniques = factorize(np.concatenate([table.keys, keys]))
        row_codes = codes[len(table):]
        order = lexsort_ints((panes, row_codes))
        row_codes, panes = row_codes[order], panes[order]
        first = run_starts(row_codes, panes)
        partial = self.form.reduce_segments([c[order] for c in columns], first)
        return self._merge_bundle(table, codes[:len(table)], uniques, row_codes[first], panes[first], partial,
                                  watermark, out)

    def _merge_bundle(self, table: PaneTable, table_codes: np.ndarray, uniques: np.ndarray,
                      bundle_codes: np.ndarray, bundle_starts: np.ndarray, bundle_acc: list, watermark: int,
                      out: Panes) -> PaneTable:
        """Fold a bundle's partials (one per (key, pane), sorted) into the table; fire LATE panes."""
        all_codes = np.concatenate([table_codes, bundle_codes])
        all_starts = np.concatenate([table.starts, bundle_starts])
        order = lexsort_ints((all_starts, all_codes))
        all_codes, all_starts = all_codes[order], all_starts[order]
        first = run_starts(all_codes, all_starts)
        acc = self.form.reduce_segments([np.concatenate([a, b])[order] for a, b in zip(table.acc, bundle_acc)]
                                        if len(table) else [b[order] for b in bundle_acc], first)
        first_wm = np.concatenate([table.first_watermark, np.full(len(bundle_codes), watermark, dtype=np.int64)])
        merged_codes = all_codes[first]
        result = PaneTable(uniques[merged_codes], all_starts[first], acc,
                           np.minimum.reduceat(first_wm[order], first), table.watermark, table.late_panes)
        # LATE panes: windows over the bundle's panes whose end is reached and that have not expired.
        lo, hi = self.layout.end_range(bundle_starts)
        late_lo = np.maximum(lo, self.layout.first_end_after(latest_max_timestamp_expired(watermark, self.lateness)))
        late_hi = np.minimum(hi, self.layout.last_end_up_to(latest_max_timestamp_reached(watermark)))
        late = self._windows(bundle_codes, bundle_starts, late_lo, late_hi)
        if len(late.ends):
            self._fire_late(result, merged_codes, late, bundle_acc, uniques, watermark, out)
        return result

    def _fire_late(self, table: PaneTable, table_codes: np.ndarray, late: _Windows, bundle_acc: list,
                   uniques: np.ndarray, watermark: int, out: Panes) -> None:
        lo = lex_searchsorted(table_codes, table.starts, late.codes, late.starts)
        hi = lex_searchsorted(table_codes, table.starts, late.codes, late.ends)
        in_table = _Windows(late.codes, late.starts, late.ends, lo, hi)
        values = self._values(bundle_acc, late, uniques) if self.discarding else self._values(table.acc, in_table,
                                                                                                uniques)
        first_data = range_reduce(np.minimum, table.first_watermark, lo, hi)
        fired_on_time = ~is_end_reached(late.ends - 1, first_data)
        keys = uniques[late.codes]
        # (after the end, not held: LATE; its index counts the panes before it, the ON_TIME one among them)
        timing = TIMING_VALUES[timing_code(late.ends - 1, watermark, fired_on_time, False)]
        index = fired_on_time.astype(np.int64)
        counts = table.late_panes
        for i, (key, end) in enumerate(zip(keys.tolist(), late.ends.tolist())):
            before = counts.get((key, end), 0)
            index[i] += before
            counts[(key, end)] = before + 1
        out.add(keys, late.starts, late.ends, values, timing, index, np.zeros(len(index), dtype=bool))
