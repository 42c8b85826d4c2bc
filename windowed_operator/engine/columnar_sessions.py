"""Session windows as arrays: the columnar path for merging windows under early/late firings.

A key group's sessions are one table, one row per session, sorted by key, start and end: bounds,
accumulator columns, the pane bookkeeping of ``WindowState`` (``columnar_panes``) and the
trigger's state (``columnar_triggers``: Beam's default trigger, or early/late firings every N
elements or D ms of processing time).  A micro-batch is then a few array operations for all keys at once instead of Python
objects per session, in the order of ``WindowedCore.run_batch``:

1. the watermark step (``TriggeredRows.on_watermark``): sessions whose end-of-window timer is due
   fire; expired sessions are purged, those with unfired elements firing a last pane first;
   then firings due by processing time (``TriggeredRows.on_processing_time``);
2. the bundle: each element makes a proto-session ``[ts, ts + gap)`` (the window's gap, or the
   element's, read from a column: ``session_windows.read_gaps``); those already expired are
   dropped; the bundle's proto-sessions and the key's active sessions are merged all at once (Beam's
   bundle-level merge, ``SessionWindows.merge_windows``: sorted by key and start, a row starts a new
   session unless it starts before the running end; touching sessions do not merge; a session whose
   trigger finished merges with nothing).  A merge group holding one session with the group's
   bounds keeps that session's state; proto-sessions with one set of bounds make a new session; any
   other group becomes a new session with its members' merged state (pane count restarting, each
   absorbed session that fired retracted in retracting mode, the trigger's phase and count merged as
   ``AfterWatermark.on_merge`` does); a group with the bounds of a finished session merges nothing
   and its elements are dropped as arriving in a closed window.  Every element folds into its
   group's session, and each session the bundle touched is asked once whether to fire.

``tests/test_columnar_sessions.py`` runs this path against ``WindowedCore`` on random streams with
watermarks at session boundaries.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from accumulations.base import Accumulation
from triggers.option import TriggerOption

from ..panes import DropReason, DroppedElement
from ..time_rules import is_end_reached, is_expired, sets_element_hold
from ..windows.session_windows import SessionWindows
from .columnar import Panes
from .columnar_triggers import NOT_SET, RowTable, TriggeredRows, supports_triggered_rows
from .range_ops import factorize, lexsort_ints, running_max_by_run


#: A key group's sessions (``columnar_triggers.RowTable``).
SessionTable = RowTable


def supports_columnar_sessions(window: Any, accumulation: Accumulation, trigger: TriggerOption,
                               timestamp_combiner: Any) -> bool:
    """Sessions with a fixed gap or a gap per element read from a column (``process(gaps=)``; a
    callable gap is read element by element), with what every triggered table needs
    (``columnar_triggers.supports_triggered_rows``)."""
    return (isinstance(window, SessionWindows) and (not window.dynamic or isinstance(window.gap, str))
            and supports_triggered_rows(accumulation, trigger, timestamp_combiner))


class ColumnarSessions(TriggeredRows):
    """The session table: session windows as rows (key, start, end, accumulator columns, trigger
    state), merged as elements extend or bridge them, fired by the row trigger (``columnar_triggers``).
    Gives the object engine's panes, merges and retractions included."""

    def __init__(self, window: SessionWindows, accumulation: Accumulation, trigger: TriggerOption,
                 allowed_lateness: int, *, label: str = "operator", column: Optional[str] = None) -> None:
        super().__init__(accumulation, trigger, allowed_lateness, label=label, column=column)
        self.gap = int(window.min_gap) if window.min_gap is not None else None  # (None: each element's)

    # -- a bundle of elements -------------------------------------------------------------------
    def process(self, table: SessionTable, keys: np.ndarray, timestamps: np.ndarray, values: Optional[np.ndarray],
                watermark: int, out: Panes, dropped: list, element_of: Callable[[int], Any],
                gaps: Optional[np.ndarray] = None, *, processing_time: int) -> SessionTable:
        """One batch of a key group (``keys``, ``timestamps``, ``values`` aligned), in the core's order;
        ``gaps``: each element's gap in ms (positive), for sessions whose gap is the element's."""
        table = self.on_processing_time(self.on_watermark(table, watermark, out), processing_time, out)
        if not len(timestamps):
            return table
        timestamps = np.asarray(timestamps, dtype=np.int64)
        assert (gaps is None) != (self.gap is None), "a gap per element exactly when the window has no fixed gap"
        ends = timestamps + (np.asarray(gaps, dtype=np.int64) if gaps is not None else self.gap)  # proto-sessions
        live = ~is_expired(ends - 1, self.lateness, watermark)
        for i in np.flatnonzero(~live).tolist():
            dropped.append(DroppedElement(DropReason.EXPIRED, element_of(i), keys[i], int(timestamps[i]), watermark))
        if not live.any():
            return table
        index = np.flatnonzero(live)
        partials = self.form.from_partials(np.ones(len(index), dtype=np.int64),
                                           [values[live]] * len(self.form.partial_aggregates) if values is not None
                                           else [])
        table, closed = self._merge_bundle(table, keys[live], timestamps[live], ends[live], partials, watermark,
                                           processing_time, out)
        for i in index[closed].tolist():
            dropped.append(DroppedElement(DropReason.CLOSED_WINDOW, element_of(i), keys[i], int(timestamps[i]),
                                          watermark))
        return table

    def process_chains(self, table: SessionTable, keys: np.ndarray, firsts: np.ndarray, lasts: np.ndarray,
                       counts: np.ndarray, aggregates: list[np.ndarray], watermark: int, out: Panes,
                       elements_of: Callable[[int], tuple[np.ndarray, Optional[np.ndarray]]], *,
                       processing_time: int) -> tuple[SessionTable, int]:
        """One batch of a key group folded upstream into chains (``session_chains``: chain ``i`` of key
        ``keys[i]`` has ``counts[i]`` elements from ``firsts[i]`` to ``lasts[i]``, with the form's
        ``partial_aggregates``); ``elements_of(i)``: its elements' times and values, sorted by time,
        asked only of a chain whose first element expired, whose live elements then go one by one.
        Returns the table and how many elements were dropped (expired or in a closed session)."""
        table = self.on_processing_time(self.on_watermark(table, watermark, out), processing_time, out)
        if not len(firsts):
            return table, 0
        assert self.gap is not None, "chains are built under a fixed gap"
        firsts = np.asarray(firsts, dtype=np.int64)
        lasts = np.asarray(lasts, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        whole = ~is_expired(firsts + self.gap - 1, self.lateness, watermark)
        partials = self.form.from_partials(counts, aggregates)
        member_keys, member_firsts, member_ends = [keys[whole]], [firsts[whole]], [lasts[whole] + self.gap]
        member_counts, member_merged = [counts[whole]], [lasts[whole] > firsts[whole]]
        member_partials = [[column[whole]] for column in partials]
        n_dropped = 0
        for i in np.flatnonzero(~whole).tolist():  # (rare: a chain reaching back past the lateness)
            times, values = elements_of(i)
            live = ~is_expired(times + self.gap - 1, self.lateness, watermark)
            n = int(live.sum())
            n_dropped += len(times) - n
            member_keys.append(np.repeat(keys[i:i + 1], n))
            member_firsts.append(times[live])
            member_ends.append(times[live] + self.gap)
            member_counts.append(np.ones(n, dtype=np.int64))
            member_merged.append(np.zeros(n, dtype=bool))
            for column, partial in zip(member_partials,
                                       self.form.from_partials(np.ones(n, dtype=np.int64),
                                                               [values[live]] * len(self.form.partial_aggregates)
                                                               if values is not None else [])):
                column.append(partial)
        weights = np.concatenate(member_counts)
        if not len(weights):
            return table, n_dropped
        table, closed = self._merge_bundle(table, np.concatenate(member_keys), np.concatenate(member_firsts),
                                           np.concatenate(member_ends), [np.concatenate(c) for c in member_partials],
                                           watermark, processing_time, out, weights=weights,
                                           merged_members=np.concatenate(member_merged))
        return table, n_dropped + int(weights[closed].sum())

    def _merge_bundle(self, table: SessionTable, keys: np.ndarray, timestamps: np.ndarray, proto_ends: np.ndarray,
                      partials: list, watermark: int, processing_time: int, out: Panes,
                      weights: Optional[np.ndarray] = None,
                      merged_members: Optional[np.ndarray] = None) -> tuple[SessionTable, np.ndarray]:
        """Beam's bundle-level merge of the bundle's proto-sessions with the key's active sessions
        (``window_families.add_to_sessions``); returns the table and which elements were dropped as
        arriving in a closed session.  A proto-session may stand for a chain of elements
        (``process_chains``): ``weights`` its element count, ``merged_members`` whether it is itself a
        merge (its elements' times differ)."""
        closed = table.take(table.closed)
        table = table.take(~table.closed)  # (finished sessions merge with nothing)
        n_rows, n_elements = len(table), len(timestamps)
        if weights is None:
            weights = np.ones(n_elements, dtype=np.int64)
        codes, uniques = factorize(np.concatenate([table.keys, keys, closed.keys]))
        groups = _merge_groups(table, codes[:n_rows + n_elements], timestamps, proto_ends, merged_members)
        dropped, unchanged = groups.drop_blocked(closed, codes[n_rows + n_elements:], n_elements)
        if not groups.n_groups:
            return RowTable.concat([table.take(unchanged), closed], table.watermark), dropped
        return RowTable.concat([self._fold_groups(table, groups, uniques, weights, partials, watermark,
                                                  processing_time, out),
                                table.take(unchanged), closed], table.watermark), dropped

    def _fold_groups(self, table: SessionTable, groups: "_MergeGroups", uniques: np.ndarray, weights: np.ndarray,
                     partials: list, watermark: int, processing_time: int, out: Panes) -> SessionTable:
        """The sessions of ``groups``: a kept session's state carried, a new or merged one's folded
        from its members (accumulators, elements since the last pane, holds, the trigger's counts),
        its pane fired where due."""
        n_rows = len(table)
        codes, starts, member, is_row = groups.codes, groups.starts, groups.member, groups.is_row
        first, group_of, n_groups = groups.first, groups.group_of, groups.n_groups
        kept, single, merging, g_ends = groups.kept, groups.single, groups.merging, groups.g_ends
        row_of_group = groups.row_of_group
        g_codes, g_starts = codes[first], starts[first]
        # Accumulators, elements since the last pane, holds and counts fold over each group's members.
        rows = np.where(is_row, member, 0)
        elements = np.where(is_row, 0, -1 - member)
        arrived = np.where(is_row, 0, weights[elements])  # (each member's elements: 0 for a session)
        g_elements = np.add.reduceat(arrived, first)
        merged = ~kept & ~single
        if self.emitter.retracting and n_rows:
            absorbed = member[is_row & merged[group_of]]
            self.emitter.retract_absorbed(table, absorbed[table.index[absorbed] > 0], watermark, out)
        reached = is_end_reached(g_ends - 1, watermark)
        if n_rows:
            columns = [np.where(is_row, table.acc[c][rows], partial[elements]) for c, partial in enumerate(partials)]
            pending = np.where(is_row, table.pending[rows], arrived)
            held = is_row & table.hold[rows]
            row_late = is_row & table.late[rows]
            # ``AfterWatermark.on_merge``: late only if every merged session was and the end is reached;
            # the count of the phase it is in sums its sources' counts of that phase, and its firing by
            # processing time is due at the earliest of theirs (``AfterProcessingTime.on_merge``).
            late_now = merged & np.logical_and.reduceat(row_late | ~is_row, first) & reached
            in_phase = is_row & (late_now[group_of] | ~row_late)
            count = np.add.reduceat(np.where(in_phase, table.count[rows], 0), first)
            fire_at = np.minimum.reduceat(np.where(in_phase, table.fire_at[rows], NOT_SET), first)
        else:
            columns = [partial[elements] for partial in partials]
            pending, held = arrived, np.zeros(len(member), dtype=bool)
            late_now, count = merged & reached, np.zeros(n_groups, dtype=np.int64)
            fire_at = np.full(n_groups, NOT_SET, dtype=np.int64)
        touched = g_elements > 0

        def carried(column: np.ndarray, fresh: Any) -> np.ndarray:
            """A kept session's value of ``column``; ``fresh`` for new and merged sessions."""
            if not n_rows:
                return np.full(n_groups, fresh, dtype=column.dtype)
            return np.where(kept, column[row_of_group], fresh).astype(column.dtype)

        result = SessionTable(
            keys=uniques[g_codes], starts=g_starts, ends=g_ends, acc=self.form.reduce_segments(columns, first),
            pending=np.add.reduceat(pending, first),
            hold=np.logical_or.reduceat(held, first) | (touched & sets_element_hold(g_ends - 1, watermark)),
            nonspeculative=carried(table.nonspeculative, 0), index=carried(table.index, 0),
            last=carried(table.last, None), late=np.where(kept, carried(table.late, False), late_now),
            count=np.where(kept, carried(table.count, 0), count) + g_elements,
            fire_at=np.where(kept, carried(table.fire_at, NOT_SET), fire_at),
            closed=np.zeros(n_groups, dtype=bool), watermark=table.watermark)
        self.on_elements(result, np.flatnonzero(touched), watermark, processing_time, out)
        # After the bundle, a merge re-places the END_OF_WINDOW hold at the merged session's end (``time_rules``).
        result.hold &= ~merging | sets_element_hold(g_ends - 1, watermark)
        return result


@dataclass
class _MergeGroups:
    """A bundle's intervals (the key's sessions, then its proto-sessions) sorted by key and time and
    cut into groups that overlap: each member's key code, bounds and source (``member``: row i of
    the table, or element j as ``-1 - j``), each group's first member, end and one session, and
    what becomes of it: ``kept`` (exactly one session with the group's bounds keeps its state),
    ``single`` (proto-sessions of one set of bounds: a new session), ``merging`` (a merge to Beam)."""

    codes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    member: np.ndarray
    is_row: np.ndarray
    first: np.ndarray
    group_of: np.ndarray
    g_ends: np.ndarray
    row_of_group: np.ndarray
    kept: np.ndarray
    single: np.ndarray
    merging: np.ndarray

    @property
    def n_groups(self) -> int:
        return len(self.first)

    def drop_blocked(self, closed: SessionTable, closed_codes: np.ndarray,
                     n_elements: int) -> tuple[np.ndarray, np.ndarray]:
        """Remove the groups with the bounds of a finished session: they merge nothing, their
        sessions stay as they are and their elements are dropped as arriving in a closed window (as
        Beam Java does).  Returns which elements were dropped and the table rows left unchanged."""
        dropped = np.zeros(n_elements, dtype=bool)
        unchanged = np.zeros(0, dtype=np.int64)
        blocked = ~self.kept & _matches(closed_codes, closed.starts, closed.ends, self.codes[self.first],
                                        self.starts[self.first], self.g_ends)
        if not blocked.any():
            return dropped, unchanged
        out_of = blocked[self.group_of]
        dropped[-1 - self.member[out_of & ~self.is_row]] = True
        unchanged = self.member[out_of & self.is_row]
        keep, survivors = ~out_of, ~blocked
        self.codes, self.starts, self.ends = self.codes[keep], self.starts[keep], self.ends[keep]
        self.member, self.is_row = self.member[keep], self.is_row[keep]
        self.kept, self.single, self.merging = self.kept[survivors], self.single[survivors], self.merging[survivors]
        self.g_ends, self.row_of_group = self.g_ends[survivors], self.row_of_group[survivors]
        old_group = self.group_of[keep]
        starts_group = np.concatenate(([True], old_group[1:] != old_group[:-1])) if len(old_group) else \
            np.zeros(0, dtype=bool)
        self.first, self.group_of = np.flatnonzero(starts_group), np.cumsum(starts_group) - 1
        return dropped, unchanged


def _merge_groups(table: SessionTable, codes: np.ndarray, timestamps: np.ndarray, proto_ends: np.ndarray,
                  merged_members: Optional[np.ndarray]) -> _MergeGroups:
    """The table's sessions and the bundle's proto-sessions (``codes``: their keys' codes, sessions
    first) as groups of overlapping intervals (``_MergeGroups``)."""
    n_rows, n_elements = len(table), len(timestamps)
    # Every interval: the sessions (row i), then the proto-sessions (element j, as -1 - j).
    member = np.concatenate([np.arange(n_rows), -1 - np.arange(n_elements)])
    starts = np.concatenate([table.starts, timestamps])
    ends = np.concatenate([table.ends, proto_ends])
    order = lexsort_ints((ends, starts, codes))
    codes, starts, ends, member = codes[order], starts[order], ends[order], member[order]
    reach = running_max_by_run(codes, ends)  # the running end within each key
    new = np.ones(len(order), dtype=bool)
    new[1:] = (codes[1:] != codes[:-1]) | (starts[1:] >= reach[:-1])
    other = new.copy()  # a member whose bounds differ from the one before it in its group
    other[1:] |= (starts[1:] != starts[:-1]) | (ends[1:] != ends[:-1])
    first = np.flatnonzero(new)
    g_ends = np.maximum.reduceat(ends, first)
    is_row = member >= 0
    g_rows = np.add.reduceat(is_row.astype(np.int64), first)
    n_groups = len(first)
    group_of = np.repeat(np.arange(n_groups), np.diff(np.append(first, len(order))))
    row_of_group = np.zeros(n_groups, dtype=np.int64)
    row_of_group[group_of[is_row]] = member[is_row]  # (the group's one session, where it has one)
    # A group holding exactly one session with the group's bounds keeps that session's state; a
    # group of proto-sessions with one set of bounds is a new session; any other group is a merge.
    kept = (g_rows == 1) & (table.starts[row_of_group] == starts[first]) & \
        (table.ends[row_of_group] == g_ends) if n_rows else np.zeros(n_groups, dtype=bool)
    distinct = np.add.reduceat(other.astype(np.int64), first)
    single = (g_rows == 0) & (distinct == 1)
    merging = distinct > 1  # (a merge to Beam: a proto-session inside a session too)
    if merged_members is not None:  # (a chain of elements at several times is a merge of its own)
        single &= ~np.logical_or.reduceat(~is_row & merged_members[np.where(is_row, 0, -1 - member)], first)
    return _MergeGroups(codes, starts, ends, member, is_row, first, group_of, g_ends, row_of_group, kept, single,
                        merging)


def _matches(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, q_codes: np.ndarray, q_starts: np.ndarray,
             q_ends: np.ndarray) -> np.ndarray:
    """Which queries (code, start, end) are among the given rows (distinct)."""
    if not len(codes) or not len(q_codes):
        return np.zeros(len(q_codes), dtype=bool)
    tag = np.concatenate([np.zeros(len(q_codes), dtype=np.int64), np.ones(len(codes), dtype=np.int64)])
    c, s, e = (np.concatenate([q, r]) for q, r in ((q_codes, codes), (q_starts, starts), (q_ends, ends)))
    order = lexsort_ints((tag, e, s, c))
    c, s, e, tag = c[order], s[order], e[order], tag[order]
    hit = np.zeros(len(order), dtype=bool)
    hit[:-1] = (tag[:-1] == 0) & (tag[1:] == 1) & (c[:-1] == c[1:]) & (s[:-1] == s[1:]) & (e[:-1] == e[1:])
    out = np.zeros(len(q_codes), dtype=bool)
    queries = tag == 0
    out[order[queries]] = hit[queries]
    return out
