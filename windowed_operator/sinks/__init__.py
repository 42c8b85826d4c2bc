"""Sinks that keep results where users read them: ``TableSink`` keeps a SQL table (SQLite,
PostgreSQL, DuckDB) equal to an operator's current result, exactly once across restarts."""
from .columns import ColumnKindError
from .table import (AUDIT_TABLE, OPTIONAL_COLUMNS, PROGRESS_TABLE, BatchResult, TableSink, TableSinkError, check_operator,
                    make_engine, pane_rows)

__all__ = ["AUDIT_TABLE", "BatchResult", "ColumnKindError", "OPTIONAL_COLUMNS", "PROGRESS_TABLE", "TableSink", "TableSinkError",
           "check_operator", "make_engine", "pane_rows"]
