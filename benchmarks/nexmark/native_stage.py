"""Nexmark q5 with its second stage in native Spark: our count per auction in hopping windows
(``apply(..., spark_event_time=True)``, docs/guides/chains.md, "Native Spark after the operator"), then Spark's own
streaming aggregation of the auctions with the most bids per window, against our chain (both stages
ours) and native Spark's q5, on one stream, interleaved, each result checked against the model.

    python benchmarks/nexmark/native_stage.py [--events 2000000 --runs 3]

It measures what the hand-off is worth where the second stage is an aggregation Spark has: the
chain's second stage costs a transformWithState per micro-batch (Python workers, state calls) where
Spark's aggregation runs in the JVM.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: timing.py and this package

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from nexmark.generator import NexmarkConfig, generate, write_files  # noqa: E402
from timing import interleaved, ratios, spread  # noqa: E402

SIDES = ("native", "ours", "ours+native")


def ours_then_native(config: Q.QueryConfig, events: Any) -> Any:
    """q5's first stage with this library, its second in native Spark, as docs/guides/chains.md shows it."""
    from pyspark.sql import functions as F

    counts = Q.operator("q5", config).operators[0]
    panes = counts.apply(S._kind(events, "auction", Q.BID_COLUMNS), end_of_input=S.END_COLUMN,
                         spark_event_time=True)
    per_window = (panes.where("event_time IS NOT NULL").groupBy("event_time")
                  .agg(F.max("value").alias("top"),
                       F.collect_list(F.struct(F.col("key").alias("auction"), F.col("value").alias("num")))
                       .alias("counts")))
    # event_time is the window's end - 1 us (the pane's timestamp + 999 us): its start in ms follows
    return per_window.select((F.unix_millis("event_time") + 1 - config.window_ms).alias("start"),
                             F.filter("counts", lambda c: c["num"] == F.col("top")).alias("hot"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Nexmark q5: a native second stage after ours")
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    from windowed_operator.spark import local_session

    stream = NexmarkConfig(events=args.events)
    config = Q.QueryConfig(max_disorder_ms=stream.max_disorder_ms)
    work = Path(tempfile.mkdtemp(prefix="nexmark-native-stage-"))
    events = generate(stream)
    write_files(events, work / "events", -(-args.events // args.files), fmt="parquet", end_marker=True)
    spark = local_session(app_name="nexmark-native-stage", shuffle_partitions=2, spark_log=str(work / "spark.log"))
    expected = Q.model("q5", events.persons, events.auctions, events.bids, config)
    correct: dict[str, bool] = {}

    def case(side: str, directory: Path) -> Callable[[], float]:
        def run() -> float:
            df = S.source(spark, directory)
            out = {"native": lambda: S.native("q5", config, df), "ours": lambda: S.ours("q5", config, df),
                   "ours+native": lambda: ours_then_native(config, df)}[side]()
            done = S.run_to_end(out, work / f"ckpt-{side}-{time.monotonic_ns()}")
            result = (Q.final_result("q5", S.ours_panes(done.rows, "q5")) if side == "ours"
                      else S.native_result("q5", done.rows))
            if directory == work / "events":
                correct[side] = correct.get(side, True) and result == expected
            return done.seconds
        return run

    warm = work / "warm"
    write_files(generate(NexmarkConfig(events=20_000)), warm, 10_000, fmt="parquet", end_marker=True)
    for side in SIDES:
        case(side, warm)()
    print(f"q5, {args.events:,} events, {args.files} micro-batches, local[2], {args.runs} rounds interleaved "
          f"({', '.join(SIDES)}), after a warm-up")
    timings = interleaved([(side, case(side, work / "events")) for side in SIDES], args.runs,
                          report=lambda side, run, s: print(f"  round {run}: {side:<12} {s:6.2f} s", flush=True))
    for side in SIDES:
        print(f"{side:<12} {spread([args.events / t for t in timings[side]]).text(0):>28} events/s  "
              f"correct: {'yes' if correct[side] else 'NO'}")
    print(f"ours / native: {ratios(timings['ours'], timings['native']).text()}x; "
          f"ours+native / native: {ratios(timings['ours+native'], timings['native']).text()}x; "
          f"ours+native / ours: {ratios(timings['ours+native'], timings['ours']).text()}x")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
