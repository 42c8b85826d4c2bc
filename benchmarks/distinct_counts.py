"""Distinct counts and quantiles per window: ours (HyperLogLog and KLL sketches, pre-folded per (key,
pane) before the shuffle, and without pre-folding) against native Spark on the same stream.

    python benchmarks/distinct_counts.py                    # 1M events, 1K keys, 3 runs a case
    python benchmarks/distinct_counts.py --events 200000 --runs 1

The stream is ``benchmarks/run.py``'s (event time advancing 1 s per 1,000 rows, up to 2 s of
disorder, 10 parquet files read one per micro-batch, 5 s watermark delay).  Cases:
- distinct keys per 10 s tumbling window (one window per 10,000 rows, about 1,000 distinct keys):
  native ``approx_count_distinct`` (HLL++) against ``ApproxCountDistinct("key")``;
- the median and 99th percentile of the amount per key and 10 s window: native
  ``percentile_approx`` against ``Quantiles("amount", (0.5, 0.99))``.
After a warm-up, each case runs ``--runs`` times round by round with its native peer first; figures
are medians with the spread, ratios are native time / our time per round.  Every result is checked:
the distinct counts against the exact counts (within 3 standard errors of each sketch), the
quantiles' ranks against the exact ranks (within the KLL rank error).

Results are recorded in ``benchmarks/results/distinct_counts.txt`` (``... | tee benchmarks/results/distinct_counts.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import math
import platform
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/run.py and timing.py, run as a script
from run import BASE, DELAY_MS, generate, run_query, source, write_parquet  # noqa: E402
from timing import interleaved, ratios, spread  # noqa: E402

import numpy as np
import pandas as pd

WINDOW_MS = 10_000
FRACTIONS = (0.5, 0.99)


def native_distinct(spark, data_dir: Path):
    from pyspark.sql import functions as F

    df = source(spark, data_dir).withWatermark("ts", f"{DELAY_MS} milliseconds")
    return df.groupBy(F.window("ts", "10 seconds")).agg(F.approx_count_distinct("key").alias("value"))


def ours_distinct(spark, data_dir: Path, prefold: bool):
    from accumulations import ApproxCountDistinct
    from windowed_operator import TimeWindows, WindowedOperator, bounded_disorder

    op = WindowedOperator(TimeWindows(WINDOW_MS), ApproxCountDistinct("key"), timestamp="ts_ms",
                          watermark=bounded_disorder(DELAY_MS))
    return op.apply(source(spark, data_dir).drop("ts"), preaggregate=prefold)


def native_quantiles(spark, data_dir: Path):
    from pyspark.sql import functions as F

    df = source(spark, data_dir).withWatermark("ts", f"{DELAY_MS} milliseconds")
    return df.groupBy(F.window("ts", "10 seconds"), "key").agg(
        F.percentile_approx("amount", list(FRACTIONS)).alias("value"))


def ours_quantiles(spark, data_dir: Path, prefold: bool):
    from accumulations import Quantiles
    from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(TimeWindows(WINDOW_MS), Quantiles("amount", fractions=FRACTIONS), key="key",
                                   timestamp="ts_ms", watermark=bounded_disorder(DELAY_MS))
    return op.apply(source(spark, data_dir).drop("ts"), preaggregate=prefold)


def results(spark, out, work: Path, name: str) -> pd.DataFrame:
    """The query's rows (a memory sink), window start in ms."""
    query = (out.writeStream.format("memory").queryName(name).outputMode("append")
             .option("checkpointLocation", str(work / f"check-{name}")).trigger(availableNow=True).start())
    query.awaitTermination()
    frame = spark.sql(f"select * from {name}").toPandas()
    start = frame["window"].map(lambda w: w["start"]) if "window" in frame else frame["window_start"]
    frame["start_ms"] = pd.to_datetime(start, utc=True).astype("int64") // 1_000_000
    return frame


def check_distinct(frame: pd.DataFrame, df: pd.DataFrame, relative_error: float) -> bool:
    """Every window's count within 3 standard errors of the exact count (windows still open at the end
    of the input, which Spark never closes without an end-of-input row, are not in the output)."""
    exact = df.key.groupby(df.ts_ms - df.ts_ms % WINDOW_MS).nunique()
    got = frame.groupby("start_ms").value.last()
    return len(got) >= len(exact) - 2 and all(abs(got[s] - exact[s]) <= 3 * relative_error * exact[s]
                                              for s in got.index)


def check_quantiles(frame: pd.DataFrame, df: pd.DataFrame, rank_error: float) -> bool:
    """Each answer's rank among its group's amounts within ``rank_error`` of its fraction."""
    groups = {k: np.sort(g.to_numpy()) for k, g in df.amount.groupby([df.key, df.ts_ms - df.ts_ms % WINDOW_MS])}
    windows = set(frame.start_ms.tolist())  # (the windows open at the end never close: see check_distinct)
    ok = len(windows) >= len({w for _, w in groups}) - 2 and len(frame) == sum(w in windows for _, w in groups)
    for key, start, value in zip(frame["key"], frame.start_ms, frame.value):
        ordered = groups[(key, start)]
        for q, answer in zip(FRACTIONS, value):
            low = np.searchsorted(ordered, answer, side="left") / len(ordered)
            high = np.searchsorted(ordered, answer, side="right") / len(ordered)
            ok &= low - rank_error <= q <= high + rank_error
    return bool(ok)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    from windowed_operator.spark import local_session

    spark = local_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="wo-distinct-"))
    try:
        df = generate(args.events, args.keys)
        data_dir = work / "data"
        write_parquet(df, data_dir)
        print(f"machine: {platform.platform()}, {__import__('os').cpu_count()} cores, Python "
              f"{platform.python_version()}")
        print(f"stream: {args.events:,} events, {args.keys:,} keys, 10 micro-batches, local[2]; {args.runs} runs per "
              "case, native first, after a warm-up\n")
        cases = {
            "distinct native": lambda: run_query(spark, native_distinct(spark, data_dir), work, "nd").seconds,
            "distinct ours": lambda: run_query(spark, ours_distinct(spark, data_dir, True), work, "od").seconds,
            "distinct ours, not pre-folded": lambda: run_query(spark, ours_distinct(spark, data_dir, False), work,
                                                               "odp").seconds,
            "quantiles native": lambda: run_query(spark, native_quantiles(spark, data_dir), work, "nq").seconds,
            "quantiles ours": lambda: run_query(spark, ours_quantiles(spark, data_dir, True), work, "oq").seconds,
            "quantiles ours, not pre-folded": lambda: run_query(spark, ours_quantiles(spark, data_dir, False), work,
                                                                "oqp").seconds,
        }
        cases["distinct native"](), cases["distinct ours"]()  # warm-up
        timings = interleaved(list(cases.items()), args.runs,
                              lambda name, run, s: print(f"  run {run + 1} {name}: {s:.1f} s", flush=True))
        print(f"\n{'case':34} {'seconds (median, spread)':>28} {'events/s':>10} {'native/ours':>20}")
        for name, seconds in timings.items():
            peer = timings[f"{name.split()[0]} native"]
            ratio = "" if name.endswith("native") else ratios(seconds, peer).text() + "x"
            median = spread(seconds).median
            print(f"{name:34} {spread(seconds).text(1):>28} {args.events / median:>10,.0f} {ratio:>20}")

        from accumulations import ApproxCountDistinct, Quantiles

        print()
        hll_error = 1.04 / math.sqrt(2 ** ApproxCountDistinct().lg_k)
        for name, out in (("ours", ours_distinct(spark, data_dir, True)),
                          ("ours_not_prefolded", ours_distinct(spark, data_dir, False)),
                          ("native", native_distinct(spark, data_dir))):
            frame = results(spark, out, work, f"distinct_{name}")
            error = hll_error if name.startswith("ours") else 0.05  # approx_count_distinct's default rsd
            print(f"distinct counts {name}: {len(frame)} windows, each within 3 standard errors of the exact count: "
                  f"{'yes' if check_distinct(frame, df, error) else 'NO'}")
        rank_error = Quantiles().rank_error()
        for name, out in (("ours", ours_quantiles(spark, data_dir, True)),
                          ("native", native_quantiles(spark, data_dir))):
            frame = results(spark, out, work, f"quantiles_{name}")
            print(f"quantiles {name}: {len(frame)} (key, window) results, each rank within {rank_error:.4f} of its "
                  f"fraction: {'yes' if check_quantiles(frame, df, rank_error) else 'NO'}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
