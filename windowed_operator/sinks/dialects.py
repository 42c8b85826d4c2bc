"""The databases a table sink writes to, and what differs between them: how an engine is made from a
URL (a file path is SQLite; PostgreSQL sessions in UTC), the dialect's upsert, the progress table, the
batched execution of one compiled statement, and a database error as one line.
"""
from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .netting import TableColumns

#: The table of each sink's last applied batch, per query.
PROGRESS_TABLE = "windowed_operator_sink_progress"
DIALECTS = ("sqlite", "postgresql")


def make_engine(url: str) -> Engine:
    """An engine for a URL or a SQLite file path; PostgreSQL sessions in UTC."""
    if "://" not in url:
        url = f"sqlite:///{url}"
    parsed = sa.make_url(url)
    options: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        if parsed.get_driver_name() in ("psycopg", "psycopg2"):
            options["connect_args"] = {"options": "-c TimeZone=UTC", "connect_timeout": 10}
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
            options["connect_args"] = {"options": "-c TimeZone=UTC", "connect_timeout": 10}
    elif parsed.get_backend_name() == "sqlite":
        options["connect_args"] = {"timeout": 30}
    return sa.create_engine(parsed, **options)


def pysqlite_outside_transaction(conn: Any) -> bool:
    """Whether pysqlite has not begun a transaction yet (it begins one only before a write, so the
    progress read would be outside it: BEGIN IMMEDIATE takes the write lock first)."""
    raw = conn.connection.driver_connection
    return not getattr(raw, "in_transaction", True)


def progress_table() -> sa.Table:
    return sa.Table(PROGRESS_TABLE, sa.MetaData(),
                    sa.Column("sink", sa.Text(), primary_key=True), sa.Column("query_id", sa.Text(), primary_key=True),
                    sa.Column("batch_id", sa.BigInteger(), nullable=False), sa.Column("table_name", sa.Text()),
                    sa.Column("updated_at", sa.DateTime(timezone=True)), sa.Column("rows_upserted", sa.BigInteger()),
                    sa.Column("rows_deleted", sa.BigInteger()))


def dialect_insert(dialect: str) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert
        return postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert
    return sqlite_insert


def execute_many(conn: Any, statement: Any, rows: list[dict], chunk_size: int) -> None:
    """``statement`` (compiled once by the dialect) for every row, ``chunk_size`` rows per
    ``executemany``: the values go through the column types' bind processors here, once per
    distinct value where they repeat (window bounds), rather than SQLAlchemy's per-row parameter
    processing, which cost more than the database's work (benchmarks/table_sink.py)."""
    compiled = statement.compile(dialect=conn.dialect)
    names = list(compiled.positiontup) if compiled.positional else list(compiled.binds)
    processors = []
    for name in names:
        bind = compiled.binds[name]
        processor = bind.type._cached_bind_processor(conn.dialect)
        processors.append((name, _memoized(processor) if processor is not None and
                           isinstance(bind.type, sa.DateTime) else processor))
    if compiled.positional:
        params: list[Any] = [tuple(row[n] if p is None or row[n] is None else p(row[n]) for n, p in processors)
                             for row in rows]
    else:
        params = [{n: row[n] if p is None or row[n] is None else p(row[n]) for n, p in processors} for row in rows]
    for i in range(0, len(params), chunk_size):
        conn.exec_driver_sql(compiled.string, params[i:i + chunk_size])


def _memoized(processor: Any) -> Any:
    seen: dict[Any, Any] = {}

    def process(value: Any) -> Any:
        found = seen.get(value)
        if found is None:
            found = seen[value] = processor(value)
        return found
    return process


def db_message(exc: Exception) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    diag = getattr(orig, "diag", None)
    column = getattr(diag, "column_name", None) if diag is not None else None
    if not text:
        return type(exc).__name__
    return (f"column {column!r}: " if column else "") + text.splitlines()[0]


def upsert_statement(dialect: str, table: sa.Table, columns: TableColumns, mode: str) -> Any:
    """The dialect's ``INSERT ... ON CONFLICT DO UPDATE`` of a row per (key, window): its columns
    replaced, or, in mode ``add``, its value added to."""
    insert = dialect_insert(dialect)(table)
    update = {c: insert.excluded[c] for c, _ in columns.columns() if c not in columns.primary_key}
    if mode == "add":
        column = columns.values[0][0]
        update[column] = table.c[column] + insert.excluded[column]
    return insert.on_conflict_do_update(index_elements=columns.primary_key, set_=update)


__all__ = ["DIALECTS", "PROGRESS_TABLE", "db_message", "dialect_insert", "execute_many", "make_engine",
           "progress_table", "pysqlite_outside_transaction", "upsert_statement"]
