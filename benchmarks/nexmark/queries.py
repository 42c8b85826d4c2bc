"""The windowed Nexmark queries with windowed-operator, their brute-force models, and each one's
final result per window as a set of rows every engine is compared on.

- q5  hot items: bids per auction in hopping windows, then the auctions with the most bids per
      window (a chain: a Count per auction, then a windowless ``AllMax`` per window start that keeps
      the count's windows);
- q5r the same count with early firings in accumulating-and-retracting mode, feeding a windowless
      Sum per window: the retractions keep the downstream total exact (bids per window);
- q7  highest bid: every bid with the largest price of its tumbling window;
- q8  new users: people who opened an auction in the tumbling window in which they registered (a
      windowed join of persons and auctions keyed by person id / seller);
- q11 user sessions: bids per bidder per session, early firings every N bids, discarding, allowed
      lateness;
- q12 processing-time windows: bids per bidder in the global window, fired every N seconds of
      processing time, discarding.

A final result is what a window holds after the end of input: the models compute it from all events
(none of the correctness streams has events late beyond the lateness); the panes of an operator
give it by their mode (the last pane in accumulating mode, the sum of the panes in discarding mode,
per final session for merged sessions).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from accumulations import AllMax, Count, InnerJoin, Sum
from triggers import TriggerOption
from windowed_operator import (GlobalWindow, KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows,
                               TimeWindows, WindowedOperator, bounded_disorder)
from windowed_operator.merge_operator import InputOptions

QUERIES = ("q5", "q5r", "q7", "q8", "q11", "q12")


@dataclass(frozen=True)
class QueryConfig:
    window_ms: int = 10_000
    period_ms: int = 2_000
    session_gap_ms: int = 10_000
    #: q11's early firing, and q5r's: every this many bids of a window.
    early_count: int = 100
    #: q11's allowed lateness (Beam's: occasionalDelaySec / 2).
    lateness_ms: int = 1_000
    #: q12's firing interval of processing time.
    processing_interval_ms: int = 10_000
    #: The watermark's delay: the generator's max_disorder_ms.
    max_disorder_ms: int = 2_000


BID_COLUMNS = ["auction", "bidder", "price", "dateTime", "extra"]
PERSON_COLUMNS = ["id", "name", "dateTime"]
AUCTION_COLUMNS = ["id", "seller", "reserve", "dateTime"]


def _quiet(make: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make()


def new_user(person: dict, auction: dict) -> dict:
    return {"id": person["id"], "name": person["name"], "reserve": auction["reserve"]}


def operator(query: str, config: QueryConfig) -> Any:
    """The query as windowed-operator operators (a chain for q5 and q5r); run it locally or apply it
    to a streaming DataFrame of bids (q8: of persons and auctions)."""
    watermark = bounded_disorder(config.max_disorder_ms)
    hopping = TimeWindows(config.window_ms).slide_by(config.period_ms)
    if query == "q5":
        counts = _quiet(lambda: KeyedWindowedOperator(hopping, Count(), key="auction", timestamp="dateTime",
                                                      watermark=watermark, name="q5 bids per auction"))
        # keyed by window: the windows spread over Spark's key groups; the value is a record of the pane's
        # fields (the auction and its count), which Spark's stage reads as columns
        top = KeyedWindowedOperator(None, AllMax(field="num"), key="window_start",
                                    value={"auction": "key", "num": "value"}, name="q5 hot items")
        return counts.then(top)
    if query == "q5r":
        early = (TriggerOption.at_watermark().with_early_firings_at_every(count=config.early_count)
                 .accumulating_and_retracting_fired_panes())
        counts = _quiet(lambda: KeyedWindowedOperator(hopping, Count(), key="auction", timestamp="dateTime",
                                                      trigger=early, watermark=watermark,
                                                      name="q5r bids per auction"))
        return counts.then(WindowedOperator(None, Sum(), name="q5r bids per window"))
    if query == "q7":
        return WindowedOperator(TimeWindows(config.window_ms), AllMax(field="price"), timestamp="dateTime",
                                watermark=watermark, name="q7 highest bid")
    if query == "q8":
        return KeyedWindowedMergeOperator(
            TimeWindows(config.window_ms), InnerJoin(new_user, result_type="struct<id:bigint,name:string,reserve:bigint>"),
            timestamp="dateTime", watermark=watermark, left=InputOptions(key="id"), right=InputOptions(key="seller"),
            name="q8 new users")
    if query == "q11":
        early = (TriggerOption.at_watermark().with_early_firings_at_every(count=config.early_count)
                 .discarding_fired_panes())
        return _quiet(lambda: KeyedWindowedOperator(SessionWindows(config.session_gap_ms), Count(), key="bidder",
                                                    timestamp="dateTime", trigger=early,
                                                    allowed_lateness=config.lateness_ms, watermark=watermark,
                                                    name="q11 user sessions"))
    if query == "q12":
        every = (TriggerOption.at_watermark().with_early_firings_at_every(config.processing_interval_ms)
                 .discarding_fired_panes())
        return _quiet(lambda: KeyedWindowedOperator(GlobalWindow(), Count(), key="bidder", timestamp="dateTime",
                                                    trigger=every, watermark=watermark, name="q12 bids per bidder"))
    raise ValueError(f"unknown query {query!r}: one of {', '.join(QUERIES)}")


# -- brute-force models: the final result per window from all events -------------------------------
def _hopping_starts(ts: np.ndarray, size: int, period: int) -> list[np.ndarray]:
    last = ts - ts % period
    return [last - k * period for k in range(size // period)]


def model(query: str, persons: pd.DataFrame, auctions: pd.DataFrame, bids: pd.DataFrame,
          config: QueryConfig, touching_sessions_merge: bool = False) -> set:
    """The final result per window from all events. Sessions follow Beam: proto-sessions
    ``[ts, ts + gap)`` merge when they overlap, so two bids exactly ``gap`` apart start two sessions;
    ``touching_sessions_merge`` gives native Spark's ``session_window`` instead, which merges them
    (measured)."""
    if query in ("q5", "q5r"):
        ts = bids.dateTime.to_numpy()
        frames = [pd.DataFrame({"start": s, "auction": bids.auction.to_numpy()})
                  for s in _hopping_starts(ts, config.window_ms, config.period_ms)]
        counts = pd.concat(frames).groupby(["start", "auction"]).size().rename("num").reset_index()
        if query == "q5r":
            return {(int(s), int(n)) for s, n in counts.groupby("start").num.sum().items()}
        top = counts[counts.num == counts.groupby("start").num.transform("max")]
        return {(int(s), int(a), int(n)) for s, a, n in top.itertuples(index=False)}
    if query == "q7":
        start = bids.dateTime - bids.dateTime % config.window_ms
        top = bids[bids.price == bids.price.groupby(start).transform("max")]
        return {(int(t - t % config.window_ms), int(a), int(b), int(p), int(t))
                for a, b, p, t in top[["auction", "bidder", "price", "dateTime"]].itertuples(index=False)}
    if query == "q8":
        p = persons.assign(start=persons.dateTime - persons.dateTime % config.window_ms)
        a = auctions.assign(start=auctions.dateTime - auctions.dateTime % config.window_ms)
        joined = p.merge(a, left_on=["start", "id"], right_on=["start", "seller"], suffixes=("", "_auction"))
        return _multiset((int(s), int(i), n, int(r)) for s, i, n, r in
                         joined[["start", "id", "name", "reserve"]].itertuples(index=False))
    if query == "q11":
        out = set()
        for bidder, times in bids.groupby("bidder").dateTime:
            ts = np.sort(times.to_numpy())
            gaps = np.diff(ts)
            breaks = np.flatnonzero(gaps > config.session_gap_ms if touching_sessions_merge
                                    else gaps >= config.session_gap_ms) + 1
            for part in np.split(ts, breaks):
                out.add((int(bidder), int(part[0]), int(part[-1]) + config.session_gap_ms, len(part)))
        return out
    if query == "q12":
        return {(int(b), int(n)) for b, n in bids.groupby("bidder").size().items()}
    raise ValueError(f"unknown query {query!r}")


def _multiset(rows: Any) -> set:
    """Rows that may repeat, as a set of (row, occurrence) pairs."""
    seen: dict = {}
    out = set()
    for row in rows:
        seen[row] = seen.get(row, 0) + 1
        out.add((row, seen[row]))
    return out


# -- the final result from an operator's panes ------------------------------------------------------
@dataclass(frozen=True)
class Pane:
    """The fields of an output pane the final results need (a PaneRecord, or a Spark output row)."""

    key: Any
    start: int
    end: int
    value: Any
    is_retraction: bool


def final_result(query: str, panes: list[Pane]) -> set:
    live = [p for p in panes if not p.is_retraction]
    if query == "q5":
        last = _last_per_window(live)
        return {(p.start, int(v["auction"]), int(v["num"])) for p in last for v in p.value}
    if query == "q5r":  # an accumulating downstream Sum: its last pane per window
        return {(p.start, int(p.value)) for p in _last_per_window(live) if p.value}
    if query == "q7":
        return {(p.start, int(b["auction"]), int(b["bidder"]), int(b["price"]), int(b["dateTime"]))
                for p in _last_per_window(live) for b in p.value}
    if query == "q8":
        return _multiset((p.start, int(r["id"]), r["name"], int(r["reserve"])) for p in live for r in p.value)
    if query == "q11":  # discarding panes of sessions that merged: summed per final session
        out = set()
        by_key: dict = {}
        for p in live:
            by_key.setdefault(p.key, []).append(p)
        for key, parts in by_key.items():
            parts.sort(key=lambda p: (p.start, p.end))
            start, end, total = parts[0].start, parts[0].end, 0
            for p in parts:
                if p.start >= end:
                    out.add((int(key), start, end, total))
                    start, end, total = p.start, p.end, 0
                end, total = max(end, p.end), total + int(p.value)
            out.add((int(key), start, end, total))
        return out
    if query == "q12":
        totals: dict = {}
        for p in live:
            totals[p.key] = totals.get(p.key, 0) + int(p.value)
        return {(int(k), n) for k, n in totals.items() if n}
    raise ValueError(f"unknown query {query!r}")


def _last_per_window(panes: list[Pane]) -> list[Pane]:
    last: dict = {}
    for p in panes:
        last[(p.key, p.start, p.end)] = p
    return list(last.values())


def panes_of(records: list) -> list[Pane]:
    return [Pane(r.key, r.window_start, r.window_end, r.value, r.is_retraction) for r in records]


# -- the local runner, micro-batch by micro-batch ---------------------------------------------------
def run_local(query: str, config: QueryConfig, batches: list[pd.DataFrame],
              processing_times: list[int] | None = None) -> list:
    """The query in the local runner, one bundle per micro-batch (the events of one file, arrival
    order); ``processing_times`` gives each batch's processing time (q12)."""
    runner = operator(query, config).local_runner()
    for i, batch in enumerate(batches):
        if processing_times is not None and processing_times[i] > runner.processing_time:
            runner.advance_processing_time(processing_times[i] - runner.processing_time)
        if query == "q8":
            persons = batch[batch.name.notna()][PERSON_COLUMNS].to_dict("records")
            auctions = batch[batch.itemName.notna()][AUCTION_COLUMNS].to_dict("records")
            runner.add_elements_from_both(_ints(persons), _ints(auctions))
        else:
            runner.add_elements(*_ints(batch[batch.auction.notna()][BID_COLUMNS].to_dict("records")))
    runner.finish()
    return runner.outputs


def _ints(records: list[dict]) -> list[dict]:
    """pandas holds integer columns with nulls as floats: back to ints, as Spark's rows have them."""
    return [{k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in r.items()} for r in records]
