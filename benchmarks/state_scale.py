"""Does a micro-batch cost follow the batch, or the state held?  Ours against native Spark.

    python benchmarks/state_scale.py                              # 10K, 100K, 1M keys; 3 runs each (long)
    python benchmarks/state_scale.py --keys 10000,100000 --runs 1 # a quick look

For each number of keys K: batch 0 gives every key state (one row per key), then ``--batches``
micro-batches of ``--rows`` rows on random keys, with event time advancing 1 s per batch inside the
first hour, so that nothing fires: a steady batch only adds to state.  Cases (ours, then native
Spark on the same files):
- ``sessions``: session windows, gap 30 min, Count, default trigger (native: ``session_window``);
- ``tumbling``: tumbling 1 h, Sum, default trigger (native: ``window``);
- ``hopping-early``: hopping 1 h every 10 min, Sum, early firings every 100 elements, accumulating
  and retracting (native cannot fire early: its plain hopping sum is the reference point).
Per run: the median and spread of the steady batches' ``triggerExecution`` time (batches 2 and on),
the checkpoint bytes each steady batch wrote (RocksDB changelog checkpointing on: the files of that
state version), and the peak resident memory of the Python workers.  Runs are interleaved (native,
ours, native, ours, ...) after a warm-up; ratios are taken within this one run.

Results are recorded in ``benchmarks/results/state_scale.txt`` (``... | tee benchmarks/results/state_scale.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/timing.py, run as a script
from timing import spread  # noqa: E402

BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z, aligned to the hour
DELAY_MS = 60_000
CASES = ("sessions", "tumbling", "hopping-early")


# -- data ---------------------------------------------------------------------------------------------
def write_data(directory: Path, keys: int, batches: int, rows: int, seed: int = 3) -> float:
    """File 0: one row per key; files 1..batches: ``rows`` rows on random keys, 1 s later each.
    Returns the median number of distinct keys a steady batch touches (what per-key work follows)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    names = np.array([f"k{i:07d}" for i in range(keys)], dtype=object)
    frames = [pd.DataFrame({"key": names, "amount": np.ones(keys, dtype=np.int64),
                            "ts_ms": BASE + rng.integers(0, 1_000, keys)})]
    touched = []
    for b in range(1, batches + 1):
        chosen = rng.integers(0, keys, rows)
        touched.append(len(np.unique(chosen)))
        frames.append(pd.DataFrame({"key": names[chosen], "amount": rng.integers(1, 100, rows).astype(np.int64),
                                    "ts_ms": BASE + 1_000 * b + rng.integers(0, 1_000, rows)}))
    for i, frame in enumerate(frames):
        path = directory / f"part-{i:04d}.parquet"
        frame.assign(ts=pd.to_datetime(frame.ts_ms, unit="ms", utc=True)).to_parquet(
            path, index=False, coerce_timestamps="us", allow_truncated_timestamps=True)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return float(statistics.median(touched))


def source(spark: Any, data: Path) -> Any:
    return (spark.readStream.schema("key string, amount bigint, ts_ms bigint, ts timestamp")
            .option("maxFilesPerTrigger", 1).parquet(str(data)))


# -- the two sides ------------------------------------------------------------------------------------
def native_query(spark: Any, data: Path, case: str) -> Any:
    from pyspark.sql import functions as F

    df = source(spark, data).withWatermark("ts", f"{DELAY_MS} milliseconds")
    if case == "sessions":
        return df.groupBy(F.session_window("ts", "30 minutes"), "key").agg(F.count("*").alias("n"))
    if case == "tumbling":
        return df.groupBy(F.window("ts", "1 hour"), "key").agg(F.sum("amount").alias("amount"))
    return df.groupBy(F.window("ts", "1 hour", "10 minutes"), "key").agg(F.sum("amount").alias("amount"))


def our_query(spark: Any, data: Path, case: str) -> Any:
    from accumulations import Count, Sum
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder

    common = dict(key="key", timestamp="ts_ms", watermark=bounded_disorder(DELAY_MS))
    if case == "sessions":
        op = KeyedWindowedOperator(SessionWindows(1_800_000), Count(), **common)
    elif case == "tumbling":
        op = KeyedWindowedOperator(TimeWindows(3_600_000), Sum("amount"), **common)
    else:
        trigger = (TriggerOption.at_watermark().with_early_firings_at_every(count=100)
                   .accumulating_and_retracting_fired_panes())
        op = KeyedWindowedOperator(TimeWindows(3_600_000).slide_by(600_000), Sum("amount"), trigger=trigger,
                                   **common)
    return op.apply(source(spark, data).drop("ts"))


# -- measuring ----------------------------------------------------------------------------------------
#: The module the Python workers are forked from: pyspark's daemon, or on a local master the one
#: ``local_session`` sets (``windowed_operator.spark.worker_daemon``).
WORKER_MODULES = {b"pyspark.daemon", b"windowed_operator.spark.worker_daemon"}


class WorkerMemory:
    """Peak resident memory of this machine's Python worker processes (not the driver), polled;
    ``samples`` keeps (time, largest worker) per poll, to take the peak of a span of batches."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self.samples: list[tuple[float, int]] = []
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "WorkerMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            largest = 0
            for pid in filter(str.isdigit, os.listdir("/proc")):
                if int(pid) == me:
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    if b"python" not in Path(argv[0].decode()).name.encode() or not WORKER_MODULES & set(argv):
                        continue  # only the Python workers (not the JVM, whose class path says python)
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                found = re.search(r"VmRSS:\s+(\d+) kB", status)
                if found:
                    largest = max(largest, int(found.group(1)) * 1024)
            self.peak = max(self.peak, largest)
            self.samples.append((time.time(), largest))
            time.sleep(self.interval)


def changelog_bytes(checkpoint: Path) -> dict[int, int]:
    """Bytes of state files per state version (a version is a batch id + 1), over all operators."""
    sizes: dict[int, int] = {}
    for path in (checkpoint / "state").rglob("*"):
        found = re.fullmatch(r"(\d+)\.(changelog|zip)", path.name)
        if found and path.is_file():
            version = int(found.group(1))
            sizes[version] = sizes.get(version, 0) + path.stat().st_size
    return sizes


def run_once(spark: Any, make: Callable[[], Any], work: Path, name: str) -> dict[str, Any]:
    checkpoint = work / f"ckpt-{name}-{time.monotonic_ns()}"
    with WorkerMemory() as memory:
        query = (make().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    progress = [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]
    data_batches = [p for p in progress if p.get("numInputRows", 0) > 0]
    steady = [p["durationMs"]["triggerExecution"] / 1000 for p in data_batches[2:]]
    versions = changelog_bytes(checkpoint)
    steady_bytes = [versions.get(p["batchId"] + 1, 0) for p in data_batches[2:]]
    shutil.rmtree(checkpoint, ignore_errors=True)
    steady_start = (pd.Timestamp(data_batches[2]["timestamp"]).timestamp() if len(data_batches) > 2
                    else float("inf"))
    return {"first_s": data_batches[0]["durationMs"]["triggerExecution"] / 1000 if data_batches else None,
            "steady_s": steady, "steady_bytes": steady_bytes, "worker_peak_bytes": memory.peak,
            "steady_worker_peak_bytes": max((rss for t, rss in memory.samples if t >= steady_start), default=0)}


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    batch = spread([statistics.median(r["steady_s"]) for r in runs if r["steady_s"]])
    written = [statistics.median(r["steady_bytes"]) for r in runs if r["steady_bytes"]]
    return {"median_s": batch.median, "min_s": batch.low, "max_s": batch.high,
            "bytes": statistics.median(written) if written else 0.0,
            "peak_mb": max(r["worker_peak_bytes"] for r in runs) / 1e6}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="10000,100000,1000000", help="comma-separated key counts")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated: {', '.join(CASES)}")
    parser.add_argument("--batches", type=int, default=6, help="steady batches after the state-loading one")
    parser.add_argument("--rows", type=int, default=20_000, help="rows per steady batch")
    parser.add_argument("--runs", type=int, default=3, help="runs per side, interleaved native/ours")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--conf", action="append", default=[], metavar="NAME=VALUE",
                        help="a Spark setting for the session, e.g. spark.windowed_operator.keyShards=false")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip the pass measuring the Python workers' memory in steady batches")
    args = parser.parse_args(argv)
    key_counts = [int(k) for k in args.keys.split(",")]
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")

    from windowed_operator.spark import local_session

    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; local[2], "
          f"2 shuffle partitions, RocksDB with changelog checkpointing; {args.batches} batches of {args.rows:,} rows "
          f"after one row per key; {args.runs} interleaved runs per side", flush=True)
    settings = dict(item.split("=", 1) for item in args.conf)
    spark = local_session(app_name="windowed-operator-state-scale", shuffle_partitions=2, extra_conf={
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true", **settings})
    if settings:
        print(f"settings: {settings}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="wo-state-scale-"))
    warm = work / "warm"
    write_data(warm, 200, 3, 200)
    for case in cases:  # JVM code generation and Python worker start-up stay out of the figures
        run_once(spark, lambda: native_query(spark, warm, case), work, "warm")
        run_once(spark, lambda: our_query(spark, warm, case), work, "warm")
    results: dict[str, Any] = {}
    touched: dict[int, float] = {}
    print(f"\n{'case':<15}{'keys':>10}{'native s/batch':>24}{'ours s/batch':>24}{'ours/native':>13}"
          f"{'native B/batch':>16}{'ours B/batch':>14}{'worker MB*':>11}", flush=True)
    for keys in key_counts:
        data = work / f"data-{keys}"
        touched[keys] = write_data(data, keys, args.batches, args.rows)
        for case in cases:
            runs: dict[str, list] = {"native": [], "ours": []}
            for _ in range(args.runs):
                runs["native"].append(run_once(spark, lambda: native_query(spark, data, case), work, "native"))
                runs["ours"].append(run_once(spark, lambda: our_query(spark, data, case), work, "ours"))
            native, ours = summary(runs["native"]), summary(runs["ours"])
            results[f"{case}/{keys}"] = {"native": native, "ours": ours, "runs": runs}
            print(f"{case:<15}{keys:>10,}"
                  f"{native['median_s']:>10.2f} ({native['min_s']:.2f}-{native['max_s']:.2f})"
                  f"{ours['median_s']:>10.2f} ({ours['min_s']:.2f}-{ours['max_s']:.2f})"
                  f"{ours['median_s'] / native['median_s']:>12.2f}x"
                  f"{native['bytes']:>16,.0f}{ours['bytes']:>14,.0f}{ours['peak_mb']:>11.0f}", flush=True)
    print("* worker MB: peak over the whole run, batch 0 (every key) included; see the steady pass below")
    first_keys, last_keys = key_counts[0], key_counts[-1]
    print(f"\ndistinct keys a steady batch touches: {touched[first_keys]:,.0f} of {first_keys:,} keys, "
          f"{touched[last_keys]:,.0f} of {last_keys:,} ({touched[last_keys] / touched[first_keys]:.2f}x): per-key "
          "work grows by this much whatever the state held")
    print("growth of the median steady batch from the fewest to the most keys:")
    for case in cases:
        first, last = results[f"{case}/{key_counts[0]}"], results[f"{case}/{key_counts[-1]}"]
        print(f"  {case:<15} native {last['native']['median_s'] / first['native']['median_s']:.2f}x, "
              f"ours {last['ours']['median_s'] / first['ours']['median_s']:.2f}x")
    spark.stop()
    if not args.no_memory:
        results["steady_memory"] = memory_pass(work, key_counts, cases)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def memory_pass(work: Path, key_counts: list[int], cases: list[str]) -> dict[str, float]:
    """Peak memory of a Python worker during steady batches (ours only, untimed).  Spark reuses
    its Python workers, and a worker keeps the memory batch 0 (every key) once took, so this pass
    runs in a session that starts a fresh worker per task: what a steady batch needs is then what
    its worker holds."""
    from windowed_operator.spark import local_session

    spark = local_session(app_name="windowed-operator-state-scale-memory", shuffle_partitions=2, extra_conf={
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.python.worker.reuse": "false"})
    out: dict[str, float] = {}
    print("\npeak Python worker memory during steady batches (MB; a fresh worker per task):")
    print(f"{'case':<15}" + "".join(f"{k:>14,}" for k in key_counts), flush=True)
    for case in cases:
        line = f"{case:<15}"
        for keys in key_counts:
            run = run_once(spark, lambda: our_query(spark, work / f"data-{keys}", case), work, "memory")
            out[f"{case}/{keys}"] = run["steady_worker_peak_bytes"] / 1e6
            line += f"{out[f'{case}/{keys}']:>14.0f}"
        print(line, flush=True)
    spark.stop()
    return out


if __name__ == "__main__":
    sys.exit(main())
