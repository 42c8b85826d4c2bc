"""One of the library's Spark settings off against on, on the Nexmark queries (one run, interleaved).

    python benchmarks/nexmark/setting_ab.py --setting packInput --queries q11,q5r,q8,q7 --runs 3
    python benchmarks/nexmark/setting_ab.py --setting slicedHandoff --queries q8,q5r,q11 --runs 3
    python benchmarks/nexmark/setting_ab.py --setting nativeStages --queries q5,q5r --runs 3
    python benchmarks/nexmark/setting_ab.py --setting workerSite --queries q7,q11 --runs 3
    python benchmarks/nexmark/setting_ab.py --setting checkpointManager --side native --queries q8,q7 --runs 3

``--setting`` names a ``spark.windowed_operator.*`` flag: ``packInput`` (packed input against
the handoff without it, in a local session slices of Arrow batches, ``spark.handoff``) or
``slicedHandoff`` (not a flag: the workers' slices of Arrow batches, a local session's default,
against pyspark's row-by-row handoff with packing off too, ``spark.worker.sliced``) or ``nativeStages`` (a chain's later stage as Spark's own aggregation against a second
transformWithState, ``windowed_operator.spark.driver.native_stage``: q5 and q5r) or ``workerSite`` (not a
flag: the site hook on the path of the Python processes Spark starts, ``spark.worker_site``, against
Spark's own path: the Python environment a function carries, which Spark starts its processes
with) or ``checkpointManager`` (not a flag either: checkpoint files renamed with Hadoop's FileSystem
API, as ``local_session`` names, against Spark's default FileContext manager, read at each query's
start; ``spark.session.LOCAL_DEFAULTS``).  ``--side native`` runs native Spark's query instead of
ours (for a setting that is not the library's own).  Per query: a warm-up, then ``--runs``
rounds of (off, on) and (on, off) in turn, each on a fresh checkpoint, with the setting set before the operator is
applied; each run's final result is checked against the brute-force model.  Prints each run, the
median events/s of both and their ratio.  A query the setting does not change measures the noise.

Results are recorded in ``benchmarks/results/nexmark_setting_ab.txt`` (``... | tee benchmarks/results/nexmark_setting_ab.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from nexmark.generator import NexmarkConfig, generate, write_files  # noqa: E402
from timing import alternating  # noqa: E402

SETTINGS = ("packInput", "slicedHandoff", "nativeStages", "workerSite", "checkpointManager")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=SETTINGS, default="packInput")
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--queries", default="q11,q5r,q8,q7")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--side", choices=("ours", "native"), default="ours")
    args = parser.parse_args(argv)
    if args.side == "native" and args.setting != "checkpointManager":
        parser.error(f"--side native: {args.setting} is a setting of the library's own, which native Spark "
                     "does not read")
    if args.side == "native" and not set(args.queries.split(",")) <= set(S.NATIVE):
        parser.error(f"--side native: native Spark runs {', '.join(S.NATIVE)} only")

    from windowed_operator.spark import local_session
    from windowed_operator.spark.base.session import (CHECKPOINT_MANAGER_CONF, FILE_SYSTEM_CHECKPOINT_MANAGER,
                                                      SPARK_DEFAULT_CHECKPOINT_MANAGER, WORKER_SITE)
    from windowed_operator.spark.base.handoff import PACK_CONF, SLICED_HANDOFF_ENV

    name = f"spark.windowed_operator.{args.setting}"
    work = Path(tempfile.mkdtemp(prefix="setting-ab-"))
    events = generate(NexmarkConfig(events=args.events))
    write_files(events, work / "events", -(-args.events // 10), fmt="parquet", end_marker=True)
    spark = local_session(app_name="setting-ab", shuffle_partitions=2, spark_log=str(work / "spark.log"))
    config = Q.QueryConfig()

    def set_to(on: bool) -> None:
        if args.setting == "slicedHandoff":  # (Spark starts a daemon per worker environment)
            if on:
                spark.conf.unset(PACK_CONF)
                spark.sparkContext.environment.pop(SLICED_HANDOFF_ENV, None)
            else:
                spark.conf.set(PACK_CONF, "false")
                spark.sparkContext.environment[SLICED_HANDOFF_ENV] = "false"
        elif args.setting == "checkpointManager":
            spark.conf.set(CHECKPOINT_MANAGER_CONF,
                           FILE_SYSTEM_CHECKPOINT_MANAGER if on else SPARK_DEFAULT_CHECKPOINT_MANAGER)
        elif args.setting != "workerSite":
            spark.conf.set(name, "true" if on else "false")
        elif on:
            spark.sparkContext.environment["PYTHONPATH"] = WORKER_SITE
        else:
            spark.sparkContext.environment.pop("PYTHONPATH", None)

    def run(query: str, on: bool) -> float:
        set_to(on)
        native = args.side == "native"
        df = S.source(spark, work / "events")
        out = S.native(query, config, df) if native else S.ours(query, config, df)
        done = S.run_to_end(out, work / f"ckpt-{query}-{on}-{time.monotonic_ns()}",
                            None if native else S.end_watermark(query, config))
        S.check_final(query, native, done.rows, events, config, f"{query} ({args.side}) with {name}={on}")
        return done.seconds

    run("q7", True)
    run("q7", False)
    for query in args.queries.split(","):
        seconds = alternating(lambda on: run(query, on), args.runs, lambda on, taken: print(
            f"{query} {args.side} {args.setting}={str(on).lower():<5} {taken:6.2f} s", flush=True))
        off, on = (statistics.median(seconds[k]) for k in (False, True))
        print(f"== {query} ({args.side}): {args.setting} off {args.events / off:,.0f} events/s, on {args.events / on:,.0f} events/s, "
              f"on / off {off / on:.2f}x (spread off {min(seconds[False]):.2f}-{max(seconds[False]):.2f} s, "
              f"on {min(seconds[True]):.2f}-{max(seconds[True]):.2f} s)", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
