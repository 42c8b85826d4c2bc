"""Feed Spark in controlled micro-batches and drive the local runner through the same batches.

Spark: one JSON file per batch (distinct modification times, ``maxFilesPerTrigger=1``), so batch i
holds exactly file i; a last file with an end-of-input marker row (``END_COLUMN`` true, read with
``apply(end_of_input=END_COLUMN)``) ends the input.  The operator's
watermark is ``bounded_disorder(delay)``, so batch i sees W_i = (largest event time of batches < i)
- delay, as Spark computes it at the end of each batch; the first batch sees no watermark.

Local: for each batch, advance the watermark to W_i, advance the processing clock to the batch's
time, add the batch as one bundle; at the end advance to the final watermark (Spark's no-data
batch).  The Spark processor applies watermark, then processing time, then elements, per key, so
both orders agree.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from windowed_operator.chain import Chain
from windowed_operator.runners.chain import ChainRunner
from windowed_operator.spark import END_OF_INPUT, FileClock
from windowed_operator.time import MIN_TIMESTAMP, shown_time
from windowed_operator.watermarks import UpstreamWatermark

SCHEMA = "user string, amount bigint, ts bigint"
#: The marker column, and the schema the harness reads its files with (the data's plus the marker).
END_COLUMN = "end_of_input"
MARKED_SCHEMA = f"{SCHEMA}, {END_COLUMN} boolean"
#: The last row of every input: it ends the input (its time only matters under an upstream watermark).
END_MARKER = {END_COLUMN: True, "ts": END_OF_INPUT}
BASE = 1_700_000_000_000  # aligned to every window size used in the tests


def is_marker(row: dict) -> bool:
    return bool(row.get(END_COLUMN))


def write_batches(directory: Path, batches: list[list[dict]], flush: bool = True) -> list[list[dict]]:
    directory.mkdir(parents=True, exist_ok=True)
    files = [*batches, [END_MARKER]] if flush else batches
    for i, rows in enumerate(files):
        path = directory / f"batch-{i:05d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_600_000_000 + i, 1_600_000_000 + i))
    return files


def write_batch_file(path: Path, rows: list[dict], index: int) -> None:
    """Batch file ``index`` of a running query's input, made visible whole: written and dated under a
    hidden name (Spark's file source skips names starting with "."), then renamed.  Written in place,
    a listing between the write and ``os.utime`` records the file with today's time, and the file
    source then ignores the next one (dated 2020: older than its maxFileAge behind the newest seen);
    a listing during the write reads a part of the rows."""
    hidden = path.with_name(f".{path.name}.tmp")
    hidden.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(hidden, (1_600_000_000 + index, 1_600_000_000 + index))
    hidden.replace(path)


def release_batches(staging: Path, source: Path, upto: int) -> None:
    """Move the first ``upto`` files ``write_batches`` staged into ``source`` (those not moved yet):
    a restarted query then finds them as new input."""
    for i in range(upto):
        name = f"batch-{i:05d}.json"
        if (staging / name).exists():
            (staging / name).replace(source / name)


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def pane_tuple(row: Any) -> tuple:
    return (row["key"] if "key" in row else None, row["ws"], row["we"], _hashable(row["value"]), row["timing"],
            row["pane_index"], row["is_first"], row["is_last"], row["is_retraction"], row["ts_ms"])


def _collector(store: dict):
    def collect(batch_df, batch_id):
        cols = [c for c in batch_df.columns if c not in ("window_start", "window_end", "timestamp",
                                                         "element_timestamp")]
        rows = batch_df.selectExpr(*cols, "unix_millis(window_start) as ws", "unix_millis(window_end) as we",
                                   "unix_millis(timestamp) as ts_ms").collect()
        store[batch_id] = [r.asDict() for r in rows]  # idempotent by batch id
    return collect


def run_spark(spark, op, batches: list[list[dict]], workdir: Path, *, clock_times: Optional[list[int]] = None,
              checkpoint: Optional[Path] = None, stop_after_files: Optional[int] = None, **apply_kwargs) -> dict:
    """Run ``op`` over the batches; returns {batch_id: [row dicts]}.  With ``clock_times`` the query runs
    in ProcessingTime mode under a FileClock set to clock_times[i] before file i is visible."""
    source = workdir / "in"
    checkpoint = checkpoint or workdir / "checkpoint"
    store: dict = {}
    source.mkdir(parents=True, exist_ok=True)
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    apply_kwargs.setdefault("end_of_input", END_COLUMN)
    if clock_times is None:
        files = write_batches(source, batches)
        out = op.apply(df, **apply_kwargs)
        query = (out.writeStream.foreachBatch(_collector(store)).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return store
    clock = FileClock(str(workdir / "clock"))
    clock.set(clock_times[0])
    out = op.apply(df, clock=clock, **apply_kwargs)
    source.mkdir(parents=True, exist_ok=True)
    query = (out.writeStream.foreachBatch(_collector(store)).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="100 milliseconds").start())
    try:
        files = [*batches, [END_MARKER]]
        for i, rows in enumerate(files):
            clock.set(clock_times[min(i, len(clock_times) - 1)])
            write_batch_file(source / f"batch-{i:05d}.json", rows, i)
            _wait_for_file(query, i)
        batches_done = query.lastProgress["batchId"]
        _wait_for(lambda: _raise_if_stopped(query) or query.lastProgress["batchId"] >= batches_done + 2)
        # (no-data batches apply the last watermark)
    finally:
        query.stop()
    return store


def _wait_for_file(query, index: int) -> None:
    def done():
        _raise_if_stopped(query)
        progress = query.lastProgress
        if not progress or not progress["sources"]:
            return False
        end = progress["sources"][0]["endOffset"]
        return end is not None and json.loads(end if isinstance(end, str) else json.dumps(end))["logOffset"] >= index
    _wait_for(done)


def _raise_if_stopped(query) -> None:
    """A query that failed stops making progress: report its error instead of waiting out the timeout."""
    if not query.isActive:
        raise RuntimeError(f"the Spark query stopped: {query.exception()}")


def _wait_for(condition, timeout: float = 300.0) -> None:
    """``timeout``: generous, because a failed query is reported at once (``_raise_if_stopped``) and
    only a slow one waits; 120 s ran out once on a machine whose 2 cores a second test run shared."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("Spark query did not make progress in time")
        time.sleep(0.05)


def spark_panes(store: dict) -> Counter:
    return Counter(pane_tuple(r) for rows in store.values() for r in rows
                   if r.get("record_type", "pane") == "pane")


def run_local_like_spark(op, batches: list[list[dict]], delay: int, clock_times: Optional[list[int]] = None):
    """The local runner driven through the same batches and watermarks Spark sees."""
    runner = _local_runner(op, clock_times[0] if clock_times else 0)
    watermark, max_ts = MIN_TIMESTAMP, None
    ended = False
    for i, rows in enumerate([*batches, [END_MARKER]]):
        if watermark > MIN_TIMESTAMP:
            runner.advance_watermark_to(watermark)
        if clock_times:
            now = clock_times[min(i, len(clock_times) - 1)]
            if now > runner.processing_time:
                runner.advance_processing_time(now - runner.processing_time)
        real = [r for r in rows if not is_marker(r)]
        if real:
            runner.add_elements(*real)
        ended = ended or len(real) < len(rows)
        # a bounded-disorder watermark moves with the times of the rows in range only
        stamps = [r["ts"] for r in real if r["ts"] is not None and r["ts"] < END_OF_INPUT]
        if stamps:
            max_ts = max(stamps) if max_ts is None else max(max_ts, *stamps)
            if max_ts - delay > 0:  # Spark's watermark never goes below 0 (1970), which means "none yet"
                watermark = max(watermark, max_ts - delay)
    if ended:
        runner.finish()  # the marker ends the input: every window closes, the global one too
    else:
        runner.advance_watermark_to(watermark)
    return runner


def _local_runner(op, processing_time: int):
    """A local runner driven by the watermarks Spark computes (the first operator of a chain's)."""
    if isinstance(op, Chain):
        first = op.operators[0].model_copy(update={"watermark": _upstream_like(op.operators[0])})
        return ChainRunner([first.local_runner(processing_time),
                            *(stage.local_runner(processing_time) for stage in op.operators[1:])])
    return op.model_copy(update={"watermark": _upstream_like(op)}).local_runner(processing_time=processing_time)


def _upstream_like(op) -> UpstreamWatermark:
    """The watermark Spark computes, given to the local runner, with the operator's idle timeout."""
    return UpstreamWatermark(idle_timeout=getattr(op.watermark, "idle_timeout", None))


def local_panes(runner) -> Counter:
    """The local runner's panes with their times as Spark's rows show them (``time.shown_time``)."""
    return Counter((r.key, shown_time(r.window_start), shown_time(r.window_end), _hashable(r.value), r.timing.value,
                    r.index, r.is_first, r.is_last, r.is_retraction, shown_time(r.timestamp)) for r in runner.outputs)


# -- two inputs ------------------------------------------------------------------------------------
RIGHT_SCHEMA = "user string, page string, ts bigint"
MARKED_RIGHT_SCHEMA = f"{RIGHT_SCHEMA}, {END_COLUMN} boolean"


def run_spark_merge(spark, op, left_batches: list[list[dict]], right_batches: list[list[dict]], workdir: Path,
                    **apply_kwargs) -> dict:
    """Both inputs read one file per batch (``maxFilesPerTrigger=1`` each), so batch i holds file i of
    each; the last file of each carries an end-of-input marker."""
    assert len(left_batches) == len(right_batches)
    store: dict = {}
    write_batches(workdir / "left", left_batches)
    write_batches(workdir / "right", right_batches)
    left = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "left"))
    right = spark.readStream.schema(MARKED_RIGHT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(workdir / "right"))
    out = op.apply(left, right, end_of_input=END_COLUMN, **apply_kwargs)
    query = (out.writeStream.foreachBatch(_collector(store)).option("checkpointLocation", str(workdir / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return store


def spark_watermarks(batches_by_side: dict[str, list[list[dict]]], delay: int) -> list[dict[str, int]]:
    """Each input's watermark as batch i sees it: its largest event time before batch i - delay
    (MIN_TIMESTAMP while it has sent nothing)."""
    n = len(next(iter(batches_by_side.values())))
    seen: dict[str, Optional[int]] = {side: None for side in batches_by_side}
    result = []
    for i in range(n + 1):
        result.append({side: MIN_TIMESTAMP if seen[side] is None else seen[side] - delay for side in seen})
        if i < n:
            for side, batches in batches_by_side.items():
                stamps = [r["ts"] for r in batches[i]]
                if stamps:
                    seen[side] = max(stamps) if seen[side] is None else max(seen[side], *stamps)
    return result


def run_local_merge_like_spark(op, left_batches: list[list[dict]], right_batches: list[list[dict]], delay: int):
    runner = _local_runner(op, 0)
    marks = spark_watermarks({"left": left_batches, "right": right_batches}, delay)
    for i, (left, right) in enumerate(zip(left_batches, right_batches)):
        for side, mark in marks[i].items():
            if mark > MIN_TIMESTAMP:
                runner.advance_watermark_to(side, mark)
        runner.add_elements_from_both(left, right)
    for side, mark in marks[-1].items():
        if mark > MIN_TIMESTAMP:
            runner.advance_watermark_to(side, mark)
    runner.finish()  # the markers of the last files end the input
    return runner
