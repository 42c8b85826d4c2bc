"""Run one example pipeline on data it generates: ``python examples/pipelines/run.py NAME [--spark]``.

NAME is one of the YAML files here (clickstream_sessions, iot_sliding_average, fraud_per_record,
cumulative_revenue, ad_click_join, session_summary, sensor_outage, sessions_table).  The data goes to ``data/NAME/<source>/`` next to the file, one
file per micro-batch; the last one holds an end-of-input marker row (``end_of_input`` true, the column
the YAML file's source names) so that Spark closes the last windows.
Without ``--spark`` the pipeline runs in the local runner (seconds); with it, on local Spark through
``windowed-operator run`` (the same as running the YAML file yourself).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pandas as pd

HERE = Path(__file__).resolve().parent
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
END_OF_INPUT = 9_000_000_000_000


def write_batches(directory: Path, batches: list[list[dict]], fmt: str) -> None:
    """One file per batch, then one with the end-of-input marker row (its time only matters under an
    upstream watermark).  CSV files carry every column, the marker's too (Spark maps CSV columns by
    position); JSON and parquet files leave out what a row does not have."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    columns = [*next(r for b in batches for r in b), "end_of_input"]
    for i, rows in enumerate([*batches, [{"ts": END_OF_INPUT, "end_of_input": True}]]):
        path = directory / f"part-{i:04d}.{fmt}"
        if fmt == "json":
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        elif fmt == "csv":
            pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
        else:
            pd.DataFrame(rows).to_parquet(path, index=False)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def by_arrival(rows: list[dict], every_ms: int, last: int | None = None) -> list[list[dict]]:
    """Micro-batches of ``every_ms`` of arrival time (``arrival`` defaults to the event time).  With
    ``last``, every interval up to it is a batch, empty or not (two inputs of a join must have the
    same number of files: Spark reads one of each per micro-batch)."""
    keep_empty = last is not None
    last = last if last is not None else max(r.get("arrival", r["ts"]) for r in rows)
    batches = []
    for lo in range(START, last + 1, every_ms):
        batches.append([{k: v for k, v in r.items() if k != "arrival"} for r in rows
                        if lo <= r.get("arrival", r["ts"]) < lo + every_ms])
    return batches if keep_empty else [b for b in batches if b]


# -- data -----------------------------------------------------------------------------------------------
def clicks(scale: int, rng: random.Random) -> dict:
    rows = []
    for user in range(20):
        t = START + rng.randrange(60_000)
        for _ in range(scale // 20):
            t += rng.choice([rng.randrange(1_000, 20_000)] * 6 + [rng.randrange(45_000, 200_000)])
            arrival = t + (rng.randrange(90_000, 180_000) if rng.random() < 0.03 else rng.randrange(0, 8_000))
            rows.append({"user": f"user-{user:02d}", "page": rng.choice(["home", "search", "item", "cart", "buy"]),
                         "ts": t, "arrival": arrival})
    return {"clicks": (by_arrival(rows, 120_000), "json")}


def readings(scale: int, rng: random.Random) -> dict:
    rows = []
    for sensor in range(5):
        for i in range(scale // 5):
            ts = START + i * 2_000 + sensor * 100
            temperature = round(20 + 5 * math.sin(i / 60 + sensor) + rng.gauss(0, 0.3), 2)
            late = rng.random() < 0.04
            arrival = ts + (rng.randrange(20_000, 150_000) if late else rng.randrange(0, 3_000))
            rows.append({"sensor": f"sensor-{sensor}", "temperature": temperature, "ts": ts, "arrival": arrival})
    return {"readings": (by_arrival(rows, 20_000), "csv")}


def outage(scale: int, rng: random.Random) -> dict:
    """Readings every second for 45 s; nothing arrives from 20 s to 35 s (the uplink is down), then
    the buffered readings arrive; one file per second of arrival, empty ones during the outage."""
    rows = []
    for sensor in range(3):
        for second in range(45):
            ts = START + second * 1_000 + sensor * 10
            arrival = ts + rng.randrange(0, 800)
            if START + 20_000 <= arrival < START + 35_000 or (12 <= second < 20 and rng.random() < 0.1):
                arrival = START + 35_000 + rng.randrange(0, 1_000)  # buffered during the outage
            temperature = round(21 + 2 * math.sin(second / 9 + sensor) + rng.gauss(0, 0.2), 2)
            rows.append({"sensor": f"sensor-{sensor}", "temperature": temperature, "ts": ts, "arrival": arrival})
    return {"readings": (by_arrival(rows, 1_000, max(r["arrival"] for r in rows)), "json")}


def payments(scale: int, rng: random.Random) -> dict:
    rows = []
    for i in range(scale):
        ts = START + i * 3_000 + rng.randrange(3_000)
        card = f"card-{rng.randrange(40):02d}"
        amount = round(rng.lognormvariate(3, 0.8), 2)
        if i % 97 == 0:  # a burst on one card
            card, amount = "card-99", round(rng.uniform(400, 900), 2)
        rows.append({"card": card, "amount": amount, "ts": ts, "arrival": ts + rng.randrange(0, 20_000)})
    return {"payments": (by_arrival(rows, 60_000), "json")}


def orders(scale: int, rng: random.Random) -> dict:
    rows = []
    for i in range(scale):
        ts = START + int(i * 2 * 86_400_000 / scale) + rng.randrange(30_000)
        rows.append({"store": rng.choice(["berlin", "paris", "rome", "vienna"]),
                     "amount": round(rng.uniform(5, 120), 2), "ts": ts})
    return {"orders": (by_arrival(rows, 2 * 3_600_000), "parquet")}


def ad_clicks(scale: int, rng: random.Random) -> dict:
    impressions, clicks_ = [], []
    for i in range(scale):
        ts = START + rng.randrange(10 * 60_000)
        impressions.append({"ad_id": f"ad-{i:05d}", "campaign": rng.choice(["spring", "phone", "shipping"]), "ts": ts})
        if rng.random() < 0.15:
            clicks_.append({"ad_id": f"ad-{i:05d}", "ts": ts + rng.randrange(1_000, 15_000)})
    last = max(r["ts"] for r in impressions + clicks_)
    return {"impressions": (by_arrival(impressions, 60_000, last), "json"),
            "clicks": (by_arrival(clicks_, 60_000, last), "json")}


GENERATORS: dict[str, Callable[[int, random.Random], dict]] = {
    "clickstream_sessions": clicks, "iot_sliding_average": readings, "fraud_per_record": payments,
    "cumulative_revenue": orders, "ad_click_join": ad_clicks, "session_summary": clicks, "sensor_outage": outage,
    "sessions_table": clicks}


def generate(name: str, scale: int, seed: int = 7, root: Path = HERE) -> None:
    """Write the example's data under ``root/data/NAME/`` (where its YAML file expects it), and
    remove the tables of results kept there from older data."""
    for database in (root / "data" / name).glob("*.db"):
        database.unlink()
    for source, (batches, fmt) in GENERATORS[name](scale, random.Random(seed)).items():
        write_batches(root / "data" / name / source, batches, fmt)


# -- summaries ------------------------------------------------------------------------------------------
def summarize(name: str, results: dict) -> None:
    panes = list(results.values())[-1]  # the last operator's (a chain's result)
    timings = pd.Series([p.timing.value + (" retraction" if p.is_retraction else "") for p in panes]).value_counts()
    print(f"{name}: {len(panes)} panes; " + ", ".join(f"{k} {v}" for k, v in timings.items()))
    if name == "fraud_per_record":
        flagged = [p for p in panes if p.value > 1_500]
        print(f"payments whose card spent > 1,500 in the 10 minutes before: {len(flagged)} "
              f"(cards: {sorted({p.key for p in flagged})})")
    if name == "cumulative_revenue":
        last = {}
        for p in panes:
            if p.window_end - p.window_start == 86_400_000:
                last[(p.key, p.window_start)] = round(p.value, 2)
        print("revenue per store and day:", last)
    if name == "sensor_outage":
        closed = sorted({(p.window_start - START) // 1_000 for p in panes if p.timing.value == "ON_TIME"})
        late = sorted({(p.window_start - START) // 1_000 for p in panes if p.timing.value == "LATE"})
        print(f"windows closed on time (start, s): {closed}; updated late after the outage: {late}")
    if name == "session_summary":
        last_mean = {}
        for p in panes:
            last_mean[p.window_start] = p.value
        print("mean clicks per session, by the 5 minutes in which sessions closed:",
              ", ".join(f"{(start - START) // 60_000}m: {value:.2f}" for start, value in sorted(last_mean.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(GENERATORS))
    parser.add_argument("--spark", action="store_true", help="run on local Spark (windowed-operator run FILE)")
    parser.add_argument("--scale", type=int, default=2_000, help="about how many events to generate")
    parser.add_argument("--plot", help="write a pane timeline PNG of the first key here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    generate(args.name, args.scale)
    # new data under the old file names: a checkpoint of the old data would skip them as read
    shutil.rmtree(HERE / "checkpoints" / args.name, ignore_errors=True)
    pipeline_file = HERE / f"{args.name}.yaml"
    if args.spark:
        status = subprocess.call([sys.executable, "-m", "windowed_operator.cli", "run", str(pipeline_file),
                                  "--master", "local[2]"])
        print(f"{args.name} on Spark: {time.perf_counter() - start:.1f} s")
        return status
    from windowed_operator.pipeline import load_pipeline
    from windowed_operator.pipeline.local_run import run_pipeline_locally, run_pipeline_runners

    pipeline = load_pipeline(pipeline_file)
    tables = [sink.table for sink in pipeline.sinks if sink.table is not None]
    if tables:  # (its sinks are tables: fill them, as `windowed-operator run FILE --local` does)
        import io

        runners = run_pipeline_locally(pipeline, out=io.StringIO()).runners
        for table in tables:
            print(f"table {table.table!r}: {table.url}")
    else:
        runners = run_pipeline_runners(pipeline)
    results = {name: runner.outputs for name, runner in runners.items()}
    summarize(args.name, results)
    if args.plot:
        from windowed_operator.viz import plot_pane_timeline, points_from_runner

        runner = next(iter(runners.values()))
        key = runner.outputs[0].key
        plot_pane_timeline(points_from_runner(runner, key), args.plot, title=f"{args.name}: {key}")
        print(f"pane timeline of {key}: {args.plot}")
    print(f"{args.name} in the local runner: {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
