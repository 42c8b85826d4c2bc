"""A checkpoint moved to another number of state partitions restarts exactly: every layout, a join, a
chain, per-partition watermarks and balanced key groups, into each sink users use.

For each case and sink: an uninterrupted run over every batch; a run over the first batches, the
checkpoint repartitioned (``windowed_operator.spark.repartition.repartition_checkpoint``, 2 -> 5
partitions, then 5 -> 3 before a second restart where ``--twice``), a restart over the rest.  Both
runs' panes together (``foreachBatch``, Spark's JSON file sink read back through its log) or the
final table (``TableSink`` into SQLite, upsert) must equal the uninterrupted run's.

    python benchmarks/repartition_matrix.py                 # every case, every sink
    python benchmarks/repartition_matrix.py --cases chain --sinks file table

The cases are ``tests/fixtures/state_fixture.py``'s (one per layout this release writes), with their
batches, and four more.  ``tests/spark/test_repartition.py`` runs a few of them in CI.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import state_fixture as fixture  # noqa: E402

SINKS = ("foreachBatch", "file", "table")
#: Cases in processing-time mode (``inputs.choose_time_mode``): run with a ``processingTime`` trigger.
PROCESSING_TIME_CASES = {"partition_watermarks"}
#: The fixture's cases of the layouts this release writes, each with its settings (``fixture.APPLY``).
FIXTURE_CASES = ("sessions_retracting", "tumbling_columnar", "hopping_early_retracting", "join_window_log",
                 "pane_log", "window_log", "key_windows", "non_keyed")
PANE_COLUMNS = ("key", "unix_millis(window_start) as ws", "unix_millis(window_end) as we", "value", "timing",
                "pane_index", "is_retraction")


def extra_cases() -> dict[str, tuple[Any, dict, Callable[[Any], Any]]]:
    """Cases beyond the fixture's: (operator, apply() options, a step on the source frame)."""
    from accumulations import Sum
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, WindowedOperator, bounded_disorder

    early = TriggerOption.at_watermark().with_early_firings_at_every(count=1).with_late_firings_at_every(count=1)
    common = dict(key="user", timestamp="ts", allowed_lateness=10_000)
    same: Callable[[Any], Any] = lambda df: df  # noqa: E731
    return {
        "chain": (KeyedWindowedOperator(SessionWindows(3_000), Sum("amount"), watermark=bounded_disorder(2_000),
                                        trigger=early.accumulating_and_retracting_fired_panes(), **common)
                  .then(WindowedOperator(None, Sum(), trigger=TriggerOption.default().accumulating_and_retracting_fired_panes())),
         {}, same),
        "partition_watermarks": (KeyedWindowedOperator(
            TimeWindows(10_000), Sum("amount"), watermark=bounded_disorder(2_000, partition="part"),
            trigger=early.accumulating_fired_panes(), **common), {},
            lambda df: df.selectExpr("*", "cast(pmod(hash(user), 2) as int) as part")),
        "balanced_key_groups": (KeyedWindowedOperator(
            TimeWindows(10_000).slide_by(5_000), Sum("amount"), watermark=bounded_disorder(2_000),
            trigger=early.accumulating_and_retracting_fired_panes(), **common), {"checkpoint": True}, same),
    }


class NotForTheTableSink(Exception):
    """The table sink takes this operator's panes in no mode (a discarding join's, say)."""


def case_parts(case: str) -> tuple[Any, dict, dict, Callable[[Any], Any]]:
    """(operator, apply() options, Spark settings, source step) of a case."""
    if case in FIXTURE_CASES:
        return fixture.operators()[case], dict(fixture.APPLY.get(case, {})), dict(fixture.SETTINGS.get(case, {})), \
            (lambda df: df)
    op, options, step = extra_cases()[case]
    return op, dict(options), {}, step


def run(spark: Any, case: str, sink: str, directory: Path, ends: bool = True, key_groups: Any = None) -> None:
    """Run ``case`` over what the source holds into ``sink`` under ``directory`` (checkpoint and output);
    ``ends``: the source holds the end of input; ``key_groups``: the count a rescaled checkpoint keeps
    (told to a case not told its checkpoint, which keeps no record of it)."""
    from windowed_operator.merge_operator import MergeOperatorBase
    from windowed_operator.sinks import TableSink
    from windowed_operator.spark import stop_at_end_of_input

    op, options, settings, step = case_parts(case)
    checkpoint = str(directory / "checkpoint")
    if options.pop("checkpoint", False):
        options["checkpoint"] = checkpoint
    elif key_groups is not None:
        options["key_groups"] = key_groups
    df = step(spark.readStream.schema(fixture.SCHEMA).option("maxFilesPerTrigger", 1).json(str(fixture.SOURCE)))
    inputs = [df.where(f"amount % 2 = {odd} or end_of_input") for odd in (1, 0)] \
        if isinstance(op, MergeOperatorBase) else [df]
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        panes = op.apply(*inputs, end_of_input="end_of_input", **options)
    finally:
        for name in settings:
            spark.conf.unset(name)
    columns = [c if c != "key" or "key" in panes.columns else "null as key" for c in PANE_COLUMNS]
    if sink == "table":
        try:  # (a discarding operator's panes are added to the row, where its accumulation allows)
            table = TableSink(f"sqlite:///{directory / 'results.db'}", "panes", mode="upsert", operator=op)
        except ValueError:
            try:
                table = TableSink(f"sqlite:///{directory / 'results.db'}", "panes", mode="add", operator=op)
            except ValueError as refused:
                raise NotForTheTableSink(str(refused)) from None
        writer = panes.writeStream.foreachBatch(table)
    elif sink == "file":
        writer = panes.selectExpr(*columns).writeStream.format("json").option("path", str(directory / "out"))
    else:
        out = directory / "out"
        out.mkdir(parents=True, exist_ok=True)

        def collect(batch_df: Any, batch_id: int) -> None:
            rows = [json.dumps(r.asDict(), sort_keys=True) for r in batch_df.selectExpr(*columns).collect()]
            (out / f"batch-{batch_id:05d}.json").write_text("".join(r + "\n" for r in rows))

        writer = panes.writeStream.foreachBatch(collect)
    # Per-partition watermarks run in processing-time mode, where Spark runs batches back to back
    # under availableNow and never ends: a stop falls in a batch (not committed: a repartitioning is
    # refused).  Under a processingTime trigger it falls between two, mostly; else the restart
    # completes that batch, and the next stop is tried.
    trigger = {"processingTime": "4 seconds"} if case in PROCESSING_TIME_CASES else {"availableNow": True}
    for _ in range(10):
        query = writer.option("checkpointLocation", checkpoint).trigger(**trigger).start()
        if ends:
            stop_at_end_of_input(query)
        else:
            drain(query)
        if committed(checkpoint):
            return
    raise RuntimeError(f"{checkpoint}: every stop fell in a batch")


def committed(checkpoint: str) -> bool:
    """Whether the checkpoint's last batch begun is committed."""
    from windowed_operator.spark.base.checkpoint_record import log_entries

    return max(log_entries(checkpoint, "offsets")) in log_entries(checkpoint, "commits")


def drain(query: Any, timeout: float = 300.0) -> None:
    """Stop ``query`` once it has read all its input and completed a batch without data after it (the
    watermark's batch); a query that ends by itself (``availableNow`` in event-time mode) just ends.
    (``processAllAvailable`` never returns in processing-time mode.)"""
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        progress = [json.loads(p.json) for p in query.recentProgress]
        if progress and all(s.get("endOffset") == s.get("startOffset") for s in progress[-1]["sources"]) and \
                progress[-1]["numInputRows"] == 0:  # (Spark reads what is there first, a file a batch)
            query.stop()
            return
        time.sleep(0.2)
    query.awaitTermination(1)
    if query.isActive:
        query.stop()
        raise TimeoutError(f"query {query.id} did not drain its input in {timeout:.0f} s")


def results(spark: Any, sink: str, directory: Path) -> Counter:
    """What a sink holds: its panes (foreachBatch, file), or the table's rows (table)."""
    if sink == "table":
        import sqlite3

        with sqlite3.connect(directory / "results.db") as db:
            return Counter(map(repr, db.execute("select * from panes order by 1, 2, 3").fetchall()))
    if sink == "file":
        return Counter(json.dumps(r.asDict(), sort_keys=True) for r in spark.read.json(str(directory / "out")).collect())
    return Counter(line for path in sorted((directory / "out").glob("batch-*.json"))
                   for line in path.read_text().splitlines())


def check(spark: Any, case: str, sink: str, work: Path, partitions: tuple[int, ...] = (5,),
          repair: bool = False, key_groups: tuple[int, ...] = ()) -> dict[str, Any]:
    """The case into the sink, uninterrupted and across a repartitioning to each of ``partitions``
    (restarting after each, on a share of the remaining batches): whether they agree, and figures.
    ``repair``: a file sink's log is filled by a second call (the same partitions) after each move;
    ``key_groups``: after the i-th repartitioning, a rescale to the i-th count (the moves list it as
    ``("groups", before, after, seconds)``)."""
    from windowed_operator.spark.repartition import repartition_checkpoint
    from windowed_operator.spark.rescale import RescaleError, rescale_checkpoint

    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(fixture.SOURCE, ignore_errors=True)
    fixture.write_source(len(fixture.BATCHES))
    try:
        run(spark, case, sink, work / "whole")
    except NotForTheTableSink as refused:
        return {"case": case, "sink": sink, "equal": None, "rows": 0, "moves": [], "why": str(refused)}
    expected = results(spark, sink, work / "whole")
    shutil.rmtree(fixture.SOURCE)
    cuts = [fixture.SPLIT + (len(fixture.BATCHES) - fixture.SPLIT) * (i + 1) // len(partitions)
            for i in range(len(partitions))]
    fixture.write_source(fixture.SPLIT)
    run(spark, case, sink, work / "moved", ends=False)
    moves: list[tuple] = []
    groups = None
    for i, (count, cut) in enumerate(zip(partitions, cuts)):
        started = time.perf_counter()
        file_sinks = (str(work / "moved" / "out"),) if sink == "file" else ()
        done = repartition_checkpoint(spark, str(work / "moved" / "checkpoint"), count, quiet_seconds=0,
                                      file_sinks=() if repair else file_sinks)
        if repair and file_sinks:
            filled = repartition_checkpoint(spark, str(work / "moved" / "checkpoint"), count, quiet_seconds=0,
                                            file_sinks=file_sinks)
            assert filled.file_sinks == ((file_sinks[0], (done.batch_id,)),), filled
        moves.append((done.partitions_before, done.partitions, round(time.perf_counter() - started, 1)))
        if i < len(key_groups):
            started = time.perf_counter()
            try:
                rescaled = rescale_checkpoint(spark, str(work / "moved" / "checkpoint"), key_groups[i],
                                              quiet_seconds=0, file_sinks=file_sinks)
            except RescaleError as refused:
                if "no keyed operator" not in str(refused):
                    raise
                moves.append(("groups", "not keyed: nothing to rescale"))
            else:
                groups = rescaled.key_groups
                moves.append(("groups", rescaled.key_groups_before, groups, round(time.perf_counter() - started, 1)))
        fixture.write_source(cut)
        run(spark, case, sink, work / "moved", ends=cut == len(fixture.BATCHES), key_groups=groups)
    found = results(spark, sink, work / "moved")
    return {"case": case, "sink": sink, "equal": found == expected, "rows": sum(expected.values()), "moves": moves}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=[*FIXTURE_CASES, *extra_cases()])
    parser.add_argument("--sinks", nargs="*", default=list(SINKS), choices=SINKS)
    parser.add_argument("--twice", action="store_true", help="2 -> 5 partitions, a restart, 5 -> 3, a restart")
    parser.add_argument("--key-groups", nargs="*", type=int, default=[],
                        help="after each repartitioning, rescale to these key groups (e.g. 40 7)")
    parser.add_argument("--work", default="/tmp/windowed-operator-repartition-matrix")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from windowed_operator.spark.base.session import local_session

    fixture.SOURCE = Path(args.work) / "in"
    spark = local_session(app_name="repartition-matrix")
    partitions = (5, 3) if args.twice else (5,)
    print(f"{'case':<26} {'sink':<13} {'result':<9} {'rows':>5}  moves (from, to, seconds)")
    failed = 0
    for case in args.cases:
        for sink in args.sinks:
            outcome = check(spark, case, sink, Path(args.work) / "run", partitions,
                            key_groups=tuple(args.key_groups))
            if outcome["equal"] is None:
                print(f"{case:<26} {sink:<13} {'n/a':<9} {'':>5}  the table sink refuses it: "
                      f"{outcome['why'][:90]}...", flush=True)
                continue
            failed += not outcome["equal"]
            print(f"{case:<26} {sink:<13} {'equal' if outcome['equal'] else 'DIFFERENT':<9} {outcome['rows']:>5}  "
                  f"{outcome['moves']}", flush=True)
    spark.stop()
    print(f"{failed} of {len(args.cases) * len(args.sinks)} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
