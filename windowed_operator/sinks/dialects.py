"""The databases a table sink writes to, one small class each (``Dialect``: what differs between
them), and what they share: the progress table, the batched execution of one compiled statement, an
upsert, and a database error as one line.

- SQLite (``sqlite:///path`` or a file path): ``BEGIN IMMEDIATE`` takes the write lock before the
  progress row is read.
- PostgreSQL (``postgresql://`` or ``postgresql+psycopg://``, psycopg 3 either way): sessions in UTC;
  the progress row is read ``FOR UPDATE``.
- DuckDB (``duckdb:///path``, or a path ending ``.duckdb``): one process writes a database file
  (DuckDB's own rule), so no row lock is needed; its columns are read from ``information_schema``
  (the SQLAlchemy dialect's catalog queries are PostgreSQL's, which DuckDB does not hold).
"""
from __future__ import annotations

from typing import Any, ClassVar, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .columns import sql_type
from .completeness import AUDIT_COLUMNS, PROGRESS_COLUMNS
from .netting import TableColumns

#: The table of each sink's last applied batch, per query.
PROGRESS_TABLE = "windowed_operator_sink_progress"
#: The audit: a row per applied batch of each sink and query (``TableSink(audit=...)``).
AUDIT_TABLE = "windowed_operator_sink_batches"


class Dialect:
    """What a table sink does differently in one database (the defaults: PostgreSQL's and SQLite's)."""

    name: ClassVar[str]
    #: Whether the progress row is read ``FOR UPDATE`` (a second writer of the same sink waits).
    locks_progress_row: ClassVar[bool] = False

    def engine(self, url: sa.URL) -> Engine:
        return sa.create_engine(url)

    def begin(self, conn: Any) -> None:
        """What a batch's transaction does first (nothing but where a database needs it)."""

    def insert(self, table: sa.Table) -> Any:
        """The dialect's ``INSERT`` with ``ON CONFLICT DO UPDATE``."""
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(table)

    def write(self, conn: Any, table: sa.Table, columns: TableColumns, mode: str, deletes: list[dict],
              upserts: list[dict], chunk_size: int) -> None:
        """A batch's net rows: ``deletes`` (their primary key as ``pk_<column>``) then ``upserts``, each
        one statement compiled once and executed ``chunk_size`` rows at a time."""
        if deletes:
            statement = sa.delete(table).where(
                sa.and_(*[table.c[c] == sa.bindparam(f"pk_{c}") for c in columns.primary_key]))
            execute_many(conn, statement, deletes, chunk_size)
        if upserts:
            execute_many(conn, upsert_statement(self, table, columns, mode), upserts, chunk_size)

    def reflect(self, engine: Engine, table: str) -> Optional[dict[str, Any]]:
        """The table's columns (name -> SQLAlchemy's column record: ``type``, ``nullable``,
        ``default``) and primary key as the database holds them (None: no such table)."""
        inspector = sa.inspect(engine)
        if not inspector.has_table(table):
            return None
        columns = {c["name"]: c for c in inspector.get_columns(table)}
        primary = inspector.get_pk_constraint(table).get("constrained_columns") or []
        return {"columns": columns, "primary_key": list(primary)}


class SQLite(Dialect):
    name = "sqlite"

    def engine(self, url: sa.URL) -> Engine:
        return sa.create_engine(url, connect_args={"timeout": 30})

    def begin(self, conn: Any) -> None:
        # pysqlite begins a transaction only before a write, so the progress read would be outside
        # it: BEGIN IMMEDIATE takes the write lock first.
        if not getattr(conn.connection.driver_connection, "in_transaction", True):
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    def insert(self, table: sa.Table) -> Any:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)


class PostgreSQL(Dialect):
    name = "postgresql"
    locks_progress_row = True

    def engine(self, url: sa.URL) -> Engine:
        if url.drivername == "postgresql":
            url = url.set(drivername="postgresql+psycopg")
        options: dict[str, Any] = {}
        if url.get_driver_name() in ("psycopg", "psycopg2"):
            options["connect_args"] = {"options": "-c TimeZone=UTC", "connect_timeout": 10}
        return sa.create_engine(url, **options)


class DuckDB(Dialect):
    name = "duckdb"
    #: A kind's Arrow type for the staged rows (``json``: its text, cast in the statement).
    ARROW_TYPES: ClassVar[dict[str, str]] = {
        "bigint": "int64", "double": "float64", "string": "string", "boolean": "bool_", "date": "date32",
        "binary": "binary", "json": "string"}

    def write(self, conn: Any, table: sa.Table, columns: TableColumns, mode: str, deletes: list[dict],
              upserts: list[dict], chunk_size: int) -> None:
        """Set-based: DuckDB runs an ``executemany`` row by row (about 250 rows/s), so the rows go in
        as one Arrow table each, registered on the connection, and one statement applies them."""
        kinds = dict(columns.columns())
        names = [c for c, _ in columns.columns()]
        driver = conn.connection.driver_connection
        # (both staged before either statement runs: DuckDB takes no registration while a result is open)
        gone = self._stage(driver, "windowed_operator_deletes", deletes, [f"pk_{c}" for c in columns.primary_key],
                           [kinds[c] for c in columns.primary_key])
        new = self._stage(driver, "windowed_operator_upserts", upserts, names, [kinds[c] for c in names])
        if gone is not None:
            conn.execute(sa.delete(table).where(sa.and_(*[table.c[c] == gone.c[f"pk_{c}"]
                                                          for c in columns.primary_key])))
        if new is not None:
            picked = sa.select(*[sa.cast(new.c[c], sa.JSON) if kinds[c] == "json" else new.c[c] for c in names])
            conn.execute(upsert_statement(self, table, columns, mode, source=picked))
        for staged in (gone, new):  # (the batch's Arrow tables are not kept alive by the connection)
            if staged is not None:
                driver.unregister(staged.name)

    def _stage(self, driver: Any, name: str, rows: list[dict], names: list[str], kinds: list[str]
               ) -> Optional[sa.TableClause]:
        """``rows`` as an Arrow table registered on the DuckDB connection as ``name`` (None: no rows)."""
        import json

        import pyarrow as pa

        if not rows:
            return None
        arrays = []
        for column, kind in zip(names, kinds):
            values = [row[column] for row in rows]
            if kind == "json":
                values = [None if v is None else json.dumps(v) for v in values]
            arrays.append(pa.array(values, type=self._arrow_type(kind)))
        driver.register(name, pa.Table.from_arrays(arrays, names=names))
        return sa.table(name, *[sa.column(c) for c in names])

    def _arrow_type(self, kind: str) -> Any:
        import pyarrow as pa

        if kind == "timestamp":
            return pa.timestamp("us", tz="UTC")
        if kind.startswith("decimal"):
            numeric = sql_type(kind)  # (the kind's precision and scale, read once: ``columns``)
            return pa.decimal128(numeric.precision, numeric.scale)  # type: ignore[attr-defined]
        return getattr(pa, self.ARROW_TYPES[kind])()

    #: DuckDB's type names (``information_schema.columns.data_type``) as SQLAlchemy types.
    TYPES: ClassVar[dict[str, sa.types.TypeEngine]] = {
        "BIGINT": sa.BigInteger(), "INTEGER": sa.Integer(), "SMALLINT": sa.SmallInteger(), "HUGEINT": sa.Numeric(38),
        "DOUBLE": sa.Double(), "FLOAT": sa.Float(), "REAL": sa.Float(), "VARCHAR": sa.Text(), "BOOLEAN": sa.Boolean(),
        "TIMESTAMP WITH TIME ZONE": sa.DateTime(timezone=True), "TIMESTAMP": sa.DateTime(), "DATE": sa.Date(),
        "JSON": sa.JSON(), "BLOB": sa.LargeBinary()}

    def reflect(self, engine: Engine, table: str) -> Optional[dict[str, Any]]:
        with engine.connect() as conn:
            found = conn.exec_driver_sql(
                "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
                "WHERE table_name = $1 ORDER BY ordinal_position", (table,)).fetchall()
            if not found:
                return None
            primary = conn.exec_driver_sql(
                "SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = $1 AND "
                "constraint_type = 'PRIMARY KEY'", (table,)).fetchall()
        columns = {name: {"name": name, "type": self._type(data_type), "nullable": nullable == "YES",
                          "default": default} for name, data_type, nullable, default in found}
        return {"columns": columns, "primary_key": list(primary[0][0]) if primary else []}

    def _type(self, data_type: str) -> sa.types.TypeEngine:
        if data_type.startswith("DECIMAL("):
            precision, scale = data_type[len("DECIMAL("):-1].split(",")
            return sa.Numeric(int(precision), int(scale))
        return self.TYPES.get(data_type, sa.types.NullType())


#: The databases a table sink writes to, by SQLAlchemy's backend name.
DIALECTS: dict[str, Dialect] = {d.name: d for d in (SQLite(), PostgreSQL(), DuckDB())}
#: A file path with one of these endings is a DuckDB database; any other, SQLite's.
DUCKDB_SUFFIXES = (".duckdb", ".ddb")
#: The databases that are a file (``<name>:///path``), and the ending a new file of each takes.
FILE_DATABASES = {"sqlite": ".db", "duckdb": DUCKDB_SUFFIXES[0]}


def file_database(url: str) -> Optional[tuple[str, str]]:
    """``(database, path)`` of a URL naming a database file (None: a server, or an in-memory database)."""
    scheme, sep, path = url.partition(":///")
    if not sep or scheme.lower() not in FILE_DATABASES or not path or path.startswith(":"):
        return None
    return scheme.lower(), path


def make_engine(url: str) -> Engine:
    """An engine for a URL or a database file path (DuckDB's for a ``.duckdb`` file, else SQLite's)."""
    if "://" not in url:
        url = f"{'duckdb' if url.lower().endswith(DUCKDB_SUFFIXES) else 'sqlite'}:///{url}"
    parsed = sa.make_url(url)
    dialect = DIALECTS.get(parsed.get_backend_name())
    return dialect.engine(parsed) if dialect is not None else sa.create_engine(parsed)


def dialect_of(engine: Engine) -> Dialect:
    """The engine's ``Dialect`` (an engine of another database is refused where the sink takes it)."""
    return DIALECTS[engine.dialect.name]


def progress_table() -> sa.Table:
    return sa.Table(PROGRESS_TABLE, sa.MetaData(),
                    sa.Column("sink", sa.Text(), primary_key=True), sa.Column("query_id", sa.Text(), primary_key=True),
                    sa.Column("batch_id", sa.BigInteger(), nullable=False), sa.Column("table_name", sa.Text()),
                    sa.Column("updated_at", sa.DateTime(timezone=True)), sa.Column("rows_upserted", sa.BigInteger()),
                    sa.Column("rows_deleted", sa.BigInteger()),
                    *[sa.Column(name, kind) for name, kind in PROGRESS_COLUMNS])


def audit_table() -> sa.Table:
    """One row per applied batch; its primary key makes a second application of a batch impossible."""
    return sa.Table(AUDIT_TABLE, sa.MetaData(),
                    sa.Column("sink", sa.Text(), primary_key=True), sa.Column("query_id", sa.Text(), primary_key=True),
                    sa.Column("batch_id", sa.BigInteger(), primary_key=True), sa.Column("table_name", sa.Text()),
                    sa.Column("applied_at", sa.DateTime(timezone=True)), sa.Column("rows_upserted", sa.BigInteger()),
                    sa.Column("rows_deleted", sa.BigInteger()), *[sa.Column(name, kind) for name, kind in AUDIT_COLUMNS])


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


def upsert_statement(dialect: Dialect, table: sa.Table, columns: TableColumns, mode: str, source: Any = None) -> Any:
    """The dialect's ``INSERT ... ON CONFLICT DO UPDATE`` of a row per (key, window): its columns
    replaced, or, in mode ``add``, its value added to; the rows bound per execution, or ``source``'s
    (a select of every column, in ``columns.columns()``'s order)."""
    insert = dialect.insert(table)
    if source is not None:
        insert = insert.from_select([c for c, _ in columns.columns()], source)
    update = {c: insert.excluded[c] for c, _ in columns.columns() if c not in columns.primary_key}
    if mode == "add":
        column = columns.values[0][0]
        update[column] = table.c[column] + insert.excluded[column]
    return insert.on_conflict_do_update(index_elements=columns.primary_key, set_=update)


__all__ = ["AUDIT_TABLE", "DIALECTS", "PROGRESS_TABLE", "audit_table", "Dialect", "db_message", "dialect_of", "execute_many", "make_engine",
           "progress_table", "upsert_statement"]
