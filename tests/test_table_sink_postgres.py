"""The table sink on a real PostgreSQL server (started by the test run: tests/postgres_server.py):
the same random-stream property as on SQLite for every window family and mode, and the bad-input
cases that depend on the database."""
from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings

from table_sink_model import FAMILIES, MODES, check_stream, streams
from windowed_operator.panes import PaneRecord, Timing
from windowed_operator.sinks import TableSink, TableSinkError, make_engine

_tables = itertools.count()


@pytest.fixture(scope="module")
def engine(postgres_url):
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


def fresh_table(engine) -> str:
    name = f"results_{next(_tables)}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    return name


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(stream=streams)
def test_table_equals_model_after_every_bundle_on_postgres(postgres_url, engine, family, mode, stream):
    check_stream(postgres_url, fresh_table(engine), family, mode, False, stream)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(stream=streams)
def test_final_only_on_postgres(postgres_url, engine, stream):
    check_stream(postgres_url, fresh_table(engine), "sessions", "retracting", True, stream)


def pane(key, start, end, value, index=0, retraction=False) -> PaneRecord:
    return PaneRecord(key, start, end, value, Timing.EARLY, index, index == 0, False, retraction, end - 1)


def test_types_on_postgres(postgres_url, engine):
    table = fresh_table(engine)
    sink = TableSink(postgres_url, table, columns=["timing", "is_last"])
    sink([pane("u", 0, 10_000, {"clicks": 3, "pages": ["a"], "spent": 1.5, "ok": True})], 0)
    columns = {c["name"]: str(c["type"]) for c in sa.inspect(engine).get_columns(table)}
    assert columns == {"key": "TEXT", "window_start": "TIMESTAMP", "window_end": "TIMESTAMP", "clicks": "BIGINT",
                       "pages": "JSON", "spent": "DOUBLE PRECISION", "ok": "BOOLEAN", "timing": "TEXT",
                       "is_last": "BOOLEAN"}
    with engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT data_type FROM information_schema.columns WHERE table_name = '{table}' "
                                    "AND column_name = 'window_start'").scalar() == "timestamp with time zone"
    assert [(r["clicks"], r["pages"], r["ok"]) for r in sink.rows()] == [(3, ["a"], True)]


def test_a_mismatched_table_on_postgres_is_refused_and_nothing_written(postgres_url, engine):
    table = fresh_table(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (key text, window_start timestamptz, window_end timestamptz, "
                             "value double precision, PRIMARY KEY (key, window_start, window_end))")
    with pytest.raises(TableSinkError, match=rf"table '{table}', column 'value' is DOUBLE PRECISION in the "
                                             "database, the sink writes bigint"):
        TableSink(postgres_url, table)([pane("u", 0, 10_000, 3)], 0)
    with engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() == 0


def test_a_failing_statement_rolls_back_on_postgres(postgres_url, engine):
    table = fresh_table(engine)
    sink = TableSink(postgres_url, table, name=table)
    sink([pane("u", 0, 10_000, 3)], 0)
    with engine.begin() as conn:  # a constraint the sink does not know: the whole batch rolls back
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD CONSTRAINT small CHECK (value < 100)")
    with pytest.raises(TableSinkError, match=rf"table '{table}'.*batch 1 rolled back, nothing of it written: "
                                             ".*violates check constraint"):
        sink([pane("u", 0, 10_000, 5, index=1), pane("v", 0, 10_000, 500)], 1)
    assert [(r["key"], r["value"]) for r in sink.rows()] == [("u", 3)]
    assert sink.applied_batch() == 0


def test_one_executemany_per_chunk_on_postgres(postgres_url, engine):
    table = fresh_table(engine)
    sink = TableSink(postgres_url, table, name=table, chunk_size=100)
    statements = []
    sa.event.listen(sink.engine, "before_cursor_execute",
                    lambda conn, cursor, statement, *_: statements.append(statement.split()[0]))
    sink([pane(f"k{i}", 0, 10_000, i) for i in range(250)], 0)
    sink([pane(f"k{i}", 0, 10_000, -i, index=1, retraction=True) for i in range(120)], 1)
    assert (statements.count("INSERT"), statements.count("DELETE")) == (3 + 2, 2)  # (+ the progress rows)
    assert len(sink.rows()) == 130
