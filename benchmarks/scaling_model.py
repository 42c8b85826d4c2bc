"""How a query's stateful work spreads over a cluster, on paper, from the hashing the code uses.

Rows are grouped by key group ``pmod(xxhash64(key, 42), key_groups)`` (``spark/driver/stage.py``),
and Spark places key group ``g`` in state partition ``pmod(murmur3(g, 42), partitions)`` (its
``HashPartitioning`` of the stateful operator's grouping column, a bigint: Murmur3 ``hashLong``,
reproduced here and checked against Spark by ``tests/test_scaling_model.py``).  With one task per state
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

MASK = 0xFFFFFFFF


def _signed(value: int) -> int:
    value &= MASK
    return value - (1 << 32) if value & 0x80000000 else value


def _rotl(value: int, bits: int) -> int:
    value &= MASK
    return ((value << bits) | (value >> (32 - bits))) & MASK


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & MASK, 15) * 0x1B873593) & MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl((h1 ^ k1) & MASK, 13) * 5 + 0xE6546B64) & MASK


def _fmix(h1: int, length: int) -> int:
    h1 = (h1 ^ length) & MASK
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & MASK
    return h1 ^ (h1 >> 16)


def murmur3_long(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashLong`` (what ``hash(bigint)`` and a bigint's hash partitioning use)."""
    value &= (1 << 64) - 1
    h1 = _mix_h1(seed & MASK, _mix_k1(value & MASK))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    return _signed(_fmix(h1, 8))


def partition_of(group: int, partitions: int) -> int:
    """The state partition Spark places key group ``group`` in (``pmod``)."""
    return murmur3_long(group) % partitions


def spread(key_groups: int, partitions: int) -> tuple[int, float]:
    """Tasks with work, and the most loaded task's share of the work against the even share."""
    load = Counter(partition_of(g, partitions) for g in range(key_groups))
    return len(load), max(load.values()) / key_groups * partitions


DESIGNS = {  # key groups for a query first started on a cluster of ``cores`` (state partitions = cores)
    "16 (before)": lambda cores: 16,
    "= cores": lambda cores: cores,
    "4 x cores": lambda cores: 4 * cores,
    "1024": lambda cores: 1024,
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
        for design in DESIGNS.values():
            groups = design(cores)
            busy, heaviest = spread(groups, cores)
            cells.append(f"{busy:>4}/{cores:<4} {heaviest:5.2f}x ({groups:>4} kg)")
        print(f"{cores:>6} | " + " | ".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
