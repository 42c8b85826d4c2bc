"""``windowed-operator demo``: a clickstream with out-of-order and late events through two operators
on local Spark, with live progress and a readable table of panes.

1. sessions per user (30 s gap), early firings every 5 clicks, late firings per late bundle,
   accumulating-and-retracting: session merges and late clicks show up as retractions;
2. clicks per page in hopping windows (60 s, sliding by 20 s), default trigger.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

from accumulations import Count
from triggers import TriggerOption

from ..operator import KeyedWindowedOperator
from ..watermarks import bounded_disorder
from ..windows import SessionWindows, TimeWindows
from .plan import END_OF_INPUT
from .pipeline_run import StopSignals
from .base.progress import ProgressPrinter, await_queries

SCHEMA = "user string, page string, amount bigint, ts bigint, end_of_input boolean"
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
PAGES = ["home", "search", "product", "cart", "checkout"]


def generate_clicks(directory: Path, *, users: int = 40, batches: int = 6, seed: int = 7) -> dict:
    """Write one JSON file per micro-batch; returns counts of what was generated."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    per_batch: list[list[dict]] = [[] for _ in range(batches)]
    span = 90_000  # event time covered by one batch
    late = 0
    for u in range(users):
        user = f"user{u:02d}"
        t = START + rng.randint(0, 30_000)
        while t < START + batches * span:
            for _ in range(rng.randint(2, 8)):  # a session of clicks a few seconds apart
                b = min((t - START) // span, batches - 1)
                ts = t
                if rng.random() < 0.04 and b + 1 < batches:  # arrives a batch later: late
                    b += 1
                    late += 1
                ts -= rng.randint(0, 4_000)  # ordinary disorder
                per_batch[b].append({"user": user, "page": rng.choice(PAGES), "amount": 1, "ts": ts})
                t += rng.randint(1_000, 12_000)
            t += rng.randint(35_000, 120_000)  # the gap that ends the session
    for rows in per_batch:
        rng.shuffle(rows)
    per_batch.append([{"end_of_input": True, "ts": END_OF_INPUT}])  # the marker row: the input ends
    for i, rows in enumerate(per_batch):
        path = directory / f"clicks-{i:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_600_000_000 + i, 1_600_000_000 + i))
    return {"events": sum(len(b) for b in per_batch[:-1]), "shifted_late": late, "files": len(per_batch)}


def session_operator() -> KeyedWindowedOperator:
    trigger = (TriggerOption.at_watermark().with_early_firings_at_every(count=5).with_late_firings_at_every(count=1)
               .accumulating_and_retracting_fired_panes())
    return KeyedWindowedOperator(SessionWindows(30_000), Count(), trigger=trigger, allowed_lateness=45_000,
                                 key="user", timestamp="ts", watermark=bounded_disorder(10_000),
                                 late_data_output=True, name="sessions")


def page_operator() -> KeyedWindowedOperator:
    return KeyedWindowedOperator(TimeWindows(60_000).slide_by(20_000), Count(), key="page", timestamp="ts",
                                 watermark=bounded_disorder(10_000), allowed_lateness=30_000, name="pages")


def _fmt_time(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000))


def _table(headers: list[str], rows: list[list]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def _plot_timeline(batches: dict, user: str, path: Optional[str],
                   watermarks: Optional[dict[int, Optional[int]]] = None) -> None:
    """The user's pane timeline (event time x micro-batch) as PNG, with the watermark each batch ran
    with, when matplotlib is installed."""
    if path is None:
        return
    try:
        from ..viz import plot_pane_timeline, points_from_rows
    except ImportError:  # pragma: no cover - viz is optional
        return
    rows = [{**r, "window_start": r["ws"], "window_end": r["we"], "batch_id": b}
            for b in sorted(batches) for r in batches[b] if r["record_type"] == "pane"]
    try:
        plot_pane_timeline(points_from_rows(rows, user, watermarks=watermarks), path, title=f"demo: sessions of {user}",
                           emitted_label="emitted (micro-batch)")
    except ImportError:
        print("(pip install matplotlib for the pane timeline plot)")
        return
    print(f"pane timeline of {user}: {path}")


def showcase_user(session_rows: list[dict]) -> Optional[str]:
    """The user whose timeline shows the most of the model: late panes, sessions merged away (a
    retraction with no pane after it) and retractions of a value that then changed, rather than
    a user whose retractions all undo and redo the same count."""
    score: Counter = Counter()
    by_user: dict[str, list[dict]] = {}
    for row in session_rows:
        if row["record_type"] == "pane":
            by_user.setdefault(row["key"], []).append(row)
    for user, rows in by_user.items():
        for i, row in enumerate(rows):
            if not row["is_retraction"]:
                score[user] += 3 if row["timing"] == "LATE" else 0
                continue
            following = next((r for r in rows[i + 1:] if (r["ws"], r["we"]) == (row["ws"], row["we"])), None)
            if following is None:
                score[user] += 3  # merged away: retracted, never re-fired
            elif following["value"] != -row["value"]:
                score[user] += 2  # the count changed
    if not by_user:
        return None
    return max(sorted(by_user), key=lambda u: score[u])


def run_demo(workdir: Optional[str] = None, master: str = "local[2]", keep: bool = False,
             plot_path: Optional[str] = None, spark_log: Optional[str] = None) -> int:
    t0 = time.monotonic()
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="windowed-operator-demo-"))
    shutil.rmtree(base / "checkpoints", ignore_errors=True)
    stats = generate_clicks(base / "clicks")
    print(f"generated {stats['events']} click events in {stats['files'] - 1} micro-batch files "
          f"({stats['shifted_late']} delivered a batch late) under {base / 'clicks'}")
    print("starting local Spark ...", flush=True)
    from .base.session import local_session

    spark = local_session(master=master, app_name="windowed-operator-demo", spark_log=spark_log)
    log_note = f" (Spark's own output: {spark_log})" if spark_log else ""
    print(f"Spark {spark.version} up in {time.monotonic() - t0:.1f} s{log_note}; running 2 stateful queries",
          flush=True)
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(base / "clicks"))
    results: dict[str, dict[int, list[dict]]] = {"sessions": {}, "pages": {}}

    def sink(name: str):
        def collect(batch_df, batch_id):
            rows = batch_df.selectExpr("*", "unix_millis(window_start) as ws", "unix_millis(window_end) as we",
                                       "unix_millis(timestamp) as ts_ms").collect()
            results[name][batch_id] = [r.asDict() for r in rows]
        return collect

    printer = ProgressPrinter(sys.stdout, names=["sessions", "pages"],
                              prefix=lambda: f"  [{time.monotonic() - t0:5.1f} s] ")
    spark.streams.addListener(printer)
    queries = {}
    with StopSignals() as signals:  # (Ctrl-C stops the queries, as in ``run``: no py4j tracebacks)
        try:
            for name, op in (("sessions", session_operator()), ("pages", page_operator())):
                queries[name] = (op.apply(source, end_of_input="end_of_input").writeStream
                                 .foreachBatch(sink(name)).queryName(name)
                                 .option("checkpointLocation", str(base / "checkpoints" / name))
                                 .trigger(availableNow=True).start())
            await_queries(list(queries.values()), printer, until=signals.requested)
            if any(q.isActive for q in queries.values()):
                signals.check()
        except KeyboardInterrupt:  # Stopped, or Ctrl-C where no handler could be installed
            for query in queries.values():
                query.stop()
            print("demo stopped", flush=True)
            raise
        finally:
            spark.streams.removeListener(printer)

    session_rows = [r for rows in results["sessions"].values() for r in rows]
    panes = [r for r in session_rows if r["record_type"] == "pane"]
    late = [r for r in session_rows if r["record_type"] == "late"]
    counts = Counter((r["timing"], r["is_retraction"]) for r in panes)
    print("\nSession panes (count of clicks per user session, accumulating and retracting):")
    print(_table(["timing", "panes", "retractions"],
                 [[t, counts[(t, False)], counts[(t, True)]] for t in ("EARLY", "ON_TIME", "LATE")]))
    print(f"late-data output: {len(late)} clicks arrived after their session expired (dropped, counted)")
    print("(a retraction undoes an earlier pane: one precedes every re-fired pane, and a session merged\n"
          " into a larger one is retracted with no pane of its own, so retractions can outnumber panes)")
    user = showcase_user(session_rows)
    if user is not None:
        print(f"\nTimeline of {user} (every pane and retraction, in emission order):")
        ordered = [r for b in sorted(results["sessions"]) for r in results["sessions"][b]
                   if r["record_type"] == "pane" and r["key"] == user]
        print(_table(["session", "clicks", "timing", "pane", "retraction", "last"],
                     [[f"{_fmt_time(r['ws'])}-{_fmt_time(r['we'])}", r["value"], r["timing"], r["pane_index"],
                       "yes" if r["is_retraction"] else "", "yes" if r["is_last"] else ""] for r in ordered]))
        _plot_timeline(results["sessions"], user, plot_path, printer.watermarks.get("sessions"))
    page_rows = [r for rows in results["pages"].values() for r in rows]
    windows = sorted({(r["ws"], r["we"]) for r in page_rows})[-4:]
    print("\nClicks per page, hopping 60 s windows every 20 s (last windows, final values):")
    final = {(r["key"], r["ws"]): r["value"] for b in sorted(results["pages"]) for r in results["pages"][b]}
    print(_table(["window"] + PAGES, [[f"{_fmt_time(s)}-{_fmt_time(e)}"] + [final.get((p, s), 0) for p in PAGES]
                                      for s, e in windows]))
    print(f"\nsession panes: {len(panes)} ({sum(counts[(t, True)] for t in ('EARLY', 'ON_TIME', 'LATE'))} retractions), "
          f"page panes: {len(page_rows)}, late-data count: {len(late)}; total {time.monotonic() - t0:.1f} s")
    spark.stop()
    if not keep and workdir is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0
