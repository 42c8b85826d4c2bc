"""The three ways rows reach the stateful processor, on two windowed joins of the same stream that
differ in how many rows reach the operator: q8 (people and auctions, 8% of the events) and each
auction joined with the bids placed in its opening window (auctions and bids, 98%).

    python benchmarks/nexmark/packing_crossover.py                  # 2M events, 3 rounds
    python benchmarks/nexmark/packing_crossover.py --events 200000 --runs 1

- row by row: pyspark's own regrouping, a tuple per row (``handoff.row_by_row``);
- packed: a Python pass in every scan task packs each key group's rows (``packed_input``), at a
  cost per task, to spare the stateful task pyspark's work per row;
- sliced: the workers hand each key group's rows over as slices of Arrow batches
  (``sliced_handoff``), the default of a local session.

Per join: a warm-up, then ``--runs`` rounds of the three, in turn in that order and reversed, each
checked against a pandas model; prints each run, the rows the operator received, the medians and
the ratios round by round.

Results are recorded in ``benchmarks/results/nexmark_q8_bound_and_packing.txt`` (``... | tee benchmarks/results/nexmark_q8_bound_and_packing.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark import cloudpickle

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from timing import interleaved, ratios, spread  # noqa: E402

# the join function runs on Spark's Python workers, which cannot import this package
cloudpickle.register_pickle_by_value(sys.modules[__name__])

PACK_CONF = "spark.windowed_operator.packInput"
JOINS = ("q8", "auction-bids")


def bid_price(auction: dict, bid: dict) -> int:
    return bid["price"]


def auction_bids_operator(config: Q.QueryConfig) -> Any:
    """Each auction joined with the bids on it in the tumbling window in which it opened: a pane per
    auction and window, the prices of those bids."""
    from accumulations.merge import InnerJoin
    from windowed_operator import KeyedWindowedMergeOperator, TimeWindows, bounded_disorder
    from windowed_operator.merge_operator import InputOptions

    return KeyedWindowedMergeOperator(
        TimeWindows(config.window_ms), InnerJoin(bid_price, result_type="bigint"), timestamp="dateTime",
        watermark=bounded_disorder(config.max_disorder_ms), left=InputOptions(key="id"),
        right=InputOptions(key="auction"), name="auction bids")


def auction_bids_model(auctions: pd.DataFrame, bids: pd.DataFrame, config: Q.QueryConfig) -> set:
    """(window start, auction, price) with multiplicity, from all events."""
    a = auctions.assign(start=auctions.dateTime - auctions.dateTime % config.window_ms)
    b = bids.assign(start=bids.dateTime - bids.dateTime % config.window_ms)
    joined = a.merge(b, left_on=["start", "id"], right_on=["start", "auction"], suffixes=("", "_bid"))
    return Q._multiset((int(s), int(i), int(p)) for s, i, p in joined[["start", "id", "price"]].itertuples(index=False))


def apply(join: str, config: Q.QueryConfig, events: Any) -> Any:
    if join == "q8":
        return S.ours("q8", config, events)
    return auction_bids_operator(config).apply(S._kind(events, "itemName", Q.AUCTION_COLUMNS),
                                               S._kind(events, "auction", Q.BID_COLUMNS), end_of_input=S.END_COLUMN)


def result(join: str, rows: list) -> set:
    panes = S.ours_panes(rows, join)
    if join == "q8":
        return Q.final_result("q8", panes)
    return Q._multiset((int(p.start), int(p.key), int(price)) for p in panes for price in p.value)


def model(join: str, events: Any, config: Q.QueryConfig) -> set:
    if join == "q8":
        return Q.model("q8", events.persons, events.auctions, events.bids, config)
    return auction_bids_model(events.auctions, events.bids, config)


def operator_rows(join: str, events: Any) -> int:
    return len(events.persons) + len(events.auctions) if join == "q8" else len(events.auctions) + len(events.bids)


#: The handoffs, in the order of a round (reversed every other round).
HANDOFFS = S.HANDOFFS


def run(spark: Any, join: str, config: Q.QueryConfig, directory: Path, checkpoint: Path, handoff: str) -> S.Run:
    with S.handoff(spark, handoff):
        out = apply(join, config, S.source(spark, directory))
    return S.run_to_end(out, checkpoint)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    work, events, spark, config = S.prepared(args.events, "packing-crossover")

    def timed(join: str, handoff: str) -> float:
        done = run(spark, join, config, work / "events", work / f"ckpt-{join}-{time.monotonic_ns()}", handoff)
        if result(join, done.rows) != model(join, events, config):
            raise AssertionError(f"{join} handed over {handoff}: the result differs from the model")
        return done.seconds

    print(f"{args.events:,} events in 10 micro-batches, local[2]; {args.runs} rounds a join, order alternating")
    for join in JOINS:
        timed(join, "sliced")  # a warm-up
        seconds = interleaved([(handoff, lambda handoff=handoff: timed(join, handoff)) for handoff in HANDOFFS],
                              args.runs, alternate=True, report=lambda handoff, _, taken: print(
                                  f"{join} {handoff:<10} {taken:6.2f} s", flush=True))
        medians = ", ".join(f"{handoff} {spread(seconds[handoff]).text()} s" for handoff in HANDOFFS)
        print(f"== {join}: {operator_rows(join, events):,} rows into the operator; {medians}; "
              f"packed / row by row {ratios(seconds['packed'], seconds['row by row']).text()}x, "
              f"sliced / row by row {ratios(seconds['sliced'], seconds['row by row']).text()}x, "
              f"sliced / packed {ratios(seconds['sliced'], seconds['packed']).text()}x", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
