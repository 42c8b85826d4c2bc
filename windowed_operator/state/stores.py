"""An operator's state as a runner opens it: the layout chosen once, its store opened from the
registry, each key group's state and batch.

``layouts.Layout.store`` names each layout's store class (module.Class in this package); ``open_store``
resolves the name once per operator and opens the store on what the operator holds (``Stores``).
Every store serves one protocol (``group_batch.LayoutStore``), so a runner dispatches once: layout ->
registry row -> store.  ``open_state`` does all of it for a runner (the Spark worker's), which then
asks for each group (``OperatorState.group``) and runs its batch (``OperatorState.run_batch``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import import_module
from typing import Any, Optional

from .codec import KeyStateCodec
from .fingerprint import IncompatibleRestartError, state_fingerprint
from .group_batch import StoreResult, LayoutStore, StoreBatch
from .group_state import GroupState, GroupStore
from .layouts import BY_NAME, KEY_SHARDS_SUFFIX, LAYOUTS, STATE_VERSION, WINDOW_LOG, Layout, record_layout
from .records import columnar_records
from .transitions import Stores, move_in


def store_class(layout: Layout) -> Any:
    """The class the registry names for ``layout``'s store."""
    module, name = layout.store.rsplit(".", 1)
    return getattr(import_module(f"{__package__}.{module}"), name)


def open_store(layout: Layout, stores: Stores) -> LayoutStore:
    """``layout``'s store, opened on what the operator holds."""
    store: LayoutStore = store_class(layout).opened(stores)
    return store


@dataclass
class OperatorState:
    """One operator's state in a runner: the layout its groups keep (``key_shards``: per-key records
    many to a text), the fingerprint each group's record carries, the layout's store, and the codec
    of the groups' per-key records."""
    layout: Layout
    key_shards: bool
    fingerprint: dict[str, str]
    stores: Stores
    store: LayoutStore
    codec: Any
    label: str

    @property
    def by_window(self) -> bool:
        """The object core's windows are kept by window (the window log takes a batch's elements as arrays)."""
        return self.layout is WINDOW_LOG

    def group(self, old_value: Any = None) -> GroupState:
        """A key group's state (its record read and checked against the fingerprint).  ``old_value``:
        the pickled value state of version 5 and before, declared only to refuse such a checkpoint."""
        group = GroupState(self.stores.store, self.codec, self.fingerprint, self.label, sharded=self.key_shards)
        if not group.meta and old_value is not None and old_value.exists():
            raise IncompatibleRestartError(
                f"{self.label}: the checkpoint holds state in the pickled layout of version 5 or earlier, which "
                "this version does not read (reading it would run code from the checkpoint): start a new checkpoint")
        return group

    def run_batch(self, group: GroupState, keys: list, watermark: int, processing_time: int,
                  engine: Any) -> StoreResult:
        """The group's batch: moved in first from a layout an earlier run stored, then run by the store;
        when the group next has work is the store's where it keeps it itself (the logs), else its due
        indexes' (the earliest event time due; whether any key is indexed)."""
        moved = move_in(group, self.layout, self.stores, watermark, processing_time)
        result = self.store.run_batch(StoreBatch(group, keys, watermark, processing_time, moved), engine)
        if result.held is None:
            result = replace(result, due=group.next_event_time(), held=group.has_due())
        return result


def open_state(part_store: GroupStore, operator: Any, core: Any, table: Any, *, layout: str, time_mode: str,
               key_groups: int, key_column: Optional[str], allow_pickle: bool = False) -> OperatorState:
    """The state of ``operator`` run by ``core`` (the object core) or ``table`` (a table engine, or
    None), in a store of texts, kept in ``layout`` (its name as the fingerprint stores it, chosen by
    the runner: ``layouts.choose_layout``), with everything it is kept with."""
    records = columnar_records(table) if table is not None else None
    codec = KeyStateCodec(allow_pickle=allow_pickle)
    row = BY_NAME[record_layout(layout)]
    fingerprint = state_fingerprint(operator, key_groups=key_groups, time_mode=time_mode, layout=layout,
                                    state_version=STATE_VERSION, key_column=key_column)
    stores = Stores(part_store, core, codec, table, records)
    return OperatorState(row, layout.endswith(KEY_SHARDS_SUFFIX), fingerprint, stores, open_store(row, stores),
                         records.codec if records is not None else codec, operator.label())


_unknown = [layout.name for layout in LAYOUTS if not hasattr(store_class(layout), "run_batch")]
assert not _unknown, f"layouts whose registry row names no store: {_unknown}"
