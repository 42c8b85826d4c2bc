"""A key group's records in Spark's state store: the ``GroupStore`` of ``windowed_operator.state.group_state``.

Three state variables per key group (the grouping key of transformWithStateInPandas):
- ``wo_group`` (ValueState ``meta string``): the group's record as JSON: the operator's fingerprint,
  the watermark last applied, the Spark timer registered, the due indexes' buckets;
- ``wo_keys`` (MapState ``key <the key column's type>`` -> ``record string``): each key's record as
  JSON, ``[event due, processing due, <the key's state>]`` (``group_state``);
- ``wo_due`` (MapState ``domain string, bucket bigint, part int`` -> ``entries string``): the due
  index's parts, JSON lists of ``[key, due]`` (keys in the codec's tagged form); on the pane log
  (``windowed_operator.state.pane_log``, domain ``panes``) the parts of each pane's rows; on the window log
  (``windowed_operator.state.window_log``, domain ``windows``) the parts of the accumulators of the windows
  expiring at one watermark; under key shards (``windowed_operator.state.key_shards``, domain ``keys``)
  the keys' records, many keys' to a text, in place of ``wo_keys``.
All of it is data: ``spark.read.format("statestore").option("stateVarName", "wo_keys")`` on a
checkpoint shows every key's windows, and ``windowed_operator.spark.inspect`` prints them.
The group's record is read in one call to the JVM (a socket round trip); the keys' records, the
index's parts and the pane log's parts are read and written many per round trip (``pipelined_map``).
Writes (records, parts, the group's record, timer changes) wait for the next read or the end of
the group's call (``flush``): a group's end is one round trip.
"""
from __future__ import annotations

from typing import Any, Hashable, Optional

from ...state.due_index import PartsAsTexts
from .pipelined_map import PendingWrites, PipelinedMap
# DUE_STATE, KEYS_STATE, META_STATE: re-exported (spark/inspect.py and the Spark tests import them from here)
from .state_schemas import DUE_STATE as DUE_STATE, KEYS_STATE as KEYS_STATE, META_STATE as META_STATE, DeclaredState

#: The map key of a non-keyed operator's one state (its key is None).
_NO_KEY = 0


def _plain(key: Any) -> Any:
    """A key as Spark's row serialization takes it (numpy scalars as Python ones)."""
    return key.item() if hasattr(key, "item") and not isinstance(key, (str, bytes)) else key


class SparkGroupStore(PartsAsTexts):
    """A key group's state in Spark's state store, as ``state`` reads and writes it: the group's
    record (a ValueState), its keys' records and its parts (MapStates), and the due index's parts;
    reads and writes of many keys go in one round trip to the JVM (``pipelined_map``)."""

    def __init__(self, state: DeclaredState, key_type: Optional[str], handle: Any = None) -> None:
        self.keyed = key_type is not None
        self.meta, self.keys, self.parts = state.meta, state.keys, state.parts
        self.handle = handle
        self.pipelined = PipelinedMap(self.keys)
        self.pipelined_parts = PipelinedMap(self.parts)
        #: Where writes wait (None where this pyspark's client is not the expected one: one call each).
        self.pending: Optional[PendingWrites] = None
        if self.pipelined.direct_capable and self.pipelined_parts.direct_capable:
            self.pending = PendingWrites(self.pipelined._api, self.pipelined._messages)
            self.pipelined.hold_writes(self.pending)
            self.pipelined_parts.hold_writes(self.pending)

    def discard(self) -> None:
        """Drop the writes still waiting: the group's call failed, so the task fails and none of
        its writes may reach the server with a later request."""
        if self.pending is not None:
            self.pending.take()

    def flush(self) -> None:
        """Send the writes still waiting: at the end of every call for a group (pyspark moves to
        another group, or ends the task, after it)."""
        if self.pending is not None:
            self.pending.flush()

    def _map_key(self, key: Hashable) -> tuple:
        return (_plain(key),) if self.keyed else (_NO_KEY,)

    # -- the group's record -----------------------------------------------------------------------
    def get_meta(self) -> Optional[str]:
        self.flush()  # (pyspark's own call: writes waiting must reach the server before it)
        value = self.meta.get()
        return value[0] if value is not None else None

    def put_meta(self, text: str) -> None:
        if self.pending is not None:
            self.pending.update_value(self.meta, (text,))
        else:
            self.meta.update((text,))

    # -- the group's Spark timer ------------------------------------------------------------------
    def register_timer(self, expiry_ms: int) -> None:
        if self.pending is not None:
            self.pending.change_timer(True, expiry_ms)
        else:
            self.handle.registerTimer(expiry_ms)

    def delete_timer(self, expiry_ms: int) -> None:
        if self.pending is not None:
            self.pending.change_timer(False, expiry_ms)
        else:
            self.handle.deleteTimer(expiry_ms)

    # -- keys (pipelined: many per round trip) ----------------------------------------------------
    def get_keys(self, keys: list[Hashable]) -> list[Optional[str]]:
        values = self.pipelined.get_many([self._map_key(k) for k in keys])
        return [value[0] if value is not None else None for value in values]

    def put_keys(self, items: list[tuple[Hashable, str]]) -> None:
        self.pipelined.put_many([(self._map_key(key), (text,)) for key, text in items])

    def remove_keys(self, keys: list[Hashable]) -> None:
        self.pipelined.remove_many([self._map_key(k) for k in keys])

    def all_keys(self) -> list[Hashable]:
        """Every key with a record of its own (one iteration of the map: a group moving its records
        into key shards)."""
        self.flush()
        return [row[0] if self.keyed else None for row in self.keys.keys()]

    # -- the due index: its parts as texts (``due_index.PartsAsTexts``) ---------------------------
    def plain_key(self, key: Hashable) -> Hashable:
        return _plain(key)

    # -- texts by part (the pane log), pipelined ---------------------------------------------------
    def get_texts(self, domain: str, places: list[tuple[int, int]]) -> list[Optional[str]]:
        values = self.pipelined_parts.get_many([(domain, int(bucket), int(part)) for bucket, part in places])
        return [value[0] if value is not None else None for value in values]

    def put_texts(self, domain: str, items: list[tuple[int, int, str]]) -> None:
        self.pipelined_parts.put_many([((domain, int(bucket), int(part)), (text,)) for bucket, part, text in items])

    def remove_texts(self, domain: str, places: list[tuple[int, int]]) -> None:
        self.pipelined_parts.remove_many([(domain, int(bucket), int(part)) for bucket, part in places])
