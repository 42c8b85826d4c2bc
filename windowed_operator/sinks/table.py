"""A table that equals the operator's current result: panes in, upserts and deletes out, exactly once.

``TableSink(url, table)`` takes one micro-batch of panes at a time (a Spark batch DataFrame in
``foreachBatch``, the local runner's ``PaneRecord`` list, or rows with the Spark output's columns) and
keeps one row per (key, window):

- ``mode="upsert"`` (operators that accumulate, with or without retractions): a pane replaces its
  window's row; a retraction deletes it, so a session absorbed by a merge disappears, and the pane
  that follows a retraction writes the new row.
- ``mode="add"`` (operators that discard fired panes): each pane's value is added to its window's
  row, so the row holds the sum of the panes.  Only for accumulations whose panes add up (``Sum``,
  ``Count``); with an ``operator=`` anything else is refused.

Each batch is applied in one database transaction together with a progress row (sink name, query
id, batch id) in ``windowed_operator_sink_progress``; a batch whose id is not above the last one
applied for that sink and query is skipped, so Spark's replay of the last batch after a crash
changes nothing.  Within a batch the rows of one window are taken in pane order (pane index, the
retraction before the pane it precedes) and only their net effect is written, in chunks of
``chunk_size`` rows per statement execution (``executemany``), never a statement per row.

Rows that are not panes (late-data and dead-letter records, whose pane columns are null) are
skipped and counted in ``BatchResult.skipped_rows``.  The global window's bounds, which the panes
show as null, are stored as 0001-01-01 and 9999-12-31 23:59:59.999 UTC (a primary key is never null).
"""
from __future__ import annotations

import datetime as dt
import logging
import numbers
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..chain import output_stage
from ..panes import FIRING_COLUMNS

from .columns import ColumnKindError, as_utc, kind_of_spark_type, sql_type
from .completeness import (AUDIT_COLUMNS, LATEST_FIRST, PROGRESS_COLUMNS, BatchWatermark, Completeness, add_missing_columns,
                           batch_values, create_status_view)
from .dialects import (AUDIT_TABLE, DIALECTS, PROGRESS_TABLE, audit_table, db_message, dialect_of, make_engine,
                       progress_table)
from .netting import GLOBAL_END, GLOBAL_START, OPTIONAL_COLUMNS, WINDOW_COLUMNS, NetError, TableColumns, net
from .reading import pane_rows, read_batch, watermark_rows
from .table_shape import (NAME, ShapeOptions, SinkMode, TableSinkError, check_table, columns_of, struct_fields)

log = logging.getLogger(__name__)




@dataclass
class BatchResult:
    """What one call did: ``applied`` False when the batch id had been applied already."""

    batch_id: int
    applied: bool
    upserted: int = 0
    deleted: int = 0
    skipped_rows: int = 0  # late-data and dead-letter rows (not panes)
    held_back: int = 0  # panes not written because they are not final (final_only)


def check_operator(operator: Any, mode: SinkMode, final_only: bool = False) -> None:
    """Refuse a sink mode the operator's panes do not fit (``operator``: any operator with a trigger
    and an accumulation)."""
    from accumulations import Count, Sum

    operator = output_stage(operator)
    trigger = operator.trigger
    label = operator.label() if hasattr(operator, "label") else type(operator).__name__
    if mode == "upsert" and trigger.discarding:
        raise ValueError(f"{label} discards fired panes: each pane holds only what arrived since the last one, so "
                         "the latest pane is not the window's value; use mode='add' (for Sum or Count), or make the "
                         "operator accumulate (accumulating_fired_panes / accumulating_and_retracting_fired_panes)")
    if mode == "add":
        if not trigger.discarding:
            raise ValueError(f"{label} accumulates fired panes: each pane holds the window's whole value, so adding "
                             "panes counts elements twice; use mode='upsert'")
        accumulation = operator.accumulation
        if not isinstance(accumulation, (Sum, Count)):
            raise ValueError(f"mode='add' adds the panes of a window, which gives the window's value only for "
                             f"accumulations whose panes add up (Sum, Count), not {type(accumulation).__name__}; "
                             "make the operator accumulate fired panes and use mode='upsert'")
        if final_only:
            raise ValueError("final_only=True keeps only final panes, but in mode='add' every pane holds part of the "
                             "window's value; give final_only=False, or accumulate and use mode='upsert'")


class TableSink:
    """``sink(batch, batch_id)``: apply one micro-batch of panes to ``table`` (see the module's doc).

    ``url``: a SQLAlchemy URL (``sqlite:///path.db``; ``postgresql://host:5432/db`` or
    ``postgresql+psycopg://host:5432/db``, the same: psycopg 3 is the driver either way), a file path
    (SQLite) or an ``Engine``; ``value_type``: the value's Spark DDL type (``bigint``,
    ``struct<clicks: bigint, pages: array<string>>``), needed only where a first batch cannot show it
    (a Spark batch shows it always; local panes whose values are all null do not); ``columns``: any of
    ``timing``, ``pane_index``, ``is_last``, ``batch_id`` (the batch that last wrote the row),
    ``fired_by`` and ``firing_watermark`` (of an operator with ``fired_by=True``);
    ``final_only``: write only final panes (``is_last``, or ON_TIME or LATE), retractions still
    delete; ``name``: the sink's name in the progress table (default: the table's); ``query_id``: the
    query the batch ids belong to (default: a Spark batch's streaming query id, else ``""``);
    ``operator``: checks that its panes fit ``mode``; ``audit``: also keep a row per applied batch
    in ``windowed_operator_sink_batches`` (batch id, rows upserted and deleted, when), in the batch's
    transaction: ``True`` keeps every batch, a number the last that many of each query, so that
    exactly-once can be read from the database (``audit_rows``); ``status_view``: the name of the
    view of the table's rows with ``complete`` and ``settled`` (``sinks.completeness``; default
    ``<table>_status``, made where ``operator`` is given; False: none).  An existing table must have
    the sink's columns with the same kinds and primary key.
    """

    #: It reads the operator's watermark rows of a batch (``windowed_operator.spark.with_watermark``).
    reads_watermark = True

    def __init__(self, url: Union[str, Engine], table: str, *, mode: SinkMode = "upsert",
                 value_type: Optional[str] = None, key_column: str = "key", value_column: str = "value",
                 columns: Sequence[str] = (), final_only: bool = False, name: Optional[str] = None,
                 query_id: Optional[str] = None, chunk_size: int = 5_000, operator: Any = None,
                 audit: Union[bool, int] = False, status_view: Union[bool, str] = True) -> None:
        if mode not in ("upsert", "add"):
            raise ValueError(f"mode must be 'upsert' or 'add', not {mode!r}")
        for what, given in (("table", table), ("key_column", key_column), ("value_column", value_column)):
            if not isinstance(given, str) or not NAME.match(given):
                raise ValueError(f"{what} {given!r} is not a plain SQL name (letters, digits, underscores)")
        unknown = [c for c in columns if c not in OPTIONAL_COLUMNS]
        if unknown:
            raise ValueError(f"columns {unknown} are not optional columns (known: {', '.join(OPTIONAL_COLUMNS)})")
        if mode == "add" and final_only:
            raise ValueError("final_only=True keeps only final panes, but in mode='add' every pane holds part of the "
                             "window's value")
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, not {chunk_size}")
        if not isinstance(audit, (bool, int)) or (not isinstance(audit, bool) and audit <= 0):
            raise ValueError(f"audit must be True, False or a positive number of batches to keep, not {audit!r}")
        if operator is not None:
            check_operator(operator, mode, final_only)
            firing = [c for c in columns if c in FIRING_COLUMNS]
            if firing and not getattr(output_stage(operator), "fired_by", False):
                raise ValueError(f"columns {firing} come from panes that say why they fired: give the operator "
                                 "fired_by=True")
        view = f"{table}_status" if status_view is True else status_view or None
        if view is not None and not NAME.match(view):
            raise ValueError(f"status_view {view!r} is not a plain SQL name (letters, digits, underscores)")
        self.url = url
        self.table_name = table
        self.mode: SinkMode = mode
        self.value_type = value_type
        self.key_column = key_column
        self.value_column = value_column
        self.optional = tuple(c for c in OPTIONAL_COLUMNS if c in columns)
        self.final_only = final_only
        self.name = name or table
        self.query_id = query_id
        self.chunk_size = chunk_size
        self.audit = audit
        #: The operator's completeness rules (None without ``operator``: the watermark alone is recorded).
        self.rules = Completeness.of(operator)
        self.status_view = view if self.rules is not None else None
        self.last_result: Optional[BatchResult] = None
        self._engine: Optional[Engine] = url if isinstance(url, Engine) else None
        self._layout: Optional[TableColumns] = None
        self._table: Optional[sa.Table] = None
        self._progress: Optional[sa.Table] = None
        if self._engine is not None:
            self._check_dialect(self._engine)
        elif value_type is not None:
            struct_fields(value_type) or kind_of_spark_type(value_type)  # (a bad type fails here, not at a batch)

    # -- the engine ------------------------------------------------------------------------------
    def __getstate__(self) -> dict:  # (a foreachBatch function may be pickled: the engine is not)
        state = dict(self.__dict__)
        state.update(_engine=None if not isinstance(self.url, Engine) else state["_engine"], _table=None,
                     _progress=None, _layout=None)
        return state

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self.url)  # type: ignore[arg-type]
            self._check_dialect(self._engine)
        return self._engine

    def _check_dialect(self, engine: Engine) -> None:
        if engine.dialect.name not in DIALECTS:
            raise ValueError(f"table sink {self.name!r}: database {engine.dialect.name!r} is not supported "
                             f"(supported: {', '.join(DIALECTS)})")

    def where(self) -> str:
        url = self._engine.url if self._engine is not None else self.url
        if isinstance(url, str) and "://" in url:
            try:
                url = sa.make_url(url)
            except sa.exc.ArgumentError:
                url = "<a URL that does not parse>"
        shown = url.render_as_string(hide_password=True) if isinstance(url, sa.URL) else str(url)  # (never a password)
        return f"table {self.table_name!r} at {shown}"

    def dispose(self) -> None:
        if self._engine is not None and not isinstance(self.url, Engine):
            self._engine.dispose()
            self._engine = None

    # -- batches ---------------------------------------------------------------------------------
    def __call__(self, batch: Any, batch_id: int) -> BatchResult:
        return self.write(batch, batch_id)

    def write(self, batch: Any, batch_id: int, query_id: Optional[str] = None,
              watermark: Union[int, BatchWatermark, None] = None) -> BatchResult:
        """Apply one batch (a Spark DataFrame, a pyarrow Table, a pandas DataFrame, ``PaneRecord``s
        or row dicts) as batch ``batch_id``; returns what was done.  ``watermark``: the operator's
        watermark the batch's panes were fired at (epoch ms: the local runner's ``watermark`` after
        the step), recorded in the progress row; a Spark batch of ``with_watermark``'s frame carries
        it in its watermark rows."""
        rows, arrow_schema, batch_query = read_batch(batch)
        rows, carried = watermark_rows(rows, arrow_schema)
        mark = BatchWatermark(int(watermark)) if isinstance(watermark, numbers.Integral) else \
            watermark if isinstance(watermark, BatchWatermark) else carried
        query = query_id if query_id is not None else self.query_id if self.query_id is not None else \
            batch_query or ""
        result = BatchResult(batch_id=int(batch_id), applied=False)
        panes = []
        for row in rows:
            if row.get("timing") is None or row.get("record_type", "pane") != "pane":
                result.skipped_rows += 1
            elif self.final_only and not row.get("is_retraction") and not row.get("is_last") and \
                    row.get("timing") == "EARLY":
                result.held_back += 1
            else:
                panes.append(row)
        if result.skipped_rows:
            log.info("table sink %r: batch %s: skipped %d late-data/dead-letter rows (no pane columns)", self.name,
                     batch_id, result.skipped_rows)
        try:
            self._prepare(panes, arrow_schema)
            deletes, upserts = self._net(panes, int(batch_id))
            self._apply(deletes, upserts, int(batch_id), query, result, mark)
        except TableSinkError:
            raise
        except sa.exc.DBAPIError as exc:
            raise TableSinkError(f"table sink {self.name!r}, {self.where()}: batch {batch_id} rolled back, nothing "
                                 f"of it written: {db_message(exc)}") from exc
        self.last_result = result
        return result

    def _prepare(self, panes: list[dict], arrow_schema: Any) -> None:
        """Know the layout and have the tables (created when missing, checked when there)."""
        if self._progress is None:
            self._progress = progress_table()
            try:
                self._create(self._progress)
                reflect = dialect_of(self.engine).reflect
                add_missing_columns(self.engine, PROGRESS_TABLE, PROGRESS_COLUMNS,
                                    lambda: reflect(self.engine, PROGRESS_TABLE))
                if self.audit:
                    self._create(audit_table())
                    add_missing_columns(self.engine, AUDIT_TABLE, AUDIT_COLUMNS, lambda: reflect(self.engine, AUDIT_TABLE))
            except sa.exc.OperationalError as exc:
                raise TableSinkError(f"table sink {self.name!r}: cannot reach the database of {self.where()}: "
                                     f"{db_message(exc)}") from exc
        if self._table is not None or not panes:
            return  # (a batch without panes writes only its progress row)
        existing = dialect_of(self.engine).reflect(self.engine, self.table_name)
        shape = ShapeOptions(f"table sink {self.name!r}", self.table_name, self.where(), self.value_type,
                             self.key_column, self.value_column, self.optional, self.mode)
        self._layout = columns_of(shape, panes, arrow_schema, existing)
        if existing is not None:
            check_table(shape, existing, self._layout)
            table = sa.Table(self.table_name, sa.MetaData(),
                             *[sa.Column(c, sql_type(k), primary_key=c in self._layout.primary_key)
                               for c, k in self._layout.columns()])
        else:
            table = sa.Table(self.table_name, sa.MetaData(),
                             *[sa.Column(c, sql_type(k), primary_key=c in self._layout.primary_key,
                                         nullable=c not in self._layout.primary_key) for c, k in self._layout.columns()])
            self._create(table)
        if self.status_view is not None:
            try:
                create_status_view(self.engine, self.status_view, self.table_name, self.name, PROGRESS_TABLE)
            except ValueError as exc:
                raise TableSinkError(f"table sink {self.name!r}, {self.where()}: {exc}") from None
        self._table = table  # (known only once its view is made: a failed batch makes it again)

    def _create(self, table: sa.Table) -> None:
        """Create ``table`` unless it exists (another sink of the same database may be creating it
        at the same moment: the progress table is shared)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.schema.CreateTable(table, if_not_exists=True))
        except sa.exc.DBAPIError:
            if not sa.inspect(self.engine).has_table(table.name):
                raise

    def _net(self, panes: list[dict], batch_id: int) -> tuple[list[dict], list[dict]]:
        """The batch's net effect per (key, window): rows to delete and rows to write, each checked
        (``netting.net``)."""
        if not panes:
            return [], []
        assert self._layout is not None
        try:
            return net(panes, batch_id, self._layout, self.mode)
        except NetError as exc:
            raise TableSinkError(self._column_error(exc.column, exc.value, exc.row, exc.why)) from None

    def _checked(self, convert: Any, column: str, value: Any, row: dict) -> Any:
        try:
            return convert(value)
        except ColumnKindError as exc:
            raise TableSinkError(self._column_error(column, value, row, str(exc))) from None

    def _column_error(self, column: str, value: Any, row: dict, why: str) -> str:
        kind = dict(self._layout.columns()).get(column) if self._layout else None
        return (f"table sink {self.name!r}: table {self.table_name!r}, column {column!r} ({kind}): value {value!r} "
                f"does not fit: {why} (pane of key {row.get('key')!r}, window [{row.get('window_start')}, "
                f"{row.get('window_end')})); nothing of the batch was written")

    def _apply(self, deletes: list[dict], upserts: list[dict], batch_id: int, query: str, result: BatchResult,
               mark: Optional[BatchWatermark]) -> None:
        progress = self._progress
        assert progress is not None
        try:
            conn = self.engine.connect()
        except sa.exc.OperationalError as exc:
            raise TableSinkError(f"table sink {self.name!r}: cannot reach the database of {self.where()}: "
                                 f"{db_message(exc)}") from exc
        dialect = dialect_of(self.engine)
        with conn, conn.begin():
            dialect.begin(conn)
            mine = (progress.c.sink == self.name) & (progress.c.query_id == query)
            read = sa.select(progress.c.batch_id).where(mine)
            last = conn.execute(read.with_for_update() if dialect.locks_progress_row else read).scalar_one_or_none()
            if last is not None and batch_id <= last:
                log.info("table sink %r: batch %s of query %r was applied already (last applied: %s): skipped",
                         self.name, batch_id, query, last)
                return
            if deletes or upserts:
                assert self._table is not None and self._layout is not None
                dialect.write(conn, self._table, self._layout, self.mode, deletes, upserts, self.chunk_size)
            now = dt.datetime.now(dt.timezone.utc)
            marked = batch_values(mark, self.rules)
            if self.audit:
                self._audit(conn, batch_id, query, now, len(upserts), len(deletes), marked.get("watermark"))
            values = dict(sink=self.name, query_id=query, batch_id=batch_id, table_name=self.table_name,
                          updated_at=now, rows_upserted=len(upserts), rows_deleted=len(deletes), **marked)
            insert = dialect.insert(progress).values(**values)
            conn.execute(insert.on_conflict_do_update(
                index_elements=["sink", "query_id"],
                set_={c: insert.excluded[c] for c in values if c not in ("sink", "query_id")}))
            result.applied, result.upserted, result.deleted = True, len(upserts), len(deletes)

    def _audit(self, conn: Any, batch_id: int, query: str, now: dt.datetime, upserted: int, deleted: int,
               watermark: Optional[dt.datetime]) -> None:
        """The batch's audit row, and the query's rows beyond the number kept dropped."""
        audit = audit_table()
        conn.execute(sa.insert(audit).values(sink=self.name, query_id=query, batch_id=batch_id,
                                             table_name=self.table_name, applied_at=now, rows_upserted=upserted,
                                             rows_deleted=deleted, watermark=watermark))
        if self.audit is not True:
            conn.execute(sa.delete(audit).where((audit.c.sink == self.name) & (audit.c.query_id == query) &
                                                (audit.c.batch_id <= batch_id - int(self.audit))))

    # -- reading it back ------------------------------------------------------------------------
    def rows(self) -> list[dict]:
        """The table's rows (times as UTC datetimes), ordered by key and window."""
        return self._read(self.table_name, self._table)

    def status_rows(self) -> list[dict]:
        """The status view's rows: the table's with ``complete`` and ``settled`` (booleans), read in
        one statement (``sinks.completeness``); ``[]`` before the view exists."""
        if self.status_view is None:
            raise ValueError(f"table sink {self.name!r} has no status view: give it operator= (and not "
                             "status_view=False)")
        rows = self._read(self.status_view, None)
        for row in rows:
            row["complete"], row["settled"] = bool(row["complete"]), bool(row["settled"])
        return rows

    def _read(self, name: str, table: Optional[sa.Table]) -> list[dict]:
        """The rows of a table or view (``table``: as known, else as found), by key and window."""
        table = table if table is not None else self._as_found(name)
        if table is None:
            return []
        order = [table.c[c] for c in ([self.key_column] if self.key_column in table.c else []) + list(WINDOW_COLUMNS)]
        with self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(sa.select(table).order_by(*order))]
        times = self._time_columns(table, WINDOW_COLUMNS)  # (a view's columns may not show their type: SQLite)
        for row in rows:
            self._as_utc(row, times)
        return rows

    def audit_rows(self, query_id: Optional[str] = None) -> list[dict]:
        """The audit's rows of this sink (of ``query_id``, or of every query), by query and batch id."""
        audit = self._as_found(AUDIT_TABLE)
        if audit is None:
            return []
        mine = audit.c.sink == self.name
        if query_id is not None:
            mine = mine & (audit.c.query_id == query_id)
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(audit).where(mine).order_by(audit.c.query_id, audit.c.batch_id))
            times = self._time_columns(audit)
            return [self._as_utc(dict(r._mapping), times) for r in rows]

    def applied_batch(self, query_id: str = "") -> Optional[int]:
        """The last batch id applied for ``query_id`` (None: none yet)."""
        progress = self._as_found(PROGRESS_TABLE)
        if progress is None:
            return None
        with self.engine.connect() as conn:
            return conn.execute(sa.select(progress.c.batch_id).where(
                (progress.c.sink == self.name) & (progress.c.query_id == query_id))).scalar()

    def progress(self, query_id: Optional[str] = None) -> Optional[dict]:
        """The sink's progress row (of ``query_id``; default: the one the status view reads, updated
        last), or None.  A progress table of an earlier version shows the columns it has."""
        progress = self._as_found(PROGRESS_TABLE)
        if progress is None:
            return None
        mine = progress.c.sink == self.name
        if query_id is not None:
            mine = mine & (progress.c.query_id == query_id)
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(progress).where(mine).order_by(sa.text(", ".join(LATEST_FIRST)))
                               .limit(1)).first()
        return None if row is None else self._as_utc(dict(row._mapping), self._time_columns(progress))

    def _as_found(self, name: str) -> Optional[sa.Table]:
        """A table of the sink's database with the columns it has (None: it has none of that name)."""
        found = dialect_of(self.engine).reflect(self.engine, name)
        if found is None:
            return None
        return sa.Table(name, sa.MetaData(), *[sa.Column(c, record["type"]) for c, record in found["columns"].items()])

    @staticmethod
    def _time_columns(table: sa.Table, also: Sequence[str] = ()) -> list[str]:
        """The columns of ``table`` that hold times (and ``also``, times whatever their type shows)."""
        return sorted({c.name for c in table.c if isinstance(c.type, sa.DateTime)} | set(also))

    @staticmethod
    def _as_utc(row: dict, times: list[str]) -> dict:
        """A row with its times (``times``) as UTC datetimes."""
        for name in times:
            if row.get(name) is not None:
                row[name] = as_utc(row[name])
        return row


__all__ = ["AUDIT_TABLE", "BatchResult", "GLOBAL_END", "GLOBAL_START", "TableColumns", "OPTIONAL_COLUMNS", "PROGRESS_TABLE",
           "TableSink", "TableSinkError", "check_operator", "make_engine", "pane_rows"]
