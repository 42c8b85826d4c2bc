"""The window log's batch steps on Nexmark q8's people and auctions, without Spark: its parts in
state version 8's form (a join's inputs by column, ``record_columns``) against version 7's
(every accumulator by value), interleaved in one process.

    python benchmarks/nexmark/window_log_steps.py [--events 2000000] [--batches 10] [--rounds 5]

Every person and auction of the stream goes to one key group, in ``--batches`` micro-batches by
arrival; each batch first fires the windows its watermark (the largest event time before it less
the stream's disorder bound) expires, then appends its rows (``WindowLog.run_batch``, as the Spark
processor calls it, with the collector paused, on an in-memory store).  Both forms must give the same panes.

Results are recorded in ``benchmarks/results/nexmark_window_log_steps.txt`` (``... | tee benchmarks/results/nexmark_window_log_steps.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from types import SimpleNamespace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: this package
sys.path.insert(0, str(HERE.parent.parent))  # the library, when run from a clone

from nexmark import queries as Q  # noqa: E402
from nexmark.generator import NexmarkConfig, generate  # noqa: E402
from timing import alternating  # noqa: E402

from accumulations.merge import SidedValues  # noqa: E402
from windowed_operator.spark.worker.gc_pause import collector_paused  # noqa: E402
from windowed_operator.engine.range_ops import factorize  # noqa: E402
from windowed_operator.time import MAX_TIMESTAMP, MIN_TIMESTAMP  # noqa: E402
from windowed_operator.state.group_batch import KeyEngine, StoreBatch  # noqa: E402
from windowed_operator.state.window_log import ArrayElements, WindowLog  # noqa: E402
from windowed_operator.engine.build import build_core


class _Store:
    """One key group's parts in a dict (what the Spark store keeps in its map state)."""

    def __init__(self) -> None:
        self.texts: dict = {}

    def get_texts(self, domain: str, places: list) -> list:
        return [self.texts.get((domain, b, p)) for b, p in places]

    def put_texts(self, domain: str, items: list) -> None:
        for b, p, text in items:
            self.texts[(domain, b, p)] = text

    def remove_texts(self, domain: str, places: list) -> None:
        for b, p in places:
            del self.texts[(domain, b, p)]


def _batches(stream: NexmarkConfig, n: int) -> list[tuple[pd.DataFrame, ArrayElements]]:
    events = generate(stream)
    people = events.persons[["id", "name", "dateTime", "arrival"]].assign(left=True, key=events.persons.id)
    auctions = events.auctions[["id", "seller", "reserve", "dateTime", "arrival"]].assign(
        left=False, key=events.auctions.seller)
    rows = pd.concat([people, auctions]).sort_values("arrival", kind="stable")
    out = []
    bounds = np.linspace(0, len(rows), n + 1).astype(int)
    for batch in (rows.iloc[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])):
        left = batch.left.to_numpy(dtype=bool)
        values = np.empty(len(batch), dtype=object)
        values[np.flatnonzero(left)] = batch[left][Q.PERSON_COLUMNS].to_dict("records")
        values[np.flatnonzero(~left)] = batch[~left][Q.AUCTION_COLUMNS].to_dict("records")
        codes, uniques = factorize(batch.key.to_numpy())
        out.append((batch, ArrayElements(uniques.tolist(), codes, batch.dateTime.to_numpy(dtype=np.int64),
                                         SidedValues(left, values), lambda i: None)))
    return out


def run(core: Any, batches: list, disorder: int, by_column: bool) -> tuple[float, list]:
    store, meta, panes = _Store(), {}, []
    log = WindowLog(core, store=store)
    log.keeps_inputs = by_column
    record = SimpleNamespace(meta=meta)  # (a log reads only the group's record)
    watermark = high = MIN_TIMESTAMP
    start = time.perf_counter()
    for frame, arrays in batches:
        with collector_paused():  # (as the Spark processor runs a key group's call)
            fired = log.run_batch(StoreBatch(record, [], watermark, 0), KeyEngine(core, arrays=arrays)).by_phase[0]
        panes += fired.outputs
        meta["wm"] = watermark
        high = max(high, int(frame.dateTime.max()))
        watermark = high - disorder
    with collector_paused():
        fired = log.run_batch(StoreBatch(record, [], MAX_TIMESTAMP, 0), KeyEngine(core)).by_phase[0]
    panes += fired.outputs
    return time.perf_counter() - start, panes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    stream = NexmarkConfig(events=args.events)
    config = Q.QueryConfig(max_disorder_ms=stream.max_disorder_ms)
    core = build_core(Q.operator("q8", config))
    batches = _batches(stream, args.batches)
    forms = {"by value (v7)": False, "by column (v8)": True}
    results = {}
    for name, by_column in forms.items():  # warm-up, and the panes each form gives
        results[name] = run(core, batches, stream.max_disorder_ms, by_column)[1]
    same = [(p.key, p.window_start, p.value) for p in results["by value (v7)"]] == \
        [(p.key, p.window_start, p.value) for p in results["by column (v8)"]]
    timings = alternating(lambda by_column: run(core, batches, stream.max_disorder_ms, by_column)[0], args.rounds)
    seconds = {name: timings[by_column] for name, by_column in forms.items()}
    print(f"q8 window log, {args.events:,} events ({sum(len(f) for f, _ in batches):,} people and auctions), "
          f"{args.batches} batches, one key group, {args.rounds} rounds interleaved; "
          f"{len(results['by column (v8)']):,} panes, equal in both forms: {same}")
    for name, values in seconds.items():
        print(f"  {name:15s} median {statistics.median(values):.3f} s  ({min(values):.3f}-{max(values):.3f})")
    v7, v8 = (statistics.median(seconds[n]) for n in forms)
    print(f"  by column / by value: {v7 / v8:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
