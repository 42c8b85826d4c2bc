"""Moving a key group from the layout its state was stored in to the one the operator now uses, once,
when a restart changes which one the operator's options choose.

The pane log and per-key pane rows:

The pane log serves the default trigger with no allowed lateness (``pane_log``); the same operator
with allowed lateness keeps pane rows per key (``columnar_records.PaneRecords``), and checkpoints
written before the pane log existed hold per-key rows too.  A restart may lower allowed lateness to
none (``fingerprint.SAFE_CHANGES``) or switch the log off or on (``spark.windowed_operator.paneLog``),
so neither direction may strand state: the first batch of
a group whose record names the other layout reads all of the group's rows once, in the old layout,
and writes them in the new one.  Both directions read what the group holds (once), not more:
- per key -> pane log: every key holding rows is in the event-time due index (its next window end or
  its expiry), so taking every entry of the index names every key;
- pane log -> per key: the group's record names every pane and its parts.

The window log and per-key windows:

The window log serves the default trigger with no allowed lateness (``window_log``); the same
operator with allowed lateness keeps windows per key, and checkpoints written before the window log
existed hold per-key windows too.  A restart may lower allowed lateness to none
(``fingerprint.SAFE_CHANGES``) or switch the log off or on (``spark.windowed_operator.paneLog``), so
neither direction may strand state: the first batch of a group
whose record names the other layout reads all of the group's state once, in the old layout, and
writes it in the new one.

- Per key -> window log: every key holding windows is in the event-time due index (each window's
  expiry), so taking every entry names every key.  The core first runs the watermark step on each
  key at this batch's watermark with the new lateness: windows whose end was reached under the old
  lateness (fired, maybe holding late elements) fire and expire exactly as they would have per key.
  What remains has not reached its end, so it never fired, and is one partial per window.
- Window log -> per key: the group's record names every bucket and its parts; the partials become
  key states as the window log fires them (``WindowLog.key_states``), and the batch visits those
  keys (their windows may be due at once under the new lateness).
"""
from __future__ import annotations

from typing import Hashable

from ..core import Emission
from ..range_ops import factorize
from ..time import MIN_TIMESTAMP
from .group_state import GroupState
from .pane_log import PaneLog
from .part_log import PartStore, take_every_bucket, write_whole_buckets
from .records import ColumnarRecords, build_table
from .window_log import Partial, WindowLog, WindowRows


def stored_layout(group: GroupState) -> str | None:
    """The layout the group's state was written in (None: a new group)."""
    fingerprint = group.meta.get("fingerprint")
    return fingerprint.get("state layout") if fingerprint else None


def key_records_to_pane_log(group: GroupState, log: PaneLog, store: PartStore) -> int:
    """Every key's pane rows moved into the pane log (the key records and index entries removed);
    returns how many keys were moved."""
    held = group.take_every_key()
    table = build_table(held, [group.loaded[key].state for key in held], group.meta.get("wm", MIN_TIMESTAMP))
    write_whole_buckets(log, store, group.meta, log.texts_by_bucket(table))
    group.drop_keys(held)
    return len(held)


def pane_log_to_key_records(group: GroupState, records: ColumnarRecords, log: PaneLog, store: PartStore) -> list[Hashable]:
    """Every pane's rows moved to per-key records (loaded and marked changed: the batch's commit
    writes them and enters their due times); returns the keys, which the batch must run with."""
    table = log.build(take_every_bucket(log, store, group.meta), group.meta.get("wm", MIN_TIMESTAMP))
    keys = factorize(table.keys)[1].tolist() if len(table) else []
    return group.adopt(records.split(table, keys))


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


def window_log_to_key_windows(group: GroupState, log: WindowLog, store: PartStore,
                              processing_time: int) -> list[Hashable]:
    """Every partial moved to its key's windows (loaded and marked changed: the batch's commit writes
    them and enters their due times); returns the keys, which the batch must visit."""
    rows = log.build(take_every_bucket(log, store, group.meta), group.meta.get("wm", MIN_TIMESTAMP))
    return group.adopt(log.key_states(rows, processing_time))
