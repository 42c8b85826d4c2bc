"""Ours on the Nexmark queries with each way rows reach the stateful processor, beside native Spark.

    python benchmarks/nexmark/handoffs.py                          # q8,q5r,q11; 2M events, 3 rounds
    python benchmarks/nexmark/handoffs.py --queries q8 --events 200000 --runs 1

The handoffs (``spark_queries.HANDOFFS``): pyspark's row-by-row regrouping, input packed in the scan
stage (``packed_input``), and slices of Arrow batches (``sliced_handoff``, a local session's
default).  Per query: a warm-up, then ``--runs`` rounds of native and the three, in that order and
reversed in turn, each on a fresh checkpoint and checked against the brute-force model; prints each
run, the medians, and per round each handoff against native and against row by row.

Results are recorded in ``benchmarks/results/nexmark_handoffs.txt`` (``... | tee benchmarks/results/nexmark_handoffs.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from timing import interleaved, ratios, spread  # noqa: E402

#: Queries whose operators take rows the handoffs differ on, and that native Spark runs.
QUERIES = ("q8", "q5r", "q11")


def timed(spark: Any, query: str, side: str, config: Q.QueryConfig, events: Any, directory: Path,
          checkpoint: Path) -> float:
    """One run of ``side`` (``native`` or a handoff of ours), checked against the model: its seconds."""
    native = side == "native"
    df = S.source(spark, directory)
    if native:
        out = S.native(query, config, df)
    else:
        with S.handoff(spark, side):
            out = S.ours(query, config, df)
    done = S.run_to_end(out, checkpoint, None if native else S.end_watermark(query, config))
    S.check_final(query, native, done.rows, events, config, f"{query} ({side})")
    return done.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    queries = args.queries.split(",")
    if not set(queries) <= set(QUERIES):
        parser.error(f"--queries: one or more of {', '.join(QUERIES)}, not {args.queries!r}")

    work, events, spark, config = S.prepared(args.events, "handoffs")
    sides = ("native", *S.HANDOFFS)

    def case(query: str, side: str) -> float:
        return timed(spark, query, side, config, events, work / "events", work / f"ckpt-{time.monotonic_ns()}")

    print(f"{args.events:,} events in 10 micro-batches, local[2]; {args.runs} rounds a query, order alternating")
    for query in queries:
        for side in sides:  # a warm-up
            case(query, side)
        seconds = interleaved([(side, lambda side=side: case(query, side)) for side in sides], args.runs,
                              alternate=True, report=lambda side, _, taken: print(
                                  f"{query} {side:<10} {taken:6.2f} s", flush=True))
        for side in sides:
            print(f"== {query} {side:<10} {args.events / spread(seconds[side]).median:9,.0f} events/s, "
                  f"{spread(seconds[side]).text()} s; x native {ratios(seconds[side], seconds['native']).text()}"
                  + ("" if side == "native" else
                     f", x row by row {ratios(seconds[side], seconds['row by row']).text()}"), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
