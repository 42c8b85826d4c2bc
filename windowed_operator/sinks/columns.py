"""The table sink's column kinds: how a pane's fields become typed database columns.

One small vocabulary of kinds sits between the three places a column's type comes from (a Spark DDL
type, an Arrow type of a Spark batch, a Python value of the local runner) and the SQLAlchemy type the
table is created with or is checked against:

================  ============================  ==========================  =======================
kind              Spark / Arrow types           Python values               column (SQLAlchemy)
================  ============================  ==========================  =======================
``bigint``        tinyint, smallint, int,       int (not bool)              BIGINT
                  bigint
``double``        float, double                 float                       DOUBLE (PostgreSQL:
                                                                            DOUBLE PRECISION)
``decimal(p,s)``  decimal(p,s)                  decimal.Decimal             NUMERIC(p, s)
``string``        string, varchar, char         str                         TEXT
``boolean``       boolean                       bool                        BOOLEAN
``timestamp``     timestamp, timestamp_ntz      datetime (UTC)              TIMESTAMP WITH TIME ZONE
                                                                            (SQLite: text, UTC)
``date``          date                          datetime.date               DATE
``binary``        binary                        bytes                       BLOB / BYTEA
``json``          array, map, a struct inside   list, dict inside a record  JSON
                  a value
================  ============================  ==========================  =======================

A value that is a record (a Spark struct, a Python dict) is not one column: each of its fields is a
column of its own kind.  Each value written is checked against its column's kind before anything
is written (SQLite would store a string in an integer column without a word).
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
from typing import Any, Callable, Optional

import numpy as np
import sqlalchemy as sa

UTC = dt.timezone.utc
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_SPARK_KINDS = {"tinyint": "bigint", "byte": "bigint", "smallint": "bigint", "short": "bigint", "int": "bigint",
                "integer": "bigint", "bigint": "bigint", "long": "bigint", "float": "double", "real": "double",
                "double": "double", "string": "string", "boolean": "boolean", "timestamp": "timestamp",
                "timestamp_ltz": "timestamp", "timestamp_ntz": "timestamp", "date": "date", "binary": "binary"}


class ColumnKindError(ValueError):
    """A value that its column's kind cannot hold (the caller names the table and column)."""


def kind_of_spark_type(ddl: str) -> str:
    """The kind of a Spark DDL type (``bigint``, ``decimal(10,2)``, ``array<string>``)."""
    name = ddl.strip().lower()
    if name in _SPARK_KINDS:
        return _SPARK_KINDS[name]
    if name.startswith(("varchar", "char")):
        return "string"
    if name == "decimal":
        return "decimal(10,0)"
    match = _DECIMAL.match(name)
    if match:
        return f"decimal({match.group(1)},{match.group(2)})"
    if name.startswith(("array<", "map<", "struct<")):
        return "json"
    raise ValueError(f"type {ddl!r} has no column kind (known: {', '.join(sorted(set(_SPARK_KINDS)))}, decimal(p,s), "
                     "varchar, array<...>, map<...>, struct<...>)")


def kind_of_arrow_type(arrow_type: Any) -> str:
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_integer(arrow_type):
        return "bigint"
    if t.is_floating(arrow_type):
        return "double"
    if t.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return "string"
    if t.is_boolean(arrow_type):
        return "boolean"
    if t.is_timestamp(arrow_type):
        return "timestamp"
    if t.is_date(arrow_type):
        return "date"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type):
        return "binary"
    if isinstance(arrow_type, (pa.ListType, pa.LargeListType, pa.MapType, pa.StructType)):
        return "json"
    raise ValueError(f"Arrow type {arrow_type} has no column kind")


def kind_of_value(value: Any) -> Optional[str]:
    """The kind of a Python value (None for None: not known from it)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return "boolean"
    if isinstance(value, (int, np.integer)):
        return "bigint"
    if isinstance(value, (float, np.floating)):
        return "double"
    if isinstance(value, decimal.Decimal):
        return "decimal(38,18)"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dt.datetime):
        return "timestamp"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    if isinstance(value, (list, tuple, dict)):
        return "json"
    raise ValueError(f"a value of type {type(value).__name__} ({value!r}) has no column kind; give the sink "
                     "value_type='<Spark DDL type>'")


def sql_type(kind: str) -> sa.types.TypeEngine:
    """The SQLAlchemy type a column of ``kind`` is created with."""
    match = _DECIMAL.match(kind)
    if match:
        return sa.Numeric(int(match.group(1)), int(match.group(2)))
    types: dict[str, sa.types.TypeEngine] = {"bigint": sa.BigInteger(), "double": sa.Double(), "string": sa.Text(), "boolean": sa.Boolean(),
            "timestamp": sa.DateTime(timezone=True), "date": sa.Date(), "binary": sa.LargeBinary(),
            "json": sa.JSON()}
    return types[kind]


def kind_of_sql_type(sql: sa.types.TypeEngine) -> Optional[str]:
    """The kind of a column as the database reports it (None: none of the kinds)."""
    checks: list[tuple[type, str]] = [(sa.Boolean, "boolean"), (sa.Integer, "bigint"), (sa.Float, "double"),
                                      (sa.Numeric, "decimal"), (sa.DateTime, "timestamp"), (sa.Date, "date"),
                                      (sa.JSON, "json"), (sa.LargeBinary, "binary"), (sa.String, "string")]
    for cls, kind in checks:
        if isinstance(sql, cls):
            return kind
    name = type(sql).__name__.upper()
    if name in ("BYTEA", "BLOB", "_BINARY"):
        return "binary"
    if name == "JSONB":
        return "json"
    return None


def same_kind(declared: str, found: Optional[str]) -> bool:
    return found is not None and (declared == found or (declared.startswith("decimal") and found == "decimal"))


def _bigint(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ColumnKindError("not an integer")
    value = int(value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ColumnKindError("outside the 64-bit integer range")
    return value


def _double(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ColumnKindError("not a number")
    result = float(value)
    if math.isnan(result):
        raise ColumnKindError("NaN (SQLite stores it as NULL): give null for no value")
    return result


def _decimal(value: Any) -> decimal.Decimal:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, decimal.Decimal, np.integer)):
        raise ColumnKindError("not a decimal (a float is inexact: cast it)")
    return decimal.Decimal(int(value)) if not isinstance(value, decimal.Decimal) else value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ColumnKindError("not a string")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ColumnKindError("not a boolean")
    return bool(value)


def as_utc(value: Any) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        raise ColumnKindError("not a timestamp")
    if isinstance(value, np.datetime64):  # pragma: no cover - (pandas Timestamps are datetimes)
        raise ColumnKindError("not a timestamp")
    moment = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise ColumnKindError("not a date")
    return value


def _binary(value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray)):
        raise ColumnKindError("not bytes")
    return bytes(value)


def _json(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ColumnKindError(f"not JSON ({exc})") from None
    return value


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "bigint": _bigint, "double": _double, "string": _string, "boolean": _boolean, "timestamp": as_utc,
    "date": _date, "binary": _binary, "json": _json}


def converter(kind: str) -> Callable[[Any], Any]:
    """``value -> database value`` for a column of ``kind``; ColumnKindError when it does not fit
    (None passes: value columns are nullable)."""
    return _decimal if kind.startswith("decimal") else _CONVERTERS[kind]


__all__ = ["ColumnKindError", "as_utc", "converter", "kind_of_arrow_type", "kind_of_spark_type", "kind_of_sql_type",
           "kind_of_value", "same_kind", "sql_type"]
