"""Beam Python's own Nexmark queries (apache_beam.testing.benchmarks.nexmark) on an event file,
run by an interpreter that has apache_beam (``run.py --beam-python``); prints one JSON object: the
seconds the pipeline took, its start-up (the same pipeline on no events) apart, and every output
with its window's bounds.

    python beam_queries.py --input events.json --query q7 [--window-sec 10 --period-sec 2 ...]

Run in batch on the DirectRunner: every event is on time (a batch watermark only ends), so the
outputs are each window's final results. q12 (processing time) does not run in Beam Python's batch
mode (its trigger has no clock there), and q5r is not a Beam query.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, TypeOptions
from apache_beam.testing.benchmarks.nexmark import nexmark_util
from apache_beam.testing.benchmarks.nexmark.queries import query5, query7, query8, query11
from apache_beam.transforms import window

QUERIES = {"q5": query5, "q7": query7, "q8": query8, "q11": query11}


class WithWindow(beam.DoFn):
    def process(self, element, w=beam.DoFn.WindowParam):
        value = element if isinstance(element, dict) else json.loads(repr(element))
        yield json.dumps({"start": int(w.start.micros // 1000), "end": int(w.end.micros // 1000), "value": value})


def run(input_path: str, query: str, metadata: dict, out_dir: str) -> list[str]:
    options = PipelineOptions(["--runner=DirectRunner"])
    options.view_as(TypeOptions).allow_unsafe_triggers = True
    nexmark_util.setup_coder()
    with beam.Pipeline(options=options) as pipeline:
        events = (pipeline | "read" >> beam.io.ReadFromText(input_path)
                  | "parse" >> beam.ParDo(nexmark_util.ParseJsonEventFn())
                  | "stamp" >> beam.Map(lambda e: window.TimestampedValue(e, e.date_time)))
        results = QUERIES[query].load(events, metadata, options)
        (results | "with window" >> beam.ParDo(WithWindow())
         | "global" >> beam.WindowInto(window.GlobalWindows())
         | "write" >> beam.io.WriteToText(f"{out_dir}/out", num_shards=1))
    return [line for path in sorted(Path(out_dir).glob("out*")) for line in path.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--query", required=True, choices=sorted(QUERIES))
    parser.add_argument("--window-sec", type=int, default=10)
    parser.add_argument("--period-sec", type=int, default=2)
    parser.add_argument("--early-count", type=int, default=100)
    parser.add_argument("--delay-sec", type=int, default=3, help="occasional_delay_sec: q11's lateness is half")
    args = parser.parse_args()
    metadata = {"auction_skip": 123, "window_size_sec": args.window_sec, "window_period_sec": args.period_sec,
                "fanout": 5, "num_max_workers": 5, "max_log_events": args.early_count,
                "occasional_delay_sec": args.delay_sec, "max_auction_waiting_time": 600}
    with tempfile.TemporaryDirectory() as empty_dir, tempfile.TemporaryDirectory() as out_dir:
        empty = Path(empty_dir) / "none.json"
        empty.write_text("")
        start = time.perf_counter()
        run(str(empty), args.query, metadata, empty_dir)
        startup = time.perf_counter() - start
        start = time.perf_counter()
        lines = run(args.input, args.query, metadata, out_dir)
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "startup_s": startup, "outputs": [json.loads(x) for x in lines]}))


if __name__ == "__main__":
    main()
