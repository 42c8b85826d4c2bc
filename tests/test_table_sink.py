"""The table sink on SQLite: random streams of every window family and accumulation mode (sessions
with merges included) keep the table equal to the model after every bundle; replays are skipped;
bad input is an error naming the table and column, with nothing of the batch written."""
from __future__ import annotations

import datetime as dt
import sqlite3
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings

from accumulations import Count, Max, Sum
from table_sink_model import FAMILIES, MODES, check_stream, make_operator, streams
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, WindowedOperator
from windowed_operator.panes import PaneRecord, Timing
from windowed_operator.sinks import PROGRESS_TABLE, TableSink, TableSinkError

UTC = dt.timezone.utc


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams)
def test_table_equals_model_after_every_bundle(family, mode, stream):
    with tempfile.TemporaryDirectory() as directory:
        check_stream(str(Path(directory) / "t.db"), "results", family, mode, False, stream)


@pytest.mark.parametrize("family", ["sessions", "tumbling", "global"])
@pytest.mark.parametrize("mode", ["accumulating", "retracting"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams)
def test_final_only_keeps_the_final_rows(family, mode, stream):
    with tempfile.TemporaryDirectory() as directory:
        check_stream(str(Path(directory) / "t.db"), "results", family, mode, True, stream)


def pane(key, start, end, value, timing="EARLY", index=0, retraction=False, last=False) -> PaneRecord:
    return PaneRecord(key, start, end, value, Timing(timing), index, index == 0, last, retraction, end - 1)


def test_a_session_absorbed_by_a_merge_disappears(tmp_path):
    sink = TableSink(str(tmp_path / "t.db"), "sessions")
    sink([pane("u", 1000, 11000, 3), pane("u", 15000, 25000, 4)], 0)
    assert [(r["window_start"].second, r["window_end"].second) for r in sink.rows()] == [(1, 11), (15, 25)]
    sink([pane("u", 1000, 11000, -3, index=1, retraction=True, last=True),
          pane("u", 15000, 25000, -4, index=1, retraction=True, last=True), pane("u", 1000, 25000, 12)], 1)
    assert [(r["window_start"].second, r["window_end"].second, r["value"]) for r in sink.rows()] == [(1, 25, 12)]


def test_rows_of_one_window_apply_in_pane_order_whatever_their_order_in_the_batch(tmp_path):
    sink = TableSink(str(tmp_path / "t.db"), "t")
    sink([pane("u", 0, 10, 5, "ON_TIME", 1), pane("u", 0, 10, -3, "ON_TIME", 1, retraction=True),
          pane("u", 0, 10, 3, "EARLY", 0)], 0)
    assert [r["value"] for r in sink.rows()] == [5]


def test_late_data_and_dead_letter_rows_are_skipped_and_counted(tmp_path):
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    rows = [{"key": "u", "window_start": start, "window_end": start + dt.timedelta(seconds=10), "value": 3,
             "timing": "ON_TIME", "pane_index": 0, "is_first": True, "is_last": True, "is_retraction": False,
             "timestamp": start, "record_type": "pane", "reason": None, "element": None, "element_timestamp": None},
            {"key": "u", "window_start": None, "window_end": None, "value": None, "timing": None, "pane_index": None,
             "is_first": None, "is_last": None, "is_retraction": None, "timestamp": None, "record_type": "late",
             "reason": "expired", "element": '{"user": "u"}', "element_timestamp": start}]
    sink = TableSink(str(tmp_path / "t.db"), "t")
    result = sink(rows, 0)
    assert (result.upserted, result.skipped_rows) == (1, 1)
    assert [(r["key"], r["window_start"], r["value"]) for r in sink.rows()] == [("u", start, 3)]


def test_a_non_keyed_operator_and_the_global_window(tmp_path):
    op = WindowedOperator(FAMILIES["global"](), Count(),
                          trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=1)
                          .accumulating_fired_panes())
    sink = TableSink(str(tmp_path / "t.db"), "totals", operator=op)
    runner = op.local_runner()
    sink(runner.add_elements(1, 2, 3), 0)
    sink(runner.finish(), 1)
    rows = sink.rows()
    assert [(r["window_start"].year, r["window_end"].year, r["value"]) for r in rows] == [(1, 9999, 3)]
    assert "key" not in rows[0]


def test_record_values_become_columns(tmp_path):
    records = [pane("u", 0, 10_000, {"clicks": 3, "pages": ["a", "b"], "spent": 1.5}),
               pane("v", 0, 10_000, {"clicks": 1, "pages": [], "spent": None})]
    sink = TableSink(str(tmp_path / "t.db"), "t")
    sink(records, 0)
    assert [(r["key"], r["clicks"], r["pages"], r["spent"]) for r in sink.rows()] == \
        [("u", 3, ["a", "b"], 1.5), ("v", 1, [], None)]
    columns = {c["name"]: str(c["type"]) for c in sa.inspect(sink.engine).get_columns("t")}
    assert columns == {"key": "TEXT", "window_start": "DATETIME", "window_end": "DATETIME", "clicks": "BIGINT",
                       "pages": "JSON", "spent": "DOUBLE"}


def test_value_type_declares_the_columns(tmp_path):
    sink = TableSink(str(tmp_path / "t.db"), "t", value_type="struct<n: bigint, avg: double>")
    sink([pane("u", 0, 10, None)], 0)  # (all null: the type comes from value_type)
    assert [(r["n"], r["avg"]) for r in sink.rows()] == [(None, None)]


def test_all_null_values_without_a_type_is_a_clear_error(tmp_path):
    sink = TableSink(str(tmp_path / "t.db"), "t")
    with pytest.raises(TableSinkError, match=r"table 't'.*cannot tell the type of column.*'value'.*value_type="):
        sink([pane("u", 0, 10, None)], 0)


def test_a_value_not_fitting_its_column_names_table_and_column_and_writes_nothing(tmp_path):
    path = str(tmp_path / "t.db")
    sink = TableSink(path, "t")
    sink([pane("u", 0, 10_000, 3)], 0)
    with pytest.raises(TableSinkError, match=r"table 't', column 'value' \(bigint\): value 'x' does not fit: "
                                             r"not an integer.*key 'w'.*nothing of the batch was written"):
        sink([pane("u", 0, 10_000, 5, index=1), pane("w", 0, 10_000, "x")], 1)
    assert [r["value"] for r in sink.rows()] == [3]
    assert sink.applied_batch() == 0  # the batch can be applied once fixed
    assert sink([pane("u", 0, 10_000, 5, index=1)], 1).applied


def test_an_integer_beyond_64_bits_does_not_fit(tmp_path):
    sink = TableSink(str(tmp_path / "t.db"), "t")
    sink([pane("u", 0, 10_000, 3)], 0)
    with pytest.raises(TableSinkError, match=r"column 'value'.*outside the 64-bit integer range"):
        sink([pane("u", 0, 10_000, 1 << 70, index=1)], 1)


def test_a_table_whose_schema_does_not_match_is_refused_by_name(tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (key TEXT, window_start DATETIME, window_end DATETIME, value TEXT, "
                   "PRIMARY KEY (key, window_start, window_end))")
        db.execute("CREATE TABLE other (key TEXT, window_start DATETIME, value BIGINT)")
    with pytest.raises(TableSinkError, match=r"table 't', column 'value' is TEXT in the database, the sink "
                                             r"writes bigint"):
        TableSink(str(path), "t")([pane("u", 0, 10_000, 3)], 0)
    with pytest.raises(TableSinkError, match=r"table 'other' has no column 'window_end'"):
        TableSink(str(path), "other")([pane("u", 0, 10_000, 3)], 0)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (0,)
        assert db.execute(f"SELECT count(*) FROM {PROGRESS_TABLE}").fetchone() == (0,)


def test_a_table_with_another_primary_key_is_refused(tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (key TEXT PRIMARY KEY, window_start DATETIME, window_end DATETIME, value BIGINT)")
    with pytest.raises(TableSinkError, match=r"table 't' has primary key \['key'\], the sink needs "
                                             r"\['key', 'window_start', 'window_end'\]"):
        TableSink(str(path), "t")([pane("u", 0, 10_000, 3)], 0)


def test_an_unreachable_database_names_the_table():
    pytest.importorskip("psycopg", reason='no PostgreSQL driver: pip install -e ".[postgres]"')
    url = "postgresql+psycopg://postgres@127.0.0.1:1/postgres"
    with pytest.raises(TableSinkError, match=r"table sink 'results': cannot reach the database of table "
                                             r"'results' at postgresql\+psycopg://postgres@127.0.0.1:1/postgres"):
        TableSink(url, "results")([pane("u", 0, 10_000, 3)], 0)


def test_an_error_never_shows_the_password():
    pytest.importorskip("psycopg", reason='no PostgreSQL driver: pip install -e ".[postgres]"')
    with pytest.raises(TableSinkError) as raised:
        TableSink("postgresql+psycopg://bob:secret@127.0.0.1:1/db", "t")([pane("u", 0, 10_000, 3)], 0)
    assert "secret" not in str(raised.value) and "bob:***@127.0.0.1:1" in str(raised.value)


def test_an_unopenable_sqlite_file_names_the_table(tmp_path):
    with pytest.raises(TableSinkError, match=r"cannot reach the database of table 'results' at .*missing/t.db"):
        TableSink(str(tmp_path / "missing" / "t.db"), "results")([pane("u", 0, 10_000, 3)], 0)


def test_a_failing_statement_rolls_the_batch_back(tmp_path):
    path = str(tmp_path / "t.db")
    sink = TableSink(path, "t")
    sink([pane("u", 0, 10_000, 3)], 0)
    with sqlite3.connect(path) as db:  # a trigger that fails on one key: the batch's other rows roll back too
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON t WHEN NEW.key = 'bad' "
                   "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END")
    with pytest.raises(TableSinkError, match=r"table 't'.*batch 1 rolled back, nothing of it written: "
                                             r"refused by a trigger"):
        sink([pane("u", 0, 10_000, 5, index=1), pane("bad", 0, 10_000, 1)], 1)
    assert [(r["key"], r["value"]) for r in sink.rows()] == [("u", 3)]
    assert sink.applied_batch() == 0


def test_modes_are_checked_against_the_operator():
    def operator(mode, accumulation=Sum()):
        trigger = getattr(TriggerOption.at_watermark(), f"{mode}_fired_panes")()
        return KeyedWindowedOperator(TimeWindows(10), accumulation, trigger=trigger)

    with pytest.raises(ValueError, match="discards fired panes.*use mode='add'"):
        TableSink("t.db", "t", operator=operator("discarding"))
    with pytest.raises(ValueError, match="accumulates fired panes.*counts elements twice"):
        TableSink("t.db", "t", mode="add", operator=operator("accumulating"))
    with pytest.raises(ValueError, match=r"only for accumulations whose panes add up \(Sum, Count\), not Max"):
        TableSink("t.db", "t", mode="add", operator=operator("discarding", Max()))
    with pytest.raises(ValueError, match="final_only=True keeps only final panes, but in mode='add'"):
        TableSink("t.db", "t", mode="add", final_only=True)
    TableSink("t.db", "t", mode="add", operator=operator("discarding", Count()))


def test_a_new_query_id_starts_its_own_progress(tmp_path):
    sink = TableSink(str(tmp_path / "t.db"), "t", columns=["batch_id"])
    sink.write([pane("u", 0, 10, 1)], 3, query_id="q1")
    assert not sink.write([pane("u", 0, 10, 2, index=1)], 3, query_id="q1").applied
    assert sink.write([pane("u", 0, 10, 2, index=1)], 0, query_id="q2").applied
    assert [(r["value"], r["batch_id"]) for r in sink.rows()] == [(2, 0)]
    assert (sink.applied_batch("q1"), sink.applied_batch("q2")) == (3, 0)


def test_writes_are_batched_not_one_statement_per_row(tmp_path):
    sink = TableSink(str(tmp_path / "t.db"), "t", chunk_size=100)
    statements = []
    sa.event.listen(sink.engine, "before_cursor_execute",
                    lambda conn, cursor, statement, params, context, executemany: statements.append(executemany))
    sink([pane(f"k{i}", 0, 10_000, i) for i in range(250)], 0)
    assert statements.count(True) == 3  # 250 rows in chunks of 100
    assert len(sink.rows()) == 250


def test_pandas_and_arrow_batches(tmp_path):
    import pandas as pd
    import pyarrow as pa

    start = pd.Timestamp("2026-01-01", tz="UTC")
    frame = pd.DataFrame({"key": ["u", "v"], "window_start": [start, start], "window_end": [start, start],
                          "value": [1.5, None], "timing": ["EARLY", "EARLY"], "pane_index": [0, 0],
                          "is_first": [True, True], "is_last": [False, False], "is_retraction": [False, False]})
    sink = TableSink(str(tmp_path / "t.db"), "t")
    sink(frame, 0)
    sink(pa.Table.from_pandas(frame.assign(value=[2.5, 1.0], pane_index=[1, 1])), 1)
    assert [(r["key"], r["value"]) for r in sink.rows()] == [("u", 2.5), ("v", 1.0)]


def test_a_sink_pickles_without_its_engine(tmp_path):
    import pickle

    sink = TableSink(str(tmp_path / "t.db"), "t")
    sink([pane("u", 0, 10, 1)], 0)
    copy = pickle.loads(pickle.dumps(sink))
    assert not copy.write([pane("u", 0, 10, 1)], 0).applied
    assert copy.write([pane("u", 0, 10, 2, index=1)], 1).applied
    assert [r["value"] for r in sink.rows()] == [2]


def test_the_operators_merge_retractions_remove_the_absorbed_sessions(tmp_path):
    from windowed_operator.testing import TimestampedValue

    op = make_operator("sessions", "retracting", early=1, lateness=60_000)
    sink = TableSink(str(tmp_path / "t.db"), "sessions", operator=op)
    runner = op.local_runner()
    sink(runner.add_elements(TimestampedValue(("u", 3), 1_000), TimestampedValue(("u", 4), 7_000)), 0)
    assert [(r["window_start"].second, r["window_end"].second) for r in sink.rows()] == [(1, 5), (7, 11)]
    merged = runner.add_elements(TimestampedValue(("u", 5), 4_000))  # bridges the two sessions
    assert sum(p.is_retraction for p in merged) == 2
    sink(merged, 1)
    assert [(r["window_start"].second, r["window_end"].second, r["value"]) for r in sink.rows()] == [(1, 11, 12)]


def test_the_sink_and_a_local_run_into_it_import_no_pyspark(tmp_path):
    import subprocess
    import sys

    code = (f"import sys\nfrom windowed_operator.sinks import TableSink\nfrom windowed_operator.panes import "
            f"PaneRecord, Timing\nTableSink({str(tmp_path / 't.db')!r}, 't')([PaneRecord('u', 0, 10, 1, Timing.EARLY, "
            "0, True, False, False, 9)], 0)\nassert 'pyspark' not in sys.modules, 'pyspark was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("suffix", [".db", ".duckdb"])
def test_the_audit_keeps_a_row_per_applied_batch_and_replays_add_none(tmp_path, suffix):
    if suffix == ".duckdb":
        pytest.importorskip("duckdb_engine", reason='no DuckDB driver: pip install -e ".[duckdb]"')
    sink = TableSink(str(tmp_path / f"results{suffix}"), "t", audit=True, query_id="q")
    for batch_id in range(3):
        sink([pane("u", 0, 10_000, batch_id + 1, index=batch_id)], batch_id)
    for batch_id in range(3):  # Spark's replay after a crash: skipped, and not audited twice
        assert not sink([pane("u", 0, 10_000, 9, index=batch_id)], batch_id).applied
    sink([pane("u", 0, 10_000, -3, index=3, retraction=True)], 3)
    rows = sink.audit_rows()
    assert [(r["query_id"], r["batch_id"], r["rows_upserted"], r["rows_deleted"]) for r in rows] == [
        ("q", 0, 1, 0), ("q", 1, 1, 0), ("q", 2, 1, 0), ("q", 3, 0, 1)]
    assert all(r["table_name"] == "t" and r["applied_at"] is not None for r in rows)
    kept = TableSink(str(tmp_path / f"results{suffix}"), "t", name="kept", audit=2, query_id="q")
    for batch_id in range(5):
        kept([pane("v", 0, 10_000, batch_id, index=batch_id)], batch_id)
    assert [r["batch_id"] for r in kept.audit_rows("q")] == [3, 4]  # (the last two of the query)
    assert [r["batch_id"] for r in sink.audit_rows("q")] == [0, 1, 2, 3]  # (another sink's rows untouched)


def test_a_batch_rolled_back_leaves_no_audit_row(tmp_path):
    path = tmp_path / "results.db"
    sink = TableSink(str(path), "t", audit=True)
    sink([pane("u", 0, 10_000, 3)], 0)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TRIGGER no_v BEFORE INSERT ON t WHEN NEW.key = 'v' BEGIN SELECT RAISE(ABORT, 'no v'); END")
    with pytest.raises(TableSinkError, match="batch 1 rolled back"):
        sink([pane("u", 0, 10_000, 5, index=1), pane("v", 0, 10_000, 1)], 1)
    assert [r["batch_id"] for r in sink.audit_rows()] == [0]


@pytest.mark.parametrize("audit", [0, -1, "yes", 1.5])
def test_an_audit_that_is_no_flag_or_count_is_refused(tmp_path, audit):
    with pytest.raises(ValueError, match=f"audit must be True, False or a positive number of batches to keep, not "
                                         f"{audit!r}"):
        TableSink(str(tmp_path / "r.db"), "t", audit=audit)
