"""Crash test of the table sink: a Spark query writing into SQLite (or DuckDB: ``--database duckdb``)
through ``TableSink``, killed with
SIGKILL (its whole process group and every process it started) at random points and restarted from
its checkpoint, must leave the table an uninterrupted run leaves, with no batch applied twice.

The query is two streaming queries in one driver over the same input files (one file per
micro-batch): sessions with early and late firings in retracting mode (``mode="upsert"``: a replay
applied twice would go unnoticed in the values, so the progress rows are checked too), and
tumbling counts in discarding mode (``mode="add"``: a batch applied twice would count twice).
The sinks keep an audit (a row per applied batch, whose primary key refuses a second one), and
after the kills it must hold every batch once.  A kill lands at a random moment after the child has applied a new batch to one of the tables drawn
at random (inside Spark's planning, the operator, the sink's transaction or Spark's commit), or,
one time in five, during start-up.  A start that is to be killed cannot finish first, whatever the
timing: it stops at a gate before its ``n``-th sink call after the start (``n`` drawn at random,
written to ``WORKDIR/gate`` by the parent) and waits there to be killed, so every planned kill lands.

    python benchmarks/table_sink_crash.py                     # 2 runs x 5 kills, against an uninterrupted run
    python benchmarks/table_sink_crash.py --runs 1 --kills 2  # (what tests/spark/test_table_sink_crash.py runs)
    python benchmarks/table_sink_crash.py --database duckdb   # the same into a DuckDB file

The child mode (``--child WORKDIR``) is the query itself.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

from windowed_operator.spark.verify import kill_all  # (the process tree killed: one way, the command's)

SCHEMA = "user string, amount bigint, ts bigint, end_of_input boolean"
BASE = 1_700_000_000_000
DELAY = 3_000
#: Long enough that no element is ever dropped, whatever the micro-batches: a restart may cut the
#: input into other micro-batches than an uninterrupted run's (Spark's file source logs a batch's
#: files before the batch's offsets, and a query killed between the two reads those files together
#: with the next ones in one batch after its restart), so the watermark steps differently and what
#: depends on its steps (an element dropped as late, a pane's timing, how early panes split a window)
#: can differ.  With nothing dropped, the tables' keys, windows and values do not.
LATENESS = 600_000
TABLES = ("sessions", "counts")
#: The database file of each target.  A DuckDB file has one writer process and no reader beside it,
#: so the parent reads the database only while the child is down; while it runs, the child's
#: ``applied-<table>`` files say which batch it applied last (written after the sink's commit).
DATABASES = {"sqlite": "results.db", "duckdb": "results.duckdb"}


def sessions_operator():
    from accumulations import Sum
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, SessionWindows, bounded_disorder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(
            SessionWindows(2_500), Sum("amount"), key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
            trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
            .accumulating_and_retracting_fired_panes(), allowed_lateness=LATENESS)


def counts_operator():
    from accumulations import Count
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(
            TimeWindows(5_000), Count(), key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
            trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
            .discarding_fired_panes(),
            allowed_lateness=LATENESS)


OPERATORS: dict[str, Callable] = {"sessions": sessions_operator, "counts": counts_operator}
MODES = {"sessions": "upsert", "counts": "add"}


def make_batches(seed: int, n_batches: int = 8, per_batch: int = 12) -> list[list[dict]]:
    rng = random.Random(seed)
    return [[{"user": rng.choice("abcd"), "amount": rng.randint(1, 9),
              "ts": BASE + 6_000 * (b + 1) - rng.randint(0, 16_000)} for _ in range(per_batch)]
            for b in range(n_batches)]


def write_input(directory: Path, batches: list[list[dict]]) -> None:
    """One JSON file per micro-batch (distinct modification times), then one ending the input."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate([*batches, [{"end_of_input": True, "ts": 9_000_000_000_000}]]):
        path = directory / f"batch-{i:05d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_600_000_000 + i, 1_600_000_000 + i))


def sink(workdir: Path, name: str, database: str = "sqlite"):
    from windowed_operator.sinks import TableSink

    return TableSink(str(workdir / DATABASES[database]), name, mode=MODES[name], operator=OPERATORS[name](),  # type: ignore
                     columns=["timing", "pane_index", "batch_id"], audit=True)


def gated(workdir: Path, name: str, write: Callable) -> Callable:
    """``write`` (a ``foreachBatch`` function), stopping for good before its ``n``-th call when the file
    ``workdir/gate`` says ``n`` (a start to be killed: it must not finish before the kill lands);
    ``workdir/blocked`` tells the parent it got there, ``workdir/applied-<name>`` the batch written last."""
    gate = workdir / "gate"
    limit = int(gate.read_text()) if gate.exists() else None
    calls = [0]

    def call(frame, batch_id: int) -> None:
        calls[0] += 1
        if limit is not None and calls[0] >= limit:
            (workdir / "blocked").write_text(f"{batch_id}\n")
            while True:
                time.sleep(1)
        write(frame, batch_id)
        (workdir / f"applied-{name}").write_text(f"{batch_id}\n")

    return call


def child(workdir: Path, tables: tuple[str, ...] = TABLES, database: str = "sqlite") -> None:
    """The queries (one per table) over ``workdir/in`` into the database file, to the end of input."""
    from windowed_operator.spark.base.session import local_session

    spark = local_session(master="local[2]", app_name="table-sink-crash", shuffle_partitions=2)
    queries = []
    for name in tables:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "in"))
        out = OPERATORS[name]().apply(df, end_of_input="end_of_input")
        queries.append(out.writeStream.foreachBatch(gated(workdir, name, sink(workdir, name, database))).queryName(name)
                       .option("checkpointLocation", str(workdir / "checkpoints" / name))
                       .trigger(availableNow=True).start())
    for query in queries:
        query.awaitTermination()
    (workdir / "done").write_text("done\n")
    spark.stop()


def table_rows(db: Path, name: str) -> list[tuple]:
    """The table's keys, windows and values (batch ids belong to a run, and a pane's timing may differ
    after a restart: see ``LATENESS``); window bounds as epoch ms, the same in either database."""
    if not db.exists():
        return []
    query = f"SELECT key, {{ms}}(window_start), {{ms}}(window_end), value FROM {name} ORDER BY key, 2, 3"
    if db.suffix == ".duckdb":
        import duckdb

        with duckdb.connect(str(db), read_only=True) as conn:
            if not conn.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [name]).fetchall():
                return []
            return [tuple(r) for r in conn.execute(query.format(ms="epoch_ms")).fetchall()]
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT name FROM sqlite_master WHERE name = ?", (name,)).fetchall():
            return []
        conn.create_function("epoch_ms", 1, lambda text: round(
            __import__("datetime").datetime.fromisoformat(text + "+00:00").timestamp() * 1000))
        return conn.execute(query.format(ms="epoch_ms")).fetchall()


def applied(db: Path) -> dict[str, int]:
    """Each table's last applied batch (the progress rows; read only while no child holds the file)."""
    if not db.exists():
        return {}
    progress = "SELECT sink, batch_id FROM windowed_operator_sink_progress"
    if db.suffix == ".duckdb":
        import duckdb

        with duckdb.connect(str(db), read_only=True) as conn:
            if not conn.execute("SELECT 1 FROM information_schema.tables WHERE table_name = "
                                "'windowed_operator_sink_progress'").fetchall():
                return {}
            return dict(conn.execute(progress).fetchall())
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return dict(conn.execute(progress).fetchall())
    except sqlite3.OperationalError:  # (not created yet)
        return {}


def audited(db: Path, name: str) -> list[int]:
    """The batch ids the sink's audit holds for table ``name``, in order (the query keeps its id
    across restarts from its checkpoint)."""
    query = f"SELECT batch_id FROM windowed_operator_sink_batches WHERE sink = '{name}' ORDER BY batch_id"
    if db.suffix == ".duckdb":
        import duckdb

        with duckdb.connect(str(db), read_only=True) as conn:
            return [r[0] for r in conn.execute(query).fetchall()]
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute(query).fetchall()]


def signalled(workdir: Path, tables: tuple[str, ...]) -> dict[str, int]:
    """The batch the running child says it applied last to each table (``gated``)."""
    return {name: int(f.read_text()) for name in tables if (f := workdir / f"applied-{name}").exists()
            and f.read_text().strip()}


def start_child(workdir: Path, log, tables: tuple[str, ...] = TABLES, database: str = "sqlite") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", str(workdir),
                             "--tables", ",".join(tables), "--database", database],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ))


def run_with_kills(workdir: Path, batches: list[list[dict]], kills: int, rng: random.Random,
                   say: Callable[[str], None] = print, timeout: float = 900.0,
                   tables: tuple[str, ...] = TABLES, database: str = "sqlite") -> dict:
    """Run the child, SIGKILL it ``kills`` times at random points, then let a last start finish;
    returns what happened (kill moments, progress seen after each restart)."""
    write_input(workdir / "in", batches)
    db = workdir / DATABASES[database]
    history: list[dict[str, int]] = []
    moments: list[str] = []
    deadline = time.monotonic() + timeout
    gate, blocked = workdir / "gate", workdir / "blocked"
    with open(workdir / "child.log", "ab") as log:
        for kill in range(kills + 1):
            before = signalled(workdir, tables)
            blocked.unlink(missing_ok=True)
            at_startup = kill < kills and rng.random() < 0.2
            if kill == kills:
                gate.unlink(missing_ok=True)
            else:  # (a start at most 3 sink calls long: each start leaves batches for the next)
                gate.write_text(f"{1 if at_startup else rng.randint(2, 3)}\n")
            proc = start_child(workdir, log, tables, database)
            if kill == kills:  # the last start runs to the end
                if proc.wait(timeout=max(1.0, deadline - time.monotonic())) != 0:
                    raise RuntimeError(f"the last run failed: see {workdir / 'child.log'}")
                break
            started = time.monotonic()
            if at_startup:  # during start-up (or at the gate before the first sink call)
                delay = rng.uniform(0, 25)
                while time.monotonic() - started < delay and proc.poll() is None:
                    time.sleep(0.05)
                where = f"{delay:.1f} s after start"
            else:  # once this start has applied a new batch to a table drawn at random (or reached the
                # gate: a replayed batch is no new one), a random moment later
                table = rng.choice(tables)
                while signalled(workdir, tables).get(table, -1) == before.get(table, -1) and proc.poll() is None and \
                        not blocked.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                delay = rng.uniform(0, 2.5)
                time.sleep(delay)
                where = f"{delay:.2f} s after a batch was applied to {table}"
            if proc.poll() is not None:
                if proc.returncode != 0:
                    raise RuntimeError(f"the child failed (exit {proc.returncode}): see {workdir / 'child.log'}")
                moments.append("finished before the kill")
                say(f"  start {kill + 1}: finished before the kill")
                break
            kill_all(proc)
            progress = applied(db)  # (what the database committed when the kill landed)
            moments.append(where)
            history.append(progress)
            say(f"  kill {kill + 1}: {where} (applied then: {progress})")
    if not (workdir / "done").exists():
        raise RuntimeError(f"the query did not finish: see {workdir / 'child.log'}")
    return {"kills": sum(1 for m in moments if m != "finished before the kill"), "moments": moments,
            "history": history, "final": applied(db)}


def run_uninterrupted(workdir: Path, batches: list[list[dict]], database: str = "sqlite") -> None:
    write_input(workdir / "in", batches)
    with open(workdir / "child.log", "ab") as log:
        if start_child(workdir, log, database=database).wait() != 0:
            raise RuntimeError(f"the uninterrupted run failed: see {workdir / 'child.log'}")


def check(killed: Path, reference: dict[str, list[tuple]], outcome: dict, database: str = "sqlite") -> None:
    """The killed run's tables equal the reference; progress only ever moved forward."""
    for name in reference:
        got = table_rows(killed / DATABASES[database], name)
        if got != reference[name]:
            raise AssertionError(f"table {name!r} after the kills differs from the uninterrupted run's:\n"
                                 f"  killed:        {got}\n  uninterrupted: {reference[name]}")
    for name, last in outcome["final"].items():  # every batch applied once: the database's own record
        ids = audited(killed / DATABASES[database], name)
        if ids != list(range(last + 1)):
            raise AssertionError(f"the audit of {name!r} holds batches {ids}, not each of 0-{last} once")
    seen = [*outcome["history"], outcome["final"]]
    for earlier, later in zip(seen, seen[1:]):
        for name, batch in earlier.items():
            if later.get(name, -1) < batch:
                raise AssertionError(f"progress of {name!r} went back from batch {batch} to {later.get(name)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--kills", type=int, default=5, help="kills per run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--tables", default=",".join(TABLES), help=argparse.SUPPRESS)
    parser.add_argument("--database", choices=sorted(DATABASES), default="sqlite")
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, tuple(args.tables.split(",")), args.database)
        return
    import tempfile

    root = args.workdir or Path(tempfile.mkdtemp(prefix="table-sink-crash-"))
    total = 0
    for run in range(args.runs):
        batches = make_batches(args.seed + run)
        print(f"run {run + 1}: {len(batches)} batches, {args.kills} kills")
        outcome = run_with_kills(root / f"killed-{run}", batches, args.kills, random.Random(args.seed * 100 + run),
                                 database=args.database)
        run_uninterrupted(root / f"clean-{run}", batches, args.database)
        reference = {name: table_rows(root / f"clean-{run}" / DATABASES[args.database], name) for name in TABLES}
        check(root / f"killed-{run}", reference, outcome, args.database)
        total += outcome["kills"]
        print(f"run {run + 1}: {outcome['kills']} kills; tables equal the uninterrupted run's "
              f"({', '.join(f'{n}: {len(reference[n])} rows' for n in TABLES)}); progress {outcome['final']}")
    print(f"{total} kills over {args.runs} runs: every table equal to its uninterrupted run's, no batch applied twice")


if __name__ == "__main__":
    main()
