"""A stopped checkpoint's state as Spark's offline state tools see it: one row per stored entry, its
key and value as UnsafeRow bytes, read into each key group's contents and written back.

Spark's reader of every column family (``format("statestore")`` with ``_readAllColumnFamilies``,
what its offline repartitioning reads) gives rows ``(partition_key, key_bytes, value_bytes,
column_family_name)``, and its rewriter (``StateRewriter``) writes rows of the same form.  The
operator's column families (``worker.group_store``) and their UnsafeRows:

- ``wo_group``: key ``(group)``, value ``(meta string)``: the group's record;
- ``wo_due``: key ``((group), (domain string, bucket bigint, part int))``, value ``(entries string)``;
- ``wo_keys``: key ``((group), (key <the key column's type>))``, value ``(record string)``;
- ``$eventTimers_keyToTimestamp``: key ``((group), expiry bigint)``; ``$eventTimers_timestampToKey``:
  key ``(expiry bigint, (group))``; both with an empty value (one null field); ``$procTimers_...`` the
  same for processing-time timers.

An UnsafeRow is a null bitset (8 bytes per 64 fields), one 8-byte slot per field (a fixed-width value,
or ``offset << 32 | size`` of a variable-width one: a string, a nested row) and the variable-width
bytes, each padded to 8.  The group is a one-field row (a bigint, or an int under a balanced
placement: ``driver.key_groups``).  A key of ``wo_keys`` is kept as its bytes (its type is the
key column's); ``GroupContents.key_rows`` pairs those bytes with each key's record.

Pure Python: imports nothing of pyspark's.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Union

from .spark_hashes import UnsupportedKeyType, parse_type as _parse_type

META_FAMILY, DUE_FAMILY, KEYS_FAMILY = "wo_group", "wo_due", "wo_keys"
#: The timers' column families: ``<prefix>_keyToTimestamp`` and ``<prefix>_timestampToKey`` for event-time
#: and processing-time timers.
TIMER_PREFIXES = ("$eventTimers", "$procTimers")
KEY_TO_TIME, TIME_TO_KEY = "_keyToTimestamp", "_timestampToKey"
#: The value of a timer's entries: one field, null.
_EMPTY_VALUE = struct.pack("<qq", 1, 0)


@dataclass
class GroupContents:
    """One key group's state: its record, its parts by (domain, bucket, part), each key's record by the
    key's UnsafeRow bytes, and its timers."""

    meta: Optional[str] = None
    parts: dict[tuple[str, int, int], str] = field(default_factory=dict)
    key_rows: dict[bytes, str] = field(default_factory=dict)
    #: Each timer kind's (``TIMER_PREFIXES``) expiries.
    timers: dict[str, set[int]] = field(default_factory=dict)


# -- UnsafeRow pieces --------------------------------------------------------------------------------------
def _bitset_bytes(fields: int) -> int:
    return ((fields + 63) // 64) * 8


def _padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def _slot(row: bytes, fields: int, index: int) -> int:
    return struct.unpack_from("<q", row, _bitset_bytes(fields) + 8 * index)[0]


def _is_null(row: bytes, index: int) -> bool:
    return bool(row[index // 8] >> (index % 8) & 1)


def _variable(row: bytes, fields: int, index: int) -> bytes:
    slot = _slot(row, fields, index) & ((1 << 64) - 1)
    offset, size = slot >> 32, slot & 0xFFFFFFFF
    return row[offset:offset + size]


def encode_row(values: list[Union[int, str, bytes, None]]) -> bytes:
    """An UnsafeRow of ``values``: int (a bigint or int slot), str, bytes (a nested row), None."""
    fields = len(values)
    head = _bitset_bytes(fields) + 8 * fields
    bitset = bytearray(_bitset_bytes(fields))
    slots, tail = [], b""
    for i, value in enumerate(values):
        if value is None:
            bitset[i // 8] |= 1 << (i % 8)
            slots.append(0)
        elif isinstance(value, int):
            slots.append(value)
        else:
            data = value.encode("utf-8") if isinstance(value, str) else value
            slots.append((head + len(tail)) << 32 | len(data))
            tail += _padded(data)
    return bytes(bitset) + b"".join(struct.pack("<Q", s & ((1 << 64) - 1)) for s in slots) + tail


def string_field(row: bytes) -> Optional[str]:
    """The one string of a one-field row (a value of the operator's state variables)."""
    return None if _is_null(row, 0) else _variable(row, 1, 0).decode("utf-8")


def _int32(slot: int) -> int:
    """An int slot's value (its low 4 bytes, signed)."""
    return struct.unpack("<i", struct.pack("<I", slot & 0xFFFFFFFF))[0]


def group_row(value: int, int_typed: bool) -> bytes:
    """The group's one-field row (an int keeps its sign in the low 4 bytes of the slot, as Spark writes it)."""
    return encode_row([value & 0xFFFFFFFF if int_typed else value])


def group_of_row(row: bytes, int_typed: bool) -> int:
    slot = _slot(row, 1, 0)
    return _int32(slot) if int_typed else slot


def read_key(row: bytes, key_type: str) -> Any:
    """The key of a ``wo_keys`` entry (its row ``(key <key_type>)``) as pyspark would collect it (a
    date as its days, a timestamp as its microseconds: what ``spark_hashes`` hashes alike)."""
    return _read_field(row, 1, 0, _parse_type(key_type.strip().lower()))


def _read_field(row: bytes, fields: int, index: int, kind: Any) -> Any:
    if _is_null(row, index):
        return None
    if isinstance(kind, tuple):
        if kind[0] != "struct":
            raise UnsupportedKeyType(f"cannot read a stored key of type {kind[0]}")
        nested = _variable(row, fields, index)
        return tuple(_read_field(nested, len(kind[1]), i, field_kind) for i, (_, field_kind) in enumerate(kind[1]))
    slot = _slot(row, fields, index)
    low = slot & 0xFFFFFFFF
    if kind == "boolean":
        return bool(slot & 0xFF)
    if kind in ("tinyint", "byte"):
        return struct.unpack("<b", struct.pack("<B", slot & 0xFF))[0]
    if kind in ("smallint", "short"):
        return struct.unpack("<h", struct.pack("<H", slot & 0xFFFF))[0]
    if kind in ("int", "integer", "date"):
        return _int32(slot)
    if kind in ("bigint", "long", "timestamp", "timestamp_ltz", "timestamp_ntz"):
        return slot
    if kind in ("float", "real"):
        return struct.unpack("<f", struct.pack("<I", low))[0]
    if kind == "double":
        return struct.unpack("<d", struct.pack("<q", slot))[0]
    if kind == "string":
        return _variable(row, fields, index).decode("utf-8")
    if kind == "binary":
        return _variable(row, fields, index)
    raise UnsupportedKeyType(f"cannot read a stored key of type {kind!r}")


# -- rows <-> groups ---------------------------------------------------------------------------------------
def read_groups(rows: Iterable[tuple[bytes, Optional[bytes], str]], int_typed: bool) -> dict[int, GroupContents]:
    """Each group's contents from the reader's ``(key_bytes, value_bytes, column_family_name)`` rows."""
    groups: dict[int, GroupContents] = {}

    def contents(row: bytes) -> GroupContents:
        return groups.setdefault(group_of_row(row, int_typed), GroupContents())

    for key, value, family in rows:
        key = bytes(key)
        if family == META_FAMILY:
            contents(key).meta = string_field(bytes(value or b""))
        elif family == DUE_FAMILY:
            place = _variable(key, 2, 1)
            domain, bucket, part = _variable(place, 3, 0).decode("utf-8"), _slot(place, 3, 1), _slot(place, 3, 2)
            contents(_variable(key, 2, 0)).parts[(domain, bucket, _int32(part))] = string_field(bytes(value or b"")) or ""
        elif family == KEYS_FAMILY:
            contents(_variable(key, 2, 0)).key_rows[_variable(key, 2, 1)] = string_field(bytes(value or b"")) or ""
        elif family.startswith(TIMER_PREFIXES) and family.endswith(KEY_TO_TIME):
            contents(_variable(key, 2, 0)).timers.setdefault(family[:-len(KEY_TO_TIME)], set()).add(_slot(key, 2, 1))
        elif family.startswith(TIMER_PREFIXES) and family.endswith(TIME_TO_KEY):
            contents(_variable(key, 2, 1)).timers.setdefault(family[:-len(TIME_TO_KEY)], set()).add(_slot(key, 2, 0))
        else:
            raise ValueError(f"a column family the operator does not write: {family!r}")
    return groups


def group_rows(group: int, contents: GroupContents, int_typed: bool) -> list[tuple[bytes, bytes, str]]:
    """The ``(key_bytes, value_bytes, column_family_name)`` rows of one group's contents."""
    me = group_row(group, int_typed)
    rows: list[tuple[bytes, bytes, str]] = []
    if contents.meta is not None:
        rows.append((me, encode_row([contents.meta]), META_FAMILY))
    for (domain, bucket, part), text in sorted(contents.parts.items()):
        rows.append((encode_row([me, encode_row([domain, bucket, part & 0xFFFFFFFF])]), encode_row([text]),
                     DUE_FAMILY))
    for key, text in contents.key_rows.items():
        rows.append((encode_row([me, key]), encode_row([text]), KEYS_FAMILY))
    for prefix, expiries in sorted(contents.timers.items()):
        for expiry in sorted(expiries):
            rows.append((encode_row([me, expiry]), _EMPTY_VALUE, prefix + KEY_TO_TIME))
            rows.append((encode_row([expiry, me]), _EMPTY_VALUE, prefix + TIME_TO_KEY))
    return rows


__all__ = ["GroupContents", "encode_row", "group_rows", "read_groups", "read_key", "string_field"]
