"""Completeness beside the table: the watermark each batch records, the bounds derived from it at
the millisecond boundaries, the status view, and a progress table of an earlier version upgraded."""
from __future__ import annotations

import datetime as dt
import sqlite3

import pytest
import sqlalchemy as sa

from accumulations import Sum
from triggers import AfterCount, Repeatedly, TriggerOption
from windowed_operator import GlobalWindow, KeyedWindowedOperator, TimeWindows
from windowed_operator.sinks import TableSink
from windowed_operator.sinks.completeness import BatchWatermark, Completeness
from windowed_operator.testing import TimestampedValue
from windowed_operator.time import MAX_TIMESTAMP, MIN_TIMESTAMP

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
T = 1_767_225_600_000  # 2026-01-01


def at(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


def tumbling(lateness: int = 5_000, trigger: TriggerOption = TriggerOption.at_watermark()
             .with_early_firings_at_every(count=1)) -> KeyedWindowedOperator:
    return KeyedWindowedOperator(TimeWindows(10_000), Sum(), trigger=trigger.accumulating_fired_panes(),
                                 allowed_lateness=lateness)


@pytest.mark.parametrize("watermark, complete, settled", [
    (T + 9_999, False, False),  # the window's max timestamp: its end is not reached
    (T + 10_000, True, False),  # past its max timestamp: ON_TIME
    (T + 14_999, True, False),  # max timestamp + lateness: not yet expired
    (T + 15_000, True, True),  # past it: expired, no pane can follow
])
def test_a_row_is_complete_past_its_end_and_settled_past_its_lateness(tmp_path, watermark, complete, settled):
    op = tumbling()
    sink = TableSink(str(tmp_path / "r.db"), "totals", operator=op)
    runner = op.local_runner()
    sink.write(runner.add_elements(TimestampedValue(("a", 1), T + 2_000)), 0, watermark=runner.watermark)
    sink.write(runner.advance_watermark_to(watermark), 1, watermark=runner.watermark)
    [row] = sink.status_rows()
    assert (row["complete"], row["settled"]) == (complete, settled)
    progress = sink.progress()
    assert progress["watermark"] == at(watermark)
    assert progress["complete_through"] == at(watermark) and progress["settled_through"] == at(watermark - 5_000)


def test_the_global_window_settles_only_at_the_end_of_input(tmp_path):
    op = KeyedWindowedOperator(GlobalWindow(), Sum(), trigger=TriggerOption.of(Repeatedly(AfterCount(1)))
                               .accumulating_fired_panes())
    sink = TableSink(str(tmp_path / "r.db"), "totals", operator=op)
    runner = op.local_runner()
    sink.write(runner.add_elements(TimestampedValue(("a", 1), T)), 0, watermark=runner.watermark)
    sink.write(runner.advance_watermark_to(MAX_TIMESTAMP - 1), 1, watermark=runner.watermark)
    assert [(r["complete"], r["settled"]) for r in sink.status_rows()] == [(False, False)]
    sink.write(runner.finish(), 2, watermark=runner.watermark)
    assert [(r["complete"], r["settled"]) for r in sink.status_rows()] == [(True, True)]


def test_without_a_watermark_trigger_complete_means_settled():
    rules = Completeness.of(tumbling(5_000, TriggerOption.of(Repeatedly(AfterCount(2)))))
    assert rules is not None and not rules.fires_at_end
    values = rules.progress_values(BatchWatermark(T + 20_000))
    assert values["complete_through"] == values["settled_through"] == at(T + 15_000)
    assert Completeness.of(tumbling()).progress_values(BatchWatermark(MIN_TIMESTAMP)) == \
        {"complete_through": None, "settled_through": None}


def test_a_batch_without_a_watermark_keeps_the_last_one(tmp_path):
    op = tumbling()
    sink = TableSink(str(tmp_path / "r.db"), "totals", operator=op)
    runner = op.local_runner()
    runner.add_elements(TimestampedValue(("a", 1), T))
    sink.write(runner.advance_watermark_to(T + 30_000), 0, watermark=runner.watermark)
    sink.write([], 1)
    assert sink.progress()["batch_id"] == 1 and sink.progress()["settled_through"] == at(T + 25_000)
    assert [r["settled"] for r in sink.status_rows()] == [True]


def test_the_watermark_rows_of_a_spark_batch_are_read_not_written(tmp_path):
    """A batch as ``with_watermark`` delivers it: pane rows, and a watermark row per key group."""
    op = tumbling(0)
    sink = TableSink(str(tmp_path / "r.db"), "totals", operator=op)
    pane = {"key": "a", "window_start": at(T), "window_end": at(T + 10_000), "value": 3, "timing": "ON_TIME",
            "pane_index": 0, "is_first": True, "is_last": False, "is_retraction": False, "timestamp": at(T + 9_999),
            "__wo_watermark": None, "__wo_held_by": None}
    marks = [dict.fromkeys(pane), dict.fromkeys(pane)]
    marks[0].update(__wo_watermark=T + 12_000, __wo_held_by="3")
    marks[1].update(__wo_watermark=T + 11_000, __wo_held_by="1")
    result = sink.write([pane, *marks], 0)
    assert (result.upserted, result.skipped_rows) == (1, 0)
    assert sink.progress()["watermark"] == at(T + 11_000) and sink.progress()["held_back_by"] == "1"
    assert [(r["value"], r["settled"]) for r in sink.status_rows()] == [(3, True)]


def earlier_progress_table(tmp_path, row: str):
    """A SQLite database with the progress table an earlier version made, holding ``row``."""
    database = tmp_path / "r.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE windowed_operator_sink_progress (sink TEXT NOT NULL, query_id TEXT NOT NULL, "
                   "batch_id BIGINT NOT NULL, table_name TEXT, updated_at DATETIME, rows_upserted BIGINT, "
                   "rows_deleted BIGINT, PRIMARY KEY (sink, query_id))")
        db.execute(f"INSERT INTO windowed_operator_sink_progress VALUES {row}")
    return database


def test_a_progress_table_of_an_earlier_version_gets_the_new_columns(tmp_path):
    database = earlier_progress_table(tmp_path, "('other', 'q', 7, 'other', NULL, 1, 0)")
    op = tumbling()
    sink = TableSink(str(database), "totals", operator=op)
    runner = op.local_runner()
    sink.write(runner.add_elements(TimestampedValue(("a", 1), T)), 0, watermark=T + 20_000)
    columns = {c["name"] for c in sa.inspect(sink.engine).get_columns("windowed_operator_sink_progress")}
    assert {"watermark", "complete_through", "settled_through", "held_back_by"} <= columns
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT batch_id FROM windowed_operator_sink_progress WHERE sink = 'other'").fetchall() == \
            [(7,)]
    assert [r["settled"] for r in sink.status_rows()] == [True]


def test_the_status_view_is_named_or_left_out(tmp_path):
    op = tumbling()
    runner = op.local_runner()
    panes = runner.add_elements(TimestampedValue(("a", 1), T))
    named = TableSink(str(tmp_path / "r.db"), "totals", operator=op, status_view="totals_final", name="it's")
    named.write(panes, 0, watermark=T + 20_000)
    assert [r["settled"] for r in named.status_rows()] == [True]  # (a quote in the sink's name, escaped)
    off = TableSink(str(tmp_path / "r.db"), "other", operator=op, status_view=False)
    off.write(panes, 0)
    assert not sa.inspect(off.engine).has_table("other_status")
    with pytest.raises(ValueError, match="no status view"):
        off.status_rows()
    with pytest.raises(ValueError, match="status_view 'a b' is not a plain SQL name"):
        TableSink(str(tmp_path / "r.db"), "x", operator=op, status_view="a b")


def test_under_a_per_partition_watermark_the_partition_holding_it_back_is_recorded(tmp_path):
    from accumulations import Count
    from windowed_operator import bounded_disorder

    op = KeyedWindowedOperator(TimeWindows(60_000), Count(), key="k", timestamp="ts",
                               watermark=bounded_disorder(10_000, partition="part"))
    sink = TableSink(str(tmp_path / "r.db"), "counts", mode="add", operator=op)
    runner = op.local_runner()
    for minute in range(4):  # partition "late" is two minutes behind "fast"
        panes = runner.add_elements(*[{"k": "x", "ts": (minute + 2) * 60_000, "part": "fast"},
                                      {"k": "y", "ts": minute * 60_000, "part": "late"}])
        sink.write(panes, minute, watermark=BatchWatermark.of_runner(runner))
    progress = sink.progress()
    assert progress["held_back_by"] == "late" and progress["watermark"] == at(3 * 60_000 - 10_000)
    assert {(r["key"], r["window_end"], r["settled"]) for r in sink.status_rows()} == \
        {("y", at(60_000), True), ("y", at(120_000), True)}  # (x's windows have not fired: the watermark is y's)


def test_the_table_says_why_each_row_fired(tmp_path):
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum(), fired_by=True, allowed_lateness=5_000,
                               trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=1)
                               .with_late_firings_at_every(count=1).accumulating_fired_panes())
    sink = TableSink(str(tmp_path / "r.db"), "totals", operator=op, columns=["timing", "fired_by", "firing_watermark"])
    runner = op.local_runner()
    sink.write(runner.add_elements(TimestampedValue(("a", 1), T), TimestampedValue(("b", 1), T + 10_000)), 0,
               watermark=runner.watermark)
    sink.write(runner.advance_watermark_to(T + 12_000), 1, watermark=runner.watermark)
    sink.write(runner.add_elements(TimestampedValue(("a", 2), T + 1_000)), 2, watermark=runner.watermark)
    assert [(r["key"], r["timing"], r["fired_by"], r["firing_watermark"]) for r in sink.rows()] == [
        ("a", "LATE", "late_count", at(T + 12_000)), ("b", "EARLY", "early_count", None)]
    with pytest.raises(ValueError, match="give the operator fired_by=True"):
        TableSink(str(tmp_path / "r.db"), "other", operator=tumbling(), columns=["fired_by"])


@pytest.mark.parametrize("suffix", [".db", ".duckdb"])
def test_a_table_named_by_a_reserved_word_has_its_view(tmp_path, suffix):
    if suffix == ".duckdb":
        pytest.importorskip("duckdb_engine", reason='no DuckDB driver: pip install -e ".[duckdb]"')
    import numpy as np

    op = tumbling()
    sink = TableSink(str(tmp_path / f"r{suffix}"), "order", operator=op)
    runner = op.local_runner()
    sink.write(runner.add_elements(TimestampedValue(("a", 1), T)), 0, watermark=np.int64(T + 20_000))
    assert [r["settled"] for r in sink.status_rows()] == [True]
    again = TableSink(str(tmp_path / f"r{suffix}"), "order", operator=op)  # (a restart: the view is made again)
    again.write(runner.add_elements(TimestampedValue(("b", 1), T + 30_000)), 1, watermark=T + 30_000)
    assert [(r["key"], r["settled"]) for r in again.status_rows()] == [("a", True), ("b", False)]
    sink.dispose(), again.dispose()


def test_a_status_view_name_that_is_a_table_is_refused(tmp_path):
    from windowed_operator.sinks import TableSinkError

    database = tmp_path / "r.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE totals_status (x INTEGER)")
    op = tumbling()
    sink = TableSink(str(database), "totals", operator=op)
    with pytest.raises(TableSinkError, match="status view 'totals_status': a table of that name exists"):
        sink.write(op.local_runner().add_elements(TimestampedValue(("a", 1), T)), 0)


def test_an_earlier_version_s_progress_reads_before_any_batch(tmp_path):
    database = earlier_progress_table(tmp_path, "('totals', '', 3, 'totals', NULL, 1, 0)")
    sink = TableSink(str(database), "totals", operator=tumbling())
    assert sink.progress()["batch_id"] == 3 and "watermark" not in sink.progress()
    assert sink.applied_batch() == 3 and sink.audit_rows() == []
