"""What key shards cost in Python per batch, without Spark: reading the shards of the keys a batch
touches, putting their records back, and writing the shards that changed.

    python benchmarks/key_shard_ops.py                        # the cases below, 3 runs each
    PYTHONPATH=/path/to/other/tree python benchmarks/key_shard_ops.py   # the same, another version

The store is ``key_records.TextStore``, dicts of texts (no JVM), so what is left is our own work on the shards' texts: what
``windowed_operator.state.key_shards`` adds per batch on top of Spark's state store calls.  Cases (held
keys, keys a batch touches): a group of Nexmark q11 (most of its keys each batch: one shard), a group
that a batch comes back to a tenth of, and state-scale's share (5% of 100K: about a key a shard).
Each record is about the size of a columnar session record (~150 bytes).  Printed per case: the
shard count the model chose, and the median milliseconds per batch and microseconds per touched key
over the steady batches of the runs (after a warm-up run), with their spread.

Results are recorded in ``benchmarks/results/key_shard_ops.txt`` (``... | tee benchmarks/results/key_shard_ops.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from key_records import TextStore  # noqa: E402
from timing import spread  # noqa: E402

import windowed_operator  # noqa: E402
from windowed_operator.state.key_shards import KeyShards  # noqa: E402

CASES = {"q11 group": (4_000, 3_000), "a tenth": (20_000, 2_000), "state scale": (100_000, 5_000)}
RECORD = json.dumps({"state": {"rows": [[1_700_000_000_000 + i, 12, 3, 0, 1] for i in range(3)]},
                     "due": [1_700_000_010_000, None]}, separators=(",", ":"))


def run(held: int, touched: int, batches: int, seed: int) -> tuple[int, list[float]]:
    """Seconds of each batch after the group's keys were all written once; the shard count."""
    store = TextStore()
    shards = KeyShards.of(store, [(k, RECORD) for k in range(held)], touched=touched, came_back=touched)
    record, rnd, seconds = shards.to_record(), random.Random(seed), []
    for _ in range(batches):
        keys = rnd.sample(range(held), touched)
        start = time.perf_counter()
        shards = KeyShards(store, record)
        shards.get_keys(keys)
        shards.put_keys([(k, RECORD) for k in keys])
        shards.flush(touched, came_back=touched)
        seconds.append(time.perf_counter() - start)
        record = shards.to_record()
    return record["shards"], seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batches", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"windowed_operator from {Path(windowed_operator.__file__).parent}; {args.runs} runs of "
          f"{args.batches} batches a case, after a warm-up run")
    print(f"{'case':14s} {'held':>8s} {'touched':>8s} {'shards':>8s} {'ms/batch':>22s} {'us/touched key':>10s}")
    for name, (held, touched) in CASES.items():
        run(held, touched, 2, seed=0)  # warm-up
        count, seconds = 0, []
        for i in range(args.runs):
            count, times = run(held, touched, args.batches, seed=i + 1)
            seconds += times
        ms = [s * 1000 for s in seconds]
        print(f"{name:14s} {held:8,d} {touched:8,d} {count:8,d} {spread(ms).text(1):>22s} "
              f"{statistics.median(ms) * 1000 / touched:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
