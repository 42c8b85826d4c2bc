"""The pane log's batch steps without Spark: one key group of ``benchmarks/run.py``'s hopping case
(60 s windows every 1 s, the default trigger), what each micro-batch reads and writes of the state
store and how long its Python steps take.

    python benchmarks/pane_log.py [--rounds 5]

The group holds 62 keys (1,000 keys over 16 key groups), 1,000 events a second of event time over
all keys, micro-batches of 100 s of events, the watermark 5 s behind the largest time seen and a
batch behind, as on Spark.  The store is the tests' in-memory one (``tests/helpers.py``), which
counts each text read, written and removed: on Spark each is an entry the JVM's state store serves
one by one.  Run it from two trees (``PYTHONPATH=<tree>``) to compare state versions: the script
uses only what both offer (``part_log.run_part_log``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

BASE = 1_767_225_600_000
KEYS, BATCH_MS, BATCHES, RATE = 62, 100_000, 10, 62  # rows a second of event time in this group


def batches(seed: int = 1) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for b in range(BATCHES):
        n = BATCH_MS // 1000 * RATE
        ts = BASE + b * BATCH_MS + np.sort(rng.integers(0, BATCH_MS, n)) + rng.integers(-2_000, 2_001, n)
        keys = np.empty(n, dtype=object)
        keys[:] = [str(k) for k in rng.integers(0, KEYS, n)]
        out.append((keys, ts.astype(np.int64), rng.integers(1, 100, n).astype(np.int64)))
    return out


def run_once(data) -> dict:
    from accumulations import Sum
    from helpers import MemoryStore, table_engine_of
    from triggers import TriggerOption
    from windowed_operator import TimeWindows
    from windowed_operator.engine.columnar import Panes
    from windowed_operator.state.pane_log import PaneLog
    from windowed_operator.state.part_log import run_part_log

    class Counting(MemoryStore):  # (and the bytes of the texts read and written)
        def get_texts(self, domain, places):
            texts = super().get_texts(domain, places)
            self.calls["read bytes"] += sum(len(t) for t in texts if t)
            return texts

        def put_texts(self, domain, items):
            self.calls["written bytes"] += sum(len(t) for _, _, t in items)
            super().put_texts(domain, items)

    engine = table_engine_of(TimeWindows(60_000).slide_by(1_000), Sum(), TriggerOption.default(), 0)
    store, meta = Counting(), {}
    log = PaneLog(engine)
    watermark, seen, panes = BASE - 10_000, BASE, 0
    seconds, calls = [], []
    for keys, ts, values in data:
        out = Panes()

        def run(table, keys=keys, ts=ts, values=values, watermark=watermark, out=out):
            return engine.process(table, keys, ts, values, watermark, out, [], lambda i: None, processing_time=0)

        before = dict(store.calls)
        start = time.perf_counter()
        run_part_log(log, store, meta, watermark, run)
        seconds.append(time.perf_counter() - start)
        meta["wm"] = watermark
        calls.append({k: store.calls[k] - before.get(k, 0)
                      for k in ("get_text", "put_text", "remove_text", "read bytes", "written bytes")})
        panes += len(out)
        watermark, seen = seen - 5_000, int(ts.max())
    steady = slice(2, None)  # (the first batches fire nothing yet)
    return {"ms": statistics.median(seconds[steady]) * 1000,
            "entries": {k: statistics.median(c[k] for c in calls[steady]) for k in calls[0]},
            "held bytes": sum(len(t) for t in store.parts.values()), "panes": panes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from windowed_operator.state.layouts import STATE_VERSION

    data = batches()
    run_once(data)  # (warm-up)
    runs = [run_once(data) for _ in range(args.rounds)]
    ms = [r["ms"] for r in runs]
    last = runs[-1]
    e = last["entries"]
    print(f"state version {STATE_VERSION}: {statistics.median(ms):.2f} ms a batch ({min(ms):.2f}-{max(ms):.2f}); "
          f"a batch reads {e['get_text']:g} texts ({e['read bytes'] / 1000:.0f} KB), writes {e['put_text']:g} "
          f"({e['written bytes'] / 1000:.0f} KB), removes {e['remove_text']:g}; {last['held bytes'] / 1000:.0f} KB "
          f"held at the end; {last['panes']:,} panes out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
