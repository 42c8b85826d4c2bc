"""What the per-key state records cost in Python per touched key, without Spark.

    python benchmarks/key_records.py                  # 20,000 touched keys a batch, 3 runs a case

A micro-batch of the columnar paths reads each touched key's record (JSON text), builds one table
of the keys' rows, runs the table, splits it back per key and writes each key's record again
(``records.KeyRecords.run_batch``).  Here the store is a dict of texts (no JVM): what is
left is our own decoding, building, splitting and encoding, which ``state_scale.py`` and Nexmark
pay per touched key on top of Spark's state store calls.  Cases are the state-scale benchmark's
(tumbling 1 h Sum, sessions 30 min Count: the default trigger; hopping 1 h / 10 min Sum with early
firings every 100 elements, retracting) and Nexmark q5r's first stage (hopping 10 s / 2 s Count,
early every 100, retracting).  Printed per case: microseconds per touched key for each step
(median over the steady batches of the runs, after a warm-up run).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accumulations import Count, Sum  # noqa: E402
from triggers import TriggerOption  # noqa: E402
from windowed_operator import SessionWindows, TimeWindows  # noqa: E402
from windowed_operator.engine.columnar import Panes  # noqa: E402
from windowed_operator import KeyedWindowedOperator  # noqa: E402
from windowed_operator.spark.plan.paths import build_table, table_engine  # noqa: E402
from windowed_operator.state.group_batch import StoreBatch, TableEngine  # noqa: E402
from windowed_operator.state.records import KeyRecords, columnar_records  # noqa: E402
from windowed_operator.spark.worker.gc_pause import collector_paused  # noqa: E402
from windowed_operator.state.group_state import GroupState  # noqa: E402

EARLY = TriggerOption.at_watermark().with_early_firings_at_every(count=100).accumulating_and_retracting_fired_panes()
HOUR = 3_600_000
CASES: dict[str, tuple[Any, Any, Any, int]] = {  # window, accumulation, trigger, event time per batch (ms)
    "tumbling 1 h, Sum": (TimeWindows(HOUR), Sum(), TriggerOption.default(), 1_000),
    "sessions 30 min, Count": (SessionWindows(HOUR // 2), Count(), TriggerOption.default(), 1_000),
    "hopping 1 h / 10 min, early, retracting": (TimeWindows(HOUR).slide_by(HOUR // 6), Sum(), EARLY, 1_000),
    "q5r: hopping 10 s / 2 s, Count, early": (TimeWindows(10_000).slide_by(2_000), Count(), EARLY, 2_000),
}


class TextStore:
    """One key group's records as texts in dicts (the Spark store's interface, no JVM)."""

    def __init__(self) -> None:
        self.meta: Any = None
        self.keys: dict = {}
        self.parts: dict = {}

    def get_meta(self) -> Any:
        return self.meta

    def put_meta(self, text: str) -> None:
        self.meta = text

    def get_keys(self, keys: list) -> list:
        return [self.keys.get(k) for k in keys]

    def put_keys(self, items: list) -> None:
        self.keys.update(items)

    def remove_keys(self, keys: list) -> None:
        for k in keys:
            self.keys.pop(k, None)

    def get_parts(self, domain: str, places: list) -> list:
        return [list(self.parts.get((domain, bucket, part), [])) for bucket, part in places]

    def put_parts(self, domain: str, items: list) -> None:
        for bucket, part, entries in items:
            self.parts[(domain, bucket, part)] = list(entries)

    def remove_parts(self, domain: str, places: list) -> None:
        for bucket, part in places:
            self.parts.pop((domain, bucket, part), None)

    def get_texts(self, domain: str, places: list) -> list:
        return [self.parts.get((domain, bucket, part)) for bucket, part in places]

    def put_texts(self, domain: str, items: list) -> None:
        self.parts.update({(domain, bucket, part): text for bucket, part, text in items})

    def remove_texts(self, domain: str, places: list) -> None:
        for bucket, part in places:
            self.parts.pop((domain, bucket, part), None)


class Timed:
    """Wraps a method, adding its time to a named step of the current batch."""

    def __init__(self, steps: dict[str, float]) -> None:
        self.steps = steps

    def wrap(self, name: str, method: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.steps[name] = self.steps.get(name, 0.0) + time.perf_counter() - start
        return timed


def run_case(case: str, keys: int, touched: int, batches: int, seed: int,
             paused: bool = True) -> list[dict[str, float]]:
    window, accumulation, trigger, step_ms = CASES[case]
    op = KeyedWindowedOperator(window, accumulation, trigger=trigger, value="v")
    engine = build_table(table_engine(op), op)  # (the rule production runs)
    records = columnar_records(engine)
    store = TextStore()
    names = np.array([f"k{i:07d}" for i in range(keys)], dtype=object)
    rng = np.random.default_rng(seed)
    base, watermark = 10 * HOUR, 10 * HOUR - 60_000
    per_batch = []
    for b in range(batches + 1):
        chosen = names if b == 0 else names[rng.integers(0, keys, touched)]
        stamps = base + b * step_ms + rng.integers(0, step_ms, len(chosen))
        values = rng.integers(1, 100, len(chosen)).astype(np.int64)
        steps: dict[str, float] = {}
        timer = Timed(steps)
        group = GroupState(store, records.codec, {"operator": case}, case)
        group.preload = timer.wrap("read + decode", group.preload)  # type: ignore[method-assign]
        group.commit = timer.wrap("encode + write", group.commit)  # type: ignore[method-assign]
        build, split = records.build, records.split
        records.build = timer.wrap("build table", build)  # type: ignore[method-assign]
        records.split = timer.wrap("split table", split)  # type: ignore[method-assign]
        order = np.argsort(chosen, kind="stable")
        batch_keys = chosen[order]

        def run(table: Any) -> Any:
            start = time.perf_counter()
            out = Panes()
            table = engine.on_watermark(table, watermark, out)
            table = engine.process(table, batch_keys, stamps[order], values[order], watermark, out, [],
                                   lambda i: None, processing_time=0)
            steps["table"] = time.perf_counter() - start
            return table

        start = time.perf_counter()
        with collector_paused() if paused else nullcontext():
            KeyRecords(records).run_batch(StoreBatch(group, batch_keys.tolist(), watermark, 0), TableEngine(run))
            group.save(wm=watermark)
        steps["total"] = time.perf_counter() - start
        records.build, records.split = build, split
        if b > 0:
            per_batch.append({name: seconds / touched * 1e6 for name, seconds in steps.items()})
    return per_batch


STEPS = ("read + decode", "build table", "table", "split table", "encode + write", "total")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000, help="keys with state")
    parser.add_argument("--touched", type=int, default=20_000, help="rows per batch, on random keys")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--collector", choices=("paused", "running", "both"), default="both",
                        help="Python's cyclic GC during a batch: paused as the Spark processor does, or running")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if c in args.cases.split(",")] or list(CASES)
    print(f"{args.keys:,} keys with state, {args.touched:,} rows a batch on random keys, {args.batches} steady "
          f"batches, {args.runs} runs; microseconds per row of a batch (median over batches and runs)")
    print(f"{'case':<52}" + "".join(f"{s:>15}" for s in STEPS))
    run_case(cases[0], 2_000, 500, 2, 0)  # warm-up
    modes = {"paused": [True], "running": [False], "both": [False, True]}[args.collector]
    for case in cases:
        figures: dict[bool, list] = {paused: [] for paused in modes}
        for run in range(args.runs):  # (interleaved: running, paused, running, paused, ...)
            for paused in modes:
                figures[paused] += run_case(case, args.keys, args.touched, args.batches, run, paused)
        for paused in modes:
            label = f"{case}, GC {'paused' if paused else 'running'}"
            print(f"{label:<52}" + "".join(f"{statistics.median(f.get(s, 0.0) for f in figures[paused]):>15.1f}"
                                           for s in STEPS), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
