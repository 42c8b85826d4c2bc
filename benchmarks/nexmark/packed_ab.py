"""Packed input against pyspark's row-by-row handoff, on the Nexmark queries (one run, interleaved).

    python benchmarks/nexmark/packed_ab.py --events 2000000 --queries q11,q5r,q8,q7 --runs 3

Per query: a warm-up, then ``--runs`` rounds of (rows one by one, packed), each on a fresh checkpoint,
with ``spark.windowed_operator.packInput`` set before the operator is applied; each run's final
result is checked against the brute-force model.  Prints each run and the median events/s of both,
and their ratio.  (Queries whose scan stage folds the rows, q5 and q7, are not packed either way:
they measure the noise.)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from nexmark.generator import NexmarkConfig, generate, write_files  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--queries", default="q11,q5r,q8,q7")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    from windowed_operator.spark import local_session
    from windowed_operator.spark.packed_input import PACK_CONF

    work = Path(tempfile.mkdtemp(prefix="packed-ab-"))
    events = generate(NexmarkConfig(events=args.events))
    files = write_files(events, work / "events", -(-args.events // 10), fmt="parquet", end_marker=True)
    spark = local_session(app_name="packed-ab", shuffle_partitions=2, spark_log=str(work / "spark.log"))
    config = Q.QueryConfig()

    def run(query: str, packed: bool) -> float:
        spark.conf.set(PACK_CONF, "true" if packed else "false")
        out = S.ours(query, config, S.source(spark, work / "events"))
        done = S.run_to_end(out, work / f"ckpt-{query}-{packed}-{time.monotonic_ns()}",
                            files if query in S.PROCESSING_TIME else 0)
        expected = Q.model(query, events.persons, events.auctions, events.bids, config)
        if Q.final_result(query, S.ours_panes(done.rows, query)) != expected:
            raise AssertionError(f"{query} {'packed' if packed else 'row by row'}: the result differs from the model")
        return done.seconds

    run("q7", True)
    run("q7", False)
    for query in args.queries.split(","):
        seconds: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.runs):
            for packed in (False, True):
                seconds[packed].append(run(query, packed))
                print(f"{query} {'packed' if packed else 'rows':<6} {seconds[packed][-1]:6.2f} s", flush=True)
        rows, packed = (statistics.median(seconds[k]) for k in (False, True))
        print(f"== {query}: row by row {args.events / rows:,.0f} events/s, packed {args.events / packed:,.0f} events/s, "
              f"packed / row by row {rows / packed:.2f}x", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
