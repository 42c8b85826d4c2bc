"""Every live transition between state layouts, and the one entry a runner calls per batch.

A restart whose operator chooses another layout than the one the checkpoint's state was written in
(``layouts.choose_layout``: an allowed lateness lowered to none, a checkpoint written before a
layout existed or with a setting since removed) moves each key group once, at its first batch:
``move_in`` reads the stored layout from the group's record, finds the transition in the new
layout's row (``layouts.Layout.moves_in``: the fingerprint refused the restart already if there is
none) and performs it.  Each reads all of the group's state once, in the old layout, and writes it
in the new one, so no state is stranded:

- per key -> a log (``key_records_to_pane_log``, ``key_windows_to_window_log``): every key holding
  state is in the event-time due index (its next window end or its expiry), so taking every entry
  names every key.  The window log first runs the watermark step on each key at this batch's
  watermark with the new lateness: windows whose end was reached under the old lateness (fired,
  maybe holding late elements) fire and expire exactly as they would have per key; what remains has
  not reached its end, so it never fired, and is one partial per window.
- per key -> row shards (``key_records_to_row_shards``): every key's rows as one table the batch runs
  and writes in shards.  Per-key windows of the object path are read as rows on the way (by the
  records codec, key by key: ``records.RowsCodec``).  (Nothing moves back: per-key session and window
  rows were chosen only by ``spark.windowed_operator.rowShards=false``, a setting since removed; and
  nothing leaves a log: only a raised allowed lateness would choose per-key state again, which the
  fingerprint refuses, now that ``spark.windowed_operator.paneLog=false`` went.)

Key shards on or off (the same records, many to a text or one per entry) are moved by the group
itself at its first commit (``GroupState._move_records``, ``layouts.KEY_SHARDS``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..engine.columnar_triggers import RowTable
from ..engine.core import Emission
from ..time import MIN_TIMESTAMP
from .group_batch import Moved
from .group_state import SHARDS, GroupState, GroupStore
from .layouts import BY_NAME, Layout, record_layout
from .pane_log import PaneLog
from .part_log import PartStore, write_whole_buckets
from .records import ColumnarRecords, RowRecords, build_table
from .window_log import Partial, WindowLog, WindowRows


def stored_layout(group: GroupState) -> str | None:
    """The layout the group's state was written in (None: a new group)."""
    fingerprint = group.meta.get("fingerprint")
    return fingerprint.get("state layout") if fingerprint else None


@dataclass
class Stores:
    """What the running operator keeps its state with: the group store, the object core and its
    codec, and on the columnar paths the engine and its per-key records."""
    store: GroupStore
    core: Any
    codec: Any
    columnar: Any = None
    records: Optional[ColumnarRecords] = None

    def pane_log(self) -> PaneLog:
        return PaneLog(self.columnar, self.store)

    def window_log(self) -> WindowLog:
        return WindowLog(self.core, self.codec, self.store)

    def row_records(self) -> RowRecords:
        assert isinstance(self.records, RowRecords)
        return self.records


def move_in(group: GroupState, layout: Layout, stores: Stores, watermark: int, processing_time: int) -> Moved:
    """Move the group's state into ``layout`` if it was stored in another (once: the batch writes it
    in ``layout``, and the group's record then names it)."""
    stored = stored_layout(group)
    if stored is None or record_layout(stored) == layout.name:
        return Moved()
    move = layout.move_from(record_layout(stored))
    if move is None or move.by_key:  # (refused by the fingerprint, or read key by key by the records codec)
        return Moved()
    return ACTS[move.act](group, stores, watermark, processing_time)


def key_records_to_pane_log(group: GroupState, log: PaneLog, store: PartStore) -> int:
    """Every key's pane rows moved into the pane log (the key records and index entries removed);
    returns how many keys were moved."""
    held = group.take_every_key()
    table = build_table(held, [group.loaded[key].state for key in held], group.meta.get("wm", MIN_TIMESTAMP))
    write_whole_buckets(log, store, group.meta, log.texts_by_bucket(table))
    group.drop_keys(held)
    return len(held)


def key_windows_to_window_log(group: GroupState, log: WindowLog, store: PartStore, watermark: int,
                              processing_time: int) -> Emission:
    """Every key's windows moved into the window log (the key records and index entries removed),
    after the windows due at ``watermark`` fired and expired; returns those panes."""
    core = log.core
    held = group.take_every_key()
    emission = Emission()
    rows = WindowRows(watermark=group.meta.get("wm", MIN_TIMESTAMP))
    for key in held:
        state = group.loaded[key].state
        if core.event_time_work_due(state, watermark):
            emission.extend(core.on_watermark(key, state, watermark, processing_time))
        for window, ws in state.windows.items():
            if ws.fired or ws.closed:
                raise RuntimeError(
                    f"{core.emitter.label}: key {key!r} holds window {window} that fired before its end, which the "
                    "window log cannot hold (its trigger fires at the end of the window only)")
            if ws.pending:
                log.fold(rows, key, window, Partial.of(ws))
    write_whole_buckets(log, store, group.meta, log.texts_by_bucket(rows))
    group.drop_keys(held)
    return emission


def key_records_to_row_shards(group: GroupState, records: RowRecords) -> RowTable:
    """Every key's rows out of its record (in key shards or its own entry; the records and the keys'
    index entries removed), as one table for the batch to run and write in row shards."""
    held = group.take_every_key()
    table = records.build(held, [group.loaded[key].state for key in held], group.meta.get("wm", MIN_TIMESTAMP))
    group.drop_keys(held)
    group.records = group.store  # (key shards, if any, are empty now: their bookkeeping goes)
    group.meta.pop(SHARDS, None)
    return table


def _to_pane_log(group: GroupState, stores: Stores, watermark: int, processing_time: int) -> Moved:
    key_records_to_pane_log(group, stores.pane_log(), stores.store)
    return Moved()


def _to_window_log(group: GroupState, stores: Stores, watermark: int, processing_time: int) -> Moved:
    return Moved(released=key_windows_to_window_log(group, stores.window_log(), stores.store, watermark,
                                                    processing_time))


def _to_row_shards(group: GroupState, stores: Stores, watermark: int, processing_time: int) -> Moved:
    return Moved(rows=key_records_to_row_shards(group, stores.row_records()))


#: The function performing each transition the registry names (``layouts.Move.act``), as a batch runs it.
ACTS: dict[str, Callable[[GroupState, Stores, int, int], Moved]] = {
    "key_records_to_pane_log": _to_pane_log,
    "key_windows_to_window_log": _to_window_log,
    "key_records_to_row_shards": _to_row_shards,
}
_unknown = {move.act for layout in BY_NAME.values() for move in layout.moves_in if not move.by_key} - set(ACTS)
assert not _unknown, f"transitions the registry names without a function here: {_unknown}"
