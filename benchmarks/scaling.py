"""Throughput with one executor against two, ours and native Spark's: does ours scale as native does?

A standalone master and two workers (1 core, 1 GB each) start from the pyspark package
(``tests/spark/test_cluster.py``'s ``standalone_cluster``).  A driver process (``--child``) runs each
case natively and with our operator over the same parquet input (``benchmarks/run.py``'s stream:
``--events`` rows, ``--keys`` keys, 10 files read one per micro-batch), with
``spark.cores.max`` 1 (one executor) or 2 (one on each worker), 4 state partitions, our key groups
balanced over them (``apply(checkpoint=...)``).  Rounds interleave the two sizes (1, 2, 1, 2, ...),
each driver warmed up by a small query first; figures are medians of the query wall time with the
spread, and the speed-up of each side is its one-executor time over its two-executor time, round by
round.  This machine has 2 cores for the drivers, both executors and their Python workers together,
so neither side can reach 2x; what matters is ours against native.

    python benchmarks/scaling.py                  # 400,000 events, 3 rounds (benchmarks/results/scaling.txt)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

PARTITIONS = 4
CASES = ("tumbling", "sessions")


def child(args: argparse.Namespace) -> None:
    """One driver: a warm-up, then each case natively and ours; a JSON line per run."""
    import warnings

    import run as bench
    from windowed_operator.spark.base.session import local_session

    spark = local_session(master=args.master, app_name=f"scaling-{args.cores}", extra_conf={
        "spark.cores.max": str(args.cores), "spark.executor.cores": "1", "spark.executor.memory": "768m",
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": str(PARTITIONS)})
    work, data = Path(args.work), Path(args.data)
    from accumulations import Sum
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder

    def ours(kind: str, source: Path) -> Any:
        window = TimeWindows(10_000) if kind == "tumbling" else SessionWindows(30_000)
        trigger = TriggerOption.default() if kind == "tumbling" else \
            TriggerOption.at_watermark().with_early_firings_at_every(count=100).accumulating_and_retracting_fired_panes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op = KeyedWindowedOperator(window, Sum("amount"), trigger=trigger, key="key", timestamp="ts_ms",
                                       watermark=bounded_disorder(bench.DELAY_MS))
        checkpoint = work / f"ckpt-ours-{kind}-{time.monotonic_ns()}"
        out = op.apply(bench.source(spark, source).drop("ts"), checkpoint=str(checkpoint))
        started = time.perf_counter()
        query = (out.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return time.perf_counter() - started

    for kind in args.cases:  # (warm-up: the JVMs, the executors, the Python workers)
        bench.native(spark, Path(args.warmup), work, kind)
        ours(kind, Path(args.warmup))
    for kind in args.cases:
        native = bench.native(spark, data, work, kind).seconds
        print(json.dumps({"cores": args.cores, "case": kind, "side": "native", "seconds": native}), flush=True)
        print(json.dumps({"cores": args.cores, "case": kind, "side": "ours", "seconds": ours(kind, data)}), flush=True)
    spark.stop()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--master")
    parser.add_argument("--cores", type=int)
    parser.add_argument("--data")
    parser.add_argument("--warmup")
    parser.add_argument("--work")
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    import run as bench
    from spark.test_cluster import standalone_cluster

    root = Path(tempfile.mkdtemp(prefix="scaling-"))
    bench.write_parquet(bench.generate(args.events, args.keys), root / "data")
    bench.write_parquet(bench.generate(20_000, args.keys, seed=2), root / "warmup", files=2)
    runs: list[dict] = []
    with standalone_cluster(root / "cluster", workers=2) as (master, _, _):
        for round_ in range(args.rounds):
            for cores in (1, 2):
                work = root / f"work-{round_}-{cores}"
                work.mkdir()
                out = subprocess.run(
                    [sys.executable, __file__, "--child", "--master", master, "--cores", str(cores), "--data",
                     str(root / "data"), "--warmup", str(root / "warmup"), "--work", str(work), "--cases",
                     *args.cases], capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
                if out.returncode:
                    sys.stderr.write(out.stderr[-4000:])
                    raise SystemExit(f"the driver with {cores} core(s) failed")
                for line in out.stdout.splitlines():
                    if line.startswith("{"):
                        runs.append({**json.loads(line), "round": round_})
                        print(f"round {round_}: {runs[-1]}", flush=True)
    print(f"\n{args.events:,} events, {args.keys:,} keys, 10 micro-batches, {PARTITIONS} state partitions, "
          f"{args.rounds} rounds (medians, spread in parentheses); speed-up = 1 executor / 2 executors")
    print(f"{'case':<10} {'side':<7} {'1 executor s':>18} {'2 executors s':>18} {'speed-up':>18}")
    for case in args.cases:
        ups = {}
        for side in ("native", "ours"):
            times = {cores: [r["seconds"] for r in runs if r["case"] == case and r["side"] == side and
                             r["cores"] == cores] for cores in (1, 2)}
            speedups = [one / two for one, two in zip(times[1], times[2])]
            ups[side] = speedups
            print(f"{case:<10} {side:<7} {_fig(times[1]):>18} {_fig(times[2]):>18} {_fig(speedups, '.2f'):>18}")
        relative = [o / n for o, n in zip(ups["ours"], ups["native"])]
        print(f"{case:<10} ours' speed-up / native's: {_fig(relative, '.2f')}")
    return 0


def _fig(values: list[float], form: str = ".1f") -> str:
    return f"{statistics.median(values):{form}} ({min(values):{form}}-{max(values):{form}})" if values else "-"


if __name__ == "__main__":
    sys.exit(main())
