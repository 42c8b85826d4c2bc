"""Until the Spark runner carries per-partition maxima to every key group (issue 60's Spark half),
``apply()`` refuses ``bounded_disorder(partition=...)``: run as one global watermark, the lagging
partition's rows would be dropped as late without a word."""
import pytest

from accumulations import Cogroup, Count
from windowed_operator import KeyedWindowedMergeOperator, KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.spark.errors import SparkOperatorError

pytestmark = pytest.mark.spark

SCHEMA = "user string, part int, ts bigint"


def stream(spark, tmp_path, name="in"):
    (tmp_path / name).mkdir()
    return spark.readStream.schema(SCHEMA).json(str(tmp_path / name))


def test_apply_refuses_a_per_partition_watermark_and_takes_the_global_one(spark, tmp_path):
    partitioned = bounded_disorder(1_000, partition="part")
    op = KeyedWindowedOperator(TimeWindows(10_000), Count(), key="user", timestamp="ts", watermark=partitioned,
                               name="counts")
    df = stream(spark, tmp_path)
    with pytest.raises(SparkOperatorError, match=r"^operator 'counts': watermark=bounded_disorder\(\.\.\., partition='part'\) "
                                                 r"is not supported on Spark yet"):
        op.apply(df)
    merge = KeyedWindowedMergeOperator(TimeWindows(10_000), Cogroup(), key="user", timestamp="ts",
                                       watermark=partitioned, name="both")
    with pytest.raises(SparkOperatorError, match="'both': .*not supported on Spark yet"):
        merge.apply(df, stream(spark, tmp_path, "right"))
    assert op.model_copy(update={"watermark": bounded_disorder(1_000)}).apply(df).isStreaming
