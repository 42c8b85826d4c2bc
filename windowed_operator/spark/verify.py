"""``windowed-operator verify-restarts FILE --kills N``: does a pipeline's output survive crashes?

The pipeline runs twice on the local Spark session it would use, each run with checkpoints and
outputs of its own under a work directory: once uninterrupted, and once SIGKILLed ``N`` times (the
driver's process group and every process it started) at random moments, restarting from its
checkpoint each time, until it finishes.  Then every sink's output of the two runs is compared: a
table sink's rows (its ``batch_id`` column aside, which numbers the run's own batches) and a file
sink's committed rows (those Spark's ``_spark_metadata`` log lists), and a verdict is printed with
the rows that differ.  A kill lands, at random, shortly after a start has committed a new batch, or
during start-up.  Where the run with kills cut a sink's input into other micro-batches than the
uninterrupted run (the two runs' offset logs: ``batch_cuts``), the verdict says so, and which of
its differences that can explain.

A pipeline is refused, saying why, where the two runs could not be compared: a sink whose output
cannot be read back (console, memory, ``foreach_batch`` user code), a table in a database server
(both runs would write one table; SQLite and DuckDB files are written per run), an input that never
ends (a rate source) or a processing-time trigger (``trigger_interval``: the runs would not end).
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from ..pipeline.document import Pipeline
from ..pipeline.endpoints import SinkSpec
from ..sinks.dialects import FILE_DATABASES, file_database

#: Table columns that number a run's own batches, so differ between two runs of the same output.
RUN_COLUMNS = ("batch_id",)


def refusals(pipeline: Pipeline) -> list[str]:
    """Why the two runs of ``pipeline`` could not be compared (nothing: they can)."""
    found = []
    if pipeline.trigger_interval:
        found.append("trigger_interval: a processing-time trigger runs until stopped; verify-restarts compares runs "
                     "that end (remove trigger_interval: availableNow runs to the end of the input)")
    found += [f"sources.{name}: a rate source never ends" for name, source in pipeline.sources.items()
              if source.rate is not None]
    for i, sink in enumerate(pipeline.sinks):
        where = f"sinks[{i}] (input {sink.input!r})"
        if sink.console is not None or sink.memory is not None:
            found.append(f"{where}: a {'console' if sink.console is not None else 'memory'} sink's output cannot be "
                         "read back to compare")
        elif sink.foreach_batch is not None:
            found.append(f"{where}: a foreach_batch sink writes where its code says, which verify-restarts cannot read")
        elif sink.table is not None and _file_database(sink) is None:
            found.append(f"{where}: the table is in a database server, which both runs would write; verify-restarts "
                         "compares table sinks into SQLite or DuckDB files (each run writes its own)")
    return found


def _file_database(sink: SinkSpec) -> Optional[str]:
    """``sqlite`` or ``duckdb`` for a table sink into a database file (None: a server, or a URL from the
    environment)."""
    url = sink.table.url if sink.table is not None else None
    found = file_database(url) if url is not None else None
    return found[0] if found is not None else None


def isolated(pipeline: Pipeline, run: Path) -> Pipeline:
    """``pipeline`` with its checkpoints and outputs under ``run`` (its sources as they are)."""
    sinks = []
    for i, sink in enumerate(pipeline.sinks):
        updates: dict[str, Any] = {"checkpoint": str(run / "checkpoints" / f"sink-{i}")}
        if sink.files is not None:
            updates["files"] = sink.files.model_copy(update={"path": str(run / "out" / f"sink-{i}")})
        if sink.table is not None:
            database = _file_database(sink)
            assert database is not None  # (refused otherwise)
            updates["table"] = sink.table.model_copy(update={
                "url": f"{database}:///{run / ('tables' + FILE_DATABASES[database])}"})
        sinks.append(sink.model_copy(update=updates))
    return pipeline.model_copy(update={"sinks": sinks, "checkpoint": str(run / "checkpoints")})


def outputs(pipeline: Pipeline) -> dict[str, list[tuple]]:
    """Each sink's output as sorted rows, by a label naming the sink."""
    found = {}
    for i, sink in enumerate(pipeline.sinks):
        label = f"sinks[{i}] ({sink.input} -> {'table ' + sink.table.table if sink.table else 'files'})"
        found[label] = sorted(_table_rows(sink) if sink.table is not None else _file_rows(sink), key=repr)
    return found


def _table_rows(sink: SinkSpec) -> list[tuple]:
    from ..sinks import TableSink

    assert sink.table is not None
    reader = TableSink(sink.table.resolved_url(), sink.table.table)
    try:
        return [tuple((k, v) for k, v in sorted(row.items()) if k not in RUN_COLUMNS) for row in reader.rows()]
    finally:
        reader.dispose()


def _file_rows(sink: SinkSpec) -> list[tuple]:
    """The rows of the files Spark's file sink committed (``_spark_metadata``: a killed batch's files
    are in the directory but not in the log)."""
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    assert sink.files is not None
    log = Path(sink.files.path) / "_spark_metadata"
    paths: list[str] = []
    for entry in sorted(log.glob("*")) if log.exists() else []:
        for line in entry.read_text().splitlines()[1:]:  # (the first line is the log's version)
            record = json.loads(line)
            if record.get("action", "add") == "add":
                paths.append(record["path"].removeprefix("file://"))
    rows: list[tuple] = []
    for path in paths:
        table = pq.read_table(path) if sink.files.format == "parquet" else pa_json.read_json(path)
        rows += [tuple(sorted((k, repr(v)) for k, v in row.items())) for row in table.to_pylist()]
    return rows


@dataclass
class Verdict:
    """What verify-restarts found: the kills that landed (and when), and each sink's differences."""

    kills: int
    moments: list[str]
    differences: dict[str, tuple[list[tuple], list[tuple]]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    #: The sinks whose query the run with kills cut into other micro-batches than the uninterrupted
    #: run (``batch_cuts``), by label.
    recut: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.differences

    def lines(self, shown: int = 5) -> list[str]:
        out = [f"{self.kills} kill(s) landed: " + "; ".join(self.moments) if self.moments else
               "no kill landed (the run ended before one could): the comparison shows no restart"]
        for label, count in self.rows.items():
            if label not in self.differences:
                out.append(f"  {label}: equal ({count} rows" + ("; its input was cut into other micro-batches in the run "
                                                              "with kills)" if label in self.recut else ")"))
        for label, (only_clean, only_killed) in self.differences.items():
            out.append(f"  {label}: DIFFERENT: {len(only_clean)} row(s) only in the uninterrupted run, "
                       f"{len(only_killed)} only in the run with kills")
            out += [f"    uninterrupted only: {row}" for row in only_clean[:shown]]
            out += [f"    with kills only:    {row}" for row in only_killed[:shown]]
            if label in self.recut:
                out.append(f"    its input was cut into other micro-batches in the run with kills ({RECUT_CAUSE}), so "
                           "the watermark stepped otherwise: an element dropped as late or kept, a pane's timing and how "
                           "early panes split a window can differ; keys, windows and final values of a pipeline that "
                           "drops no element do not")
        if self.equal:
            out.append("verdict: the outputs are equal")
        elif all(label in self.recut for label in self.differences):
            out.append("verdict: the outputs DIFFER where the input was cut otherwise: if keys, windows or final values "
                       "differ (with no element dropped), a sink applied a batch twice or lost one, or the pipeline is not "
                       "deterministic")
        else:
            out.append("verdict: the outputs DIFFER (a sink applied a batch twice or lost one, or the pipeline is not "
                       "deterministic)")
        return out


def _differences(clean: list[tuple], killed: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    from collections import Counter

    a, b = Counter(clean), Counter(killed)
    return sorted((a - b).elements(), key=repr), sorted((b - a).elements(), key=repr)


#: What most often cuts a restarted query's input otherwise.
RECUT_CAUSE = ("likely Spark's file source: killed after it logged a batch's files and before that batch's offsets, "
               "a query reads those files with the next ones in one batch")


def recut(clean: list[str], killed: list[str]) -> bool:
    """Whether two runs' batch ends (``batch_cuts``) differ where both offset logs still hold them
    (Spark keeps the last ``minBatchesToRetain``: each list from the first end both hold)."""
    both = set(clean) & set(killed)
    first = next((end for end in clean if end in both), None)
    if first is None:
        return clean != killed
    return clean[clean.index(first):] != killed[killed.index(first):]


def batch_cuts(checkpoints: Path) -> dict[str, list[str]]:
    """Where each query under ``checkpoints`` ended its micro-batches that read input: by the query's
    checkpoint (its path there), its sources' end offsets batch by batch (Spark's offset log: a
    batch's lines from the third on; a batch without new input repeats the last ones, kept once)."""
    cuts = {}
    for offsets in sorted(p for p in checkpoints.rglob("offsets") if p.is_dir()):
        ends: list[str] = []
        for batch in sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit()):
            end = "\n".join((offsets / str(batch)).read_text().splitlines()[2:])
            if not ends or ends[-1] != end:
                ends.append(end)
        cuts[offsets.parent.relative_to(checkpoints).as_posix()] = ends
    return cuts


# -- the runs -----------------------------------------------------------------------------------
def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (``/proc``: pyspark's worker daemon makes a process group of its own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def kill_all(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group and every process it started."""
    others = _descendants(proc.pid)
    for kill in [lambda: os.killpg(proc.pid, signal.SIGKILL), *[lambda p=p: os.kill(p, signal.SIGKILL) for p in others]]:
        try:
            kill()
        except ProcessLookupError:
            pass
    proc.wait()


def _start(run: Path, master: str, conf: dict[str, str], env: dict[str, str]) -> subprocess.Popen:
    """One start of a run, in a session of its own, its output appended to ``run/run.log`` (kept for a
    failure's report; the child keeps its own descriptor of it)."""
    with open(run / "run.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "windowed_operator.spark.verify", "--child", str(run),
                                 "--master", master, *[f"--conf={k}={v}" for k, v in conf.items()]],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def _committed(run: Path) -> int:
    """Batches the run's queries have committed (their checkpoints' commit logs)."""
    return sum(1 for path in (run / "checkpoints").glob("*/commits/*") if path.name.isdigit())


def _failed(run: Path, what: str) -> RuntimeError:
    log = (run / "run.log").read_text(errors="replace")[-3000:] if (run / "run.log").exists() else ""
    return RuntimeError(f"{what} failed; its log ({run / 'run.log'}) ends:\n{log}")


def verify_restarts(pipeline: Pipeline, kills: int, workdir: Path, *, master: str = "local[2]",
                    conf: Optional[dict[str, str]] = None, seed: Optional[int] = None,
                    env: Optional[dict[str, str]] = None, say: Callable[[str], None] = print,
                    timeout: float = 1800.0) -> Verdict:
    """Run ``pipeline`` uninterrupted and with ``kills`` SIGKILLs, and compare its sinks' outputs
    (``refusals`` must be empty)."""
    refused = refusals(pipeline)
    if refused:
        raise ValueError("verify-restarts cannot compare this pipeline's runs: " + "; ".join(refused))
    rng = random.Random(seed)
    env = dict(os.environ if env is None else env)
    conf = dict(conf or {})
    runs = {}
    for name in ("uninterrupted", "killed"):
        run = workdir / name
        run.mkdir(parents=True, exist_ok=False)
        runs[name] = isolated(pipeline, run)
        (run / "pipeline.json").write_text(runs[name].model_dump_json(by_alias=True, exclude_unset=True))
    clean = workdir / "uninterrupted"
    say(f"uninterrupted run ({clean})")
    began = time.monotonic()
    if _start(clean, master, conf, env).wait(timeout=timeout) != 0:
        raise _failed(clean, "the uninterrupted run")
    took = time.monotonic() - began
    killed = workdir / "killed"
    moments: list[str] = []
    deadline = time.monotonic() + timeout
    for attempt in range(kills + 1):
        proc = _start(killed, master, conf, env)
        if attempt == kills:  # the last start runs to the end
            if proc.wait(timeout=max(1.0, deadline - time.monotonic())) != 0:
                raise _failed(killed, "the last start of the run with kills")
            break
        before, started = _committed(killed), time.monotonic()
        if rng.random() < 0.2:  # during start-up
            delay = rng.uniform(0, min(20.0, took / 2))
            while time.monotonic() - started < delay and proc.poll() is None:
                time.sleep(0.05)
            where = f"{delay:.1f} s after a start"
        else:  # shortly after this start committed a new batch
            while _committed(killed) == before and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            delay = rng.uniform(0, 1.5)
            time.sleep(delay)
            where = f"{delay:.2f} s after batch {_committed(killed) - 1} committed"
        if proc.poll() is not None:
            if proc.returncode != 0:
                raise _failed(killed, "a start of the run with kills")
            say(f"  start {attempt + 1} finished before its kill")
            break
        kill_all(proc)
        moments.append(where)
        say(f"  kill {len(moments)}: {where}")
    clean_out, killed_out = outputs(runs["uninterrupted"]), outputs(runs["killed"])
    clean_cuts, labels = batch_cuts(clean / "checkpoints"), list(clean_out)
    cut_sinks = {int(found.group(1)) for query, ends in batch_cuts(killed / "checkpoints").items()
                 if recut(clean_cuts.get(query, []), ends) and (found := re.match(r"sink-(\d+)(/|$)", query))}
    # (a sink's query checkpoints under sink-<i>: ``isolated``)
    verdict = Verdict(kills=len(moments), moments=moments, recut=[labels[i] for i in sorted(cut_sinks)])
    for label, rows in clean_out.items():
        verdict.rows[label] = len(rows)
        only_clean, only_killed = _differences(rows, killed_out[label])
        if only_clean or only_killed:
            verdict.differences[label] = (only_clean, only_killed)
    return verdict


def _child(run: Path, master: str, conf: dict[str, str], out: TextIO) -> None:
    """One start of a run: the isolated pipeline on a local session, to its end."""
    from .pipeline_run import run_pipeline

    # (validated by the command already, user code allowed by it: the references are not checked again)
    pipeline = Pipeline.model_validate_json((run / "pipeline.json").read_text(), context={"defer_references": True})
    run_pipeline(pipeline, master=master, conf=conf, workdir=run / "work", out=out)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="one start of a verify-restarts run (started by the command)")
    parser.add_argument("--child", type=Path, required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[])
    args = parser.parse_args()
    _child(args.child, args.master, dict(c.split("=", 1) for c in args.conf), sys.stdout)
