"""Spark's ``xxhash64`` (a row's key group is ``pmod(xxhash64(key), key_groups)``) equals the Python one
(``spark_hashes.xxhash64``) on random values of every type a key column may have: what lets code
outside a query find the key group Spark gives a stored key."""
import datetime
import decimal
import random

import pytest

from windowed_operator.spark.base.spark_hashes import xxhash64

pytestmark = pytest.mark.spark


def _values(rng: random.Random) -> dict[str, list]:
    def text() -> str:
        return "".join(rng.choice("ab€z\u00e9x\U0001F600 ") for _ in range(rng.randint(0, 70)))

    return {
        "string": [text() for _ in range(60)] + [None, ""],
        "bigint": [rng.randint(-2 ** 63, 2 ** 63 - 1) for _ in range(30)] + [0, -1, None],
        "int": [rng.randint(-2 ** 31, 2 ** 31 - 1) for _ in range(30)],
        "smallint": [rng.randint(-2 ** 15, 2 ** 15 - 1) for _ in range(10)],
        "tinyint": [rng.randint(-128, 127) for _ in range(10)],
        "boolean": [True, False, None],
        "double": [rng.uniform(-1e9, 1e9) for _ in range(20)] + [0.0, -0.0, float("nan"), float("inf")],
        "float": [rng.uniform(-1e3, 1e3) for _ in range(10)] + [0.0, -0.0],
        "binary": [bytes(rng.randrange(256) for _ in range(rng.randint(0, 70))) for _ in range(20)],
        "date": [datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randint(-30_000, 30_000)) for _ in range(10)],
        "timestamp": [datetime.datetime(2026, 1, 1, 12, 0, 0, 123_456) + datetime.timedelta(seconds=rng.randint(
            -10 ** 9, 10 ** 9)) for _ in range(10)],
        "timestamp_ntz": [datetime.datetime(2026, 1, 1) + datetime.timedelta(microseconds=rng.randint(-10 ** 15, 10 ** 15))
                          for _ in range(10)],
        "decimal(10,2)": [decimal.Decimal(rng.randint(-10 ** 9, 10 ** 9)) / 100 for _ in range(10)],
        "decimal(30,5)": [decimal.Decimal(rng.randint(-10 ** 24, 10 ** 24)) / 100_000 for _ in range(10)]
        + [decimal.Decimal(0)],
        "struct<a:string,b:bigint>": [(text(), rng.randint(-9, 9 ** 9)) for _ in range(10)] + [(None, 5)],
        "array<int>": [[rng.randint(-99, 99) for _ in range(rng.randint(0, 4))] for _ in range(10)],
    }


def test_xxhash64_in_python_is_sparks_for_every_key_type(spark):
    from pyspark.sql import functions as F

    for spark_type, values in _values(random.Random(20261205)).items():
        frame = spark.createDataFrame([(v,) for v in values], f"k {spark_type}")
        rows = frame.select("k", F.xxhash64("k").alias("h")).collect()
        assert len(rows) == len(values)
        wrong = [(r.k, r.h, xxhash64(r.k, spark_type)) for r in rows if xxhash64(r.k, spark_type) != r.h]
        assert not wrong, (spark_type, wrong[:3])
