"""What a micro-batch costs when it carries almost nothing: Nexmark q7 (ours and native) and a
stateful Python processor that does nothing (one value state, a row count per key), on many small
micro-batches, so that the fixed cost per batch is what is measured.

    python benchmarks/nexmark/batch_overhead.py                 # 30 files of 1,000 events, 3 rounds
    python benchmarks/nexmark/batch_overhead.py --query q8 --files 10 --events-per-file 200000

With ``--query q8`` on the Nexmark table's stream (the second line), the do-nothing processor takes
q8's rows (people and auctions, keyed by person and seller into 16 key groups, as ours keys them):
its whole-run rate is what any ``transformWithStateInPandas`` implementation of q8 could reach at
most on these micro-batches, to set against 30x Beam's rate.

Per side, the medians over the middle batches (the first and last three left out: query start,
end of input) of Spark's own progress figures: the whole trigger, ``addBatch``, and, summed over the
stateful operator's tasks, the time spent in its updates (for a Python processor: the Python worker's
round trip) and in the state store's commit.  The "do-nothing processor" row is the floor any
``transformWithStateInPandas`` pays per batch on this machine, whatever the library above it does.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: timing.py and this package

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from nexmark.generator import NexmarkConfig, generate, write_files  # noqa: E402
from timing import interleaved, spread  # noqa: E402


def do_nothing_plan(events: Any, query: str = "q7") -> Any:
    """A transformWithStateInPandas that declares one value state and counts each key's rows: q7's
    bids in two keys, or q8's people and auctions in 16 key groups (by person id and seller)."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class DoNothing(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.state = handle.getValueState("v", "x bigint")

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            yield pd.DataFrame({"k": [key[0]], "n": [sum(len(r) for r in rows)]})

        def close(self) -> None:
            pass

    if query == "q8":
        rows = events.where("name is not null or itemName is not null").selectExpr(
            "pmod(xxhash64(coalesce(seller, id)), 16) as k")
    else:
        rows = events.where("auction is not null").selectExpr("auction % 2 as k")
    return rows.groupBy("k").transformWithStateInPandas(DoNothing(), "k long, n long", "append", "None")


def figures(run: S.Run) -> dict[str, float]:
    middle = run.progress[3:-3]

    def median(of: Callable[[dict], float]) -> float:
        return statistics.median(of(p) for p in middle)

    def operators(p: dict) -> list[dict]:
        return p.get("stateOperators", [])

    return {"trigger": median(lambda p: p["durationMs"]["triggerExecution"]),
            "addBatch": median(lambda p: p["durationMs"].get("addBatch", 0)),
            "updates": median(lambda p: sum(o["allUpdatesTimeMs"] for o in operators(p))),
            "commit": median(lambda p: sum(o["commitTimeMs"] for o in operators(p)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the fixed cost of a micro-batch: ours, native, a do-nothing processor")
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--events-per-file", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--query", choices=("q7", "q8"), default="q7")
    args = parser.parse_args(argv)

    from windowed_operator.spark import local_session

    work = Path(tempfile.mkdtemp(prefix="batch-overhead-"))
    directory = work / "events"
    write_files(generate(NexmarkConfig(events=args.files * args.events_per_file)), directory, args.events_per_file,
                fmt="parquet", end_marker=True)
    spark = local_session(app_name="batch-overhead", shuffle_partitions=2, spark_log=str(work / "spark.log"),
                          extra_conf={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
    config = Q.QueryConfig(max_disorder_ms=2_000)
    q = args.query
    plans = {f"native {q}": lambda df: S.native(q, config, df), f"ours {q}": lambda df: S.ours(q, config, df),
             "do-nothing processor": lambda df: do_nothing_plan(df, q)}
    last: dict[str, list[dict[str, float]]] = {name: [] for name in plans}

    def case(name: str) -> Callable[[], float]:
        def run() -> float:
            done = S.run_to_end(plans[name](S.source(spark, directory)), work / f"ckpt-{time.monotonic_ns()}")
            last[name].append({**figures(done), "seconds": done.seconds, "batches": len(done.progress)})
            return done.seconds
        return run

    for name in plans:  # a warm-up of each
        case(name)()
        last[name].clear()
    interleaved([(name, case(name)) for name in plans], args.runs)
    print(f"{args.files} micro-batches of {args.events_per_file:,} events, local[2], {args.runs} runs interleaved; "
          "medians over runs of each run's median batch, ms")
    print(f"{'side':<22}{'trigger':>9}{'addBatch':>10}{'updates':>9}{'commit':>8}{'batches':>9}"
          f"{'run s (spread)':>22}{'events/s':>11}")
    events = args.files * args.events_per_file
    for name in plans:
        row = {k: statistics.median(f[k] for f in last[name]) for k in last[name][0]}
        run = spread([f["seconds"] for f in last[name]])
        print(f"{name:<22}{row['trigger']:>9.0f}{row['addBatch']:>10.0f}{row['updates']:>9.0f}{row['commit']:>8.0f}"
              f"{row['batches']:>9.0f}{run.text():>22}{events / run.median:>11,.0f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
