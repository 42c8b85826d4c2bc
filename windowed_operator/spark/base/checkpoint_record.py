"""What a checkpoint records of how its query was planned, in one file beside Spark's own.

A checkpoint holds state whose layout the plan decided when the query first started: the native stages
setting a query started with (``driver.checkpoint_settings``) and the key groups and their placement
(``driver.key_groups``).  A restart must plan the same, so each is written into ``RECORD`` at a query's
first start and read back at every restart that is told the checkpoint.  One JSON object, each
setting under its own name: writing one keeps the others.  On the local file system it is read and
written here; on another (``hdfs://``, ``s3a://``, ...) through the JVM's Hadoop file system, with a
classic session.
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional
from urllib.parse import urlparse

#: The file in a checkpoint's directory.
RECORD = "windowed_operator.json"


class CheckpointRecordError(ValueError):
    """A checkpoint's record cannot be read."""


def local_directory(location: str, plain_paths_local: bool = True) -> Optional[str]:
    """The directory of a checkpoint on the local file system (``file:``, or a plain path where the
    default file system is the local one: ``plain_paths_local``), else None."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return parsed.path
    if parsed.scheme == "" or len(parsed.scheme) == 1:  # (a one-letter scheme: a Windows drive)
        return location if plain_paths_local else None
    return None


def _hadoop(spark: Any, path: str) -> tuple[Any, Any]:
    jvm = getattr(getattr(spark, "sparkContext", None), "_jvm", None) if spark is not None else None
    if jvm is None:
        raise CheckpointRecordError(f"{path} is not on this machine's file system, and no classic Spark session is "
                                    "at hand to read it through Hadoop's (Spark Connect exposes none)")
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path, hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def read_record(location: str, spark: Any = None, plain_paths_local: bool = True) -> dict[str, Any]:
    """The checkpoint's record ({} where it has none)."""
    local = local_directory(location, plain_paths_local)
    if local is not None:
        path = os.path.join(local, RECORD)
        if not os.path.isfile(path):
            return {}
        with open(path, encoding="utf-8") as f:
            text = f.read()
    else:
        file, fs = _hadoop(spark, location.rstrip("/") + "/" + RECORD)
        if not fs.exists(file):
            return {}
        jio = spark.sparkContext._jvm.java.io
        stream = fs.open(file)
        try:
            reader = jio.BufferedReader(jio.InputStreamReader(stream, "UTF-8"))
            text = "\n".join(iter(reader.readLine, None))
        finally:
            stream.close()
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise CheckpointRecordError(f"checkpoint {location}: {RECORD} cannot be read ({exc})") from None
    if not isinstance(record, dict):
        raise CheckpointRecordError(f"checkpoint {location}: {RECORD} holds {type(record).__name__}, not an object")
    return record


def update_record(location: str, settings: dict[str, Any], spark: Any = None, plain_paths_local: bool = True) -> None:
    """Write ``settings`` into the checkpoint's record, keeping what else it records."""
    record = {**read_record(location, spark, plain_paths_local), **settings}
    text = json.dumps(record) + "\n"
    local = local_directory(location, plain_paths_local)
    if local is not None:
        os.makedirs(local, exist_ok=True)
        temporary = os.path.join(local, f".{RECORD}.tmp")
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, os.path.join(local, RECORD))
        return
    file, fs = _hadoop(spark, location.rstrip("/") + "/" + RECORD)
    stream = fs.create(file, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def has_batches(location: str, spark: Any = None, plain_paths_local: bool = True) -> bool:
    """Whether Spark has written a batch into the checkpoint (its offsets log has an entry)."""
    return bool(log_entries(location, "offsets", spark, plain_paths_local))


def log_entries(location: str, log: str, spark: Any = None, plain_paths_local: bool = True) -> dict[int, float]:
    """The batches of one of Spark's logs in the checkpoint (``offsets``, ``commits``, or a file sink's
    ``_spark_metadata`` given as the location): batch id -> when its file was written (seconds since
    the epoch); {} where the log is missing."""
    local = local_directory(location, plain_paths_local)
    if local is not None:
        directory = os.path.join(local, log)
        if not os.path.isdir(directory):
            return {}
        return {int(name.split(".")[0]): os.path.getmtime(os.path.join(directory, name))
                for name in os.listdir(directory) if _batch_file(name)}
    directory, fs = _hadoop(spark, location.rstrip("/") + "/" + log)
    if not fs.exists(directory):
        return {}
    return {int(status.getPath().getName().split(".")[0]): status.getModificationTime() / 1000
            for status in fs.listStatus(directory) if _batch_file(status.getPath().getName())}


def _batch_file(name: str) -> bool:
    """A batch's file of a Spark log: its id, or (a file sink's compacted batch) its id and ``.compact``."""
    return name.isdigit() or (name.endswith(".compact") and name[:-len(".compact")].isdigit())
