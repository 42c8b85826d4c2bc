"""Random streams through the local runner into a table sink, checked after every bundle against a
model of the table built from the panes alone (no code of the sink's):

- accumulating: the latest pane of each window (there are no retractions);
- retracting: each window's panes minus its retractions, which must leave at most one pane standing
  (its value: the sum of pane values, retractions counting negative);
- discarding: the sum of each window's panes;
- ``final_only``: of those, the windows whose latest pane is final (is_last, or not EARLY).

Each batch also records the runner's watermark, and the status view is checked against the model
(``check_status``): every row it calls settled equals that window's row at the end of the stream
(no later pane changes or removes it), every row it calls complete holds an on-time (or later)
result, and at the end of input every row is settled.

Shared by the SQLite and PostgreSQL tests (tests/test_table_sink.py, tests/test_table_sink_postgres.py).
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Optional

import sqlalchemy as sa
from hypothesis import strategies as st

from accumulations import Sum
from triggers import TriggerOption
from windowed_operator import (CumulativeWindows, GlobalWindow, KeyedWindowedOperator, SessionWindows, SlidingWindows,
                               TimeWindows)
from windowed_operator.sinks import TableSink, make_engine
from windowed_operator.testing import TimestampedValue
from windowed_operator.time import MAX_SHOWN_TIME, MIN_SHOWN_TIME, shown_time

FAMILIES: dict[str, Callable[[], Any]] = {
    "tumbling": lambda: TimeWindows(10_000),
    "hopping": lambda: TimeWindows(10_000).slide_by(5_000),
    "sessions": lambda: SessionWindows(4_000),
    "global": lambda: GlobalWindow(),
    "per_record_sliding": lambda: SlidingWindows(5_000),
    "cumulative": lambda: CumulativeWindows(20_000, 5_000),
}
MODES = ("accumulating", "retracting", "discarding")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
OPTIONAL = ["timing", "pane_index", "is_last", "batch_id"]


def make_operator(family: str, mode: str, early: int, lateness: int) -> KeyedWindowedOperator:
    trigger = TriggerOption.at_watermark().with_early_firings_at_every(count=early).with_late_firings_at_every(count=1)
    trigger = {"accumulating": trigger.accumulating_fired_panes(), "discarding": trigger.discarding_fired_panes(),
               "retracting": trigger.accumulating_and_retracting_fired_panes()}[mode]
    return KeyedWindowedOperator(FAMILIES[family](), Sum(), trigger=trigger, allowed_lateness=lateness)


_element = st.tuples(st.sampled_from(["a", "b"]), st.integers(-5, 20),
                     st.integers(0, 40_000).map(lambda t: t - t % 500))
_step = st.one_of(
    st.tuples(st.just("add"), st.lists(_element, min_size=1, max_size=4)),
    st.tuples(st.just("add"), st.lists(_element, min_size=1, max_size=4)),
    st.tuples(st.just("watermark"), st.sampled_from([1_000, 4_000, 5_000, 10_000, 20_000])),
)
streams = st.fixed_dictionaries({
    "steps": st.lists(_step, min_size=1, max_size=12),
    "early": st.integers(1, 3),
    "lateness": st.sampled_from([0, 5_000, 30_000]),
})


def ms(moment: dt.datetime) -> int:
    return (moment - EPOCH) // dt.timedelta(milliseconds=1)


def window_key(pane: Any) -> tuple:
    start, end = shown_time(pane.window_start), shown_time(pane.window_end)
    return (pane.key, MIN_SHOWN_TIME if start is None else start, MAX_SHOWN_TIME if end is None else end)


class TableModel:
    def __init__(self, mode: str, final_only: bool) -> None:
        self.mode, self.final_only = mode, final_only
        self.latest: dict[tuple, Any] = {}  # (key, start, end) -> latest pane (not retraction)
        self.written_in: dict[tuple, int] = {}
        self.net: dict[tuple, int] = {}  # panes minus retractions
        self.total: dict[tuple, Any] = {}  # sum of values, retractions negative

    def add(self, panes: list, batch_id: int) -> None:
        for pane in panes:
            pk = window_key(pane)
            self.net[pk] = self.net.get(pk, 0) + (-1 if pane.is_retraction else 1)
            self.total[pk] = self.total.get(pk, 0) + pane.value
            if self.mode == "retracting":
                assert self.net[pk] in (0, 1), f"window {pk}: panes minus retractions = {self.net[pk]}"
            else:
                assert not pane.is_retraction
            if not pane.is_retraction:
                self.latest[pk] = pane
                if not self.final_only or pane.is_last or pane.timing.value != "EARLY":
                    self.written_in[pk] = batch_id

    def expected(self) -> dict[tuple, tuple]:
        """(key, start ms, end ms) -> (value, timing, pane_index, is_last, batch_id)."""
        table = {}
        for pk, pane in self.latest.items():
            if self.mode == "retracting" and self.net[pk] == 0:
                continue
            if self.final_only and not (pane.is_last or pane.timing.value != "EARLY"):
                continue
            value = self.total[pk] if self.mode in ("retracting", "discarding") else pane.value
            table[pk] = (value, pane.timing.value, pane.index, pane.is_last, self.written_in[pk])
        return table


def table_of(sink: TableSink) -> dict[tuple, tuple]:
    return {(r["key"], ms(r["window_start"]), ms(r["window_end"])):
            (r["value"], r["timing"], r["pane_index"], r["is_last"], r["batch_id"]) for r in sink.rows()}


def check_status(statuses: list[tuple[int, list[dict]]], final: dict[tuple, tuple], stale_merged: bool) -> None:
    """The status view after each batch against the table at the end (see the module's doc).
    ``stale_merged``: sessions without retractions, whose merged-away windows keep their last
    (EARLY) row, which no pane removes."""
    for batch_id, rows in statuses:
        for row in rows:
            pk = (row["key"], ms(row["window_start"]), ms(row["window_end"]))
            values = (row["value"], row["timing"], row["pane_index"], row["is_last"], row["batch_id"])
            if row["settled"]:
                assert row["complete"], f"after batch {batch_id}: {pk} settled but not complete"
                assert final.get(pk) == values, \
                    f"after batch {batch_id}: {pk} settled as {values}, but ends as {final.get(pk)}"
            if row["complete"] and not stale_merged:
                assert row["timing"] != "EARLY", f"after batch {batch_id}: {pk} complete with an EARLY pane"
    assert all(row["settled"] for row in statuses[-1][1]), "the end of input settles every row"


def check_stream(url: str, table: str, family: str, mode: str, final_only: bool, stream: dict,
                 after: Optional[Callable[[TableSink], None]] = None) -> None:
    """Run the stream bundle by bundle into a sink at ``url``; after each the table equals the model
    (and a replay of every batch so far changes nothing)."""
    op = make_operator(family, mode, stream["early"], stream["lateness"])
    engine = make_engine(url)
    if engine.dialect.name == "sqlite":  # (durability is the crash test's: no fsync per commit here)
        sa.event.listen(engine, "connect", lambda connection, _: connection.execute("PRAGMA synchronous=OFF"))
    sink = TableSink(engine, table, mode="add" if mode == "discarding" else "upsert", columns=OPTIONAL,
                     final_only=final_only, operator=op)
    model = TableModel(mode, final_only)
    runner = op.local_runner()
    watermark = 0
    emitted_by_batch = []
    statuses = []
    try:
        steps = [*stream["steps"], ("finish", None)]
        for batch_id, (kind, arg) in enumerate(steps):
            if kind == "add":
                panes = runner.add_elements(*[TimestampedValue((k, v), t) for k, v, t in arg])
            elif kind == "watermark":
                watermark += arg
                panes = runner.advance_watermark_to(watermark)
            else:
                panes = runner.finish()
            sink.write(panes, batch_id, watermark=runner.watermark)
            model.add(panes, batch_id)
            emitted_by_batch.append(panes)
            assert table_of(sink) == model.expected(), f"after batch {batch_id} ({kind})"
            statuses.append((batch_id, sink.status_rows()))
        check_status(statuses, table_of(sink), family == "sessions" and mode != "retracting")
        before = table_of(sink)
        for batch_id, panes in enumerate(emitted_by_batch):  # a replay (Spark after a crash) is skipped
            assert not sink.write(panes, batch_id).applied
        assert table_of(sink) == before
        if after is not None:
            after(sink)
    finally:
        engine.dispose()
