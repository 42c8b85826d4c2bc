"""Move a stopped query's checkpoint to another number of state partitions (another cluster size).

Spark's state partitions are fixed for the life of a checkpoint: a restart with another
``spark.sql.shuffle.partitions`` keeps the stored number.  Spark 4.2's offline repartitioning
(``spark._streamingCheckpointManager.repartition``) rewrites the state of every stateful operator of
a stopped query into a new number of partitions, as one more batch of the checkpoint that reads no
input; the next start goes on from there.  :func:`repartition_checkpoint` runs it after the checks
Spark leaves to the caller, and repairs what it leaves behind:

- **a running query is refused**: one of this session's active queries on the checkpoint, a batch
  begun and not committed (running, or stopped mid-batch: restart the query and let a batch complete
  first), or a batch committed less than ``quiet_seconds`` ago (a query of another process may still
  be running: Spark keeps no lock on a checkpoint);
- **a file sink's log gets the new batch**: Spark's file sink logs every batch's files in
  ``<path>/_spark_metadata`` and refuses to read or compact a log with a batch missing
  (``BATCH_METADATA_NOT_FOUND``); the repartitioning's batch goes through no sink, so for each
  ``file_sinks`` path the batches committed since its log's last one are logged with no files, by
  Spark's own log class (a compaction batch compacts, as the sink would);
- the table sink and ``foreachBatch`` need nothing: the table sink applies each batch id above the
  last it applied, and a ``foreachBatch`` function is not called for the new batch.

Key groups are not state partitions: Spark moves whole groups, keeping each group's value, so a
query keeps its key groups (``driver.key_groups``), and partitions beyond their number stay idle.
Every layout, join, chain and per-partition watermark restarts exactly after it
(``tests/spark/test_repartition.py``, ``benchmarks/repartition_matrix.py``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

from ..error_summary import error_summary
from .base.checkpoint_record import local_directory, log_entries
from .inspect import key_groups_of, state_partitions
from .base.errors import SparkOperatorError

#: The default for ``quiet_seconds``: a checkpoint whose last batch committed more recently is refused.
QUIET_SECONDS = 60.0


class RepartitionError(SparkOperatorError):
    """The checkpoint cannot be repartitioned now; the message says why and what to do."""


@dataclass(frozen=True)
class Repartitioned:
    """What :func:`repartition_checkpoint` did."""

    checkpoint: str
    partitions_before: int
    partitions: int
    #: The batch Spark wrote (it reads no input; the next start goes on after it).
    batch_id: int
    #: The key groups of the query (None: not known from the checkpoint).
    key_groups: Optional[int]
    #: Each file sink's path and the batches logged in it with no files.
    file_sinks: tuple[tuple[str, tuple[int, ...]], ...] = field(default=())

    def lines(self) -> list[str]:
        """What was done, for a reader."""
        out = [f"{self.checkpoint}: state moved from {self.partitions_before} to {self.partitions} partitions "
               f"(batch {self.batch_id}, which reads no input); start the query again to go on"
               if self.partitions != self.partitions_before else
               f"{self.checkpoint}: {self.partitions} state partitions already: the state stays"]
        for path, batches in self.file_sinks:
            out.append(f"file sink {path}: batch{'es' if len(batches) > 1 else ''} "
                       f"{', '.join(map(str, batches))} logged with no files" if batches else
                       f"file sink {path}: its log was complete")
        if self.key_groups is not None and self.partitions > self.key_groups:
            out.append(f"note: the query hashes keys into {self.key_groups} key groups, so {self.partitions - self.key_groups}"
                       f" of the {self.partitions} partitions hold no state and do no stateful work")
        return out


def repartition_checkpoint(spark: Any, checkpoint: str, partitions: int, *, file_sinks: tuple[str, ...] = (),
                           quiet_seconds: float = QUIET_SECONDS) -> Repartitioned:
    """Move the state of the stopped query whose checkpoint is ``checkpoint`` to ``partitions`` state
    partitions (Spark's offline repartitioning), after refusing a running query, and log the new
    batch in each file sink's log (``file_sinks``: the sinks' output paths).  With the number the
    checkpoint has, only the file sinks' logs are filled (a checkpoint repartitioned without them).  Needs a classic
    session of Spark 4.2 or later, configured as the query's (the state store provider)."""
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise RepartitionError(f"partitions must be a positive integer, got {partitions!r}")
    manager = getattr(spark, "_streamingCheckpointManager", None)
    if manager is None or getattr(getattr(spark, "sparkContext", None), "_jvm", None) is None:
        raise RepartitionError("repartitioning needs a classic Spark session of Spark 4.2 or later "
                               "(spark._streamingCheckpointManager; Spark Connect has none)")
    refuse_active(spark, checkpoint)
    check_stopped(checkpoint, quiet_seconds, file_sinks, spark)
    before = state_partitions(spark, checkpoint)
    if before == partitions and not file_sinks:
        raise RepartitionError(f"checkpoint {checkpoint} has {partitions} state partitions already")
    if before != partitions:  # (the same number with file sinks: their logs are filled, the state stays)
        try:
            manager.repartition(checkpoint, partitions)
        except Exception as exc:  # (Spark's own refusal: its message, first line)
            raise RepartitionError(f"checkpoint {checkpoint}: Spark refused to repartition it: "
                                   f"{error_summary(exc)}") from exc
    batch_id = max(log_entries(checkpoint, "commits", spark))
    filled = tuple((path, log_missing_batches(spark, path, checkpoint)) for path in file_sinks)
    return Repartitioned(checkpoint=checkpoint, partitions_before=before, partitions=partitions, batch_id=batch_id,
                         key_groups=_count(key_groups_of(spark, checkpoint)), file_sinks=filled)


def refuse_active(spark: Any, checkpoint: str) -> None:
    for query in spark.streams.active:
        try:
            root = str(query._jsq.streamingQuery().resolvedCheckpointRoot())
        except Exception:  # (not a classic query object: nothing to compare)
            continue
        if _same_location(root, checkpoint):
            raise RepartitionError(f"checkpoint {checkpoint} is the checkpoint of the running query {query.id} "
                                   f"({query.name or 'unnamed'}): stop it first (query.stop())")


def check_stopped(checkpoint: str, quiet_seconds: float = QUIET_SECONDS, file_sinks: tuple[str, ...] = (),
                  spark: Any = None) -> None:
    """Refuse a checkpoint whose query may be running, from its files alone (no session needed for a
    local one: the command checks before starting Spark), and file sinks without a log."""
    offsets = log_entries(checkpoint, "offsets", spark)
    commits = log_entries(checkpoint, "commits", spark)
    if not commits:
        raise RepartitionError(f"checkpoint {checkpoint}: no batch committed (is it a query's checkpointLocation?)")
    last = max(offsets)
    if last not in commits:
        raise RepartitionError(
            f"checkpoint {checkpoint}: batch {last} began and was not committed: its query is running, or stopped "
            "in the middle of a batch; stop the query, or start it again until a batch completes, then repartition")
    age = time.time() - max(commits.values())
    if age < quiet_seconds:
        raise RepartitionError(
            f"checkpoint {checkpoint}: its last batch committed {age:.0f} s ago: its query may still be running "
            f"(Spark keeps no lock on a checkpoint); stop it and try again after {quiet_seconds:.0f} s, or pass "
            "quiet_seconds=0 (--quiet-seconds 0) once you know it is stopped")
    for path in file_sinks:  # (before anything moves)
        if not log_entries(path, "_spark_metadata", spark):
            raise RepartitionError(f"file sink {path}: no _spark_metadata log there (is it the sink's output path?)")


def _same_location(a: str, b: str) -> bool:
    def norm(location: str) -> str:
        local = local_directory(location)
        return (local if local is not None else location).rstrip("/")

    return norm(a) == norm(b)


def _count(key_groups: Optional[tuple[int, bool]]) -> Optional[int]:
    return key_groups[0] if key_groups is not None else None


def log_missing_batches(spark: Any, path: str, checkpoint: str) -> tuple[int, ...]:
    """Log with no files, in the file sink at ``path``, each batch the checkpoint committed after its
    log's last one (batches that went through no sink); the ids logged."""
    logged = log_entries(path, "_spark_metadata", spark)
    missing = sorted(b for b in log_entries(checkpoint, "commits", spark) if b > max(logged))
    if not missing:
        return ()
    jvm = spark.sparkContext._jvm
    sinks = jvm.org.apache.spark.sql.execution.streaming.sinks
    log = sinks.FileStreamSinkLog(sinks.FileStreamSinkLog.VERSION(), spark._jsparkSession,
                                  f"{path.rstrip('/')}/_spark_metadata", jvm.scala.Option.empty())
    nothing = spark.sparkContext._gateway.new_array(sinks.SinkFileStatus, 0)
    for batch in missing:
        if not log.add(batch, nothing):
            raise RepartitionError(f"file sink {path}: batch {batch} was logged meanwhile: is its query running?")
    return tuple(missing)
