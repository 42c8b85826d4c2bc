"""A local SparkSession configured for the windowed operator's stateful processing."""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Iterator, Optional, Sequence

from pyspark.sql import SparkSession

from . import worker_site
from .handoff import DAEMON_CONF, WORKER_DAEMON
from .shipping import ship_library

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Settings the operator needs: transformWithStateInPandas requires RocksDB.  The avro state encoding
#: is deliberately not set: native streaming aggregations in the same session refuse it, and the
#: operator's state schema (one binary value) never grows: versions live inside the value.
REQUIRED_CONF = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Stage progress bars interleave with the operator's own progress lines and are no use to a
    # streaming query's user (a bar per micro-batch); --conf spark.ui.showConsoleProgress=true.
    "spark.ui.showConsoleProgress": "false",
}

#: What ``apply()`` checks in the caller's session, and why each is needed: a session built
#: elsewhere (the user's own, a platform's) fails at its first batch without it, in a Java trace.
NEEDED_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        ROCKSDB_PROVIDER, "transformWithStateInPandas, which runs the operator, keeps its state only in RocksDB"),
}


#: The changelog checkpointing setting of the RocksDB state store.
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"

#: Settings the operator relies on for speed on every master, cluster or local: ``local_session`` sets
#: them, and ``apply()`` names each one the caller's session lacks, in one line with how to set it (the
#: query runs without it, slower).
ADVISED_CONF = {
    # A commit writes the batch's changes to RocksDB's changelog instead of a snapshot of its files:
    # Nexmark at 2M events, 2 rounds interleaved, ours 1.09x (q5) and 1.20x (q11) faster, native
    # 1.04x and 1.34x (benchmarks/results/nexmark_setting_ab.txt).  Spark moves a
    # checkpoint between the two forms either way, so turning it on or off keeps the state.
    CHANGELOG_CONF: ("true", "each micro-batch then writes its state changes to a changelog; without it every "
                             "state store snapshots its RocksDB files every batch"),
}


class SessionAdvice(UserWarning):
    """A session setting the operator runs without, slower (``ADVISED_CONF``)."""


class SessionSettingsError(RuntimeError):
    """The session lacks a setting the operator needs."""


def check_session(spark: Any) -> None:
    """Refuse a session that lacks a setting of ``NEEDED_CONF``, naming each key, its current and
    its required value, before a query starts (set them when the session is built; the state store
    provider cannot change in a running session); warn of each setting of ``ADVISED_CONF`` it lacks
    (``SessionAdvice``)."""
    wrong = []
    for key, (needed, why) in NEEDED_CONF.items():
        current = spark.conf.get(key, None)
        if current != needed:
            wrong.append(f"  {key} is {current!r}, needs {needed!r}: {why}")
    for key, (advised, why) in ADVISED_CONF.items():
        current = spark.conf.get(key, None)
        if current != advised:
            warnings.warn(f"{key} is {current!r}: set it to {advised!r} ({why}): spark-submit --conf {key}={advised}, "
                          f"or SparkSession.builder.config({key!r}, {advised!r})", SessionAdvice, stacklevel=4)
    if wrong:
        raise SessionSettingsError(
            "this SparkSession cannot run a windowed operator:\n" + "\n".join(wrong) + "\nbuild the session "
            "with them (SparkSession.builder.config(key, value), spark-submit --conf key=value, or a platform's "
            "Spark configuration), or use windowed_operator.spark.local_session(), which sets them")


#: The directory whose ``sitecustomize`` Spark's Python processes run (``worker_site``), and the setting
#: that puts it on their path.
WORKER_SITE = os.path.dirname(os.path.abspath(worker_site.__file__))
WORKER_PATH = "spark.executorEnv.PYTHONPATH"

#: The setting naming the class that writes a query's checkpoint files; the class that renames them
#: with Hadoop's FileSystem API (see ``LOCAL_DEFAULTS``), and Spark's default, which renames them with
#: FileContext (named only to switch back, as a user on HDFS or an object store may).
CHECKPOINT_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
_CHECKPOINTING = "org.apache.spark.sql.execution.streaming.checkpointing"
FILE_SYSTEM_CHECKPOINT_MANAGER = f"{_CHECKPOINTING}.FileSystemBasedCheckpointFileManager"
SPARK_DEFAULT_CHECKPOINT_MANAGER = f"{_CHECKPOINTING}.FileContextBasedCheckpointFileManager"

#: Defaults that suit one machine and nothing else: on a cluster the user's Spark configuration
#: (spark-defaults.conf, --conf) decides.
LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    # Python workers forked with the processor's modules already imported (``worker_daemon``).
    # They also hand each key group's rows to the processor as slices of Arrow batches
    # (``sliced_handoff``), so input is not packed here by default (``handoff.choose_handoff``).
    DAEMON_CONF: WORKER_DAEMON,
    # Every Python process Spark starts imports pyspark from the installed package, not from its zip
    # (``worker_site``): the driver-side pre-init of a stateful operator, which no daemon reaches,
    # took 0.4-0.5 s less at a query's first batch (Nexmark q7, 2M events).
    WORKER_PATH: WORKER_SITE,
    # Checkpoint files (offsets, commits, each state store's changelog) are written to a temporary
    # file and renamed.  Spark's default manager renames through Hadoop's FileContext, whose local
    # file system first looks the target up by running ``readlink`` in a child process of the JVM
    # (``RawLocalFileSystem.getFileLinkStatus``): 5 ms a rename on an idle machine, most of each
    # stateful task's commit and ~50 ms of each micro-batch's planning on Nexmark.  Renaming through
    # the FileSystem API is ``File.renameTo``: on a local disk the same POSIX rename, as atomic, with
    # no child process.  The files are the same either way: a checkpoint moves between the two
    # managers freely.
    CHECKPOINT_MANAGER_CONF: FILE_SYSTEM_CHECKPOINT_MANAGER,
}


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def session_conf(master: str, shuffle_partitions: int = 2, extra_conf: Optional[dict] = None) -> dict[str, str]:
    """What a session on ``master`` is given: the local defaults on a local master only, what the
    operator needs everywhere, the caller's settings last (they win; a ``spark.executorEnv.PYTHONPATH``
    of theirs is followed by the site hook's directory on a local master)."""
    local = {**LOCAL_DEFAULTS, "spark.sql.shuffle.partitions": str(shuffle_partitions)} if is_local_master(master) else {}
    advised = {key: value for key, (value, _) in ADVISED_CONF.items()}
    conf = {**local, **advised, **REQUIRED_CONF, **(extra_conf or {})}
    given = (extra_conf or {}).get(WORKER_PATH)
    if local and given:  # a path of the caller's own keeps the site hook after it
        conf[WORKER_PATH] = os.pathsep.join(dict.fromkeys([*given.split(os.pathsep), WORKER_SITE]))
    return conf


@contextlib.contextmanager
def jvm_stderr_to(path: Optional[str]) -> Iterator[None]:
    """While the JVM starts, point this process's stderr at ``path``: the JVM inherits it, so
    Spark's log, its warnings at start-up (before any log level can be set), the stage progress
    bars and the Python workers' messages (which the JVM relays to its stderr) go to the file for
    the life of the JVM, while this process's own stderr returns to the terminal afterwards.  The
    JVM's stdout stays the terminal: a console sink's rows are output, not noise.  No effect once
    a JVM is running.  The file's directory is made if missing."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(2)
    try:
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


def local_session(master: str = "local[2]", app_name: str = "windowed-operator", shuffle_partitions: int = 2,
                  extra_conf: dict | None = None, py_files: Sequence[str] = (), ship: bool = True,
                  spark_log: Optional[str] = None) -> SparkSession:
    """A session on ``master`` (despite the name, any master: ``spark://host:7077`` too).  ``extra_conf``
    overrides the defaults; ``py_files`` (.py, .zip, .egg: user code) are added on the driver and every
    executor (and to PYTHONPATH, for the driver's Python workers if this starts the JVM); unless the
    master is local (or ``ship`` is false) the library itself is shipped to the executors too (see
    :mod:`.shipping`).  On a local master, ``shuffle_partitions`` and :data:`LOCAL_DEFAULTS` apply
    (``extra_conf`` wins); on a cluster what the operator needs and :data:`ADVISED_CONF` are set.  ``spark_log`` sends
    the JVM's stderr (Spark's log, progress bars, the Python workers' messages) to that file instead
    of the terminal, if this call starts the JVM (its directory is made if missing)."""
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
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in session_conf(master, shuffle_partitions, extra_conf).items():
        builder = builder.config(key, value)
    with jvm_stderr_to(spark_log):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if ship:
        ship_library(spark)
    for path in py_files:
        spark.sparkContext.addPyFile(path if "://" in path else os.path.abspath(path))
    return spark
