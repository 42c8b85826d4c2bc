"""The table sink on DuckDB (a database file, ``duckdb:///path`` or a path ending ``.duckdb``): the
same random-stream property as on SQLite and PostgreSQL for every window family and mode, the types,
and the bad-input cases that depend on the database."""
from __future__ import annotations

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings

from table_sink_model import FAMILIES, MODES, check_stream, streams
from windowed_operator.panes import PaneRecord, Timing
from windowed_operator.sinks import TableSink, TableSinkError, make_engine

pytest.importorskip("duckdb_engine", reason='no DuckDB driver: pip install -e ".[duckdb]"')
_SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    return tmp_path_factory.mktemp("duckdb") / "results.duckdb"


_tables = iter(range(1_000_000))


def fresh_table() -> str:
    return f"results_{next(_tables)}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("mode", MODES)
@_SETTINGS
@given(stream=streams)
def test_table_equals_model_after_every_bundle_on_duckdb(database, family, mode, stream):
    check_stream(f"duckdb:///{database}", fresh_table(), family, mode, False, stream)


@_SETTINGS
@given(stream=streams)
def test_final_only_on_duckdb(database, stream):
    check_stream(str(database), fresh_table(), "sessions", "retracting", True, stream)  # (a file path)


def pane(key, start, end, value, index=0, retraction=False) -> PaneRecord:
    return PaneRecord(key, start, end, value, Timing.EARLY, index, index == 0, False, retraction, end - 1)


def test_a_duckdb_file_path_or_url_is_duckdb_and_any_other_path_sqlite(tmp_path):
    assert make_engine(str(tmp_path / "a.duckdb")).dialect.name == "duckdb"
    assert make_engine(f"duckdb:///{tmp_path / 'b.db'}").dialect.name == "duckdb"
    assert make_engine(str(tmp_path / "c.db")).dialect.name == "sqlite"


def test_types_on_duckdb(database):
    table = fresh_table()
    sink = TableSink(str(database), table, columns=["timing", "is_last"])
    sink([pane("u", 0, 10_000, {"clicks": 3, "pages": ["a"], "spent": 1.5, "ok": True})], 0)
    with sink.engine.connect() as conn:
        columns = dict(conn.exec_driver_sql("SELECT column_name, data_type FROM information_schema.columns WHERE "
                                            f"table_name = '{table}'").fetchall())
    assert columns == {"key": "VARCHAR", "window_start": "TIMESTAMP WITH TIME ZONE",
                       "window_end": "TIMESTAMP WITH TIME ZONE", "clicks": "BIGINT", "pages": "JSON",
                       "spent": "DOUBLE", "ok": "BOOLEAN", "timing": "VARCHAR", "is_last": "BOOLEAN"}
    assert [(r["clicks"], r["pages"], r["ok"]) for r in sink.rows()] == [(3, ["a"], True)]
    again = TableSink(str(database), table, columns=["timing", "is_last"])  # (a second sink reads the table's columns)
    again([pane("u", 0, 10_000, {"clicks": 4, "pages": [], "spent": 2.0, "ok": False}, index=1)], 1)
    assert [(r["clicks"], r["spent"]) for r in again.rows()] == [(4, 2.0)]


def test_a_mismatched_table_on_duckdb_is_refused_and_nothing_written(database):
    table = fresh_table()
    engine = make_engine(str(database))
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (key text, window_start timestamptz, window_end timestamptz, "
                             "value double, PRIMARY KEY (key, window_start, window_end))")
    with pytest.raises(TableSinkError, match=rf"table '{table}', column 'value' is DOUBLE in the database, the "
                                             "sink writes bigint"):
        TableSink(engine, table)([pane("u", 0, 10_000, 3)], 0)
    with engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() == 0


def test_a_table_with_another_primary_key_on_duckdb_is_refused(database):
    table = fresh_table()
    engine = make_engine(str(database))
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (key text PRIMARY KEY, window_start timestamptz, "
                             "window_end timestamptz, value bigint)")
    with pytest.raises(TableSinkError, match=rf"table '{table}' has primary key \['key'\], the sink needs"):
        TableSink(engine, table)([pane("u", 0, 10_000, 3)], 0)


def test_a_failing_statement_rolls_back_on_duckdb(tmp_path):
    engine = make_engine(str(tmp_path / "checked.duckdb"))
    with engine.begin() as conn:  # a constraint the sink does not know: the whole batch rolls back
        conn.exec_driver_sql("CREATE TABLE t (key text, window_start timestamptz, window_end timestamptz, value "
                             "bigint CHECK (value < 100), PRIMARY KEY (key, window_start, window_end))")
    sink = TableSink(engine, "t")
    sink([pane("u", 0, 10_000, 3)], 0)
    with pytest.raises(TableSinkError, match=r"table 't'.*batch 1 rolled back, nothing of it written: .*CHECK"):
        sink([pane("u", 0, 10_000, 5, index=1), pane("v", 0, 10_000, 500)], 1)
    assert [(r["key"], r["value"]) for r in sink.rows()] == [("u", 3)]
    assert sink.applied_batch() == 0


def test_one_statement_per_batch_on_duckdb(database):
    """DuckDB's executemany runs row by row: the rows go in as one staged Arrow table each, whatever
    ``chunk_size`` says."""
    table = fresh_table()
    sink = TableSink(str(database), table, name=table, chunk_size=100)
    statements = []
    sa.event.listen(sink.engine, "before_cursor_execute",
                    lambda conn, cursor, statement, *_: statements.append(statement.split()[0]))
    sink([pane(f"k{i}", 0, 10_000, i) for i in range(250)], 0)
    sink([pane(f"k{i}", 0, 10_000, -i, index=1, retraction=True) for i in range(120)], 1)
    assert (statements.count("INSERT"), statements.count("DELETE")) == (1 + 2, 1)  # (+ the progress rows)
    assert len(sink.rows()) == 130
