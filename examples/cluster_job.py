"""A job of your own for ``spark-submit``: click sessions per user, from JSON files to JSON files.

The operator is the one of ``pipelines/clickstream_sessions.yaml`` (early counts every 5 clicks, the
final count when the watermark passes a session, late clicks re-fire it, each update retracting the
last), applied with ``op.apply`` to a streaming DataFrame of the session ``spark-submit`` made; the
query runs until the input's end-of-input row has closed every session (``availableNow``).  Window
bounds are written as epoch milliseconds.  ``docs/guides/clusters.md`` ships it to a cluster with a
packed virtual environment (``--archives``); ``tests/spark/test_cluster.py`` runs those commands.

    python examples/pipelines/run.py generate clickstream_sessions   # its input, under examples/pipelines/data/
    spark-submit --master spark://host:7077 examples/cluster_job.py \\
        examples/pipelines/data/clickstream_sessions/clicks sessions-out/ sessions-ckpt/
"""
from __future__ import annotations

import argparse
from typing import Any, Optional

from accumulations import Count
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, bounded_disorder

SCHEMA = "user string, page string, ts bigint, end_of_input boolean"


def sessions_operator() -> KeyedWindowedOperator:
    return KeyedWindowedOperator(
        SessionWindows(30_000), Count(), key="user", timestamp="ts",
        trigger=(TriggerOption.at_watermark().with_early_firings_at_every(count=5)
                 .with_late_firings_at_every(count=1).accumulating_and_retracting_fired_panes()),
        watermark=bounded_disorder(10_000), allowed_lateness=120_000)


def start(spark: Any, clicks: str, output: str, checkpoint: str, files_per_batch: Optional[int] = None) -> Any:
    """Start the query (``availableNow``: it ends when the input has been read and every session closed)."""
    from pyspark.sql import functions as F

    reader = spark.readStream.schema(SCHEMA)
    if files_per_batch is not None:
        reader = reader.option("maxFilesPerTrigger", files_per_batch)
    panes = sessions_operator().apply(reader.json(clicks), end_of_input="end_of_input", checkpoint=checkpoint)
    rows = panes.select("key", F.unix_millis("window_start").alias("window_start"),
                        F.unix_millis("window_end").alias("window_end"), "value", "timing", "pane_index",
                        "is_retraction")
    return (rows.writeStream.format("json").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start(output))


def main(argv: Optional[list[str]] = None) -> None:
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clicks", help="a directory of JSON files: user, page, ts (epoch ms), end_of_input")
    parser.add_argument("output", help="where the panes go (JSON files)")
    parser.add_argument("checkpoint", help="the query's checkpoint location (shared storage on a cluster)")
    parser.add_argument("--files-per-batch", type=int, default=None, help="maxFilesPerTrigger of the source")
    args = parser.parse_args(argv)
    spark = SparkSession.builder.appName("clickstream-sessions").getOrCreate()
    start(spark, args.clicks, args.output, args.checkpoint, args.files_per_batch).awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
