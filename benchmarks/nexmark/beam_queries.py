"""Beam Python's own Nexmark queries (apache_beam.testing.benchmarks.nexmark) on an event file,
run by an interpreter that has apache_beam (``run.py --beam-python``); prints one JSON object: the
seconds the pipeline took, its start-up (the same pipeline on no events) apart, and every output
with its window's bounds.

    python beam_queries.py --input events.json --query q7 [--window-sec 10 --period-sec 2 ...]
    python beam_queries.py --input events.json --query q12 --streaming --batches 10 --disorder-ms 2000

By default in batch on the DirectRunner, as Beam's launcher runs a file of events: every event is
on time (a batch watermark only ends), so the outputs are each window's final results. q12
(processing time) does not run in Beam Python's batch mode (its trigger has no clock there).
``--streaming`` runs the same query on the DirectRunner's streaming mode, which is what a Beam user
gets for a streaming pipeline run locally: the events (in the file's arrival order) arrive as a
TestStream in ``--batches`` bundles, like the micro-batches on Spark; after each, the watermark
advances as a bounded-disorder watermark would (the largest event time seen minus
``--disorder-ms``, so no event is late) and processing time by ``--window-sec`` (q12 fires once
per bundle); then the watermark ends. Early firings fire as the watermark goes, and the final
result per window is the same. q5r is not a Beam query.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, TypeOptions
from apache_beam.testing.benchmarks.nexmark import nexmark_util
from apache_beam.testing.benchmarks.nexmark.queries import query5, query7, query8, query11, query12
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp
from bundles import bundles  # this directory: the script's own

QUERIES = {"q5": query5, "q7": query7, "q8": query8, "q11": query11, "q12": query12}
STREAMING_ONLY = ("q12",)


class WithWindow(beam.DoFn):
    def process(self, element, w=beam.DoFn.WindowParam):
        value = element if isinstance(element, dict) else json.loads(repr(element))
        yield json.dumps({"start": int(w.start.micros // 1000), "end": int(w.end.micros // 1000), "value": value})


class AppendLines(beam.DoFn):
    """Appends each output to a file: Beam Python's text sink takes no unbounded input, and the
    streaming DirectRunner runs in this process, so one appending write per line is enough."""

    def __init__(self, path: str) -> None:
        self.path = path

    def process(self, line: str):
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def event_stream(input_path: str, batches: int, disorder_ms: int, processing_step_sec: int) -> TestStream:
    """The file's events in arrival order as ``batches`` bundles, each followed by the watermark a
    bounded-disorder watermark would hold (``bundles.py``) and a step of processing time."""
    lines = [line for line in Path(input_path).read_text().splitlines() if line]
    stream = TestStream()
    for bundle, watermark in bundles(lines, batches, disorder_ms):
        stream = stream.add_elements([window.TimestampedValue(line, Timestamp(micros=at * 1000)) for line, at in bundle])
        if watermark is not None:
            stream = stream.advance_watermark_to(Timestamp(micros=watermark * 1000))
        stream = stream.advance_processing_time(processing_step_sec)
    return stream.advance_watermark_to_infinity()


def run(input_path: str, query: str, metadata: dict, out_dir: str, stream: Optional[TestStream] = None) -> list[str]:
    """The query over the file (batch), or over ``stream`` (streaming: built before the clock starts,
    so reading the file's event times is not counted as Beam's)."""
    streaming = stream is not None
    options = PipelineOptions(["--runner=DirectRunner"] + (["--streaming"] if streaming else []))
    options.view_as(TypeOptions).allow_unsafe_triggers = True
    nexmark_util.setup_coder()
    out = f"{out_dir}/out"
    with beam.Pipeline(options=options) as pipeline:
        lines = (pipeline | "events" >> stream if streaming else pipeline | "read" >> beam.io.ReadFromText(input_path))
        events = (lines | "parse" >> beam.ParDo(nexmark_util.ParseJsonEventFn())
                  | "stamp" >> beam.Map(lambda e: window.TimestampedValue(e, e.date_time)))
        results = QUERIES[query].load(events, metadata, options)
        with_window = results | "with window" >> beam.ParDo(WithWindow())
        if streaming:
            with_window | "append" >> beam.ParDo(AppendLines(out))
        else:
            (with_window | "global" >> beam.WindowInto(window.GlobalWindows())
             | "write" >> beam.io.WriteToText(out, num_shards=1))
    return [line for path in sorted(Path(out_dir).glob("out*")) for line in path.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--query", required=True, choices=sorted(QUERIES))
    parser.add_argument("--window-sec", type=int, default=10)
    parser.add_argument("--period-sec", type=int, default=2)
    parser.add_argument("--early-count", type=int, default=100)
    parser.add_argument("--delay-sec", type=int, default=3, help="occasional_delay_sec: q11's lateness is half")
    parser.add_argument("--streaming", action="store_true", help="the DirectRunner's streaming mode, on a TestStream")
    parser.add_argument("--batches", type=int, default=1, help="bundles the TestStream delivers (--streaming)")
    parser.add_argument("--disorder-ms", type=int, default=0, help="the watermark's lag behind the largest event time")
    args = parser.parse_args()
    if args.query in STREAMING_ONLY and not args.streaming:
        parser.error(f"{args.query} runs on processing time: Beam Python runs it only with --streaming")
    metadata = {"auction_skip": 123, "window_size_sec": args.window_sec, "window_period_sec": args.period_sec,
                "fanout": 5, "num_max_workers": 5, "max_log_events": args.early_count,
                "occasional_delay_sec": args.delay_sec, "max_auction_waiting_time": 600}
    with tempfile.TemporaryDirectory() as empty_dir, tempfile.TemporaryDirectory() as out_dir:
        empty = Path(empty_dir) / "none.json"
        empty.write_text("")
        streams = ([event_stream(path, args.batches, args.disorder_ms, args.window_sec) for path in (str(empty), args.input)]
                   if args.streaming else [None, None])
        start = time.perf_counter()
        run(str(empty), args.query, metadata, empty_dir, streams[0])
        startup = time.perf_counter() - start
        start = time.perf_counter()
        lines = run(args.input, args.query, metadata, out_dir, streams[1])
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "startup_s": startup, "outputs": [json.loads(x) for x in lines]}))


if __name__ == "__main__":
    main()
