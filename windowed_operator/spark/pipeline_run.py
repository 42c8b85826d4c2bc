"""Running a declarative pipeline on Spark: sources -> operators (chained by name) -> sinks."""
from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence, TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..pipeline.endpoints import MemorySource, SinkSpec, SourceSpec
from ..pipeline.document import Pipeline
from ..pipeline.user_code import import_dotted
from ..runners.totals import Totals
from .driver.checkpoint_settings import default_file_system_is_local, native_stages_setting, record, session_setting
from .driver.native_stage import NATIVE_STAGES_CONF
from .driver.feed import feed_of, with_watermark
from .plan.outputs import split_outputs
from .base.progress import ProgressPrinter, await_queries


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


def build_frames(spark: SparkSession, pipeline: Pipeline, workdir: Path, checkpoint: Optional[str] = None,
                 upstream_of: Optional[str] = None) -> dict[str, DataFrame]:
    """Every source and operator output as a streaming DataFrame, by name (with ``upstream_of``: only
    what that one reads), the operators applied with ``checkpoint=`` (the checkpoint of the query that
    will run them: their key groups follow the cluster at its first start, ``spark.driver.key_groups``)."""
    needed = _upstream(pipeline, upstream_of) if upstream_of is not None else None
    frames = {name: source_frame(spark, name, spec, workdir) for name, spec in pipeline.sources.items()
              if needed is None or name in needed}
    operators = pipeline.build_operators()
    for spec in pipeline.operators:
        if needed is not None and spec.name not in needed:
            continue
        op = operators[spec.name]
        inputs = []
        markers = [pipeline.sources[name].end_of_input for name in spec.inputs if name in pipeline.sources]
        marker = next((m for m in markers if m is not None), None)
        for side, name in zip(("left", "right") if spec.left else ("input",), spec.inputs):
            df = frames[name]
            if spec.upstream_delay is not None:
                ts = getattr(spec, f"{side}_options").timestamp if side != "input" else None
                # (ignore: an operator without a timestamp column validates today, and reaches pyspark's refusal of
                # None here before the runner's own error naming the setting)
                df = df.withWatermark(ts or spec.timestamp,  # type: ignore[arg-type]
                                      f"{spec.upstream_delay} milliseconds")
            inputs.append(df)
        frames[spec.name] = op.apply(*inputs, end_of_input=marker, checkpoint=checkpoint)
    return frames


def _upstream(pipeline: Pipeline, name: str) -> set[str]:
    """``name`` and every source and operator it reads, directly or not."""
    inputs = {spec.name: list(spec.inputs) for spec in pipeline.operators}
    found: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo += inputs.get(current, [])
    return found


def _frames_as_checkpoints_were_started(spark: SparkSession, pipeline: Pipeline, workdir: Path) -> list[DataFrame]:
    """Each sink's frame, planned for its own query: its operators applied with the sink's checkpoint
    (their key groups), and with the native stages setting the sinks' checkpoints take
    (``checkpoint_settings``), which each checkpoint then records; the session's own setting is
    restored once the frames are planned (the plan reads it when an operator is applied)."""
    checkpoints = sink_checkpoints(pipeline)
    given = spark.conf.get(NATIVE_STAGES_CONF, None)
    local = default_file_system_is_local(spark)
    native = native_stages_setting(checkpoints, session_setting(spark), plain_paths_local=local)
    spark.conf.set(NATIVE_STAGES_CONF, str(native).lower())
    try:
        frames = [build_frames(spark, pipeline, workdir, checkpoint, upstream_of=sink.input)[sink.input]
                  for sink, checkpoint in zip(pipeline.sinks, checkpoints)]
    finally:
        if given is None:
            spark.conf.unset(NATIVE_STAGES_CONF)
        else:
            spark.conf.set(NATIVE_STAGES_CONF, given)
    record(checkpoints, native, plain_paths_local=local)
    return frames


def sink_query_names(pipeline: Pipeline) -> list[str]:
    return [sink.memory.query_name if sink.memory else f"{pipeline.name}_{sink.input}_{i}"
            for i, sink in enumerate(pipeline.sinks)]


def output_operators(pipeline: Pipeline, frames: Sequence[DataFrame]) -> dict[str, str]:
    """Each sink query's output operator (its observation name): the one whose panes it counts."""
    from .driver.feed import feed_of

    found = {}
    for frame, name in zip(frames, sink_query_names(pipeline)):
        feed = feed_of(frame)
        if feed is not None and feed.observation:
            found[name] = feed.observation
    return found


def sink_checkpoints(pipeline: Pipeline) -> list[str]:
    return [sink.checkpoint or str(Path(pipeline.checkpoint) / f"{sink.input}-{i}")
            for i, sink in enumerate(pipeline.sinks)]


def sink_frame(sink: SinkSpec, frame: DataFrame, operator: Any) -> DataFrame:
    """What of its input's frame a sink writes (``output``: all, the panes, or the late data and dead
    letters; the spec's validation has refused a side output of an operator that has none).  A table
    sink gets the whole frame with the operator's watermark rows (``with_watermark``), and keeps the
    panes of it."""
    feed = feed_of(frame)
    if sink.table is not None and feed is not None and not feed.native_stage:
        marked = with_watermark(frame)  # (side rows stay out where the sink takes the panes only)
        if sink.output == "panes" and "record_type" in marked.columns:
            marked = marked.where(F.col("record_type").isNull() | (F.col("record_type") == "pane"))
        return marked
    if sink.output == "all":
        return frame
    outputs = split_outputs(frame, operator)
    part = outputs.panes if sink.output == "panes" else outputs.side
    assert part is not None
    return part


def start_sinks(pipeline: Pipeline, frames: Sequence[DataFrame]) -> list[Any]:
    """A query for each sink, writing its frame (``_frames_as_checkpoints_were_started``)."""
    queries = []
    operators = pipeline.build_operators() if any(sink.table is not None or sink.output != "all"
                                                  for sink in pipeline.sinks) else {}
    for sink, frame, name, checkpoint in zip(pipeline.sinks, frames, sink_query_names(pipeline),
                                             sink_checkpoints(pipeline)):
        writer = sink_frame(sink, frame, operators.get(sink.input)).writeStream.queryName(name)
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
        elif sink.table is not None:  # (batch ids recorded under the streaming query's id)
            writer = writer.foreachBatch(sink.table.build(operators.get(sink.input)))
        else:
            assert sink.foreach_batch is not None
            writer = writer.foreachBatch(import_dotted(sink.foreach_batch.function))
        queries.append(writer.start())
    return queries


class Stopped(KeyboardInterrupt):
    """A run stopped by a signal, its queries stopped: SIGINT (Ctrl-C) or SIGTERM (a container's stop).
    A ``KeyboardInterrupt``, so that a caller catching Ctrl-C catches both."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """While a run waits on its queries, SIGINT (Ctrl-C) and SIGTERM (a container's stop) ask it to stop
    them (``received``) instead of interrupting whatever the driver is doing: pyspark's own SIGINT
    handler raises ``KeyboardInterrupt`` wherever the main thread is, in the middle of a JVM call
    most of the time, which py4j logs with its tracebacks.  The same signal again within
    ``REPEAT_WITHIN`` seconds is the same request (Ctrl-C reaches the process group, ``timeout``
    signals the process and then its group); a later one exits at once with 128 + its number (the
    checkpoints keep every committed micro-batch; the JVM ends with the driver).  Python runs signal
    handlers on the main thread only: on another thread nothing is installed and Ctrl-C behaves as
    pyspark makes it.  The previous handlers come back on exit."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    REPEAT_WITHIN = 1.0

    def __init__(self) -> None:
        self.received: Optional[int] = None
        self._at = 0.0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def requested(self) -> bool:
        return self.received is not None

    def check(self) -> None:
        """Raise ``Stopped`` once a stop was asked for."""
        if self.received is not None:
            raise Stopped(self.received)

    def _handle(self, signum: int, frame: object) -> None:
        now = time.monotonic()
        if self.received is None:
            self.received, self._at = signum, now
        elif now - self._at > self.REPEAT_WITHIN:
            os.write(2, b"stopped at once; checkpoints keep every committed micro-batch (run again to resume)\n")
            os._exit(128 + signum)


def run_pipeline(pipeline: Pipeline, *, spark: Optional[SparkSession] = None, master: Optional[str] = None,
                 workdir: Optional[Path] = None, out: TextIO = sys.stdout,
                 conf: Optional[dict[str, str]] = None, py_files: Sequence[str] = (),
                 spark_log: Optional[str] = None) -> dict[str, Totals]:
    """Start every sink's query and print a line per completed micro-batch until they end
    (availableNow, or the end of input) or Ctrl-C (SIGINT) or SIGTERM, which stops them cleanly
    (Spark has committed each finished micro-batch to the checkpoint, so a rerun resumes there) and
    raises :class:`Stopped` (a ``KeyboardInterrupt``) for the caller; see :class:`StopSignals`.
    Returns each query's totals; a query's failure is raised.

    Without ``spark``, a session on ``master`` is built with ``conf`` and ``py_files`` (user code) and
    its console output sent to ``spark_log``; on a cluster master (``spark://...``) the library is
    shipped to the executors (see :mod:`.shipping`)."""
    from .base.session import local_session
    from .base.shipping import ship_library

    if spark is None:
        spark = local_session(master=master or "local[*]", app_name=pipeline.name, extra_conf=conf,
                              py_files=py_files, spark_log=spark_log)
    elif conf or py_files:
        raise ValueError("conf and py_files configure a new session; give them to local_session instead")
    else:
        ship_library(spark)  # a session of the caller's on a cluster: its executors need the library too
    workdir = workdir or Path(tempfile.mkdtemp(prefix="wo-pipeline-"))
    with StopSignals() as signals:  # (after the session: its SparkContext installs pyspark's handler)
        frames = _frames_as_checkpoints_were_started(spark, pipeline, workdir)
        printer = ProgressPrinter(out, names=sink_query_names(pipeline),
                                  output_operators=output_operators(pipeline, frames))
        spark.streams.addListener(printer)
        queries: list[Any] = []
        try:
            try:
                signals.check()
                queries = start_sinks(pipeline, frames)
                await_queries(queries, printer, until=signals.requested)
                if any(q.isActive for q in queries):  # (a request after the last query ended ends nothing)
                    signals.check()
            except KeyboardInterrupt:  # Stopped, or Ctrl-C where no handler could be installed
                for query in queries:
                    query.stop()
                print(f"stopped; checkpoints kept under {pipeline.checkpoint} (run again to resume)", file=out,
                      flush=True)
                raise
        finally:
            spark.streams.removeListener(printer)
    for name in sink_query_names(pipeline):
        print(printer.totals.get(name, Totals(input_rows=0)).line(name), file=out, flush=True)
    return dict(printer.totals)
