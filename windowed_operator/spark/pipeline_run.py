"""Running a declarative pipeline on Spark: sources -> operators (chained by name) -> sinks."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TextIO

from pyspark.sql import DataFrame, SparkSession

from ..pipeline.spec import MemorySource, Pipeline, SourceSpec, import_dotted


def _memory_source(spark: SparkSession, name: str, memory: MemorySource, workdir: Path) -> DataFrame:
    """An in-memory list becomes JSON files of ``rows_per_batch`` rows, read one file per micro-batch."""
    directory = workdir / f"memory-{name}"
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(memory.rows), memory.rows_per_batch):
        path = directory / f"part-{i // memory.rows_per_batch:05d}.json"
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in memory.rows[i:i + memory.rows_per_batch]))
        os.utime(path, (1_600_000_000 + i, 1_600_000_000 + i))
    return spark.readStream.schema(memory.schema_).option("maxFilesPerTrigger", 1).json(str(directory))


def source_frame(spark: SparkSession, name: str, spec: SourceSpec, workdir: Path) -> DataFrame:
    if spec.files is not None:
        files = spec.files
        reader = spark.readStream.format(files.format).schema(files.schema_).options(**files.options)
        if files.format == "csv" and "header" not in files.options:
            reader = reader.option("header", "true")
        if files.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", files.max_files_per_trigger)
        return reader.load(files.path)
    if spec.rate is not None:
        return spark.readStream.format("rate").option("rowsPerSecond", spec.rate.rows_per_second).load()
    assert spec.memory is not None
    return _memory_source(spark, name, spec.memory, workdir)


def build_frames(spark: SparkSession, pipeline: Pipeline, workdir: Path,
                 drop_counters: Optional[dict[str, Any]] = None) -> dict[str, DataFrame]:
    """Every source and operator output as a streaming DataFrame, by name; ``drop_counters`` gets an
    accumulator of dropped late elements per operator."""
    frames = {name: source_frame(spark, name, spec, workdir) for name, spec in pipeline.sources.items()}
    operators = pipeline.build_operators()
    for spec in pipeline.operators:
        op = operators[spec.name]
        inputs = []
        markers = [pipeline.sources[name].end_of_input for name in spec.inputs if name in pipeline.sources]
        marker = next((m for m in markers if m is not None), None)
        for side, name in zip(("left", "right") if spec.left else ("input",), spec.inputs):
            df = frames[name]
            if spec.watermark.upstream is not None:
                ts = getattr(spec, f"{side}_options").timestamp if side != "input" else None
                df = df.withWatermark(ts or spec.timestamp, f"{spec.watermark.upstream} milliseconds")
            inputs.append(df)
        counter = spark.sparkContext.accumulator(0)
        if drop_counters is not None:
            drop_counters[spec.name] = counter
        frames[spec.name] = op.apply(*inputs, drop_counter=counter, end_of_input=marker)
    return frames


def start_sinks(pipeline: Pipeline, frames: dict[str, DataFrame]) -> list[Any]:
    queries = []
    for i, sink in enumerate(pipeline.sinks):
        writer = frames[sink.input].writeStream.queryName(sink.memory.query_name if sink.memory else
                                                          f"{pipeline.name}_{sink.input}_{i}")
        checkpoint = sink.checkpoint or str(Path(pipeline.checkpoint) / f"{sink.input}-{i}")
        writer = writer.option("checkpointLocation", checkpoint)
        if pipeline.trigger_interval:
            writer = writer.trigger(processingTime=f"{pipeline.trigger_interval} milliseconds")
        else:
            writer = writer.trigger(availableNow=True)
        if sink.console is not None:
            writer = (writer.format("console").option("truncate", str(sink.console.truncate).lower())
                      .option("numRows", sink.console.num_rows))
        elif sink.files is not None:
            writer = writer.format(sink.files.format).option("path", sink.files.path)
        elif sink.memory is not None:
            writer = writer.format("memory")
        else:
            assert sink.foreach_batch is not None
            writer = writer.foreachBatch(import_dotted(sink.foreach_batch.function))
        queries.append(writer.start())
    return queries


class _Totals:
    """Rows in and out summed over every micro-batch a query reported (each counted once)."""

    def __init__(self) -> None:
        self.seen: set = set()
        self.rows_in = 0
        self.rows_out = 0

    def update(self, query: Any) -> None:
        for progress in query.recentProgress:
            batch = progress.get("batchId") if isinstance(progress, dict) else progress.batchId
            if batch in self.seen:
                continue
            self.seen.add(batch)
            progress = progress if isinstance(progress, dict) else json.loads(progress.json)
            self.rows_in += progress.get("numInputRows", 0)
            self.rows_out += max(0, (progress.get("sink") or {}).get("numOutputRows", 0) or 0)


def _progress_line(query: Any, totals: _Totals, dropped: Optional[int]) -> str:
    totals.update(query)
    progress = query.lastProgress or {}
    watermark = (progress.get("eventTime") or {}).get("watermark", "-")
    late = "-" if dropped is None else dropped
    out = totals.rows_out if totals.rows_out else "-"  # sinks that do not report rows (foreachBatch) say -1
    return (f"{query.name}: batch {progress.get('batchId', '-')}, input rows {totals.rows_in}, "
            f"panes out {out}, late rows dropped {late}, watermark {watermark}")


def run_pipeline(pipeline: Pipeline, *, spark: Optional[SparkSession] = None, master: Optional[str] = None,
                 workdir: Optional[Path] = None, out: TextIO = sys.stdout, poll_seconds: float = 2.0,
                 on_progress: Optional[Callable[[list[Any]], None]] = None, conf: Optional[dict[str, str]] = None,
                 py_files: Sequence[str] = ()) -> list[Any]:
    """Start every sink's query, print progress until they end (availableNow) or Ctrl-C, which stops
    them cleanly: Spark commits each micro-batch to the checkpoint, so a rerun resumes there.

    Without ``spark``, a session on ``master`` is built with ``conf`` and ``py_files`` (user code); on a
    cluster master (``spark://...``) the library is shipped to the executors (see :mod:`.shipping`)."""
    from .session import local_session
    from .shipping import ship_library

    if spark is None:
        spark = local_session(master=master or "local[*]", app_name=pipeline.name, extra_conf=conf,
                              py_files=py_files)
    elif conf or py_files:
        raise ValueError("conf and py_files configure a new session; give them to local_session instead")
    else:
        ship_library(spark)  # a session of the caller's on a cluster: its executors need the library too
    workdir = workdir or Path(tempfile.mkdtemp(prefix="wo-pipeline-"))
    counters: dict[str, Any] = {}
    queries = start_sinks(pipeline, build_frames(spark, pipeline, workdir, counters))
    dropped_for = {q.name: counters.get(sink.input) for q, sink in zip(queries, pipeline.sinks)}
    totals = {q.name: _Totals() for q in queries}
    try:
        while any(q.isActive for q in queries):
            time.sleep(poll_seconds)
            for query in queries:
                counter = dropped_for.get(query.name)
                print(_progress_line(query, totals[query.name], None if counter is None else counter.value),
                      file=out, flush=True)
            if on_progress is not None:
                on_progress(queries)
        for query in queries:
            if query.exception() is not None:
                raise query.exception()
    except KeyboardInterrupt:
        for query in queries:
            query.stop()
        print(f"stopped; checkpoints kept under {pipeline.checkpoint} (run again to resume)", file=out)
    return queries
