"""Move a stopped query's checkpoint to another number of key groups (a cluster larger than its groups).

A query's stateful work is done in key groups, fixed at its first start (``driver.key_groups``), and
a row's group is ``pmod(xxhash64(key), key_groups)``: more state partitions than groups stay idle.
:func:`rescale_checkpoint` rewrites a stopped query's state into ``key_groups`` groups, as one more
batch of the checkpoint that reads no input (as Spark's offline repartitioning does, through the
same ``StateRewriter``), and records the new count in the checkpoint's record; the next start told
the checkpoint (``apply(df, checkpoint=...)``, or ``run`` on a pipeline file) goes on with it.

For every stateful operator of the query, its rows (every column family) are read
(``state_rows``), each key is placed in the group Spark will give it (``spark_hashes.key_group``, of
the key column's type, which the state's schema holds), the groups' state split and joined by key
in every layout (``state.rekey``), and the rows written back, each new group with the timers of the
old groups its state came from (a timer that finds nothing due changes nothing).  A balanced
placement stays balanced over the checkpoint's state partitions; a checkpoint started before it
keeps bigint groups ``0 .. key_groups - 1``.  The state passes through the driver: one operator's
rows at a time.

Refused like a repartitioning (``repartition.check_stopped``): a running query, a batch begun and
not committed, a batch committed less than ``quiet_seconds`` ago.  A file sink's log gets the new
batch (``file_sinks``), as after a repartitioning.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Hashable, Optional

from ..error_summary import error_summary
from ..state.rekey import RekeyError, StoredGroup, rekey
from .base.checkpoint_record import log_entries, update_record
from .driver.key_groups import MAX_KEY_GROUPS, KeyGroups, balanced_values, recorded_key_groups
from .inspect import state_partitions
from .repartition import QUIET_SECONDS, RepartitionError, check_stopped, log_missing_batches, refuse_active
from .base.spark_hashes import UnsupportedKeyType, key_group
from .base.state_rows import GroupContents, group_rows, read_groups, read_key

_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


class RescaleError(RepartitionError):
    """The checkpoint cannot be rescaled now, or its state cannot be moved; the message says why."""


@dataclass(frozen=True)
class Rescaled:
    """What :func:`rescale_checkpoint` did."""

    checkpoint: str
    key_groups_before: int
    key_groups: int
    batch_id: int
    partitions: int
    #: Per stateful operator: (old groups holding state, new groups holding state, keys placed).
    operators: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    file_sinks: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def lines(self) -> list[str]:
        out = [f"{self.checkpoint}: state moved from {self.key_groups_before} to {self.key_groups} key groups "
               f"(batch {self.batch_id}, which reads no input); start the query again with apply(df, checkpoint=...) "
               f"(or key_groups={self.key_groups}) to go on"]
        for operator, (before, after, keys) in sorted(self.operators.items()):
            out.append(f"operator {operator}: {keys} key{'' if keys == 1 else 's'} placed, from {before} group"
                       f"{'' if before == 1 else 's'} into {after}")
        if self.key_groups < self.partitions:
            out.append(f"note: {self.partitions - self.key_groups} of the {self.partitions} state partitions hold no "
                       "group; repartition the checkpoint to fewer, or choose more key groups")
        for path, batches in self.file_sinks:
            out.append(f"file sink {path}: batch{'es' if len(batches) > 1 else ''} {', '.join(map(str, batches))} "
                       "logged with no files" if batches else f"file sink {path}: its log was complete")
        return out


def rescale_checkpoint(spark: Any, checkpoint: str, key_groups: int, *, file_sinks: tuple[str, ...] = (),
                       quiet_seconds: float = QUIET_SECONDS) -> Rescaled:
    """Move the state of the stopped query whose checkpoint is ``checkpoint`` into ``key_groups`` key
    groups, after refusing a running query; log the new batch in each file sink's log."""
    if isinstance(key_groups, bool) or not isinstance(key_groups, int) or not 1 <= key_groups <= MAX_KEY_GROUPS:
        raise RescaleError(f"key_groups must be an integer from 1 to {MAX_KEY_GROUPS}, got {key_groups!r}")
    jvm = getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None or not hasattr(spark, "_jsparkSession"):
        raise RescaleError("rescaling needs a classic Spark session (Spark Connect has none)")
    refuse_active(spark, checkpoint)
    check_stopped(checkpoint, quiet_seconds, file_sinks, spark)
    operators = _operators(spark, checkpoint)
    key_types = {op: _key_type(spark, checkpoint, op) for op in operators}
    kept = recorded_key_groups(checkpoint, spark)
    before = kept.count if kept is not None else _fingerprint_count(checkpoint, key_types)
    if before == key_groups:
        raise RescaleError(f"checkpoint {checkpoint} has {key_groups} key groups already")
    partitions = state_partitions(spark, checkpoint)
    balanced = kept is not None and kept.values is not None
    new = KeyGroups(key_groups, balanced_values(key_groups, partitions) if balanced else None)
    old = kept if kept is not None else KeyGroups(before)
    moved: dict[int, tuple[int, int, int]] = {}
    rewrite = _Rewrite(spark, old, new, partitions, key_types, moved)

    last = max(log_entries(checkpoint, "commits", spark))
    _copy_entry(spark, checkpoint, "offsets", last, last + 1)
    try:
        none = jvm.scala.Option.empty()
        rewriter = jvm.org.apache.spark.sql.execution.streaming.state.StateRewriter(
            spark._jsparkSession, last, last + 1, checkpoint, spark._jsparkSession.sessionState().newHadoopConf(),
            none, jvm.scala.Option.apply(rewrite), none)
        rewriter.run()
        if rewrite.error is not None:
            raise rewrite.error
    except BaseException as exc:
        _delete_entry(spark, checkpoint, "offsets", last + 1)  # (nothing committed: the checkpoint is as it was)
        cause = rewrite.error or exc  # (the transform's own error, which reached here wrapped by the JVM)
        if isinstance(cause, RescaleError):
            raise cause from None
        raise RescaleError(f"checkpoint {checkpoint}: its state could not be rescaled: {error_summary(cause)}") from cause
    update_record(checkpoint, {"key_groups": key_groups, "values": list(new.values) if new.values else None}, spark)
    _copy_entry(spark, checkpoint, "commits", last, last + 1)
    filled = tuple((path, log_missing_batches(spark, path, checkpoint)) for path in file_sinks)
    return Rescaled(checkpoint=checkpoint, key_groups_before=before, key_groups=key_groups, batch_id=last + 1,
                    partitions=partitions, operators=moved, file_sinks=filled)


class _Rewrite:
    """The rewriter's transform (a ``scala.Function1`` over one operator's rows, called from the JVM)."""

    def __init__(self, spark: Any, old: KeyGroups, new: KeyGroups, partitions: int, key_types: dict[int, Any],
                 moved: dict[int, tuple[int, int, int]]) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(spark.sparkContext._gateway)
        self.spark, self.old, self.new, self.partitions = spark, old, new, partitions
        self.key_types, self.moved = key_types, moved
        self.error: Optional[BaseException] = None

    def apply(self, jdf: Any) -> Any:
        from pyspark.sql import DataFrame

        frame = DataFrame(jdf, self.spark)
        try:
            rows = self._rewritten(frame)
        except BaseException as exc:  # (kept for the caller: an error raised across py4j loses its type)
            self.error = exc
            raise
        return self.spark.createDataFrame(rows, frame.schema).repartition(self.partitions, "partition_key")._jdf

    def _rewritten(self, frame: Any) -> list[tuple]:
        group_type = frame.schema["partition_key"].dataType.fields[0].dataType.simpleString()
        int_typed = group_type == "int"
        read = [(bytes(r.key_bytes), bytes(r.value_bytes) if r.value_bytes is not None else None,
                 r.column_family_name) for r in frame.collect()]
        contents = read_groups(read, int_typed)
        if not contents:
            return []
        metas = {group: json.loads(c.meta) if c.meta is not None else {} for group, c in contents.items()}
        fingerprint = next(iter(metas.values())).get("fingerprint") or {}
        operator, key_type = self._operator_of(fingerprint)
        keyed = fingerprint.get("key column") not in (None, "None")
        old_index = {value: g for g, value in enumerate(self.old.values or range(self.old.count))} if keyed else {0: 0}
        key_bytes: dict[Hashable, bytes] = {}
        stored: dict[int, StoredGroup] = {}
        for value, c in contents.items():
            if value not in old_index:
                raise RescaleError(f"operator {operator}: state of group {value}, which the checkpoint's "
                                   f"{self.old.count} key groups do not name")
            keys = {}
            for raw, record in c.key_rows.items():
                key = read_key(raw, key_type) if keyed else None
                key_bytes[key] = raw
                keys[key] = record
            stored[old_index[value]] = StoredGroup(metas[value], dict(c.parts), keys)

        placed: dict[Hashable, int] = {}

        def group_of(key: Hashable) -> int:
            if key not in placed:
                placed[key] = key_group(key, key_type, self.new.count) if keyed else 0
            return placed[key]

        try:
            groups = rekey(stored, group_of, self.old.count, self.new.count, keyed=keyed)
        except (RekeyError, UnsupportedKeyType) as exc:
            raise RescaleError(f"operator {operator}: {exc}") from exc
        by_index = {index: value for value, index in old_index.items()}
        out: list[tuple] = []
        for index, group in groups.items():
            value = (self.new.values[index] if self.new.values else index) if keyed else 0
            timers: dict[str, set[int]] = {}
            for source in group.sources:
                for kind, expiries in contents[by_index[source]].timers.items():
                    timers.setdefault(kind, set()).update(expiries)
            written = GroupContents(meta=_COMPACT(group.meta), parts=group.parts,
                                    key_rows={key_bytes[key]: record for key, record in group.keys.items()},
                                    timers=timers)
            out += [((value,), key, val, family) for key, val, family in group_rows(value, written, int_typed)]
        self.moved[operator] = (len(stored), len(groups), len(placed))
        return out

    def _operator_of(self, fingerprint: dict) -> tuple[int, str]:
        matches = [(op, key_type) for op, (fp, key_type) in self.key_types.items() if fp == fingerprint] or \
            [(op, key_type) for op, (fp, key_type) in self.key_types.items() if fp is None]
        if len(matches) != 1:
            raise RescaleError("cannot tell which stateful operator a set of state rows belongs to "
                               f"(fingerprint {fingerprint}): {len(matches)} operators match")
        return matches[0]

    class Java:
        implements = ["scala.Function1"]


def _operators(spark: Any, checkpoint: str) -> list[int]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/state")
    fs = path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    if not fs.exists(path):
        raise RescaleError(f"checkpoint {checkpoint}: no state (is it a stateful query's checkpointLocation?)")
    return sorted(int(s.getPath().getName()) for s in fs.listStatus(path) if s.getPath().getName().isdigit())


def _key_type(spark: Any, checkpoint: str, operator: int) -> tuple[Optional[dict], str]:
    """The operator's fingerprint (None: no group state yet) and its key column's type (the type of
    its key records' map key in the state's schema)."""
    try:
        keys = spark.read.format("statestore").option("operatorId", operator).option("stateVarName", "wo_keys") \
            .load(checkpoint)
        key_type = keys.schema["user_map_key"].dataType.fields[0].dataType.simpleString()
        metas = spark.read.format("statestore").option("operatorId", operator).option("stateVarName", "wo_group") \
            .load(checkpoint).select("value.meta").limit(1).collect()
    except Exception as exc:
        raise RescaleError(f"checkpoint {checkpoint}: operator {operator} is not one of this library's operators "
                           f"(its state has no key records: {error_summary(exc)})") from exc
    return (json.loads(metas[0][0]).get("fingerprint") if metas else None), key_type


def _fingerprint_count(checkpoint: str, key_types: dict[int, tuple[Optional[dict], str]]) -> int:
    """The key groups the operators' fingerprints name (``_key_type`` of each operator)."""
    counts = set()
    for fingerprint, _ in key_types.values():
        if fingerprint is not None and fingerprint.get("key column") not in (None, "None"):
            counts.add(int(fingerprint["key groups"]))
    if not counts:
        raise RescaleError(f"checkpoint {checkpoint}: no keyed operator of its query holds state (a non-keyed "
                           "operator's state is one group, whatever the key groups): nothing to rescale")
    if len(counts) != 1:
        raise RescaleError(f"checkpoint {checkpoint}: its operators' fingerprints name different key groups "
                           f"({sorted(counts)})")
    return counts.pop()


def _copy_entry(spark: Any, checkpoint: str, log: str, source: int, target: int) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    src = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/{log}/{source}")
    dst = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/{log}/{target}")
    fs = src.getFileSystem(conf)
    if fs.exists(dst):
        raise RescaleError(f"checkpoint {checkpoint}: {log}/{target} exists already: is its query running?")
    jvm.org.apache.hadoop.fs.FileUtil.copy(fs, src, fs, dst, False, conf)


def _delete_entry(spark: Any, checkpoint: str, log: str, batch: int) -> None:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/{log}/{batch}")
    path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()).delete(path, False)


__all__ = ["RescaleError", "Rescaled", "rescale_checkpoint"]
