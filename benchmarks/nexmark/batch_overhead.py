"""What a micro-batch costs when it carries almost nothing: Nexmark q7 (ours and native) and a
stateful Python processor that does nothing (one value state, a row count per key), on many small
micro-batches, so that the fixed cost per batch is what is measured.

    python benchmarks/nexmark/batch_overhead.py                 # 30 files of 1,000 events, 3 rounds
    python benchmarks/nexmark/batch_overhead.py --query q8 --files 10 --events-per-file 200000

With ``--query q8`` on the Nexmark table's stream (the second line), the do-nothing processor takes
q8's rows (people and auctions, keyed by person and seller into 16 key groups, as ours keys them):
its whole-run rate is what any ``transformWithStateInPandas`` implementation of q8 could reach at
most on these micro-batches, to set against 30x Beam's rate.  A fourth side, the minimal q8
processor (``minimal_q8_plan``), does q8's work and emits our panes with nothing else: what an
implementation of our q8 with no Python object per row could reach, to set against native Spark.

Per side, the medians over the middle batches (the first and last three left out: query start,
end of input; every batch of a run too short for that) of Spark's own progress figures: the whole trigger, ``addBatch``, and, summed over the
stateful operator's tasks, the time spent in its updates (for a Python processor: the Python worker's
round trip) and in the state store's commit.  The "do-nothing processor" row is the floor any
``transformWithStateInPandas`` pays per batch on this machine, whatever the library above it does.

Results are recorded in ``benchmarks/results/nexmark_batch_overhead.txt`` (``... | tee benchmarks/results/nexmark_batch_overhead.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: timing.py and this package

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from nexmark.generator import NexmarkConfig, generate, write_files  # noqa: E402
from timing import interleaved, ratios, spread  # noqa: E402


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


def minimal_q8_plan(events: Any, config: Q.QueryConfig) -> Any:
    """q8 as a ``transformWithStateInPandas`` that keeps only what q8 needs, as columns: our panes
    (one per person or seller and tumbling window with a pair: its list of pairs; an inner join's
    window without a pair emits nothing), at the window's end, from the same 16 key groups.

    Each group's rows of a batch are appended, window by window, as a JSON object of columns to a
    map state keyed by (window end, batch number); a value state lists what is held and the one
    timer pending.  When the watermark reaches a window's end, its parts are read, removed and
    joined by a pandas merge; a row whose window has expired is dropped (both by ``time_rules``, as
    every path of the library decides them).  It leaves
    out everything a library owes its users beyond that: bad and late rows reported, a user's join
    function called per pair, other triggers, merges of any two inputs, state versions."""
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StatefulProcessor

    from windowed_operator.time_rules import end_of_window_due, is_end_reached, is_expired

    size, columns = config.window_ms, ("key", "side", "ts", "name", "reserve")

    class MinimalQ8(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.handle = handle
            self.meta = handle.getValueState("meta", "m string")
            self.parts = handle.getMapState("parts", "e bigint, s bigint", "t string")

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            frames = list(rows)
            yield from self._step(frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True),
                                  timerValues, None)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
            yield from self._step(None, timerValues, expiredTimerInfo.getExpiryTimeInMs())

        def close(self) -> None:
            pass

        def _step(self, frame: Any, timer_values: Any, fired_timer: Any) -> Iterator[Any]:
            watermark = timer_values.getCurrentWatermarkInMs()
            stored = self.meta.get()
            meta = json.loads(stored[0]) if stored is not None else {"held": [], "seq": 0, "timer": None}
            if fired_timer is not None and meta["timer"] == fired_timer:
                meta["timer"] = None
            # (a held part is (window end, batch number); a window's max timestamp is its end - 1)
            panes = self._fire([h for h in meta["held"] if is_end_reached(h[0] - 1, watermark)])
            meta["held"] = [h for h in meta["held"] if not is_end_reached(h[0] - 1, watermark)]
            if frame is not None and len(frame):
                starts = frame.ts.to_numpy() - frame.ts.to_numpy() % size
                live = ~is_expired(starts + size - 1, 0, watermark)
                frame, starts = frame[live], starts[live]
                for start in np.unique(starts).tolist():
                    rows = frame[starts == start]
                    self.parts.updateValue((start + size, meta["seq"]), (json.dumps({
                        "key": rows.key.tolist(), "side": rows.side.tolist(), "ts": rows.ts.tolist(),
                        "name": rows.name.where(rows.name.notna(), None).tolist(),
                        "reserve": [None if r != r else int(r) for r in rows.reserve.tolist()]}),))
                    meta["held"].append([start + size, meta["seq"]])
                meta["seq"] += 1
            due = min((end_of_window_due(h[0] - 1) for h in meta["held"]), default=None)
            if due != meta["timer"]:
                if meta["timer"] is not None:
                    self.handle.deleteTimer(meta["timer"])
                if due is not None:
                    self.handle.registerTimer(due)
                meta["timer"] = due
            self.meta.update((json.dumps(meta),))
            if panes is not None:
                yield panes

        def _fire(self, due: list) -> Any:
            if not due:
                return None
            held: dict[str, list] = {c: [] for c in columns}
            for end, seq in due:
                part = json.loads(self.parts.getValue((end, seq))[0])
                for c in columns:
                    held[c].extend(part[c])
                self.parts.removeKey((end, seq))
            rows = pd.DataFrame(held)
            rows["ws"] = rows.ts - rows.ts % size
            people, auctions = rows[rows.side == 0], rows[rows.side == 1]
            pairs = people.merge(auctions[["key", "ws", "reserve"]], on=["key", "ws"], suffixes=("", "_a"))
            values: dict = {}
            for k, start, name, reserve in zip(pairs.key.tolist(), pairs.ws.tolist(), pairs.name.tolist(),
                                               pairs.reserve_a.tolist()):
                values.setdefault((k, start), []).append({"id": k, "name": name, "reserve": reserve})
            if not values:
                return None
            keys, starts = [k for k, _ in values], [s for _, s in values]
            return pd.DataFrame({"key": keys, "ws": starts, "we": [s + size for s in starts],
                                 "value": list(values.values()), "timing": "ON_TIME", "pane_index": 0,
                                 "is_last": True})

    timed = events.withColumn("t", F.timestamp_millis("dateTime")).withWatermark(
        "t", f"{config.max_disorder_ms} milliseconds")
    kept = F.when(F.col("t").isNotNull(), F.col("name").isNotNull() | F.col("itemName").isNotNull())
    rows = timed.where(kept.otherwise(F.lit(False))).selectExpr(
        "coalesce(seller, id) as key", "pmod(xxhash64(coalesce(seller, id)), 16) as g",
        "cast(if(name is not null, 0, 1) as int) as side", "dateTime as ts", "name", "reserve")
    return rows.groupBy("g").transformWithStateInPandas(
        MinimalQ8(), "key long, ws long, we long, value array<struct<id:bigint,name:string,reserve:bigint>>, "
                     "timing string, pane_index long, is_last boolean", "append", "EventTime")


def figures(run: S.Run) -> dict[str, float]:
    middle = run.progress[3:-3] or run.progress  # (a run of fewer than 7 batches: all of them)

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
    if q == "q8":
        plans["minimal q8 processor"] = lambda df: minimal_q8_plan(df, config)
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
    timings = interleaved([(name, case(name)) for name in plans], args.runs)
    print(f"{args.files} micro-batches of {args.events_per_file:,} events, local[2], {args.runs} runs interleaved; "
          "medians over runs of each run's median batch, ms")
    print(f"{'side':<22}{'trigger':>9}{'addBatch':>10}{'updates':>9}{'commit':>8}{'batches':>9}"
          f"{'run s (spread)':>22}{'events/s':>11}{'x native (spread)':>22}")
    events = args.files * args.events_per_file
    for name in plans:
        row = {k: statistics.median(f[k] for f in last[name]) for k in last[name][0]}
        run = spread([f["seconds"] for f in last[name]])
        print(f"{name:<22}{row['trigger']:>9.0f}{row['addBatch']:>10.0f}{row['updates']:>9.0f}{row['commit']:>8.0f}"
              f"{row['batches']:>9.0f}{run.text():>22}{events / run.median:>11,.0f}"
              f"{ratios(timings[name], timings[f'native {q}']).text():>22}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
