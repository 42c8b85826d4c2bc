"""A local SparkSession configured for the windowed operator's stateful processing."""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Settings the operator needs: transformWithStateInPandas requires RocksDB.  The avro state encoding
#: is deliberately not set: native streaming aggregations in the same session refuse it, and the
#: operator's state schema (one binary value) never grows: versions live inside the value.
REQUIRED_CONF = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def local_session(master: str = "local[2]", app_name: str = "windowed-operator", shuffle_partitions: int = 2,
                  extra_conf: dict | None = None) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g"))
    for key, value in {**REQUIRED_CONF, **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
