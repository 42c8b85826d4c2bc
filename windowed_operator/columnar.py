"""The columnar path: all windows of many keys as arrays, for Beam's default trigger.

Most windowed aggregations use the default trigger: one ON_TIME pane when the watermark passes the
end of the window, then one LATE pane per bundle of late elements within allowed lateness.  For
that trigger no window needs trigger state or timers, so a whole key group's windows can live in a
few arrays (key, start, end, accumulator, pane index, fired) and a micro-batch is a handful of array
operations for all keys at once, instead of Python objects per window.  The rules are the core's
(``tests/test_columnar.py`` runs this path against ``WindowedCore`` on random streams); this module
only restates them for arrays, for this one trigger:

- watermark step: a window not fired yet whose end has passed fires ON_TIME (its last pane if it
  also expires now); windows past ``end - 1 + allowed_lateness`` are dropped from state;
- elements: an element whose every window has expired is dropped (EXPIRED); the others are folded
  into their windows; a window whose end has already passed fires a LATE pane per bundle.

Accumulations take part through ``ColumnarForm`` (sum, count, min, max, mean); the modes are
discarding and accumulating (retracting mode keeps the object path).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from accumulations.base import Accumulation
from accumulations.numeric import Count, Max, Mean, Min, Sum
from triggers.option import TriggerOption

from .panes import DropReason, DroppedElement, Timing
from .time import MAX_TIMESTAMP
from .windows.base import WindowOption


@dataclass(frozen=True)
class ColumnarForm:
    """An accumulation as arrays: ``columns`` accumulator columns, combined with ``combine``."""

    kind: str  # "sum", "count", "min", "max", "mean"

    def partials(self, values: Optional[np.ndarray], first: np.ndarray, n: int) -> list[np.ndarray]:
        counts = np.diff(np.append(first, n))
        if self.kind == "count":
            return [counts.astype(np.int64)]
        assert values is not None
        if self.kind == "sum":
            return [np.add.reduceat(values, first)]
        if self.kind == "min":
            return [np.minimum.reduceat(values, first)]
        if self.kind == "max":
            return [np.maximum.reduceat(values, first)]
        return [np.add.reduceat(values, first), counts.astype(np.int64)]

    def combine(self, a: list[np.ndarray], b: list[np.ndarray]) -> list[np.ndarray]:
        if self.kind == "min":
            return [np.minimum(a[0], b[0])]
        if self.kind == "max":
            return [np.maximum(a[0], b[0])]
        return [x + y for x, y in zip(a, b)]

    def reduce_segments(self, cols: list[np.ndarray], first: np.ndarray) -> list[np.ndarray]:
        if self.kind == "min":
            return [np.minimum.reduceat(cols[0], first)]
        if self.kind == "max":
            return [np.maximum.reduceat(cols[0], first)]
        return [np.add.reduceat(c, first) for c in cols]

    def outputs(self, cols: list[np.ndarray]) -> list:
        if self.kind == "mean":
            return [s / c for s, c in zip(cols[0].tolist(), cols[1].tolist())]
        return cols[0].tolist()


def columnar_form(accumulation: Accumulation) -> Optional[ColumnarForm]:
    for cls, kind in ((Sum, "sum"), (Count, "count"), (Min, "min"), (Max, "max"), (Mean, "mean")):
        if type(accumulation) is cls:
            return ColumnarForm(kind)
    return None


def supports_columnar(window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                      timestamp_combiner: Any) -> bool:
    from .panes import TimestampCombiner

    form = columnar_form(accumulation)
    return (window.kind == "assigned" and trigger.kind == "default" and not trigger.retracting
            and not trigger.only_updated_panes and form is not None
            and not (trigger.discarding and form.kind in ("min", "max"))  # no neutral element to reset to
            and timestamp_combiner == TimestampCombiner.END_OF_WINDOW)


@dataclass
class WindowTable:
    """Every open window of a key group: one row per (key, window)."""

    keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=object))
    starts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    acc: list = field(default_factory=list)  # accumulator columns
    pane_index: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    fired: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, mask: np.ndarray) -> "WindowTable":
        return WindowTable(self.keys[mask], self.starts[mask], self.ends[mask], [c[mask] for c in self.acc],
                           self.pane_index[mask], self.fired[mask])


@dataclass
class Panes:
    """Output rows as columns (what the Spark processor turns into one DataFrame)."""

    keys: list = field(default_factory=list)
    starts: list = field(default_factory=list)
    ends: list = field(default_factory=list)
    values: list = field(default_factory=list)
    timing: list = field(default_factory=list)
    pane_index: list = field(default_factory=list)
    is_first: list = field(default_factory=list)
    is_last: list = field(default_factory=list)

    def add(self, table: WindowTable, mask: np.ndarray, values: list, timing: Timing, is_last: np.ndarray) -> None:
        idx = np.flatnonzero(mask)
        self.keys += table.keys[idx].tolist()
        self.starts += table.starts[idx].tolist()
        self.ends += table.ends[idx].tolist()
        self.values += values
        self.timing += [timing.value] * len(idx)
        panes = table.pane_index[idx]
        self.pane_index += panes.tolist()
        self.is_first += (panes == 0).tolist()
        self.is_last += is_last.tolist()

    def __len__(self) -> int:
        return len(self.starts)


class ColumnarCore:
    def __init__(self, window: WindowOption, accumulation: Accumulation, trigger: TriggerOption,
                 allowed_lateness: int) -> None:
        form = columnar_form(accumulation)
        assert form is not None
        self.window = window
        self.form = form
        self.discarding = trigger.discarding
        self.lateness = allowed_lateness
        self.identity = {"sum": [0], "count": [0], "mean": [0, 0]}.get(form.kind)

    def _reset(self, table: WindowTable, mask: np.ndarray) -> None:
        """Discarding mode: a fired window starts empty again."""
        for col, zero in zip(table.acc, self.identity or []):
            col[mask] = zero

    def _fire(self, table: WindowTable, mask: np.ndarray, timing: Timing, is_last: np.ndarray, out: Panes) -> None:
        values = self.form.outputs([c[mask] for c in table.acc])
        out.add(table, mask, values, timing, is_last)
        table.pane_index[mask] += 1
        table.fired[mask] = True
        if self.discarding:
            self._reset(table, mask)

    def next_event_time(self, table: WindowTable) -> Optional[int]:
        """When the group next has something to do: an ON_TIME pane or an expiry."""
        if not len(table):
            return None
        due = np.where(table.fired, table.ends - 1 + self.lateness, table.ends - 1)
        return int(due.min())

    def on_watermark(self, table: WindowTable, watermark: int, out: Panes) -> WindowTable:
        if not len(table):
            return table
        ended = watermark >= MAX_TIMESTAMP
        expired = ended | (watermark >= table.ends - 1 + self.lateness)
        due = ~table.fired & (watermark >= table.ends - 1)
        if due.any():
            self._fire(table, due, Timing.ON_TIME, expired[due], out)
        return table.take(~expired) if expired.any() else table

    def process(self, table: WindowTable, keys: np.ndarray, timestamps: np.ndarray, values: Optional[np.ndarray],
                watermark: int, out: Panes, dropped: list, element_of: Callable[[int], Any]) -> WindowTable:
        """One batch of a key group (``keys``, ``timestamps``, ``values`` aligned), in the core's order."""
        table = self.on_watermark(table, watermark, out)
        n = len(timestamps)
        if n == 0:
            return table
        starts, ends, index = self.window.assign_array(timestamps)
        live = (watermark < MAX_TIMESTAMP) & (watermark < ends - 1 + self.lateness)
        accepted = np.zeros(n, dtype=bool)
        accepted[index[live]] = True
        for i in np.flatnonzero(~accepted).tolist():
            dropped.append(DroppedElement(DropReason.EXPIRED, element_of(i), keys[i], int(timestamps[i]), watermark))
        starts, ends, index = starts[live], ends[live], index[live]
        if not len(index):
            return table
        # Batch partials per (key, window): sort pairs by key then window.
        pair_keys = keys[index]
        codes, uniques = _codes(np.concatenate([table.keys, pair_keys]))
        table_codes, pair_codes = codes[:len(table)], codes[len(table):]
        order = np.lexsort((ends, starts, pair_codes))
        pair_codes, starts, ends, index = pair_codes[order], starts[order], ends[order], index[order]
        change = (np.diff(pair_codes) != 0) | (np.diff(starts) != 0) | (np.diff(ends) != 0)
        first = np.concatenate(([0], np.flatnonzero(change) + 1))
        pair_values = values[index] if values is not None else None
        partial = self.form.partials(pair_values, first, len(index))
        batch = WindowTable(uniques[pair_codes[first]], starts[first], ends[first], partial,
                            np.zeros(len(first), dtype=np.int64), np.zeros(len(first), dtype=bool))
        batch_codes = pair_codes[first]
        # Merge with the open windows: stack both, sort, and combine equal (key, window) rows.
        merged_codes = np.concatenate([table_codes, batch_codes])
        all_starts = np.concatenate([table.starts, batch.starts])
        all_ends = np.concatenate([table.ends, batch.ends])
        from_batch = np.concatenate([np.zeros(len(table), dtype=bool), np.ones(len(batch), dtype=bool)])
        order = np.lexsort((from_batch, all_ends, all_starts, merged_codes))
        merged_codes, all_starts, all_ends = merged_codes[order], all_starts[order], all_ends[order]
        change = (np.diff(merged_codes) != 0) | (np.diff(all_starts) != 0) | (np.diff(all_ends) != 0)
        first = np.concatenate(([0], np.flatnonzero(change) + 1))
        acc = self.form.reduce_segments([np.concatenate([a, b])[order] for a, b in zip(table.acc, batch.acc)]
                                        if len(table) else [b[order] for b in batch.acc], first)
        pane_index = np.maximum.reduceat(np.concatenate([table.pane_index, batch.pane_index])[order], first)
        fired = np.logical_or.reduceat(np.concatenate([table.fired, batch.fired])[order], first)
        touched = np.logical_or.reduceat(from_batch[order], first)
        result = WindowTable(uniques[merged_codes[first]], all_starts[first], all_ends[first], acc, pane_index,
                             fired)
        late = touched & (watermark >= result.ends - 1)
        if late.any():  # the default trigger fires every late bundle at once (never the last pane here)
            self._fire(result, late, Timing.LATE, np.zeros(int(late.sum()), dtype=bool), out)
        return result


def _codes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of keys (any hashable), and the key of each code."""
    index: dict = {}
    codes = np.fromiter((index.setdefault(k, len(index)) for k in keys.tolist()), dtype=np.int64, count=len(keys))
    uniques = np.empty(len(index), dtype=object)
    uniques[:] = list(index)
    return codes, uniques
