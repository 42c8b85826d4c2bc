"""Session and window rows in row shards against per-key records in key shards, in Python, without Spark.

    python benchmarks/row_shards.py                  # every case, 3 rounds

A batch of the columnar paths on per-key records reads the touched keys' records, builds one table,
runs it, splits it per key and writes each record (``records.KeyRecords.run_batch``, with the
records in ``key_shards``, as Spark keeps them by default before row shards); on row shards it reads
the touched shards' column texts into one table, runs it and cuts it back into texts
(``row_shards.RowShardStore.run_batch``).  The store is a dict of texts (no JVM), so the figures are our
own Python per batch; the state entries and bytes a batch reads and writes (what the JVM's state
store is paid for) are counted too.  Cases: Nexmark q11's shape (sessions, early firings every N
elements, retracting; batches come back to most keys) and q12's (the global window fired by
processing time), sessions with a batch coming back to few keys of many, and hopping windows
with early firings (many rows a key; the case where the texts' encoding showed most).  Each round runs key
records then row shards on the same batches (seeded), after a warm-up; printed: the median over the
rounds' steady batches of the milliseconds a batch, its spread, and keys/rows as a ratio.

Results are recorded in ``benchmarks/results/row_shards.txt`` (``... | tee benchmarks/results/row_shards.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from key_records import TextStore  # noqa: E402

from accumulations import Count  # noqa: E402
from triggers import TriggerOption  # noqa: E402
from windowed_operator import GlobalWindow, SessionWindows, TimeWindows  # noqa: E402
from windowed_operator.engine.columnar import Panes  # noqa: E402
from windowed_operator import KeyedWindowedOperator  # noqa: E402
from windowed_operator.spark.plan.paths import build_table, table_engine  # noqa: E402
from windowed_operator.state.group_batch import StoreBatch, TableEngine  # noqa: E402
from windowed_operator.state.records import KeyRecords, columnar_records  # noqa: E402
from windowed_operator.spark.worker.gc_pause import collector_paused  # noqa: E402
from windowed_operator.state.group_state import GroupState  # noqa: E402
from windowed_operator.state.row_shards import RowShardStore  # noqa: E402

Q11 = (SessionWindows(10_000), TriggerOption.at_watermark().with_early_firings_at_every(count=5)
       .accumulating_and_retracting_fired_panes())
Q12 = (GlobalWindow(), TriggerOption.at_watermark().with_early_firings_at_every(duration=10_000))
#: Hopping windows with early firings (``run.py``'s ``ours hopping 60s/1s early``): every key holds
#: about 62 windows, every batch touches every key (the group's texts are read and written whole).
HOPPING = (TimeWindows(60_000).slide_by(1_000), TriggerOption.at_watermark().with_early_firings_at_every(count=100)
           .accumulating_fired_panes())
CASES: dict[str, tuple[Any, Any, int, int]] = {  # window, trigger, keys held, keys a batch touches
    "q11 shape: 2,500 keys, 2,000 touched": (*Q11, 2_500, 2_000),
    "q12 shape: 2,500 keys, 2,500 touched": (*Q12, 2_500, 2_500),
    "sessions, 100,000 keys, 5,000 touched": (*Q11, 100_000, 5_000),
    "hopping 60 s / 1 s early: 150 keys, all touched": (*HOPPING, 150, 150),
}


class CountingStore(TextStore):
    """The text store, counting the entries and bytes a batch reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.entries = self.bytes = 0

    def get_texts(self, domain: str, places: list) -> list:
        texts = super().get_texts(domain, places)
        self.entries += len(places)
        self.bytes += sum(len(t) for t in texts if t)
        return texts

    def put_texts(self, domain: str, items: list) -> None:
        self.entries += len(items)
        self.bytes += sum(len(text) for _, _, text in items)
        super().put_texts(domain, items)


def run_case(case: str, layout: str, batches: int, seed: int) -> list[tuple[float, int, int]]:
    """(seconds, entries, bytes) per steady batch."""
    window, trigger, held, touched = CASES[case]
    op = KeyedWindowedOperator(window, Count(), trigger=trigger, allowed_lateness=60_000)
    engine = build_table(table_engine(op), op)  # (the rule production runs)
    records = columnar_records(engine)
    store = CountingStore()
    names = np.array([f"k{i:07d}" for i in range(held)], dtype=object)
    rng = np.random.default_rng(seed)
    out = []
    for b in range(batches + 2):
        chosen = names if b == 0 else names[rng.choice(held, touched, replace=False)]
        now = b * 1_000
        stamps = now + rng.integers(0, 1_000, len(chosen))
        watermark = now - 2_000
        order = np.argsort(chosen, kind="stable")
        keys = chosen[order]

        def run(table: Any) -> Any:
            panes = Panes()
            table = engine.on_processing_time(engine.on_watermark(table, watermark, panes), now, panes)
            return engine.process(table, keys, stamps[order], None, watermark, panes, [], lambda i: None,
                                  processing_time=now)

        store.entries = store.bytes = 0
        start = time.perf_counter()
        with collector_paused():
            group = GroupState(store, records.codec, {"operator": case}, case,
                               sharded=layout == "keys")
            layout_store = KeyRecords(records) if layout == "keys" else RowShardStore(store, engine, records.codec.kind)
            layout_store.run_batch(StoreBatch(group, keys.tolist(), watermark, now), TableEngine(run))
            group.save(wm=watermark)
        if b > 1:  # (the first batch creates every key, the second learns how many a batch touches)
            out.append((time.perf_counter() - start, store.entries, store.bytes))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(argv)
    cases = [c for c in CASES if c in args.cases.split(",")] or list(CASES)
    run_case(cases[0], "keys", 2, 99)  # warm-up
    run_case(cases[0], "rows", 2, 99)
    print(f"ms a steady batch (median over {args.rounds} rounds x {args.batches} batches, [min-max]); "
          "entries and KB read + written a batch")
    for case in cases:
        figures: dict[str, list] = {"keys": [], "rows": []}
        for r in range(args.rounds):  # (interleaved: keys, rows, keys, rows, ...)
            for layout in figures:
                figures[layout] += run_case(case, layout, args.batches, r)
        line = []
        for layout, runs in figures.items():
            ms = [s * 1e3 for s, _, _ in runs]
            line.append(f"{layout}: {statistics.median(ms):7.1f} [{min(ms):.1f}-{max(ms):.1f}] ms, "
                        f"{statistics.median(e for _, e, _ in runs):,.0f} entries, "
                        f"{statistics.median(b for _, _, b in runs) / 1024:,.0f} KB")
        ratio = statistics.median(s for s, _, _ in figures["keys"]) / statistics.median(
            s for s, _, _ in figures["rows"])
        print(f"{case}\n  " + "\n  ".join(line) + f"\n  keys/rows: {ratio:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
