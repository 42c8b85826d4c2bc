"""The window log: the object path's (key, window) accumulators stored by window, not by key, where
no element needs the state it joins.

The per-key layout reads and writes the record of every key a batch touches and of every key due:
on Spark, requests to the JVM's state server whose number follows the keys.  Nexmark's q8 (a
windowed join of persons and auctions, nearly every person a new key) spent its operator time
there.  Under the default trigger with no allowed lateness an element never needs what is stored
(as for the pane log, ``pane_log``): it is dropped if all its windows have expired, and otherwise
only added to them; no window fires on an element, since a window whose end is reached has
expired.  So a batch's elements are run by the core on *empty* key states, and what they leave,
one accumulator per (key, window) with its element count and holds, is appended to the window's
bucket of the part log (``part_log``) without reading anything.  A window's bucket is its expiry
due time: a watermark step reads the buckets due, folds each (key, window)'s accumulators in the
order they were written (``Accumulation.merge``) and fires each window's one pane through the
core's emitter (``firing.PaneEmitter``): every window read is one the watermark expires, and the
trigger fires each window once, ON_TIME, at its end (``TriggerOption.fires_once_at_end``).  The
elements are added by the core's rules (``process_batch`` on empty key states, or their array
form); the pane is the emitter's; this module only decides where the accumulators wait.

Serves windows assigned by timestamp (tumbling, hopping, cumulative, global) on the object and
array paths, for any accumulation whose ``merge`` agrees with ``accumulate`` (as Beam requires of a
CombineFn).  A checkpoint written per key moves to it once, and back (``window_log_migration``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

import numpy as np

from accumulations.merge import SidedAccumulation

from ..engine.core import Emission, WindowedCore
from ..engine.key_state import KeyState, WindowState
from ..engine.range_ops import lexsort_ints
from ..engine.vectorized import segment_holds
from ..panes import DropReason, DroppedElement, TimestampCombiner
from ..time import MIN_TIMESTAMP
from ..time_rules import is_timer_due
from ..windows.base import Window
from .codec import KeyStateCodec
from .group_batch import StoreResult, KeyEngine, StoreBatch, Work
from .layouts import WINDOW_LOG
from .part_log import Held, PartStore, held_buckets, run_part_log
from .record_columns import decode_sided, encode_sided
from .records import _decoded, _encoded

#: The store's part domain (beside the due index's "event"/"processing" and the pane log's "panes"), and its field
#: of the group's record (``layouts.WINDOW_LOG``).
DOMAIN, META = WINDOW_LOG.domain, WINDOW_LOG.meta_key
#: A part's accumulators: each in the state codec's tagged form, or (joins, cogroups) their inputs by column.
ACCS, SIDED_ACCS = "a", "x"
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


@dataclass
class Partial:
    """One (key, window)'s elements folded: what a key state's window holds before it fires."""

    acc: Any
    count: int
    earliest: Optional[int] = None
    latest: Optional[int] = None

    @classmethod
    def of(cls, ws: WindowState) -> "Partial":
        """What a window of a key state holds since its last pane."""
        return cls(ws.acc, ws.pending, ws.pane_min_ts, ws.pane_max_ts)

    def state(self, accumulation: Any) -> WindowState:
        """A window holding this partial since its last pane (``of``'s inverse)."""
        return WindowState(acc=accumulation.merge(accumulation.default_accumulated_value(), self.acc),
                           pending=self.count, pane_min_ts=self.earliest, pane_max_ts=self.latest)


@dataclass
class WindowRows:
    """(key, window) -> its partial, in the order the partials were written; ``watermark``: the
    watermark they were read at (the group's last)."""

    partials: dict[tuple[Hashable, Window], Partial] = field(default_factory=dict)
    watermark: int = MIN_TIMESTAMP

    def __len__(self) -> int:
        return len(self.partials)


@dataclass
class ArrayElements:
    """A batch's elements of every key as arrays, for the window log's batch step in one pass.

    ``codes[i]`` indexes element i's key in ``keys``, codes numbered in order of the keys' first
    arrival (as ``range_ops.factorize`` numbers them); ``values`` is what the accumulation's
    ``fold_segments`` folds (None for an accumulation reading nothing, such as Count);
    ``element_of(i)`` rebuilds element i, only for a dropped one."""

    keys: list
    codes: np.ndarray
    timestamps: np.ndarray
    values: Any
    element_of: Callable[[int], Any]

    def __len__(self) -> int:
        return len(self.timestamps)


class WindowLog:
    """A ``part_log.PartLog`` whose buckets are the windows' expiry due times."""

    layout = WINDOW_LOG.name
    domain = DOMAIN
    meta_key = META

    def __init__(self, core: WindowedCore, codec: Optional[KeyStateCodec] = None,
                 store: Optional[PartStore] = None) -> None:
        self.core, self.store = core, store
        self.accumulation = core.accumulation
        self.codec = codec or KeyStateCodec()
        #: Holds matter only to the EARLIEST/LATEST combiners: the others store none.
        self.keeps_holds = core.emitter.combiner != TimestampCombiner.END_OF_WINDOW
        #: A join's or cogroup's accumulators are its inputs, stored by column (``record_columns``).
        self.keeps_inputs = keeps_inputs(self.accumulation)

    @classmethod
    def opened(cls, stores: Any) -> "WindowLog":
        return cls(stores.core, stores.codec, stores.store)

    def run_batch(self, batch: StoreBatch, engine: KeyEngine) -> StoreResult:
        """The panes of the windows the watermark expires (read from their buckets; after the panes
        moving the group in released), then the batch's elements appended (``engine.arrays`` first,
        then its work).  Updates the group's record (the caller saves it)."""
        assert self.store is not None
        fired, added = batch.moved.released, Emission()
        watermark = batch.watermark

        def run(rows: WindowRows) -> WindowRows:
            left, panes = self.fire(rows, watermark)
            fired.extend(panes)
            if engine.arrays is not None:
                added.extend(self.add_arrays(left, engine.arrays, watermark))
            added.extend(self.add(left, engine.batch.work))
            return left

        meta = batch.group.meta
        due = run_part_log(self, self.store, meta, watermark, run)
        return StoreResult((fired, Emission(), added), due, bool(held_buckets(self, meta)))

    # -- buckets ----------------------------------------------------------------------------------
    def bucket(self, window: Window) -> int:
        return self.core.expiry_due(window)

    def due_buckets(self, held: dict[int, Held], last_watermark: int, watermark: int) -> list[int]:
        return sorted(bucket for bucket in held if is_timer_due(bucket, watermark))

    def next_due(self, held: dict[int, Held], watermark: int) -> Optional[int]:
        return min(held) if held else None

    # -- partials ---------------------------------------------------------------------------------
    def fold(self, rows: WindowRows, key: Hashable, window: Window, partial: Partial) -> None:
        """Add a later partial of (key, window) to ``rows``."""
        held = rows.partials.get((key, window))
        if held is None:
            rows.partials[(key, window)] = partial
            return
        held.acc = self.accumulation.merge(held.acc, partial.acc)
        held.count += partial.count
        held.earliest = _extreme(min, held.earliest, partial.earliest)
        held.latest = _extreme(max, held.latest, partial.latest)

    def add(self, rows: WindowRows, work: Work) -> Emission:
        """Run the batch's work (each key's elements; each closure carries the batch's watermark and
        processing time) on empty key states and fold what the windows got into ``rows``; returns
        the drops (no pane fires on elements here)."""
        states: dict[Hashable, KeyState] = {}
        emission = Emission()
        for key, run in work:
            state = states.get(key)
            if state is None:
                state = states[key] = KeyState()
            emission.extend(run(key, state))
        if emission.outputs:
            raise RuntimeError(f"{self.core.emitter.label}: a pane fired on elements, which the window log's "
                               "trigger never does (its panes fire at the end of the window)")
        for key, state in states.items():
            for window, ws in state.windows.items():
                if ws.pending:
                    self.fold(rows, key, window, Partial.of(ws))
        return emission

    def add_arrays(self, rows: WindowRows, elements: ArrayElements, watermark: int) -> Emission:
        """``add`` for every key's elements at once, as arrays: what the core does per key on empty
        states (``vectorized.process_arrays``), in one sort and one fold for the whole batch, since a
        key's state here never holds anything the elements could meet.

        Each (key, window) folds its elements in time order (ties in arrival order), as each key's
        elements reach the core; an element whose windows have all expired is dropped, reported
        key by key in order of first arrival and in time order within a key."""
        emission = Emission()
        n = len(elements)
        if n == 0:
            return emission
        core = self.core
        timestamps, element_codes = elements.timestamps, elements.codes
        starts, ends, index = core.window_option.assign_array(timestamps)
        order = lexsort_ints((index, timestamps[index], ends, starts, element_codes[index]))
        starts, ends, index = starts[order], ends[order], index[order]
        codes = element_codes[index]
        changes = (np.diff(codes) != 0) | (np.diff(starts) != 0) | (np.diff(ends) != 0)
        first = np.concatenate(([0], np.flatnonzero(changes) + 1))
        counts = np.diff(np.append(first, len(index)))
        segment_windows = [Window(start, end) for start, end in zip(starts[first].tolist(), ends[first].tolist())]
        expired = {window: core.is_expired(window, watermark) for window in set(segment_windows)}
        live = np.fromiter((not expired[window] for window in segment_windows), dtype=bool,
                           count=len(segment_windows))
        live_pairs = np.repeat(live, counts)
        accepted = np.zeros(n, dtype=bool)
        accepted[index[live_pairs]] = True
        dropped = np.flatnonzero(~accepted)
        if len(dropped):
            dropped = dropped[lexsort_ints((dropped, timestamps[dropped], element_codes[dropped]))]
            for i in dropped.tolist():
                emission.dropped.append(DroppedElement(DropReason.EXPIRED, elements.element_of(i),
                                                       elements.keys[int(element_codes[i])], int(timestamps[i]),
                                                       watermark))
        if not live.any():
            return emission
        index = index[live_pairs]
        counts = counts[live]
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        earliest, latest = segment_holds(timestamps[index], first, watermark)
        values = elements.values[index] if elements.values is not None else index
        partials = self.accumulation.fold_segments(values, first)
        keys = elements.keys
        segment_keys = element_codes[index[first]].tolist()
        live_windows = [window for window, alive in zip(segment_windows, live.tolist()) if alive]
        for j, (code, window, count) in enumerate(zip(segment_keys, live_windows, counts.tolist())):
            self.fold(rows, keys[code], window, Partial(partials[j], count, earliest[j], latest[j]))
        return emission

    def fire(self, rows: WindowRows, watermark: int) -> tuple[WindowRows, Emission]:
        """The panes of the loaded partials, and the partials left: none, for every window read is one
        the watermark expires (its bucket is its expiry due time).  The log serves only triggers that
        fire each window once, ON_TIME, as the watermark passes its end (``fires_once_at_end``), where
        no allowed lateness makes the end-of-window timer and the expiry due at the same watermark:
        so each window's one pane is the emitter's, finished, its end-of-window timer holding until
        it fires, as the core's watermark step gives it (key by key in the order the partials were
        read, each key's windows in event-time order)."""
        emission = Emission()
        core, emit = self.core, self.core.emitter.emit
        by_key: dict[Hashable, list[tuple[Window, Partial]]] = {}
        for (key, window), partial in rows.partials.items():
            if not core.is_expired(window, watermark):
                raise RuntimeError(f"{core.emitter.label}: the window log read window {window} of key {key!r}, "
                                   f"which the watermark {watermark} does not expire")
            by_key.setdefault(key, []).append((window, partial))
        for key, windows in by_key.items():
            if len(windows) > 1:
                windows.sort(key=lambda item: (item[0].end, item[0].start))
            for window, partial in windows:
                emission.outputs.extend(emit(key, window, partial.state(self.accumulation), watermark, finished=True,
                                             timer_hold=True))
        return WindowRows(watermark=watermark), emission

    # -- parts <-> rows ---------------------------------------------------------------------------
    def build(self, bucket_parts: list[tuple[int, str]], watermark: int) -> WindowRows:
        rows = WindowRows(watermark=watermark)
        if not bucket_parts:
            return rows
        read = self.codec.read_value
        for part in json.loads(f"[{','.join(text for _, text in bucket_parts)}]"):
            keys, accs = _decoded(read, part["k"]), part_accs(read, part)
            holds = part.get("h") or [None] * len(keys)
            for key, start, end, acc, count, hold in zip(keys, part["s"], part["e"], accs, part["n"], holds):
                earliest, latest = hold if hold is not None else (None, None)
                self.fold(rows, key, Window(start, end), Partial(acc, count, earliest, latest))
        return rows

    def texts_by_bucket(self, rows: WindowRows) -> dict[int, tuple[str, int]]:
        """Each bucket's windows as one part's text (a bucket's least is the bucket: its due time)."""
        by_bucket: dict[int, list[tuple[Hashable, Window, Partial]]] = {}
        for (key, window), partial in rows.partials.items():
            by_bucket.setdefault(self.bucket(window), []).append((key, window, partial))
        return {bucket: (self.part_text(items), bucket) for bucket, items in by_bucket.items()}

    def text_of(self, rows: WindowRows, bucket: int) -> tuple[str, int]:
        """The rows as one part's text of ``bucket`` (its parts folded)."""
        return self.part_text([(key, window, partial) for (key, window), partial in rows.partials.items()]), bucket

    def part_text(self, items: list[tuple[Hashable, Window, Partial]]) -> str:
        encode = self.codec.value
        part: dict[str, Any] = {
            "k": _encoded(encode, [key for key, _, _ in items]),
            "s": [window.start for _, window, _ in items], "e": [window.end for _, window, _ in items],
            "n": [p.count for _, _, p in items]}
        accs = [p.acc for _, _, p in items]
        if self.keeps_inputs:
            part[SIDED_ACCS] = encode_sided(encode, accs)
        else:
            part[ACCS] = _encoded(encode, accs)
        if self.keeps_holds:
            part["h"] = [[p.earliest, p.latest] if p.earliest is not None else None for _, _, p in items]
        return _encode(part)


def keeps_inputs(accumulation: Any) -> bool:
    """A merge's accumulation whose accumulators are each its window's (left inputs, right inputs)
    (joins and cogroups: ``folds_sided_arrays``)."""
    return isinstance(accumulation, SidedAccumulation) and accumulation.inner.folds_sided_arrays()


def part_accs(read: Callable[[Any], Any], part: dict) -> list:
    """A stored part's accumulators: by value, or, a join's and a cogroup's, their inputs by column
    (the form of state version 8; version 7 stored every accumulator by value)."""
    if SIDED_ACCS in part:
        return decode_sided(read, part[SIDED_ACCS])
    return _decoded(read, part[ACCS])


def _extreme(pick: Any, a: Optional[int], b: Optional[int]) -> Optional[int]:
    return b if a is None else a if b is None else pick(a, b)


