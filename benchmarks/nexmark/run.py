"""Nexmark on Spark: our operators and native PySpark on one generated stream, checked for
correctness, with throughput figures.

    python benchmarks/nexmark/run.py                              # 2M events, every query, 3 runs
    python benchmarks/nexmark/run.py --events 200000 --queries q5,q7 --runs 1   # a quick look
    python benchmarks/nexmark/run.py --queries q8 --ours-setting q8:packInput=false  # also ours with a setting

One stream (``--events``, the Nexmark proportions, 10,000 events per second of event time, up to
2 s of disorder) is written as parquet, ``--files`` micro-batches, plus an end-of-input row. Per
query: a warm-up, then ``--runs`` rounds of native, ours, the floor, in that order and reversed in
turn (the second run of a pair gains up to 1.2x on the same code, ``timing.alternating``; an even
``--runs`` balances it), each on a fresh checkpoint;
events per second of wall time for the whole query (median and spread), ours / native per round,
output rows, the state rows Spark reports after the run and the p50/p99 micro-batch duration. Each
run's final results are checked against the brute-force model (pandas, over all events), ours and
native's alike (native q11 by Spark's own session rule, which merges sessions one gap apart).
With ``--beam-python``, Beam Python's own queries run on the first ``--beam-sample`` events on the
DirectRunner, in batch and in streaming mode (``--beam-mode``; ``beam_queries.py``), checked the same way,
in the same rounds (native, ours, Beam batch, Beam streaming): Beam's median rate and spread, and
ours / Beam round by round.
q12 runs on processing time, so with Spark's default trigger, stopped once a batch has run at the
watermark its end-of-input row brings (the batch that emits its last panes).
``--ours-setting q8:packInput=false`` adds a side, ours*, that runs ours on q8 with that library
setting, in the same rounds and checked the same way (benchmarks/results/nexmark.txt shows q8 both ways: its
operator gets 160,000 rows of the 2M events, below where packed input pays, see
``benchmarks/results/nexmark_q8_bound_and_packing.txt``).

Results are recorded in ``benchmarks/results/nexmark.txt`` (``... | tee benchmarks/results/nexmark.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
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
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: timing.py and this package

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from nexmark.generator import NexmarkConfig, generate, write_files  # noqa: E402
from floor import calibrate, floor_plans  # noqa: E402
from timing import interleaved, percentile, ratios, spread  # noqa: E402


def batch_durations(run: S.Run) -> tuple[float, float]:
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in run.progress if p.get("numInputRows", 0) > 0]
    return percentile(durations, 50), percentile(durations, 99)


def state_rows(run: S.Run) -> int:
    last = [op.get("numRowsTotal", 0) for p in run.progress[-1:] for op in p.get("stateOperators", [])]
    return sum(last)


BEAM_QUERIES = ("q5", "q7", "q8", "q11", "q12")
#: Beam Python runs q12 (processing time) only in streaming mode.
BEAM_STREAMING_ONLY = ("q12",)
BEAM_MODES = {"batch": ("batch",), "streaming": ("streaming",), "both": ("batch", "streaming")}


def beam_result(query: str, outputs: list[dict]) -> set:
    """Beam's outputs (each with its window's bounds) in the shape of ``queries.model``'s."""
    if query == "q5":
        return {(o["start"], o["value"]["auction_id"], o["value"]["num"]) for o in outputs}
    if query == "q7":
        return {(o["start"], o["value"]["auction"], o["value"]["bidder"], o["value"]["price"],
                 o["value"]["date_time"]) for o in outputs}
    if query == "q8":
        return Q._multiset((o["start"], o["value"]["id"], o["value"]["name"], o["value"]["reserve"])
                           for o in outputs)
    panes = [Q.Pane(o["value"]["bidder_id"], o["start"], o["end"], o["value"]["bid_count"], False) for o in outputs]
    return Q.final_result(query, panes)


def run_beam(python: str, events: Any, sample: int, config: Q.QueryConfig, query: str, work: Path,
             streaming: bool = False, batches: int = 1) -> dict:
    """Beam Python's query on the first ``sample`` events (in another interpreter, which has
    apache_beam), checked against the model on the same events. ``streaming``: the DirectRunner's
    streaming mode, the events in ``batches`` bundles (see ``beam_queries.py``)."""
    import subprocess

    from nexmark.generator import Events

    first = Events(*(f[f.event_id < sample] for f in (events.persons, events.auctions, events.bids)),
                   config=events.config)
    sample_dir = work / f"beam-sample-{sample}"
    if not sample_dir.exists():
        write_files(first, sample_dir, sample, fmt="json")
    answer = subprocess.run(
        [python, str(HERE / "beam_queries.py"), "--input", str(sample_dir / "events-00000.json"), "--query", query,
         "--window-sec", str(config.window_ms // 1000), "--period-sec", str(config.period_ms // 1000),
         "--early-count", str(config.early_count), "--delay-sec", str(2 * config.lateness_ms // 1000)]
        + (["--streaming", "--batches", str(batches), "--disorder-ms", str(config.max_disorder_ms)] if streaming else []),
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
    figures = json.loads(answer.stdout.strip().splitlines()[-1])
    expected = Q.model(query, first.persons, first.auctions, first.bids, config)
    return {"seconds": figures["seconds"], "startup_s": figures["startup_s"],
            "correct": beam_result(query, figures["outputs"]) == expected, "rows": len(figures["outputs"])}


#: The side that runs ours with a setting of its own (``--ours-setting``).
SET = "ours*"


def parse_settings(specs: list[str]) -> dict[str, tuple[str, str]]:
    """``QUERY:NAME=VALUE`` specs -> query -> (NAME, VALUE); NAME is a ``spark.windowed_operator.*`` setting."""
    settings: dict[str, tuple[str, str]] = {}
    for spec in specs:
        query, _, assignment = spec.partition(":")
        name, _, value = assignment.partition("=")
        if query not in Q.QUERIES or not name or not value:
            raise ValueError(f"--ours-setting {spec!r}: expected QUERY:NAME=VALUE with QUERY one of "
                             f"{', '.join(Q.QUERIES)} (e.g. q8:packInput=false)")
        if query in settings:
            raise ValueError(f"--ours-setting {spec!r}: {query} already has {settings[query][0]}={settings[query][1]}")
        settings[query] = (name, value)
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Nexmark on Spark: ours, native, checked")
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=10, help="micro-batches the stream is written as")
    parser.add_argument("--queries", default=",".join(Q.QUERIES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--beam-python", help="a Python with apache_beam: runs Beam's own queries on a sample")
    parser.add_argument("--beam-sample", type=int, default=100_000, help="events Beam's queries read")
    parser.add_argument("--beam-mode", choices=sorted(BEAM_MODES), default="both",
                        help="Beam's DirectRunner in batch (a file, as Beam's launcher runs one), in streaming "
                             "(a TestStream in bundles of the micro-batches' size), or both")
    parser.add_argument("--native-stages", choices=("on", "off"), default="on",
                        help="spark.windowed_operator.nativeStages: a chain's later stage that Spark can aggregate "
                             "itself (q5's and q5r's) runs as Spark's aggregation (on, as a new query would set it) "
                             "or as a second transformWithState (off)")
    parser.add_argument("--no-floor", action="store_true", help="leave out each query's floor (benchmarks/floor.py)")
    parser.add_argument("--ours-setting", action="append", default=[], metavar="QUERY:NAME=VALUE",
                        help="also run ours on QUERY with spark.windowed_operator.NAME=VALUE, as the side ours* "
                             "(e.g. q8:packInput=false), in the same rounds; repeatable")
    args = parser.parse_args(argv)
    queries = [q for q in args.queries.split(",") if q]
    try:
        settings = parse_settings(args.ours_setting)
    except ValueError as error:
        parser.error(str(error))
    unknown = [q for q in queries if q not in Q.QUERIES]
    if unknown:
        parser.error(f"unknown queries {unknown}: pick from {', '.join(Q.QUERIES)}")

    from windowed_operator.spark import local_session

    stream = NexmarkConfig(events=args.events)
    config = Q.QueryConfig(max_disorder_ms=stream.max_disorder_ms)
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"stream: {args.events:,} events (seed {stream.seed}, {stream.rate:,}/s of event time, "
          f"{stream.max_disorder_ms} ms disorder), {args.files} micro-batches, local[2]; {args.runs} runs per "
          f"query, native and ours interleaved, after a warm-up; native stages {args.native_stages}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="nexmark-"))
    events = generate(stream)
    write_files(events, work / "events", -(-args.events // args.files), fmt="parquet", end_marker=True)
    spark = local_session(app_name="nexmark", shuffle_partitions=2, spark_log=str(work / "spark.log"),
                          extra_conf={"spark.sql.streaming.numRecentProgressUpdates": "1000",
                                      "spark.windowed_operator.nativeStages": str(args.native_stages == "on").lower()})
    warm = work / "warm"
    write_files(generate(NexmarkConfig(events=2_000)), warm, 1_000, fmt="parquet", end_marker=True)
    S.run_to_end(S.ours("q7", config, S.source(spark, warm)), work / "warm-ours")
    S.run_to_end(S.native("q7", config, S.source(spark, warm)), work / "warm-native")

    print(f"\n{'query':<6}{'side':<8}{'events/s (median, spread)':>34}{'ours/native':>22}{'rows out':>10}"
          f"{'state rows':>12}{'p50 / p99 batch s':>20}  correct")
    for query in queries:
        expected = Q.model(query, events.persons, events.auctions, events.bids, config)
        native_expected = (Q.model(query, events.persons, events.auctions, events.bids, config,
                                   touching_sessions_merge=True) if query == "q11" else expected)
        last: dict[str, S.Run] = {}
        correct: dict[str, bool] = {}

        floor_rows: dict[str, int] = {}

        def floor_run(rows: dict[str, int], calls: Callable[[str], Any] = lambda label: None) -> S.Run:
            """The query's floor (``benchmarks/floor.py``), emitting ``rows`` per call by operator."""
            with floor_plans(lambda label: rows.get(label, 0), calls):
                out = S.ours(query, config, S.source(spark, work / "events"))
            return S.run_to_end(out, work / f"ckpt-{query}-floor-{time.monotonic_ns()}", S.end_watermark(query, config))

        def case(side: str) -> Callable[[], float]:
            def run() -> float:
                if side == "floor":  # (calibrated once, untimed, after ours' first run: as many rows as ours)
                    if not floor_rows:
                        floor_rows.update(calibrate(spark, last["ours"].progress, floor_run))
                    done = last[side] = floor_run(floor_rows)
                    correct[side] = True  # (a floor computes nothing to check)
                    return done.seconds
                df = S.source(spark, work / "events")
                ours = side != "native"
                with (S.library_setting(spark, f"spark.windowed_operator.{settings[query][0]}", settings[query][1])
                      if side == SET else nullcontext()):
                    out = S.ours(query, config, df) if ours else S.native(query, config, df)
                done = S.run_to_end(out, work / f"ckpt-{query}-{side}-{time.monotonic_ns()}",
                                    S.end_watermark(query, config) if ours else None)
                result = (Q.final_result(query, S.ours_panes(done.rows, query)) if ours
                          else S.native_result(query, done.rows))
                correct[side] = correct.get(side, True) and result == (expected if ours else native_expected)
                last[side] = done
                return done.seconds
            return run

        sides = (["native"] if query in S.NATIVE else []) + ["ours"] + ([] if args.no_floor else ["floor"]) \
            + ([SET] if query in settings else [])
        requested = BEAM_MODES[args.beam_mode] if args.beam_python and query in BEAM_QUERIES else ()
        beam_modes = [mode for mode in requested if not (mode == "batch" and query in BEAM_STREAMING_ONLY)]
        sample = min(args.beam_sample, args.events)
        per_batch = -(-args.events // args.files)  # the micro-batches' size on Spark: Beam's bundles'
        beam_last: dict[str, dict] = {}
        beam_correct: dict[str, bool] = {}

        def beam_case(mode: str) -> Callable[[], float]:
            def run() -> float:
                done = run_beam(args.beam_python, events, sample, config, query, work, streaming=mode == "streaming",
                                batches=-(-sample // per_batch))
                beam_correct[mode] = beam_correct.get(mode, True) and done["correct"]
                beam_last[mode] = done
                return done["seconds"]
            return run

        # (Beam's runs join the rounds: its rate moves by a third from run to run)
        timings = interleaved([(side, case(side)) for side in sides]
                              + [(f"beam {mode}", beam_case(mode)) for mode in beam_modes], args.runs, alternate=True)
        for side in sides:
            figure = spread([args.events / t for t in timings[side]])
            versus = ratios(timings[side], timings["native"]).text() + "x" if side != "native" and "native" in timings \
                else ""
            p50, p99 = batch_durations(last[side])
            print(f"{query:<6}{side:<8}{figure.text(0):>34}{versus:>22}{len(last[side].rows):>10,}"
                  f"{state_rows(last[side]):>12,}{f'{p50:.2f} / {p99:.2f}':>20}  "
                  f"{'yes' if correct[side] else 'NO'}", flush=True)
        if "floor" in timings:
            print(f"{query:<6}{'':<8}ours/floor {ratios(timings['ours'], timings['floor']).text()}x (throughput, per "
                  "round; the floor: our query with a do-nothing processor emitting as many rows, benchmarks/floor.py)"
                  + (f", floor/native {ratios(timings['floor'], timings['native']).text()}x" if "native" in timings
                     else ""), flush=True)
        if query in settings:
            print(f"{query:<6}{SET:<8}: ours with spark.windowed_operator.{settings[query][0]}={settings[query][1]}",
                  flush=True)
        if "batch" in requested and "batch" not in beam_modes:
            print(f"{query:<6}{'beam':<8}{'not in batch mode (processing time)':>34}", flush=True)
        for mode in beam_modes:
            seconds = timings[f"beam {mode}"]
            # per round: our rate over Beam's, each over its own events (all of them; the sample)
            versus = {side: spread([(args.events / o) / (sample / b) for o, b in zip(timings[side], seconds)])
                      for side in sides if side != "native"}
            print(f"{query:<6}{'beam':<8}{spread([sample / t for t in seconds]).text(0):>34}{'':>22}"
                  f"{beam_last[mode]['rows']:>10,}{'':>12}{'':>20}  {'yes' if beam_correct[mode] else 'NO'}   "
                  + ", ".join(f"{side}/beam {v.text(1)}x" for side, v in versus.items())
                  + f" (DirectRunner, {mode}, {sample:,}-event sample, start-up "
                  f"{beam_last[mode]['startup_s']:.1f} s apart)", flush=True)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
