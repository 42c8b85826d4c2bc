"""Throughput of windowed-operator on Spark against what a user would pick instead, on the same data.

    python benchmarks/run.py                  # 2M events, 1K keys (about 10-20 minutes here)
    python benchmarks/run.py --events 200000  # a quick look

One generated stream (``--events`` rows, ``--keys`` keys, event time advancing 1 s per 1,000 rows
with up to 2 s of disorder, written as 10 parquet files read one per micro-batch, 5 s watermark
delay) is run through:
- pandas in one process (the floor: a batch groupby, no streaming);
- native Spark Structured Streaming ``groupBy(window(...), key).agg(sum)`` (tumbling 10 s; hopping
  60 s / 1 s; ``session_window`` 30 s);
- our operator on Spark: tumbling with the default trigger (pre-aggregated, columnar), without
  pre-aggregation, on the element-by-element path, with early firings, in retracting mode; hopping
  (pane sharing) and sessions with the default trigger; state after the run read back from the
  checkpoint (accumulators held and bytes; native: Spark's state rows and RocksDB memory);
- the Apache Beam Python DirectRunner on a sample (skipped when ``apache_beam`` is not installed);
- per-record sliding windows in the core as the window grows (elements per window 1K -> 1M).
Every figure is rows per second of wall time for the whole query (first batch included); ratios are
taken within this one run.  ``--only`` picks cases by name.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

BASE = 1_767_225_600_000
DELAY_MS = 5_000


# -- data ---------------------------------------------------------------------------------------------
def generate(events: int, keys: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ordinal = np.arange(events, dtype=np.int64)
    ts = BASE + ordinal + rng.integers(-2_000, 2_001, events)  # 1,000 rows per second of event time
    return pd.DataFrame({"key": rng.integers(0, keys, events).astype(str).astype(object),
                         "amount": rng.integers(1, 100, events).astype(np.int64), "ts_ms": ts})


def write_parquet(df: pd.DataFrame, directory: Path, files: int = 10) -> None:
    directory.mkdir(parents=True)
    bounds = np.linspace(0, len(df), files + 1).astype(int)
    for i, part in enumerate(df.iloc[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])):
        path = directory / f"part-{i:03d}.parquet"
        part.assign(ts=pd.to_datetime(part.ts_ms, unit="ms", utc=True)).to_parquet(
            path, index=False, coerce_timestamps="us", allow_truncated_timestamps=True)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


# -- peers --------------------------------------------------------------------------------------------
def pandas_floor(df: pd.DataFrame, size_ms: int) -> float:
    start = time.perf_counter()
    window = df.ts_ms - df.ts_ms % size_ms
    df.groupby([df.key, window]).amount.sum()
    return time.perf_counter() - start


def run_query(spark, out, work: Path, name: str) -> tuple[float, dict]:
    start = time.perf_counter()
    query = (out.writeStream.format("noop").option("checkpointLocation", str(work / f"ckpt-{name}"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    state: dict = {"rows": 0, "bytes": 0}
    for progress in query.recentProgress:
        for op in progress.get("stateOperators", []) if isinstance(progress, dict) else progress.stateOperators:
            op = op if isinstance(op, dict) else json.loads(op.json)
            state = {"rows": op.get("numRowsTotal", 0), "entries": op.get("numRowsTotal", 0),
                     "bytes": op.get("memoryUsedBytes", 0)}
    return elapsed, state


def our_state(spark, checkpoint: Path) -> dict:
    """What our operator holds after the run, read back from the checkpoint (Spark's state data
    source): keys with state, accumulators (pane rows on the columnar path, windows on the object
    path) and the bytes of the keys' JSON records."""
    import json

    from windowed_operator.spark.inspect import key_records

    rows = key_records(spark, str(checkpoint)).select("record").collect()
    entries = size = 0
    for (record,) in rows:
        size += len(record)
        state = json.loads(record)["state"]
        entries += len(state.get("starts", state.get("windows", [])))
    return {"rows": len(rows), "entries": entries, "bytes": size}


def source(spark, data_dir: Path):
    return (spark.readStream.schema("key string, amount bigint, ts_ms bigint, ts timestamp")
            .option("maxFilesPerTrigger", 1).parquet(str(data_dir)))


def native(spark, data_dir: Path, work: Path, kind: str) -> tuple[float, dict]:
    from pyspark.sql import functions as F

    df = source(spark, data_dir).withWatermark("ts", f"{DELAY_MS} milliseconds")
    if kind == "tumbling":
        group = F.window("ts", "10 seconds")
    elif kind == "hopping":
        group = F.window("ts", "60 seconds", "1 second")
    else:
        group = F.session_window("ts", "30 seconds")
    out = df.groupBy(group, "key").agg(F.sum("amount").alias("amount"))
    return run_query(spark, out, work, f"native-{kind}")


def ours(spark, data_dir: Path, work: Path, kind: str, trigger: str, key_groups: int,
         vectorized: bool = True, preaggregate: bool = True) -> tuple[float, dict]:
    from accumulations import Sum
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder

    window = {"tumbling": TimeWindows(10_000), "hopping": TimeWindows(60_000).slide_by(1_000),
              "sessions": SessionWindows(30_000)}[kind]
    option = {"default": TriggerOption.default(),
              "early": TriggerOption.at_watermark().with_early_firings_at_every(count=100)
              .accumulating_fired_panes(),
              "retracting": TriggerOption.at_watermark().with_early_firings_at_every(count=100)
              .accumulating_and_retracting_fired_panes()}[trigger]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(window, Sum("amount"), trigger=option, key="key", timestamp="ts_ms",
                                   watermark=bounded_disorder(DELAY_MS))
    out = op.apply(source(spark, data_dir).drop("ts"), key_groups=key_groups, vectorized=vectorized,
                   preaggregate=preaggregate)
    name = f"ours-{kind}-{trigger}-{key_groups}-{vectorized}-{preaggregate}"
    elapsed, _ = run_query(spark, out, work, name)
    return elapsed, our_state(spark, work / f"ckpt-{name}")


def beam_direct(df: pd.DataFrame, sample: int) -> float | None:
    """Beam Python DirectRunner, tumbling 10 s sum with early firings every 100 elements, on a sample."""
    try:
        import apache_beam as beam
        from apache_beam.transforms import trigger as beam_trigger
        from apache_beam.transforms import window as beam_window
    except ImportError:
        return None
    rows = df.head(sample)
    elements = list(zip(rows.key.tolist(), rows.amount.tolist(), rows.ts_ms.tolist()))
    start = time.perf_counter()
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        (pipeline | beam.Create(elements)
         | beam.Map(lambda e: beam_window.TimestampedValue((e[0], e[1]), e[2] / 1000))
         | beam.WindowInto(beam_window.FixedWindows(10),
                           trigger=beam_trigger.AfterWatermark(early=beam_trigger.AfterCount(100)),
                           accumulation_mode=beam_trigger.AccumulationMode.ACCUMULATING)
         | beam.CombinePerKey(sum))
    return time.perf_counter() - start


def per_record_sliding(per_window: int, events: int) -> float:
    """Core only: one key, 1 element per ms, sliding windows holding ``per_window`` elements."""
    from accumulations import Sum
    from windowed_operator import KeyedWindowedOperator, SlidingWindows
    from windowed_operator.testing import TestStream, TimestampedValue

    op = KeyedWindowedOperator(SlidingWindows(per_window), Sum())
    runner = op.local_runner()
    stream = TestStream()
    batch = 1_000
    for lo in range(0, events, batch):
        stream.add_elements([TimestampedValue(("k", 1), BASE + t) for t in range(lo, min(events, lo + batch))])
        stream.advance_watermark_to(BASE + lo)
    start = time.perf_counter()
    runner.run(stream, finish=False)
    return time.perf_counter() - start


# -- report -------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="windowed-operator benchmarks")
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--key-groups", type=int, default=None, help="default: the operator's (4 per partition)")
    parser.add_argument("--beam-sample", type=int, default=20_000)
    parser.add_argument("--sliding-events", type=int, default=1_100_000,
                        help="events per sliding case: more than the largest window (1M) so it fills")
    parser.add_argument("--only", default="", help="comma-separated case prefixes (pandas,native,ours,beam,sliding)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--beam-python", help="a Python with apache_beam, when this one has none (the Beam case "
                                              "then runs there, on the same generated data)")
    args = parser.parse_args(argv)
    wanted = [w for w in args.only.split(",") if w]
    pick = lambda name: not wanted or any(name.startswith(w) for w in wanted)  # noqa: E731

    events = args.events
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"data: {events:,} events, {args.keys:,} keys, 10 files (one micro-batch each), local[2], "
          f"2 shuffle partitions, RocksDB state store; key_groups={args.key_groups or 'default (16)'}", flush=True)
    df = generate(events, args.keys)
    work = Path(tempfile.mkdtemp(prefix="wo-bench-"))
    data_dir = work / "data"
    write_parquet(df, data_dir)
    results: dict[str, dict[str, Any]] = {}

    def record(name: str, seconds: float | None, n: int = events, state: dict | None = None) -> None:
        if seconds is None:
            print(f"{name:<34} skipped", flush=True)
            return
        results[name] = {"seconds": round(seconds, 2), "rows_per_s": round(n / seconds), "state": state}
        extra = (f"  state: {state['rows']:,} rows, {state['entries']:,} accumulators, {state['bytes'] / 1e6:.1f} MB"
                 if state else "")
        print(f"{name:<34} {seconds:8.2f} s {n / seconds:>12,.0f} rows/s{extra}", flush=True)

    if pick("pandas"):
        record("pandas tumbling 10s (floor)", pandas_floor(df, 10_000))
    spark = None
    spark_cases = ["native tumbling 10s", "ours tumbling 10s default", "ours tumbling 10s early",
                   "ours tumbling 10s retracting", "ours tumbling 10s no pre-aggregation",
                   "ours tumbling 10s plain path", "native hopping 60s/1s",
                   "ours hopping 60s/1s default", "native sessions 30s", "ours sessions 30s default"]
    if any(pick(name) for name in spark_cases):
        from windowed_operator.spark import local_session

        spark = local_session(app_name="windowed-operator-benchmarks", shuffle_partitions=2)
        spark.sparkContext.setLogLevel("ERROR")
        # Warm-up outside the timings: JVM code generation and Python worker start-up (10-18 s for the
        # first stateful Python batch, SPARK_NOTES.md) would otherwise land on whichever case runs first.
        warm = work / "warm"
        write_parquet(generate(2_000, 10, seed=2), warm, files=2)
        native(spark, warm, work, "tumbling")
        ours(spark, warm, work, "tumbling", "default", args.key_groups)
    cases: list[tuple[str, Callable[[], tuple[float, dict]]]] = [
        ("native tumbling 10s", lambda: native(spark, data_dir, work, "tumbling")),
        ("ours tumbling 10s default", lambda: ours(spark, data_dir, work, "tumbling", "default", args.key_groups)),
        ("ours tumbling 10s early", lambda: ours(spark, data_dir, work, "tumbling", "early", args.key_groups)),
        ("ours tumbling 10s retracting", lambda: ours(spark, data_dir, work, "tumbling", "retracting",
                                                       args.key_groups)),
        ("ours tumbling 10s no pre-aggregation", lambda: ours(spark, data_dir, work, "tumbling", "default",
                                                               args.key_groups, preaggregate=False)),
        ("ours tumbling 10s plain path", lambda: ours(spark, data_dir, work, "tumbling", "default", args.key_groups,
                                                       vectorized=False)),
        ("native hopping 60s/1s", lambda: native(spark, data_dir, work, "hopping")),
        ("ours hopping 60s/1s default", lambda: ours(spark, data_dir, work, "hopping", "default", args.key_groups)),
        ("native sessions 30s", lambda: native(spark, data_dir, work, "sessions")),
        ("ours sessions 30s default", lambda: ours(spark, data_dir, work, "sessions", "default", args.key_groups)),
    ]
    for name, run in cases:
        if pick(name):
            seconds, state = run()
            record(name, seconds, state=state)
    if pick("beam"):
        seconds = beam_direct(df, args.beam_sample)
        if seconds is None and args.beam_python:
            import subprocess

            out = work / "beam.json"
            subprocess.run([args.beam_python, __file__, "--only", "beam", "--events", str(events), "--keys",
                            str(args.keys), "--beam-sample", str(args.beam_sample), "--json", str(out)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            seconds = next(iter(json.loads(out.read_text()).values()))["seconds"]
        record(f"beam DirectRunner tumbling early ({args.beam_sample:,} sample)", seconds, n=args.beam_sample)
    if pick("sliding"):
        for per_window in (1_000, 10_000, 100_000, 1_000_000):
            record(f"sliding per-record {per_window:,}/window (core)",
                   per_record_sliding(per_window, args.sliding_events), n=args.sliding_events)

    print("\nratios (same run):")

    def ratio(a: str, b: str) -> None:
        if a in results and b in results:
            print(f"  {a} / {b}: {results[a]['rows_per_s'] / results[b]['rows_per_s']:.2f}x")

    ratio("ours tumbling 10s default", "native tumbling 10s")
    ratio("ours tumbling 10s early", "native tumbling 10s")
    ratio("ours tumbling 10s retracting", "native tumbling 10s")
    ratio("ours tumbling 10s default", "ours tumbling 10s no pre-aggregation")
    ratio("ours tumbling 10s default", "ours tumbling 10s plain path")
    ratio("ours hopping 60s/1s default", "native hopping 60s/1s")
    if "ours hopping 60s/1s default" in results and "native hopping 60s/1s" in results:
        ours_entries = results["ours hopping 60s/1s default"]["state"]["entries"]
        native_entries = results["native hopping 60s/1s"]["state"]["entries"]
        print(f"  hopping state after the run: native {native_entries:,} window rows / ours {ours_entries:,} panes: "
              f"{native_entries / max(1, ours_entries):.1f}x fewer accumulators")
    ratio("ours sessions 30s default", "native sessions 30s")
    ratio("ours tumbling 10s default", "pandas tumbling 10s (floor)")
    beam = next((k for k in results if k.startswith("beam")), None)
    if beam:
        for name in ("ours tumbling 10s early", "ours tumbling 10s retracting"):
            ratio(name, beam)
    sliding = [k for k in results if k.startswith("sliding")]
    if len(sliding) > 1:
        print(f"  {sliding[0]} / {sliding[-1]}: "
              f"{results[sliding[0]]['rows_per_s'] / results[sliding[-1]]['rows_per_s']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if spark is not None:
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
