"""How much of a sink's table is final: the operator's watermark recorded with each batch, and the
status view that reads it beside the rows.

Each batch a sink applies records, in the same transaction and in its progress row, the watermark
the operator fired the batch's panes at (``BatchWatermark``: the local runner's, or on Spark the
one every key group ran at, from the operator's watermark rows) and two bounds on ``window_end``
derived from it by Beam's rules (``time_rules``):

- ``complete_through``: a row whose window ends at or before it is *complete*: the watermark has
  passed its end, so its on-time result is in (for triggers that fire when the watermark passes the
  end: the default one and ``at_watermark()``; for any other trigger complete means settled);
- ``settled_through``: a row whose window ends at or before it is *settled*: the window has
  expired under the allowed lateness, so no further pane can change or remove the row (the end of
  input settles every row, the global window's too).

The status view ``<table>_status`` is the table with two more columns, ``complete`` and ``settled``,
read against the sink's latest progress row in the same statement, so one read of it is
consistent with the rows (``WHERE settled`` is a dashboard's "final rows only").
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..chain import output_stage
from ..time import MAX_SHOWN_TIME, MAX_TIMESTAMP, shown_datetime
from ..time_rules import latest_max_timestamp_expired, latest_max_timestamp_reached

#: The columns completeness adds to the progress table (and ``watermark`` to the audit's).
PROGRESS_COLUMNS = (("watermark", sa.DateTime(timezone=True)), ("complete_through", sa.DateTime(timezone=True)),
                    ("settled_through", sa.DateTime(timezone=True)), ("held_back_by", sa.Text()))
AUDIT_COLUMNS = (("watermark", sa.DateTime(timezone=True)),)


@dataclass(frozen=True)
class BatchWatermark:
    """The operator's watermark a batch's panes were fired at (epoch ms; ``MAX_TIMESTAMP``: the input
    ended), and under ``partition=`` the partition holding it back (``"<partition>"``, or
    ``"<input> <partition>"`` in a merge)."""

    watermark_ms: int
    held_back_by: Optional[str] = None

    @classmethod
    def of_runner(cls, runner: Any) -> "BatchWatermark":
        """A local runner's watermark after a step (and the partition holding it back, where it says)."""
        holding_back = getattr(runner, "holding_back", None)
        return cls(runner.watermark, holding_back() if holding_back is not None else None)

    @staticmethod
    def lowest(marks: list["BatchWatermark"]) -> Optional["BatchWatermark"]:
        """The batch's watermark from what each key group reported: the lowest (every group of a
        batch runs at the same one; the lowest is the one every row is complete to)."""
        return min(marks, key=lambda m: m.watermark_ms) if marks else None


@dataclass(frozen=True)
class Completeness:
    """The operator's rules that turn a watermark into the bounds (``allowed_lateness`` in ms;
    ``fires_at_end``: its trigger fires when the watermark passes a window's end)."""

    allowed_lateness: int
    fires_at_end: bool

    @classmethod
    def of(cls, operator: Any) -> Optional["Completeness"]:
        """An operator's rules (a chain's: its last stage's, whose panes the sink gets); None without one."""
        if operator is None:
            return None
        operator = output_stage(operator)
        return cls(int(operator.allowed_lateness), operator.trigger.kind in ("default", "at_watermark"))

    def _through(self, latest_max_timestamp: int, watermark_ms: int) -> Optional[dt.datetime]:
        """The latest ``window_end`` of windows whose max timestamp is at most ``latest_max_timestamp``;
        at the end of input every window's (the global window's end is stored as ``MAX_SHOWN_TIME``);
        before it never the global window's."""
        if watermark_ms >= MAX_TIMESTAMP:
            return shown_datetime(MAX_SHOWN_TIME)
        return shown_datetime(min(latest_max_timestamp + 1, MAX_SHOWN_TIME - 1))

    def progress_values(self, mark: BatchWatermark) -> dict[str, Any]:
        """The progress row's completeness columns for a batch fired at ``mark``."""
        settled = self._through(latest_max_timestamp_expired(mark.watermark_ms, self.allowed_lateness),
                                mark.watermark_ms)
        complete = self._through(latest_max_timestamp_reached(mark.watermark_ms), mark.watermark_ms) \
            if self.fires_at_end else settled
        return {"complete_through": complete, "settled_through": settled}


def batch_values(mark: Optional[BatchWatermark], rules: Optional[Completeness]) -> dict[str, Any]:
    """What a batch writes of its watermark (nothing where it has none: the row keeps the last)."""
    if mark is None:
        return {}
    values: dict[str, Any] = {"watermark": shown_datetime(min(mark.watermark_ms, MAX_SHOWN_TIME)),
                              "held_back_by": mark.held_back_by}
    if rules is not None:
        values.update(rules.progress_values(mark))
    return values


def add_missing_columns(engine: Engine, table: str, columns: tuple[tuple[str, Any], ...],
                        reflect: Callable[[], Optional[dict]]) -> None:
    """Add ``columns`` a table made by an earlier version lacks (``reflect``: its columns, read)."""
    found = (reflect() or {}).get("columns") or {}
    for name, kind in columns:
        if name in found:
            continue
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql(f'ALTER TABLE {table} ADD COLUMN {name} {kind.compile(dialect=engine.dialect)}')
        except sa.exc.DBAPIError:  # (another sink of the same database added it at the same moment)
            if name not in ((reflect() or {}).get("columns") or {}):
                raise


#: The sink's progress row the status view reads: the one updated last (of any of its queries).
LATEST_FIRST = ("updated_at DESC", "batch_id DESC")


def status_view_sql(view: str, table: str, sink: str, progress: str, engine: Engine) -> str:
    """The status view: ``table``'s rows with ``complete`` and ``settled`` against the sink's latest
    row of the progress table (``progress``); names quoted as the database needs."""
    quote = engine.dialect.identifier_preparer.quote
    name = sa.literal(sink).compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True})
    latest = (f"SELECT complete_through, settled_through FROM {quote(progress)} WHERE sink = {name} "
              f"ORDER BY {', '.join(LATEST_FIRST)} LIMIT 1")
    create = "CREATE VIEW IF NOT EXISTS" if engine.dialect.name == "sqlite" else "CREATE OR REPLACE VIEW"
    return (f"{create} {quote(view)} AS SELECT t.*, COALESCE(t.window_end <= p.complete_through, FALSE) AS complete, "
            f"COALESCE(t.window_end <= p.settled_through, FALSE) AS settled FROM {quote(table)} AS t "
            f"LEFT JOIN ({latest}) AS p ON 1 = 1")


def create_status_view(engine: Engine, view: str, table: str, sink: str, progress: str) -> None:
    """Make the status view (PostgreSQL and DuckDB replace it, so a view built on it stays; SQLite
    keeps one already there, its ``t.*`` read at each query); refused where ``view`` names a table.
    Another sink making it at the same moment is no error."""
    if view in sa.inspect(engine).get_table_names():
        raise ValueError(f"status view {view!r}: a table of that name exists; give the sink another "
                         "status_view= (or status_view=False)")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(status_view_sql(view, table, sink, progress, engine))
    except sa.exc.DBAPIError:
        if view not in sa.inspect(engine).get_view_names():
            raise


__all__ = ["AUDIT_COLUMNS", "BatchWatermark", "Completeness", "LATEST_FIRST", "PROGRESS_COLUMNS", "add_missing_columns",
           "batch_values", "create_status_view", "status_view_sql"]
