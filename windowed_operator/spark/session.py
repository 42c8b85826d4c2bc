"""A local SparkSession configured for the windowed operator's stateful processing."""
from __future__ import annotations

import os
import sys
from typing import Sequence

from pyspark.sql import SparkSession

from .shipping import ship_library

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Settings the operator needs: transformWithStateInPandas requires RocksDB.  The avro state encoding
#: is deliberately not set: native streaming aggregations in the same session refuse it, and the
#: operator's state schema (one binary value) never grows: versions live inside the value.
REQUIRED_CONF = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def local_session(master: str = "local[2]", app_name: str = "windowed-operator", shuffle_partitions: int = 2,
                  extra_conf: dict | None = None, py_files: Sequence[str] = (), ship: bool = True) -> SparkSession:
    """A session on ``master`` (despite the name, any master: ``spark://host:7077`` too).  ``extra_conf``
    overrides the defaults; ``py_files`` (.py, .zip, .egg: user code) are added on the driver and every
    executor (and to PYTHONPATH, for the driver's Python workers if this starts the JVM); unless the
    master is local (or ``ship`` is false) the library itself is shipped to the executors too (see
    :mod:`.shipping`)."""
    missing = [f for f in py_files if "://" not in f and not os.path.exists(f)]
    if missing:
        raise FileNotFoundError(f"py files not found: {', '.join(missing)}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local_files = [os.path.abspath(f) for f in py_files if "://" not in f]
    if local_files:  # TransformWithStateInPandas runs a Python worker on the driver too (a query's first
        # batch), which sees the PYTHONPATH the driver JVM starts with, not the files added below
        entries = [os.path.dirname(f) if f.endswith(".py") else f for f in local_files]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
            [*entries, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g"))
    for key, value in {**REQUIRED_CONF, **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if ship:
        ship_library(spark)
    for path in py_files:
        spark.sparkContext.addPyFile(path if "://" in path else os.path.abspath(path))
    return spark
