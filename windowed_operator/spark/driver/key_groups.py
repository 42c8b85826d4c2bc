"""How many key groups a query's stateful stages hash keys into, and the value each group takes in Spark.

The stateful operator groups rows by key group (``stage._grouped``): one Python call and one timer per
group and micro-batch, so a group's count bounds the tasks that do the operator's work, and Spark
places group value ``v`` in state partition ``pmod(murmur3(v, 42), partitions)`` (its hash
partitioning of the grouping column).  Two placements:

- **before this module** (every checkpoint written so far, and any query whose checkpoint apply() is
  not told): group ``g`` is the bigint ``g`` itself, ``key_groups`` defaults to 16 whatever the
  cluster, and hash collisions leave partitions idle: of 16 cores, 10 have work
  (``benchmarks/scaling_model.py``);
- **balanced** (a query first started with ``apply(df, checkpoint=...)``): the count follows the
  cluster (``first_count``: the state partitions, ``spark.sql.shuffle.partitions`` at the first
  start, times what brings it to at least 16), and group ``g`` is an int chosen so that Spark places it
  in partition ``g mod partitions``: every partition holds the same number of groups.

The choice is kept in the checkpoint (``checkpoint_record``, beside Spark's own files) and read back at every
restart told the checkpoint, so a restart under another session keeps it.  A restart of a balanced
checkpoint that is not told it (or of an earlier one told a balanced placement) is refused by Spark at
its first batch (``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE``: the grouping column is an int in one and a
bigint in the other), never silently: no key finds another's state.  A stopped query moved to another
number of state partitions (``spark.repartition``: Spark's offline repartitioning) keeps its groups
and their values, placed by Spark's hash from then on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from ..base.checkpoint_record import RECORD, has_batches, read_record, update_record
from ..base.errors import SparkOperatorError
from ..base.spark_hashes import murmur3_int, murmur3_long

#: Key groups when apply() is not told the checkpoint: a constant, never derived from the session (a
#: restart with another ``spark.sql.shuffle.partitions`` must find every key in the group it left it
#: in).  On local[2], 8 to 16 groups ran fastest (benchmarks/run.py: 8 groups 1.5x faster than 64).
DEFAULT_KEY_GROUPS = 16
#: The largest group count a balanced placement takes (its values are ints below 2^31).
MAX_KEY_GROUPS = 1 << 16



@dataclass(frozen=True)
class KeyGroups:
    """A query's key groups: ``count``, and ``values`` (group ``g``'s value in Spark, an int; None:
    the bigint ``g`` itself, as before balanced placement)."""

    count: int
    values: Optional[tuple[int, ...]] = None

    def plan_fields(self) -> dict[str, Any]:
        """The ``SparkPlan`` fields that say it."""
        return {"key_groups": self.count, "group_values": self.values}


def resolve_key_groups(key_groups: Optional[int]) -> int:
    """The number of key groups of a query whose checkpoint apply() is not told: ``key_groups``, or
    ``DEFAULT_KEY_GROUPS``.  Fixed for the life of a checkpoint (its state's fingerprint holds it, and
    a restart with another number is refused)."""
    if key_groups is None:
        return DEFAULT_KEY_GROUPS
    return _checked(key_groups)


def _checked(key_groups: Any) -> int:
    if isinstance(key_groups, bool) or not isinstance(key_groups, int) or key_groups < 1:
        raise SparkOperatorError(f"key_groups must be a positive integer, got {key_groups!r}")
    return key_groups


def first_count(partitions: int) -> int:
    """The key groups of a query first started on ``partitions`` state partitions: a multiple of them,
    at least 16 (each partition the same number of groups; one call per group and batch)."""
    return partitions * math.ceil(DEFAULT_KEY_GROUPS / partitions)


def key_groups_for(spark: Any, key_groups: Optional[int], checkpoint: Optional[str]) -> KeyGroups:
    """The key groups of a query over ``spark``'s session: without ``checkpoint``, ``key_groups`` (or
    16) placed as before; with it, those its ``RECORD`` keeps, else (a first start) ``key_groups`` or
    ``first_count`` of the session's shuffle partitions, balanced over them, and the record written.
    A checkpoint started before balanced placement (it holds batches but no record) keeps the earlier
    placement, with ``key_groups`` or 16 (its state's fingerprint refuses another count)."""
    if checkpoint is None:
        return KeyGroups(resolve_key_groups(key_groups))
    kept = recorded_key_groups(checkpoint, spark)
    if kept is not None:
        if key_groups is not None and _checked(key_groups) != kept.count:
            raise SparkOperatorError(
                f"key_groups={key_groups}, but the checkpoint {checkpoint} keeps {kept.count} key groups "
                f"({RECORD}): leave key_groups out, or move the stopped query's state to {key_groups} groups first "
                f"(windowed-operator rescale {checkpoint} --key-groups {key_groups})")
        return kept
    if has_batches(checkpoint, spark):
        return KeyGroups(resolve_key_groups(key_groups))  # (no record written: its count is the fingerprint's)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    count = _checked(key_groups) if key_groups is not None else first_count(partitions)
    if count > MAX_KEY_GROUPS:
        raise SparkOperatorError(f"key_groups={count}: at most {MAX_KEY_GROUPS}")
    values = balanced_values(count, partitions)
    update_record(checkpoint, {"key_groups": count, "values": list(values), "partitions_at_first_start": partitions},
                  spark)
    return KeyGroups(count, values)


def recorded_key_groups(checkpoint: str, spark: Any = None) -> Optional[KeyGroups]:
    """The key groups the checkpoint's ``RECORD`` keeps (None: it keeps none, as before balanced placement)."""
    record = read_record(checkpoint, spark)
    if "key_groups" not in record:
        return None
    return KeyGroups(int(record["key_groups"]),
                     tuple(int(v) for v in record["values"]) if record.get("values") is not None else None)


def balanced_values(count: int, partitions: int) -> tuple[int, ...]:
    """An int value for each of ``count`` groups, distinct, such that Spark places group ``g`` in state
    partition ``g mod partitions`` (``pmod(murmur3_int(v), partitions)``): the smallest free ones."""
    wanted = [count // partitions + (1 if p < count % partitions else 0) for p in range(partitions)]
    found: list[list[int]] = [[] for _ in range(partitions)]
    missing, value = count, 0
    while missing:
        partition = murmur3_int(value) % partitions
        if len(found[partition]) < wanted[partition]:
            found[partition].append(value)
            missing -= 1
        value += 1
    return tuple(found[g % partitions][g // partitions] for g in range(count))


__all__ = ["DEFAULT_KEY_GROUPS", "KeyGroups", "RECORD", "balanced_values", "first_count", "key_groups_for",
           "murmur3_int", "murmur3_long", "resolve_key_groups"]
