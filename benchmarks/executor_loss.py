"""Executors lost mid-batch on a standalone cluster: the query finishes, and its table equals the local
runner's, nothing lost, nothing applied twice.

A standalone master and two workers (1 core each) start from the pyspark package
(``tests/spark/test_cluster.py``'s ``standalone_cluster``); a driver process runs sessions with early
and late firings in retracting mode over JSON files, one file a micro-batch, into SQLite through
``TableSink`` (upsert: the progress rows show a batch applied twice), with its key groups spread
over 4 state partitions on both executors (``apply(checkpoint=...)``).  Each time the driver's sink
starts reading a batch not seen before (its jobs then run on the executors), one executor's JVM,
on a worker drawn at random, is SIGKILLed; the master starts a new one, and Spark runs the lost
tasks again, the lost state stores reloaded from the checkpoint.

    python benchmarks/executor_loss.py --kills 10        # the loop (benchmarks/results/executor_loss.txt)

``tests/spark/test_cluster.py`` runs it with one kill.  The child mode (``--child``) is the driver.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import table_sink_crash as crash  # noqa: E402

PARTITIONS = 4


def child(workdir: Path, master: str) -> None:
    """The driver: the sessions query over ``workdir/in`` into ``workdir/results.db``, to the end of input;
    ``workdir/reading`` names the batch its sink is reading."""
    from windowed_operator.sinks import TableSink
    from windowed_operator.spark.base.session import local_session

    spark = local_session(master=master, app_name="executor-loss", extra_conf={
        "spark.executor.memory": "768m", "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(PARTITIONS), "spark.task.maxFailures": "8"})
    op = crash.sessions_operator()
    sink = TableSink(str(workdir / "results.db"), "sessions", mode="upsert", operator=op,
                     columns=["timing", "pane_index", "batch_id"])

    def reading(frame, batch_id: int) -> None:
        (workdir / "reading.tmp").write_text(f"{batch_id}\n")
        (workdir / "reading.tmp").replace(workdir / "reading")
        sink(frame, batch_id)

    df = spark.readStream.schema(crash.SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "in"))
    checkpoint = str(workdir / "checkpoint")
    query = (op.apply(df, end_of_input="end_of_input", checkpoint=checkpoint).writeStream.foreachBatch(reading)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    (workdir / "done").write_text("done\n")
    spark.stop()


def executors(worker_pids: list[int]) -> dict[int, list[int]]:
    """Each worker's executor JVMs (processes running ``CoarseGrainedExecutorBackend`` below it)."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            commands[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found: dict[int, list[int]] = {}
    for worker in worker_pids:
        todo, below = [worker], []
        while todo:
            for kid in children.get(todo.pop(), []):
                below.append(kid)
                todo.append(kid)
        found[worker] = [pid for pid in below if "CoarseGrainedExecutorBackend" in commands.get(pid, "")]
    return found


def run_with_executor_kills(workdir: Path, master: str, worker_pids: list[int], batches: list[list[dict]],
                            kills: int, rng: random.Random, say: Callable[[str], None] = print,
                            timeout: float = 1800.0) -> dict:
    """Run the driver; each time its sink starts reading a new batch, SIGKILL an executor JVM (of a
    worker drawn at random), ``kills`` times; returns the batches each kill landed in."""
    workdir.mkdir(parents=True, exist_ok=True)
    crash.write_input(workdir / "in", batches)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                      os.environ.get("PYTHONPATH")]))}
    log = open(workdir / "driver.log", "wb")
    driver = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", str(workdir),
                               "--master", master], stdout=log, stderr=subprocess.STDOUT, env=env,
                              start_new_session=True)
    landed: list[dict] = []
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while driver.poll() is None and time.monotonic() < deadline:
            marker = workdir / "reading"
            batch = marker.read_text().strip() if marker.exists() else None
            if batch is not None and batch not in seen and len(landed) < kills:
                seen.add(batch)
                worker = rng.choice(worker_pids)
                victims = executors([worker])[worker]
                if victims:
                    os.kill(victims[0], signal.SIGKILL)
                    landed.append({"batch": int(batch), "worker": worker_pids.index(worker), "executor": victims[0]})
                    say(f"  kill {len(landed)}: the executor on worker {worker_pids.index(worker)} while the sink read "
                        f"batch {batch}")
            time.sleep(0.05)
        if driver.poll() is None:
            raise TimeoutError(f"the driver did not finish in {timeout} s: see {workdir / 'driver.log'}")
        if driver.returncode != 0 or not (workdir / "done").exists():
            raise RuntimeError(f"the driver failed (exit {driver.returncode}): see {workdir / 'driver.log'}")
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        log.close()
    return {"kills": landed, "applied": crash.applied(workdir / "results.db")}


def reference_rows(workdir: Path, batches: list[list[dict]]) -> list[tuple]:
    """The table the local runner's panes over the same batches leave (what an uninterrupted Spark run
    leaves: tests/spark/test_table_sink_spark.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from spark.harness import run_local_like_spark  # (the tests' harness: the same batches, as Spark cuts them)

    from windowed_operator.sinks import TableSink

    op = crash.sessions_operator()
    local = TableSink(str(workdir / "local.db"), "sessions", mode="upsert", operator=op,
                      columns=["timing", "pane_index", "batch_id"])
    local(run_local_like_spark(op, batches, crash.DELAY).outputs, 0)
    return crash.table_rows(workdir / "local.db", "sessions")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.master)
        return
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from spark.test_cluster import standalone_cluster

    root = Path(tempfile.mkdtemp(prefix="executor-loss-"))
    batches = crash.make_batches(args.seed, n_batches=args.batches)
    with standalone_cluster(root, workers=2) as (master, _, workers):
        started = time.monotonic()
        outcome = run_with_executor_kills(root / "run", master, [w.pid for w in workers], batches, args.kills,
                                          random.Random(args.seed))
        seconds = time.monotonic() - started
    got, expected = crash.table_rows(root / "run" / "results.db", "sessions"), reference_rows(root, batches)
    lost = len(set(expected) - set(got))
    extra = len(set(got) - set(expected))
    print(f"{len(batches)} batches, {len(outcome['kills'])} executors killed mid-batch, in {seconds:.0f} s; "
          f"table rows: {len(got)} (local runner: {len(expected)}), {lost} lost, {extra} not in the local runner's; "
          f"last batch applied {outcome['applied']}")
    print(json.dumps(outcome["kills"]))
    if got != expected:
        raise SystemExit("the table differs from the local runner's")


if __name__ == "__main__":
    main()
