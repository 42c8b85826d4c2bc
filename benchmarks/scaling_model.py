"""How a query's stateful work spreads over a cluster, on paper, from the hashing the code uses.

Rows are grouped by key group ``pmod(xxhash64(key, 42), key_groups)`` (``spark/driver/stage.py``),
and Spark places key group ``g`` in state partition ``pmod(murmur3(g, 42), partitions)`` (its
``HashPartitioning`` of the stateful operator's grouping column, a bigint: Murmur3 ``hashLong``,
reproduced in ``windowed_operator.spark.driver.key_groups`` and checked against Spark by
``tests/spark/test_scaling_model.py``); a balanced placement (``apply(df, checkpoint=...)``) gives each
group an int that Spark places in partition ``g mod partitions``.  With one task per state
partition and keys spread evenly over key groups (xxhash64 spreads them: each group holds 1 /
key_groups of the keys, within sampling noise), this prints, for each cluster size (cores = state
partitions) and key-group count: how many tasks have work, and the most loaded task's share of the
work against the even share 1 / cores (1.00x: perfectly even; the query's batch lasts as long as
its most loaded task).

    python benchmarks/scaling_model.py            # the table (benchmarks/results/scaling_model.txt)
"""
from __future__ import annotations

import argparse
from collections import Counter

from windowed_operator.spark.driver.key_groups import balanced_values, first_count, murmur3_int, murmur3_long


def partition_of(group: int, partitions: int) -> int:
    """The state partition Spark places key group ``group`` in (``pmod``)."""
    return murmur3_long(group) % partitions


def spread(key_groups: int, partitions: int, balanced: bool = False) -> tuple[int, float]:
    """Tasks with work, and the most loaded task's share of the work against the even share; a
    balanced placement's groups are the ints ``balanced_values`` chooses (Spark hashes an int column's
    values with ``hashInt``)."""
    if balanced:
        load = Counter(murmur3_int(v) % partitions for v in balanced_values(key_groups, partitions))
    else:
        load = Counter(partition_of(g, partitions) for g in range(key_groups))
    return len(load), max(load.values()) / key_groups * partitions


DESIGNS = {  # key groups for a query first started on a cluster of ``cores`` (state partitions = cores)
    "16 (before)": (lambda cores: 16, False),
    "= cores": (lambda cores: cores, False),
    "4 x cores": (lambda cores: 4 * cores, False),
    "balanced (first_count)": (first_count, True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", default="8,16,32,64,128,256,512")
    args = parser.parse_args()
    print("# tasks with work / cores, and the most loaded task's share of the work against 1 / cores")
    header = f"{'cores':>6} | " + " | ".join(f"{name:>22}" for name in DESIGNS)
    print(header)
    print("-" * len(header))
    for cores in map(int, args.cores.split(",")):
        cells = []
        for design, balanced in DESIGNS.values():
            groups = design(cores)
            busy, heaviest = spread(groups, cores, balanced)
            cells.append(f"{busy:>4}/{cores:<4} {heaviest:5.2f}x ({groups:>4} kg)")
        print(f"{cores:>6} | " + " | ".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
