"""Join ad impressions with clicks per 1-minute window, then the click-through rate per campaign.

Two streams: impressions (an ad shown: ad_id, campaign, ts) and clicks (ad_id, ts: 1-15 s after
their impression; 5% of them arrive 2.5 minutes late, behind the watermark).  A keyed merge operator left-outer-joins them per
ad_id in 1-minute windows, with the slower stream's watermark; its panes feed a one-input operator
without a window option, which keeps those windows and averages "clicked" per campaign: the CTR per
campaign and minute.  A click whose impression fell into the previous minute does not join (this is
a windowed join); it is counted, not lost.

    python examples/ad_click_join.py            # the chain in the local runner
    python examples/ad_click_join.py --spark    # the chain on local Spark too (one query), checked against it
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from accumulations import Mean
from accumulations.merge import LeftOuterJoin
from windowed_operator import (KeyedWindowedMergeOperator, KeyedWindowedOperator, TimeWindows, TimestampedValue,
                               bounded_disorder)
from windowed_operator.merge_operator import InputOptions
from windowed_operator.testing import TwoInputTestStream

MINUTE = 60_000
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CAMPAIGNS = {"spring-sale": 0.12, "new-phone": 0.05, "free-shipping": 0.20}


def generate(n_impressions: int = 600, seed: int = 7) -> tuple[list[dict], list[dict]]:
    """Impressions over 10 minutes and the clicks they get (each campaign has its own true CTR)."""
    rng = random.Random(seed)
    impressions, clicks = [], []
    for i in range(n_impressions):
        campaign = rng.choice(sorted(CAMPAIGNS))
        ts = START + rng.randrange(10 * MINUTE)
        impressions.append({"ad_id": f"ad-{i:05d}", "campaign": campaign, "ts": ts})
        impressions[-1]["arrival"] = ts
        if rng.random() < CAMPAIGNS[campaign]:
            click_ts = ts + rng.randrange(1_000, 15_000)
            arrival = click_ts if rng.random() < 0.95 else click_ts + 150_000
            clicks.append({"ad_id": f"ad-{i:05d}", "ts": click_ts, "arrival": arrival})
    return impressions, clicks


def clicked_per_impression(impression: dict, click: dict | None) -> dict:
    return {"campaign": impression["campaign"], "clicked": click is not None}


def join_operator() -> KeyedWindowedMergeOperator:
    return KeyedWindowedMergeOperator(
        TimeWindows(MINUTE), LeftOuterJoin(clicked_per_impression, result_type="struct<campaign:string,clicked:boolean>"),
        key="ad_id", timestamp="ts", watermark=bounded_disorder(10_000),
        left=InputOptions(), right=InputOptions(), on_bad_element="dead_letter")


def campaign_of(pane) -> str:
    return pane.value[0]["campaign"]  # an ad_id's pane: its impression paired with its clicks (or None)


def was_clicked(pane) -> float:
    return 1.0 if any(pair["clicked"] for pair in pane.value) else 0.0


def ctr_operator() -> KeyedWindowedOperator:
    """No window option: keeps the join's 1-minute windows (window propagation).  On Spark the key
    and value come from callables, so their Spark types are given."""
    return KeyedWindowedOperator(None, Mean(), key=campaign_of, value=was_clicked, on_bad_element="dead_letter",
                                 key_type="string", value_type="double")


def arrival_batches(rows: list[dict], batch_ms: int = 2 * MINUTE, n: int = 8) -> list[list[dict]]:
    """Rows by arrival time in 2-minute micro-batches (the same batches locally and on Spark)."""
    return [sorted((r for r in rows if START + i * batch_ms <= r["arrival"] < START + (i + 1) * batch_ms),
                   key=lambda r: r["arrival"]) for i in range(n)]


def stream_of(impressions: list[dict], clicks: list[dict]) -> TwoInputTestStream:
    stream = TwoInputTestStream()
    for left, right in zip(arrival_batches(impressions), arrival_batches(clicks)):
        stream.add_elements_from_both(left, right)
    return stream


def joined_clicks(panes) -> dict:
    """(ad_id, window start in ms) -> whether the impression was clicked, for windows with an impression."""
    return {(p.key, p.window_start): any(pair["clicked"] for pair in p.value) for p in panes if p.value}


def run_local(impressions: list[dict], clicks: list[dict]) -> dict:
    chain = join_operator().then(ctr_operator()).local_runner()
    panes = chain.run(stream_of(impressions, clicks))
    join_runner = chain.runners[0]
    return {
        "ctr": final_values((p.key, p.window_start, p.index, p.value) for p in panes if not p.is_retraction),
        "joined": joined_clicks(join_runner.outputs),
        "join_panes": len(join_runner.outputs),
        "unjoined_clicks": chain.runners[1].dropped_counts["missing_key"],
        "late_clicks": join_runner.dropped_counts["expired"],
    }


def final_values(panes) -> dict:
    """(campaign, window start) -> the value of its last pane, from (key, window start, pane index, value)."""
    last: dict = {}
    for key, start, index, value in panes:
        if (key, start) not in last or index > last[(key, start)][0]:
            last[(key, start)] = (index, value)
    return {window: value for window, (_, value) in last.items()}


def print_report(result: dict) -> None:
    print(f"{'minute':>6}  " + "  ".join(f"{c:>13}" for c in sorted(CAMPAIGNS)))
    minutes = sorted({w for _, w in result["ctr"]})
    for w in minutes:
        cells = [result["ctr"].get((c, w)) for c in sorted(CAMPAIGNS)]
        print(f"{(w - START) // MINUTE:>6}  " + "  ".join(f"{'-' if v is None else f'{v:.1%}':>13}" for v in cells))
    print(f"join panes: {result['join_panes']}, clicks without an impression in their window: "
          f"{result['unjoined_clicks']}, clicks beyond the watermark (dropped, counted): {result['late_clicks']}")


def run_spark(impressions: list[dict], clicks: list[dict]) -> dict:
    """The chain on local Spark, both stages in one streaming query: one JSON file per 2-minute batch
    of each input (read one file per micro-batch), an end-of-input marker row last; returns the CTR
    per (campaign, window start) of the last pane of each window."""
    import json
    import os

    from windowed_operator.spark import END_OF_INPUT, local_session

    work = Path(tempfile.mkdtemp(prefix="ad-click-join-"))
    spark = local_session(app_name="ad-click-join", spark_log=str(work / "spark.log"))  # Spark's output: not ours
    for side, rows in (("impressions", impressions), ("clicks", clicks)):
        (work / side).mkdir()
        batches = [*arrival_batches(rows), [{"end_of_input": True, "ts": END_OF_INPUT}]]
        for i, batch in enumerate(batches):
            path = work / side / f"part-{i:03d}.json"
            path.write_text("".join(json.dumps(r) + "\n" for r in batch))
            os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    left = (spark.readStream.schema("ad_id string, campaign string, ts bigint, end_of_input boolean")
            .option("maxFilesPerTrigger", 1).json(str(work / "impressions")))
    right = (spark.readStream.schema("ad_id string, ts bigint, end_of_input boolean").option("maxFilesPerTrigger", 1)
             .json(str(work / "clicks")))
    out = join_operator().then(ctr_operator()).apply(left, right, end_of_input="end_of_input")
    query = (out.writeStream.format("memory").queryName("ad_click_ctr")
             .option("checkpointLocation", str(work / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.sql("select key, unix_millis(window_start) as ws, pane_index, value from ad_click_ctr "
                     "where record_type = 'pane' and not is_retraction").collect()
    spark.stop()
    return final_values((r["key"], r["ws"], r["pane_index"], r["value"]) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spark", action="store_true", help="also run the chain on local Spark")
    parser.add_argument("--impressions", type=int, default=600)
    args = parser.parse_args(argv)
    impressions, clicks = generate(args.impressions)
    print(f"{len(impressions)} impressions, {len(clicks)} clicks over 10 minutes")
    result = run_local(impressions, clicks)
    print_report(result)
    if args.spark:
        ctr = run_spark(impressions, clicks)
        same = ctr == result["ctr"]
        print(f"Spark (join and CTR in one query): {len(ctr)} CTR values per campaign and minute, "
              f"{'equal to' if same else 'DIFFERENT FROM'} the local runner's")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
