"""Spark's two hash functions, computed in Python exactly as the JVM computes them.

- **Murmur3** (``hash()``, and the hash partitioning that places a key group in a state partition):
  ``murmur3_int``, ``murmur3_long`` (``driver.key_groups`` chooses balanced group values with it).
- **xxHash64** (``xxhash64()``: a row's key group is ``pmod(xxhash64(key), key_groups)``,
  ``driver.stage._grouped``): ``xxhash64(value, spark_type)`` for a key of the key column's type, so that
  code outside a query (moving a stopped checkpoint's keys to another number of key groups) finds the
  group Spark would give each key (``key_group``).  The type rules are Spark's (``HashExpression``):
  a null leaves the seed; booleans, bytes, shorts, ints and dates hash as ints, bigints and
  timestamps as longs; a float or double by its IEEE bits with -0.0 as 0.0; a decimal of precision
  up to 18 by its unscaled long, above by the bytes of its unscaled value; strings (UTF-8) and
  binary by their bytes; a struct or array folds its fields or elements, each hashed with the hash
  so far as its seed (Spark refuses to hash a map).  Checked against Spark's own ``xxhash64`` on random values of
  every type (``tests/spark/test_spark_hashes.py``).

Pure Python: imports nothing of pyspark's (the types are named by their ``simpleString``).
"""
from __future__ import annotations

import datetime
import decimal
import math
import re
import struct
from typing import Any

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
#: The seed of Spark's ``hash()`` and ``xxhash64()``.
SEED = 42


# -- Murmur3_x86_32 ------------------------------------------------------------------------------------
def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK32


def _mix_k1(k1: int) -> int:
    return (_rotl32((k1 * 0xCC9E2D51) & _MASK32, 15) * 0x1B873593) & _MASK32


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl32(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK32


def _fmix32(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def murmur3_int(value: int, seed: int = SEED) -> int:
    """Spark's hash of an int (``Murmur3_x86_32.hashInt``)."""
    return _fmix32(_mix_h1(seed & _MASK32, _mix_k1(value & _MASK32)), 4)


def murmur3_long(value: int, seed: int = SEED) -> int:
    """Spark's hash of a bigint (``Murmur3_x86_32.hashLong``)."""
    value &= _MASK64
    return _fmix32(_mix_h1(_mix_h1(seed & _MASK32, _mix_k1(value & _MASK32)), _mix_k1(value >> 32)), 8)


# -- XXH64 ---------------------------------------------------------------------------------------------
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl64(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK64


def _signed64(value: int) -> int:
    return value - (1 << 64) if value & (1 << 63) else value


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * _P2) & _MASK64
    h ^= h >> 29
    h = (h * _P3) & _MASK64
    h ^= h >> 32
    return _signed64(h)


def _round(acc: int, lane: int) -> int:
    return (_rotl64((acc + lane * _P2) & _MASK64, 31) * _P1) & _MASK64


def xxh64_int(value: int, seed: int = SEED) -> int:
    """``XXH64.hashInt``: four bytes."""
    h = (seed + _P5 + 4) & _MASK64
    h ^= ((value & _MASK32) * _P1) & _MASK64
    h = (_rotl64(h, 23) * _P2 + _P3) & _MASK64
    return _fmix64(h)


def xxh64_long(value: int, seed: int = SEED) -> int:
    """``XXH64.hashLong``: eight bytes."""
    h = (seed + _P5 + 8) & _MASK64
    h ^= (_rotl64((value * _P2) & _MASK64, 31) * _P1) & _MASK64
    h = (_rotl64(h, 27) * _P1 + _P4) & _MASK64
    return _fmix64(h)


def xxh64_bytes(data: bytes, seed: int = SEED) -> int:
    """``XXH64.hashUnsafeBytes``: the standard XXH64 of the bytes."""
    seed &= _MASK64
    length, offset = len(data), 0
    if length >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _MASK64, (seed + _P2) & _MASK64, seed, (seed - _P1) & _MASK64
        while offset <= length - 32:
            a, b, c, d = struct.unpack_from("<4Q", data, offset)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            offset += 32
        h = (_rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)) & _MASK64
        for v in (v1, v2, v3, v4):
            h ^= _round(0, v)
            h = (h * _P1 + _P4) & _MASK64
    else:
        h = (seed + _P5) & _MASK64
    h = (h + length) & _MASK64
    while offset <= length - 8:
        (lane,) = struct.unpack_from("<Q", data, offset)
        h ^= _round(0, lane)
        h = (_rotl64(h, 27) * _P1 + _P4) & _MASK64
        offset += 8
    if offset <= length - 4:
        (word,) = struct.unpack_from("<I", data, offset)
        h ^= (word * _P1) & _MASK64
        h = (_rotl64(h, 23) * _P2 + _P3) & _MASK64
        offset += 4
    while offset < length:
        h ^= (data[offset] * _P5) & _MASK64
        h = (_rotl64(h, 11) * _P1) & _MASK64
        offset += 1
    return _fmix64(h)


# -- Spark's type rules --------------------------------------------------------------------------------
_INTS = {"boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "date"}
_LONGS = {"bigint", "long", "timestamp", "timestamp_ltz", "timestamp_ntz"}
_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


class UnsupportedKeyType(ValueError):
    """A key column type this module does not hash as Spark does."""


def xxhash64(value: Any, spark_type: str, seed: int = SEED) -> int:
    """Spark's ``xxhash64`` of ``value`` (as pyspark collects it: int, float, str, bytes, bool,
    Decimal, date, datetime, tuple/list/dict/Row) of the Spark type ``spark_type`` (its
    ``simpleString``, e.g. ``bigint``, ``struct<a:string,b:int>``)."""
    return _hash(value, parse_type(spark_type.strip().lower()), seed)


def key_group(value: Any, spark_type: str, key_groups: int) -> int:
    """The key group Spark gives a key: ``pmod(xxhash64(key), key_groups)``."""
    return xxhash64(value, spark_type) % key_groups


def _hash(value: Any, kind: Any, seed: int) -> int:
    if value is None:
        return seed
    if isinstance(kind, str):
        return _hash_atom(value, kind, seed)
    tag = kind[0]
    if tag == "struct":
        fields = kind[1]
        if isinstance(value, dict):
            items = [value.get(name) for name, _ in fields]
        else:  # (a tuple or Row, by position)
            items = list(value)
            if len(items) != len(fields):
                raise ValueError(f"a struct of {len(fields)} fields, got {value!r}")
        for item, (_, field_kind) in zip(items, fields):
            seed = _hash(item, field_kind, seed)
        return seed
    if tag == "array":
        for item in value:
            seed = _hash(item, kind[1], seed)
        return seed
    raise UnsupportedKeyType(f"cannot hash a key of type {kind!r}")


def _hash_atom(value: Any, kind: str, seed: int) -> int:
    if kind in _INTS:
        if kind == "date":
            value = (value - _EPOCH_DATE).days if isinstance(value, datetime.date) else value
        return xxh64_int(int(value), seed)
    if kind in _LONGS:
        if isinstance(value, datetime.datetime):
            value = _micros(value, kind)
        return xxh64_long(int(value), seed)
    if kind in ("float", "real"):
        bits = 0 if value == 0 else struct.unpack("<I", struct.pack("<f", value))[0]
        return xxh64_int(0x7FC00000 if math.isnan(value) else bits, seed)
    if kind == "double":
        bits = 0 if value == 0 else struct.unpack("<Q", struct.pack("<d", value))[0]
        return xxh64_long(0x7FF8000000000000 if math.isnan(value) else bits, seed)
    if kind in ("string", "varchar", "char") or kind.startswith(("varchar(", "char(")):
        return xxh64_bytes(str(value).encode("utf-8"), seed)
    if kind == "binary":
        return xxh64_bytes(bytes(value), seed)
    found = _DECIMAL.fullmatch(kind)
    if found:
        precision, scale = int(found.group(1)), int(found.group(2))
        unscaled = int(decimal.Decimal(value).scaleb(scale).to_integral_value())
        if precision <= 18:
            return xxh64_long(unscaled, seed)
        return xxh64_bytes(_java_big_integer_bytes(unscaled), seed)
    raise UnsupportedKeyType(f"cannot hash a key of type {kind!r} as Spark does")


def _micros(value: datetime.datetime, kind: str) -> int:
    """Microseconds since the epoch: a naive ``timestamp_ntz`` is wall time (as UTC), a naive
    ``timestamp`` is local time (as pyspark collects it)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc) if kind == "timestamp_ntz" else value.astimezone()
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _java_big_integer_bytes(value: int) -> bytes:
    """``BigInteger.toByteArray``: two's complement, big-endian, the fewest bytes with a sign bit."""
    length = (value + (value < 0)).bit_length() // 8 + 1
    return value.to_bytes(length, "big", signed=True)


# -- types by simpleString -----------------------------------------------------------------------------
def parse_type(text: str) -> Any:
    """A type's simpleString as this module reads it: a name, or ``("struct", ((name, type), ...))``,
    ``("array", type)``."""
    kind, rest = _parse_at(text, 0)
    if rest != len(text):
        raise UnsupportedKeyType(f"cannot read the type {text!r}")
    return kind


def _parse_at(text: str, at: int) -> tuple[Any, int]:
    if text.startswith("map<", at):
        raise UnsupportedKeyType(f"cannot hash a key of type {text!r}: Spark refuses to hash a map")
    for tag in ("struct<", "array<"):
        if text.startswith(tag, at):
            at += len(tag)
            if tag == "array<":
                inner, at = _parse_at(text, at)
                return ("array", inner), _expect(text, at, ">")
            fields: list[tuple[str, Any]] = []
            while not text.startswith(">", at):
                colon = text.find(":", at)
                if colon < 0:
                    raise UnsupportedKeyType(f"cannot read the type {text!r} at {at}")
                name = text[at:colon].strip().strip("`")
                kind, at = _parse_at(text, colon + 1)
                fields.append((name, kind))
                if text.startswith(",", at):
                    at += 1
            return ("struct", tuple(fields)), at + 1
    end = at
    depth = 0
    while end < len(text) and (depth or text[end] not in ",>"):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    return text[at:end].strip(), end


def _expect(text: str, at: int, char: str) -> int:
    if not text.startswith(char, at):
        raise UnsupportedKeyType(f"cannot read the type {text!r} at {at}")
    return at + 1


__all__ = ["SEED", "UnsupportedKeyType", "key_group", "murmur3_int", "murmur3_long", "xxh64_bytes", "xxh64_int",
           "xxh64_long", "xxhash64"]
