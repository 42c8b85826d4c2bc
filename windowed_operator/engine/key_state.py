"""Per-key operator state: plain data, which the state codec writes as one JSON record per key
(``state.codec``; nothing is pickled since state version 6).

One coalesced state value per key was measured 10x faster than an entry per window (docs/
contributing/measured-design.md, "What Spark's stateful API gives and costs"), so everything a key needs (its windows, their trigger state and timers, and the element
buffer of per-record sliding windows) lives in one ``KeyState``.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ..windows.base import Window


@dataclass(slots=True)
class WindowState:
    """One window of a key: its accumulator, trigger state and timers, its pane indexes, the
    elements pending since the last pane and their timestamp holds, and whether it fired or closed."""

    acc: Any
    trigger_state: dict = field(default_factory=dict)
    #: ``"<trigger path>@<domain>" -> time``; set by triggers through their context.
    timers: dict = field(default_factory=dict)
    pane_index: int = 0
    nonspeculative_index: int = 0
    fired: bool = False
    last_output: Any = None
    last_timestamp: int = 0
    #: The trigger finished: later elements of this window are dropped until the window expires.
    closed: bool = False
    #: Elements accumulated since the last pane (an empty pane has none).
    pending: int = 0
    #: Earliest/latest timestamp of the pane's elements that arrived at or after the watermark: what
    #: the EARLIEST/LATEST timestamp combiners output (Beam's element holds; later ones hold nothing).
    pane_min_ts: Optional[int] = None
    pane_max_ts: Optional[int] = None
    #: The window's END_OF_WINDOW element hold is set: an element since its last pane arrived before
    #: its end (``time_rules.sets_element_hold`` at its max timestamp; every pane releases it).
    #: Under EARLIEST/LATEST the element holds are ``pane_min_ts``/``pane_max_ts`` instead.
    #: (State version 8 and before kept the flag across EARLY panes: ``state_codec`` reads it so.)
    on_time_hold: bool = False

    def has_element_hold(self, end_of_window: bool) -> bool:
        """Whether an element hold is set: the END_OF_WINDOW one, or (EARLIEST/LATEST) a held timestamp."""
        return self.on_time_hold if end_of_window else self.pane_min_ts is not None

    def add_pending(self, count: int) -> None:
        self.pending += count

    def hold(self, ts: Optional[int]) -> None:
        """Let ``ts`` count for the pane's EARLIEST/LATEST timestamp (None: nothing to hold)."""
        if ts is None:
            return
        self.pane_min_ts = ts if self.pane_min_ts is None else min(self.pane_min_ts, ts)
        self.pane_max_ts = ts if self.pane_max_ts is None else max(self.pane_max_ts, ts)

    def absorb(self, other: "WindowState", merge: Any) -> None:
        """Take in the state of a session merged into this one: its accumulator (``merge``), its
        unfired elements and its holds."""
        self.acc = merge(self.acc, other.acc)
        self.pending += other.pending
        self.hold(other.pane_min_ts)
        self.hold(other.pane_max_ts)
        self.on_time_hold = self.on_time_hold or other.on_time_hold

    def timer_times(self, domain: str) -> list[int]:
        suffix = "@" + domain
        return [t for k, t in self.timers.items() if k.endswith(suffix)]


@dataclass(slots=True)
class ElementBuffer:
    """Partial aggregates per element timestamp, for per-record sliding windows (sorted by timestamp)."""

    times: list[int] = field(default_factory=list)
    partials: dict[int, Any] = field(default_factory=dict)

    def add(self, ts: int, partial: Any) -> None:
        if ts not in self.partials:
            insort(self.times, ts)
        self.partials[ts] = partial

    def get(self, ts: int, default: Any) -> Any:
        return self.partials.get(ts, default)

    def in_range(self, lo: int, hi: int) -> Iterator[tuple[int, Any]]:
        """Entries with ``lo <= ts <= hi`` in timestamp order."""
        for ts in self.times[bisect_left(self.times, lo):bisect_right(self.times, hi)]:
            yield ts, self.partials[ts]

    def time_range(self, lo: int, hi: int) -> tuple[int, ...]:
        """The first and last timestamps held in ``[lo, hi]`` (empty if none)."""
        first, last = bisect_left(self.times, lo), bisect_right(self.times, hi)
        return (self.times[first], self.times[last - 1]) if first < last else ()

    def purge_up_to(self, ts: int) -> None:
        """Forget entries with timestamp ``<= ts``."""
        cut = bisect_right(self.times, ts)
        for old in self.times[:cut]:
            del self.partials[old]
        del self.times[:cut]

    def __len__(self) -> int:
        return len(self.times)


@dataclass(slots=True)
class SlidingAggregate:
    """FIFO aggregation with two stacks: the aggregate of the elements in a range that slides
    forward, in amortized O(1) merges per element and without an inverse (so for any accumulation).

    ``back`` holds the newest entries and their running aggregate; ``front`` the oldest, each with
    the aggregate of itself and every newer front entry (``front[-1]`` is the oldest).  Evicting
    pops ``front``; when it is empty, ``back`` is flipped into it once.  Entries stay in time order,
    so order-sensitive merges (ToList) are right.  Only valid while elements arrive in time order;
    the core rebuilds it from the element buffer after an out-of-order element.
    """

    front: list = field(default_factory=list)
    back: list = field(default_factory=list)
    back_agg: Any = None
    valid: bool = True

    def push(self, ts: int, partial: Any, merge: Any) -> None:
        self.back.append((ts, partial))
        self.back_agg = partial if len(self.back) == 1 else merge(self.back_agg, partial)

    def evict_before(self, lo: int, merge: Any) -> None:
        while True:
            if not self.front:
                if not self.back or self.back[0][0] >= lo:
                    return
                agg = None
                for ts, partial in reversed(self.back):
                    agg = partial if agg is None else merge(partial, agg)
                    self.front.append((ts, agg))
                self.back.clear()
                self.back_agg = None
            if self.front[-1][0] >= lo:
                return
            self.front.pop()

    def query(self, merge: Any) -> Any:
        """The aggregate of the entries held, or None."""
        if self.front and self.back:
            return merge(self.front[-1][1], self.back_agg)
        if self.front:
            return self.front[-1][1]
        return self.back_agg if self.back else None

    def reset(self) -> None:
        self.front.clear()
        self.back.clear()
        self.back_agg = None
        self.valid = True


@dataclass(slots=True)
class KeyState:
    """One key's state in the object engine: its windows (each a ``WindowState``: accumulator,
    trigger state, timers, pane bookkeeping), the elements buffered for per-record sliding windows
    and their running aggregate.  Plain data, kept between batches by the runner (the local runner
    in memory, the Spark runner as a JSON record per key: ``state.codec``)."""

    windows: dict[Window, WindowState] = field(default_factory=dict)
    buffer: ElementBuffer = field(default_factory=ElementBuffer)
    #: Per-record sliding windows: the element timestamps that have a live window (sorted), and the
    #: running aggregate of the newest element's range.
    window_times: list[int] = field(default_factory=list)
    sliding: SlidingAggregate = field(default_factory=SlidingAggregate)

    def is_empty(self) -> bool:
        return not self.windows and not len(self.buffer)
