"""The columnar tables' own time per micro-batch, without Spark: what our Python code costs in a batch.

    python benchmarks/columnar_tables.py            # 2M events, 200K a batch, 1K keys, 3 runs a case

The stream is ``run.py``'s (event time advancing 1 s per 1,000 rows, up to 2 s of disorder, 1K
keys, a bounded-disorder watermark 5 s behind): each batch is handed to the table the Spark
processor would use, as the processor hands it (windows assigned by timestamp: folded per (key,
pane) as the scan stage's pre-aggregation does; sessions: the rows), then the end of input fires and
purges everything.  Printed: seconds in the table for the whole stream (median of the runs, spread),
per batch, and the panes emitted.  Set against ``run.py``'s figures, the difference is Spark's
(the scan, the shuffle, transformWithState and its Arrow transfer, the state store).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/run.py, run as a script
from run import DELAY_MS, generate  # noqa: E402
from timing import spread  # noqa: E402

from accumulations import Sum  # noqa: E402
from triggers import TriggerOption  # noqa: E402
from windowed_operator import SessionWindows, TimeWindows  # noqa: E402
from windowed_operator.engine.columnar import PaneTable, Panes  # noqa: E402
from windowed_operator import KeyedWindowedOperator  # noqa: E402
from windowed_operator.spark.plan.paths import build_table, table_engine  # noqa: E402
from windowed_operator.engine.columnar_triggers import RowTable, TriggeredRows  # noqa: E402

WINDOWS = {"tumbling 10 s": TimeWindows(10_000), "hopping 60 s / 1 s": TimeWindows(60_000).slide_by(1_000),
           "sessions 30 s": SessionWindows(30_000)}
EARLY = TriggerOption.at_watermark().with_early_firings_at_every(count=100)
TRIGGERS = {"default": TriggerOption.default(), "early": EARLY.accumulating_fired_panes(),
            "retracting": EARLY.accumulating_and_retracting_fired_panes()}


def run_case(window: Any, trigger: TriggerOption, df: pd.DataFrame, per_batch: int) -> tuple[float, int]:
    """Seconds spent in the table over the whole stream, and the panes it emitted."""
    op = KeyedWindowedOperator(window, Sum(), trigger=trigger, value="amount")
    engine = build_table(table_engine(op), op)  # (the rule production runs)
    table: Any = RowTable() if isinstance(engine, TriggeredRows) else PaneTable()
    layout = window.pane_layout()
    watermark, spent, panes = 0, 0.0, 0
    for lo in range(0, len(df), per_batch):
        batch = df.iloc[lo:lo + per_batch]
        out = Panes()
        if layout is not None:  # (what the scan stage's pre-aggregation sends)
            folded = (batch.assign(pane=layout.pane_start(batch.ts_ms.to_numpy()))
                      .groupby(["key", "pane"], sort=False).amount.agg(["sum", "count"]).reset_index())
            start = time.perf_counter()
            table, _ = engine.process_partials(table, folded.key.to_numpy(dtype=object), folded.pane.to_numpy(),
                                               folded["count"].to_numpy(), [folded["sum"].to_numpy()], watermark,
                                               out, processing_time=0)
        else:
            start = time.perf_counter()
            table = engine.process(table, batch.key.to_numpy(dtype=object), batch.ts_ms.to_numpy(),
                                   batch.amount.to_numpy(), watermark, out, [], lambda i: None, processing_time=0)
        spent += time.perf_counter() - start
        panes += len(out)
        watermark = int(batch.ts_ms.max()) - DELAY_MS
    out = Panes()
    start = time.perf_counter()
    table = engine.on_watermark(table, 2 ** 62, out)
    spent += time.perf_counter() - start
    assert len(table) == 0
    return spent, panes + len(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    df = generate(args.events, args.keys)
    batches = -(-args.events // args.batch)
    print(f"{args.events:,} events, {args.batch:,} a batch ({batches} batches), {args.keys:,} keys; "
          f"{args.runs} runs a case after a warm-up; Sum")
    print(f"{'case':<40} {'seconds (spread)':>22} {'per batch':>10} {'panes':>10}")
    run_case(WINDOWS["tumbling 10 s"], TRIGGERS["early"], df.iloc[:args.batch], args.batch)  # warm-up
    for window_name, window in WINDOWS.items():
        for trigger_name, trigger in TRIGGERS.items():
            times, panes = [], 0
            for _ in range(args.runs):
                seconds, panes = run_case(window, trigger, df, args.batch)
                times.append(seconds)
            figures = spread(times)
            print(f"{window_name + ', ' + trigger_name:<40} {figures.text():>22} "
                  f"{figures.median / batches:>10.3f} {panes:>10,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
