"""Throughput of windowed-operator on Spark against what a user would pick instead, on the same data.

    python benchmarks/run.py                  # 2M events, 1K keys, 3 runs a case (about 25 minutes here)
    python benchmarks/run.py --events 200000 --runs 1  # a quick look

One generated stream (``--events`` rows, ``--keys`` keys, event time advancing 1 s per 1,000 rows
with up to 2 s of disorder, written as 10 parquet files read one per micro-batch, 5 s watermark
delay) is run through:
- pandas in one process (the floor: a batch groupby, no streaming);
- native Spark Structured Streaming ``groupBy(window(...), key).agg(sum)`` (tumbling 10 s; hopping
  60 s / 1 s; ``session_window`` 30 s);
- our operator on Spark: tumbling with the default trigger (pre-aggregated, columnar), without
  pre-aggregation, on the element-by-element path, with early firings every 100 elements
  (accumulating), and with them in retracting mode; hopping and sessions with the default trigger
  (pane sharing; the session table), with early firings and in retracting mode (the window table;
  sessions: the element path until the session table takes count triggers); state after the run read back from the
  checkpoint (accumulators held and bytes; native: Spark's state rows and RocksDB memory);
- latency: ``--latency-batches`` micro-batches of ``--latency-rows`` rows (100 of 1,000), tumbling
  10 s, native and ours (also without pre-aggregation: whether the scan-stage fold still pays on small
  batches): p50/p99 of the batch durations after the first (the fixed cost per
  micro-batch is what a latency-minded user feels);
- the Apache Beam Python DirectRunner on a sample (200,000 events; its start-up timed apart; skipped
  when ``apache_beam`` is not installed, or run from ``--beam-python``'s interpreter);
- a chain (Nexmark q5's shape): counts per key in hopping 10 s / 2 s windows, then the largest count
  per window; native Spark chains two windowed aggregations, ours two operators in one query, told
  its checkpoint (so, a new query, its second stage runs as Spark's aggregation: ``nativeStages``),
  and the first alone, to show what the second stage costs;
- per-record sliding windows in the core as the window grows (elements per window 1K -> 1M).
A warm-up query pair runs first, outside the timings.  Every Spark case runs ``--runs`` times (3),
round by round, in its group's order and reversed in turn (native, ours, floor..., then ...floor,
ours, native: the second run of a pair gains up to 1.2x on the same code, ``timing.alternating``;
an even ``--runs`` balances it), each run on a fresh checkpoint; figures are the median with the spread (min-max) in parentheses,
rows per second of wall time for the whole query at the median, and ratios are taken round by
round within the run.  ``--only`` picks cases by name.

Results are recorded in ``benchmarks/results/run.txt`` (``... | tee benchmarks/results/run.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/timing.py, run as a script
from floor import calibrate, floor_plans, floor_rows  # noqa: E402
from timing import interleaved, percentile, ratios, spread  # noqa: E402

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


@dataclass
class Run:
    seconds: float
    state: dict
    #: Each micro-batch's progress, as JSON dicts, in order.
    progress: list
    checkpoint: Path


def new_checkpoint(work: Path, name: str) -> Path:
    """A fresh checkpoint directory (each run starts from nothing)."""
    return work / f"ckpt-{name}-{time.monotonic_ns()}"


def run_query(spark, out, work: Path, name: str, checkpoint: Path | None = None) -> Run:
    """One query to the end of its input, on ``checkpoint`` (the one its operators were told) or a
    fresh one."""
    checkpoint = checkpoint or new_checkpoint(work, name)
    start = time.perf_counter()
    query = (out.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    progress = [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]
    state: dict = {"rows": 0, "bytes": 0}
    for batch in progress:
        for op in batch.get("stateOperators", []):
            state = {"rows": op.get("numRowsTotal", 0), "entries": op.get("numRowsTotal", 0),
                     "bytes": op.get("memoryUsedBytes", 0)}
    return Run(elapsed, state, progress, checkpoint)


def our_state(spark, checkpoint: Path) -> dict:
    """What our operator holds after the run, read back from the checkpoint (Spark's state data
    source): keys with state, accumulators (pane rows on the columnar path and the pane log,
    windows on the object path) and the bytes of the JSON records and parts."""
    import json

    from windowed_operator.spark.inspect import key_records, pane_log_parts
    from windowed_operator.state.pane_log import part_rows

    rows = key_records(spark, str(checkpoint)).select("record").collect()
    entries = size = 0
    for (record,) in rows:
        size += len(record)
        state = json.loads(record)["state"]
        entries += len(state.get("starts", state.get("windows", [])))
    logged: set = set()  # the pane log's keys (a key's rows of a pane may span parts)
    for bucket, text in pane_log_parts(spark, str(checkpoint)).select("bucket", "rows").collect():
        size += len(text)
        part = part_rows(text, bucket)
        entries += len(part.codes)
        logged.update(json.dumps(key) for key in part.keys)
    return {"rows": len(rows) + len(logged), "entries": entries, "bytes": size}


def source(spark, data_dir: Path):
    return (spark.readStream.schema("key string, amount bigint, ts_ms bigint, ts timestamp")
            .option("maxFilesPerTrigger", 1).parquet(str(data_dir)))


def native(spark, data_dir: Path, work: Path, kind: str) -> Run:
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


def floor_context(floor: dict[str, int] | None, calls: Callable[[str], Any] | None = None):
    """Where ``floor`` is given (rows per call by operator; ``calls``: accumulators counting the
    calls, by operator), the query is built as its floor (``benchmarks/floor.py``); else as ours."""
    from contextlib import nullcontext

    if floor is None:
        return nullcontext()
    return floor_plans(lambda label: floor.get(label, 0), calls or (lambda label: None))


def ours(spark, data_dir: Path, work: Path, kind: str, trigger: str, key_groups: int,
         vectorized: bool = True, preaggregate: bool = True, floor: dict[str, int] | None = None,
         calls: Callable[[str], Any] | None = None) -> Run:
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
    with floor_context(floor, calls):
        out = op.apply(source(spark, data_dir).drop("ts"), key_groups=key_groups, vectorized=vectorized,
                       preaggregate=preaggregate)
    side = "floor" if floor is not None else "ours"
    run = run_query(spark, out, work, f"{side}-{kind}-{trigger}-{key_groups}-{vectorized}-{preaggregate}")
    if floor is None:
        run.state = our_state(spark, run.checkpoint)
    return run


def native_hot_items(spark, data_dir: Path, work: Path) -> Run:
    """Nexmark q5's shape natively: a count per key and hopping window, then the largest count per
    window (Spark 4 chains windowed aggregations in append mode, the second grouped by window_time)."""
    from pyspark.sql import functions as F

    df = source(spark, data_dir).withWatermark("ts", f"{DELAY_MS} milliseconds")
    counts = df.groupBy(F.window("ts", "10 seconds", "2 seconds"), "key").count()
    out = counts.groupBy(F.window_time("window").alias("window_time")).agg(F.max("count").alias("top"))
    return run_query(spark, out, work, "native-hot-items")


def ours_hot_items(spark, data_dir: Path, work: Path, key_groups: int | None, chained: bool = True,
                   floor: dict[str, int] | None = None, calls: Callable[[str], Any] | None = None) -> Run:
    """The same with our operators: a hopping count per key, then (``chained``) a windowless Max
    that keeps each count's window, in the same query, applied as the production checklist asks
    (told the query's checkpoint: its key groups follow the session, and the Max, which Spark can
    aggregate itself, runs as Spark's aggregation, as in a new query told a checkpoint on this
    machine's file system; on shared storage, or not told it, the two-stage form unless the session
    sets ``nativeStages``)."""
    from accumulations import Count, Max
    from windowed_operator import KeyedWindowedOperator, TimeWindows, WindowedOperator, bounded_disorder

    counts = KeyedWindowedOperator(TimeWindows(10_000).slide_by(2_000), Count(), key="key", timestamp="ts_ms",
                                   watermark=bounded_disorder(DELAY_MS))
    operators = counts.then(WindowedOperator(None, Max())) if chained else counts
    name = f"{'floor' if floor is not None else 'ours'}-hot-items-{chained}"
    checkpoint = new_checkpoint(work, name)
    with floor_context(floor, calls):
        out = operators.apply(source(spark, data_dir).drop("ts"), key_groups=key_groups, checkpoint=str(checkpoint))
    return run_query(spark, out, work, name, checkpoint)


def beam_direct(df: pd.DataFrame, sample: int) -> dict | None:
    """Beam Python DirectRunner, tumbling 10 s sum with early firings every 100 elements, on a sample;
    its start-up (the same pipeline on 10 elements) is timed on its own and reported apart."""
    try:
        import apache_beam as beam
        from apache_beam.transforms import trigger as beam_trigger
        from apache_beam.transforms import window as beam_window
    except ImportError:
        return None

    def timed(rows: pd.DataFrame) -> float:
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

    startup = statistics.median(timed(df.head(10)) for _ in range(3))
    total = timed(df.head(sample))
    return {"startup_s": startup, "total_s": total, "seconds": max(1e-9, total - startup)}


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


# -- latency -----------------------------------------------------------------------------------------
def latency_figures(run: Run) -> tuple[float, float]:
    """p50 and p99 of the micro-batches' durations (``triggerExecution``), the first batch (query
    start-up) left out: what a user of a low-latency query feels on every batch."""
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in run.progress if p.get("numInputRows", 0) > 0]
    steady = durations[1:] or durations
    return percentile(steady, 50), percentile(steady, 99)


# -- report -------------------------------------------------------------------------------------------
#: Each group: its native peer first, then our cases, run round by round in this order and reversed in turn.
GROUPS: dict[str, list[str]] = {
    "tumbling": ["native tumbling 10s", "ours tumbling 10s default", "ours tumbling 10s early",
                 "ours tumbling 10s retracting", "ours tumbling 10s no pre-aggregation", "ours tumbling 10s plain path"],
    "hopping": ["native hopping 60s/1s", "ours hopping 60s/1s default", "ours hopping 60s/1s early",
                "ours hopping 60s/1s retracting"],
    "sessions": ["native sessions 30s", "ours sessions 30s default", "ours sessions 30s early",
                 "ours sessions 30s retracting"],
    "chain": ["native chain hot items", "ours chain hot items", "ours chain first stage only"],
}


def spark_case(spark, data_dir: Path, work: Path, name: str, key_groups: int | None) -> Callable[..., Run]:
    """The case's run (our cases take ``floor=`` and ``calls=``: ``floor_context``)."""
    if name == "native chain hot items":
        return lambda: native_hot_items(spark, data_dir, work)
    if name.startswith("ours chain"):
        return lambda **floor: ours_hot_items(spark, data_dir, work, key_groups, chained=name.endswith("hot items"),
                                              **floor)
    kind = name.split()[1]
    if name.startswith("native"):
        return lambda: native(spark, data_dir, work, kind)
    trigger = name.split()[-1] if name.split()[-1] in ("default", "early", "retracting") else "default"
    return lambda **floor: ours(spark, data_dir, work, kind, trigger, key_groups,
                                vectorized=not name.endswith("plain path"),
                                preaggregate=not name.endswith("no pre-aggregation"), **floor)


def floor_of(name: str) -> str:
    """The name of an our case's floor (``benchmarks/floor.py``)."""
    return "floor" + name[len("ours"):]


def floor_case(spark, make: Callable[..., Run], ours_run: Callable[[], Run], rows: dict[str, int]) -> Callable[[], Run]:
    """The floor of an our case (``make``): calibrated once, from the last run of ours (``ours_run``)
    and a counting run of the floor, both untimed, to emit as many rows as ours (``rows``: kept)."""
    def run() -> Run:
        if not rows:
            rows.update(calibrate(spark, ours_run().progress, lambda found, calls: make(floor=found, calls=calls)))
        return make(floor=rows)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="windowed-operator benchmarks")
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each Spark case, interleaved with its native peer")
    parser.add_argument("--key-groups", type=int, default=None, help="default: the operator's (16)")
    parser.add_argument("--beam-sample", type=int, default=200_000)
    parser.add_argument("--latency-batches", type=int, default=100)
    parser.add_argument("--latency-rows", type=int, default=1_000)
    parser.add_argument("--sliding-events", type=int, default=1_100_000,
                        help="events per sliding case: more than the largest window (1M) so it fills")
    parser.add_argument("--only", default="", help="comma-separated case prefixes (pandas,native,ours,latency,beam,"
                                                   "sliding)")
    parser.add_argument("--no-floor", action="store_true", help="leave out the floor of each of our cases "
                                                                    "(benchmarks/floor.py)")
    parser.add_argument("--json", help="also write the figures to this file (benchmarks/results/run.json, say)")
    parser.add_argument("--beam-python", help="a Python with apache_beam, when this one has none (the Beam case "
                                              "then runs there, on the same generated data)")
    args = parser.parse_args(argv)
    wanted = [w for w in args.only.split(",") if w]
    pick = lambda name: not wanted or any(name.startswith(w) for w in wanted)  # noqa: E731

    events = args.events
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"data: {events:,} events, {args.keys:,} keys, 10 files (one micro-batch each), local[2], "
          f"2 shuffle partitions, RocksDB state store; key_groups={args.key_groups or 'default (16)'}; "
          f"{args.runs} runs per Spark case, interleaved with its native peer, after a warm-up", flush=True)
    df = generate(events, args.keys)
    work = Path(tempfile.mkdtemp(prefix="wo-bench-"))
    data_dir = work / "data"
    write_parquet(df, data_dir)
    results: dict[str, dict[str, Any]] = {}

    def record(name: str, seconds: list[float], n: int = events, state: dict | None = None, **extra: Any) -> None:
        figure = spread(seconds)
        results[name] = {"seconds": [round(t, 2) for t in seconds], "median_s": round(figure.median, 2),
                         "rows_per_s": round(n / figure.median), **extra,
                         "state": state}
        held = (f"  state: {state['rows']:,} rows, {state['entries']:,} accumulators, {state['bytes'] / 1e6:.1f} MB"
                if state else "")
        print(f"{name:<40} {figure.text():>20} s {n / figure.median:>12,.0f} rows/s{held}", flush=True)

    if pick("pandas"):
        record("pandas tumbling 10s (floor)", [pandas_floor(df, 10_000) for _ in range(args.runs)])
    picked = {group: [name for name in names if pick(name)] for group, names in GROUPS.items()}
    spark = None
    if any(picked.values()) or pick("latency"):
        from windowed_operator.spark import local_session

        spark = local_session(app_name="windowed-operator-benchmarks", shuffle_partitions=2,
                              extra_conf={"spark.sql.streaming.numRecentProgressUpdates": "1000"},
                              spark_log=str(work / "spark.log"))
        # Warm-up outside the timings: JVM code generation and Python worker start-up (10-18 s for the
        # first stateful Python batch) would otherwise land on whichever case runs first.
        warm = work / "warm"
        write_parquet(generate(2_000, 10, seed=2), warm, files=2)
        native(spark, warm, work, "tumbling")
        ours(spark, warm, work, "tumbling", "default", args.key_groups)
    for group, names in picked.items():
        if not names:
            continue
        peer = GROUPS[group][0]
        names = [peer, *(n for n in names if n != peer)]  # ratios need the peer in every round
        last: dict[str, Run] = {}

        def timed(name: str, make: Callable[[], Run]) -> Callable[[], float]:
            def run() -> float:
                last[name] = make()
                return last[name].seconds
            return run

        cases: list[tuple[str, Callable[[], float]]] = []
        for name in names:
            make = spark_case(spark, data_dir, work, name, args.key_groups)
            cases.append((name, timed(name, make)))
            if name.startswith("ours") and not args.no_floor:  # (right after ours: its calibration reads ours' run)
                cases.append((floor_of(name), timed(floor_of(name), floor_case(
                    spark, make, lambda name=name: last[name], {}))))
        timings = interleaved(cases, args.runs, alternate=True)
        for name, _ in cases:
            record(name, timings[name], state=last[name].state)
            if name != peer:
                results[name]["vs_native"] = ratios(timings[name], timings[peer]).text()
            if name.startswith("ours") and floor_of(name) in timings:
                results[name]["vs_floor"] = ratios(timings[name], timings[floor_of(name)]).text()
                print(f"  {name}: ours/floor {results[name]['vs_floor']}x, floor/native "
                      f"{ratios(timings[floor_of(name)], timings[peer]).text()}x (throughput ratios per round); "
                      f"rows out: ours {floor_rows(last[name].progress):,}, floor "
                      f"{floor_rows(last[floor_of(name)].progress):,}", flush=True)
    if pick("latency"):
        latency_dir = work / "latency"
        write_parquet(generate(args.latency_batches * args.latency_rows, args.keys, seed=5), latency_dir,
                      files=args.latency_batches)
        latest: dict[str, Run] = {}

        def tumbling(trigger: str, **options: Any) -> Callable[..., Run]:
            return lambda **floor: ours(spark, latency_dir, work, "tumbling", trigger, args.key_groups, **options,
                                        **floor)

        cases = [("native", lambda: native(spark, latency_dir, work, "tumbling")),
                 ("ours", tumbling("default")), ("ours early", tumbling("early")),
                 ("ours no pre-agg", tumbling("default", preaggregate=False))]
        if not args.no_floor:
            cases[2:2] = [("floor", floor_case(spark, tumbling("default"), lambda: latest["ours"], {}))]
            cases[4:4] = [("floor early", floor_case(spark, tumbling("early"), lambda: latest["ours early"], {}))]
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cases}

        def latency_case(name: str, make: Callable[[], Run]) -> Callable[[], float]:
            def run() -> float:
                done = latest[name] = make()
                figures[name].append(latency_figures(done))
                return done.seconds
            return run

        interleaved([(name, latency_case(name, make)) for name, make in cases], args.runs)
        print(f"\nlatency: {args.latency_batches} micro-batches of {args.latency_rows:,} rows, tumbling 10 s, batch "
              "duration after the first (median of runs, spread):")
        for name, runs in figures.items():
            p50, p99 = spread([r[0] for r in runs]), spread([r[1] for r in runs])
            results[f"latency {name}"] = {"p50_s": p50.median, "p99_s": p99.median}
            floor = name.replace("ours", "floor") if name.startswith("ours") else None
            versus = ""
            if floor in figures:  # (p50 per round: ours over the floor's, and over native's)
                versus = (f"   p50 ours/floor {spread([o[0] / f[0] for o, f in zip(runs, figures[floor])]).text(2)}x, "
                          f"ours/native {spread([o[0] / n[0] for o, n in zip(runs, figures['native'])]).text(2)}x")
            print(f"  {name:<16} p50 {p50.text(3)} s   p99 {p99.text(3)} s{versus}", flush=True)
    if pick("beam"):
        beam = beam_direct(df, args.beam_sample)
        if beam is None and args.beam_python:
            import subprocess

            out = work / "beam.json"
            subprocess.run([args.beam_python, __file__, "--only", "beam", "--events", str(events), "--keys",
                            str(args.keys), "--beam-sample", str(args.beam_sample), "--json", str(out)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            beam = next(iter(json.loads(out.read_text()).values()))["beam"]
        if beam is None:
            print("beam: skipped (no apache_beam here; --beam-python PATH runs it from another interpreter)")
        else:
            name = f"beam DirectRunner tumbling early ({args.beam_sample:,} sample)"
            record(name, [beam["seconds"]], n=args.beam_sample, beam=beam)
            print(f"  (Beam's start-up, timed apart and left out: {beam['startup_s']:.1f} s; with it: "
                  f"{args.beam_sample / beam['total_s']:,.0f} rows/s)")
    if pick("sliding"):
        for per_window in (1_000, 10_000, 100_000, 1_000_000):
            record(f"sliding per-record {per_window:,}/window (core)",
                   [per_record_sliding(per_window, args.sliding_events)], n=args.sliding_events)

    print("\nratios (round by round within this run: median, spread):")
    for name, figures_of in results.items():
        if "vs_native" in figures_of:
            print(f"  {name} vs native: {figures_of['vs_native']}x")
    if "ours hopping 60s/1s default" in results and "native hopping 60s/1s" in results:
        ours_entries = results["ours hopping 60s/1s default"]["state"]["entries"]
        native_entries = results["native hopping 60s/1s"]["state"]["entries"]
        print(f"  hopping state after the run: native {native_entries:,} window rows / ours {ours_entries:,} panes: "
              f"{native_entries / max(1, ours_entries):.1f}x fewer accumulators")
    beam_name = next((k for k in results if k.startswith("beam")), None)
    for name in ("ours tumbling 10s early", "ours tumbling 10s retracting"):
        if beam_name and name in results:
            print(f"  {name} / {beam_name}: {results[name]['rows_per_s'] / results[beam_name]['rows_per_s']:.1f}x")
    sliding = [k for k in results if k.startswith("sliding")]
    if len(sliding) > 1:
        print(f"  {sliding[0]} / {sliding[-1]}: "
              f"{results[sliding[0]]['rows_per_s'] / results[sliding[-1]]['rows_per_s']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    if spark is not None:
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
