"""The scaling model (benchmarks/scaling_model.py) places key groups in state partitions as Spark does:
its Murmur3 ``hashLong`` equals Spark's ``hash`` of a bigint, and a stateful operator's key group lands
in the partition the model says (read back with ``spark_partition_id`` after Spark's own shuffle)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scaling_model  # noqa: E402

pytestmark = pytest.mark.spark


def test_the_models_hash_and_placement_are_sparks(spark):
    from pyspark.sql import functions as F

    values = [0, 1, 15, 16, 255, 1023, 4095, 2 ** 31, -1, -(2 ** 40), 2 ** 62 + 7]
    rows = spark.createDataFrame([(v,) for v in values], "g bigint").select("g", F.hash("g").alias("h")).collect()
    assert {r.g: r.h for r in rows} == {v: scaling_model.murmur3_long(v) for v in values}
    ints = spark.createDataFrame([(v,) for v in (0, 1, 7, 4096, 2 ** 31 - 1, -5)], "g int")
    assert {r.g: r.h for r in ints.select("g", F.hash("g").alias("h")).collect()} == {
        v: scaling_model.murmur3_int(v) for v in (0, 1, 7, 4096, 2 ** 31 - 1, -5)}
    placed = (spark.range(64).withColumnRenamed("id", "g").repartition(7, "g")
              .select("g", F.spark_partition_id().alias("p")).collect())
    assert {r.g: r.p for r in placed} == {g: scaling_model.partition_of(g, 7) for g in range(64)}


def test_a_balanced_placement_puts_group_g_in_partition_g_mod_partitions_in_spark(spark):
    from pyspark.sql import functions as F

    from windowed_operator.spark.driver.key_groups import balanced_values

    values = balanced_values(40, 8)
    placed = (spark.createDataFrame([(g, v) for g, v in enumerate(values)], "g int, v int").repartition(8, "v")
              .select("g", F.spark_partition_id().alias("p")).collect())
    assert {r.g: r.p for r in placed} == {g: g % 8 for g in range(40)}
