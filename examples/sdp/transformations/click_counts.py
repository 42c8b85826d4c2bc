"""A windowed operator defining a streaming table of Spark Declarative Pipelines.

Inside a query function nothing may analyse a DataFrame, so the input's schema is declared (a
StructType: a DDL string would be parsed by the server) and passed to ``apply(schema=...)``.
"""
import os

from pyspark import pipelines as dp
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from accumulations import Count
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder

CLICKS = StructType([StructField("user", StringType()), StructField("page", StringType()),
                     StructField("ts", LongType()), StructField("end_of_input", BooleanType())])


@dp.table(comment="Clicks per user and 10-second window, with early firings and retractions")
def click_counts():
    clicks = (spark.readStream.schema(CLICKS).option("maxFilesPerTrigger", 1)  # noqa: F821 - SDP provides spark
              .json(os.environ["WO_SDP_INPUT"]))
    op = KeyedWindowedOperator(
        TimeWindows(10_000), Count(), key="user", timestamp="ts", watermark=bounded_disorder(2_000),
        allowed_lateness=30_000,
        trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=3).with_late_firings_at_every(count=1)
        .accumulating_and_retracting_fired_panes())
    return op.apply(clicks, schema=CLICKS, end_of_input="end_of_input")
