"""Moving a key group between the per-key pane rows and the pane log, once, when a restart changes
which one the operator's options choose.

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
"""
from __future__ import annotations

from typing import Hashable

from .columnar_records import ColumnarRecords, build_table
from .group_state import GroupState
from .pane_log import PaneLog
from .part_log import PartStore, take_every_bucket, write_whole_buckets
from .range_ops import factorize
from .time import MIN_TIMESTAMP


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
