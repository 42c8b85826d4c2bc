"""The object engine's pane emission without Spark: a hopping count (10 s windows every 2 s) with early
firings after every element and retractions, 40,000 elements over 200 keys in batches of 2,000, through
the local runner.  Prints the seconds and the panes (the panes must be the same from any tree).

    PYTHONPATH=<tree> python benchmarks/pane_emission.py
"""
from __future__ import annotations

import random
import time
import warnings

from accumulations import Count
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.runners.local import LocalRunner


def main() -> None:
    warnings.simplefilter("ignore")
    rng = random.Random(1)
    trigger = TriggerOption.at_watermark().with_early_firings_at_every(count=1)
    op = KeyedWindowedOperator(TimeWindows(10_000).slide_by(2_000), Count(), key="key", timestamp="ts",
                               trigger=trigger.accumulating_and_retracting_fired_panes(),
                               watermark=bounded_disorder(1000))
    events = [{"key": f"k{rng.randint(0, 200)}", "ts": i * 5 + rng.randint(0, 500)} for i in range(40_000)]
    start = time.perf_counter()
    runner = LocalRunner(op)
    for i in range(0, len(events), 2000):
        runner.add_elements(*events[i:i + 2000])
    runner.finish()
    print(f"pane emission: {time.perf_counter() - start:.3f} s, {len(runner.outputs)} panes")


if __name__ == "__main__":
    main()
