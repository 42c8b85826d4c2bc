"""Spark's hashes in Python (``windowed_operator.spark.base.spark_hashes``), without a JVM: the xxHash64 is
the standard one (its published vectors), the type rules are read from a type's simpleString, and a
type it cannot hash is named.  Against Spark's own ``xxhash64`` on random values of every type:
``tests/spark/test_spark_hashes.py``."""
import datetime
import decimal

import pytest

from windowed_operator.spark.base.spark_hashes import (UnsupportedKeyType, key_group, xxh64_bytes, xxh64_int,
                                                       xxh64_long, xxhash64)

U64 = (1 << 64) - 1


@pytest.mark.parametrize("data,seed,expected", [
    (b"", 0, 0xEF46DB3751D8E999),
    (b"abc", 0, 0x44BC2CF5AD770999),
    (b"Nobody inspects the spammish repetition", 0, 0xFBCEA83C8A378BF1),  # (32 bytes and more: the four lanes)
])
def test_the_bytes_hash_is_the_standard_xxh64(data, seed, expected):
    assert xxh64_bytes(data, seed) & U64 == expected


def test_ints_and_longs_hash_as_their_little_endian_bytes_do():
    for value in (0, 1, -1, 2 ** 31 - 1, -(2 ** 31)):
        assert xxh64_int(value) == xxh64_bytes((value & 0xFFFFFFFF).to_bytes(4, "little"), 42)
    for value in (0, 1, -1, 2 ** 63 - 1, -(2 ** 63), 1_767_225_600_000):
        assert xxh64_long(value) == xxh64_bytes((value & U64).to_bytes(8, "little"), 42)


def test_the_type_decides_the_width_and_a_struct_folds_its_fields():
    assert xxhash64(7, "int") == xxh64_int(7) != xxhash64(7, "bigint") == xxh64_long(7)
    assert xxhash64(True, "boolean") == xxh64_int(1)
    assert xxhash64("é", "string") == xxh64_bytes("é".encode())
    assert xxhash64(None, "string") == 42, "a null leaves the seed"
    folded = xxh64_long(5, xxh64_bytes(b"a"))
    assert xxhash64(("a", 5), "struct<a:string,b:bigint>") == xxhash64({"b": 5, "a": "a"}, "struct<a:string,b:bigint>") \
        == folded
    assert xxhash64([1, 2], "array<int>") == xxh64_int(2, xxh64_int(1))
    assert xxhash64(-0.0, "double") == xxhash64(0.0, "double") == xxh64_long(0)
    assert xxhash64(decimal.Decimal("1.25"), "decimal(10,2)") == xxh64_long(125)
    assert xxhash64(datetime.date(1970, 1, 2), "date") == xxh64_int(1)
    assert xxhash64(datetime.datetime(1970, 1, 1, 0, 0, 1), "timestamp_ntz") == xxh64_long(1_000_000)


def test_a_key_group_is_the_positive_remainder():
    groups = [key_group(f"k{i}", "string", 16) for i in range(200)]
    assert all(0 <= g < 16 for g in groups) and len(set(groups)) == 16
    assert key_group(-3, "bigint", 5) == xxh64_long(-3) % 5


def test_a_type_it_cannot_hash_is_named():
    with pytest.raises(UnsupportedKeyType, match="interval"):
        xxhash64(1, "interval day")
    with pytest.raises(UnsupportedKeyType, match="cannot read the type"):
        xxhash64(1, "struct<a:int")
    with pytest.raises(UnsupportedKeyType, match="refuses to hash a map"):
        xxhash64({"a": 1}, "map<string,int>")
