"""A table sink's columns: found from a batch (its Spark schema, the sink's ``value_type``, or the
values themselves) or from the table the database holds, and an existing table checked against them."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Optional


from .columns import kind_of_arrow_type, kind_of_spark_type, kind_of_sql_type, kind_of_value, same_kind, sql_type
from .netting import WINDOW_COLUMNS, TableColumns

SinkMode = Literal["upsert", "add"]
#: A plain SQL name (of a table or a column the sink makes).
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

class TableSinkError(RuntimeError):
    """A batch the sink could not apply; nothing of it is in the table (its transaction rolled back)."""


@dataclass(frozen=True)
class ShapeOptions:
    """What a sink's options say of its table's columns; ``label`` and ``where`` name the sink and the
    table in errors."""

    label: str
    table: str
    where: str
    value_type: Optional[str]
    key_column: str
    value_column: str
    optional: tuple[str, ...]
    mode: SinkMode


def struct_fields(ddl: str) -> Optional[list[tuple[str, str]]]:
    """The fields of a ``struct<...>`` DDL type (None: not a struct)."""
    from ..ddl import parse_columns

    text = parse_columns(f"v {ddl}")[0][1]
    if not text.startswith("struct<"):
        return None
    return parse_columns(text[len("struct<"):-1].replace(": ", " "))


def columns_of(o: ShapeOptions, panes: list[dict], arrow_schema: Any, existing: Optional[dict]) -> TableColumns:
    """The columns, from ``value_type``, the Spark batch's schema, the values, or the table."""
    table_kinds = {name: kind_of_sql_type(c["type"]) for name, c in existing["columns"].items()} \
        if existing else {}
    keyed: Optional[bool] = None
    key_kind: Optional[str] = None
    values: Optional[list[tuple[str, Optional[str]]]] = None
    record = False
    if arrow_schema is not None:
        names = arrow_schema.names
        keyed = "key" in names
        if keyed:
            key_kind = kind_of_arrow_type(arrow_schema.field("key").type)
        value_type = arrow_schema.field("value").type
        import pyarrow as pa

        if isinstance(value_type, pa.StructType) and o.value_type is None:
            record = True
            values = [(f.name, kind_of_arrow_type(f.type)) for f in value_type]
        elif o.value_type is None:
            values = [(o.value_column, kind_of_arrow_type(value_type))]
    elif panes:
        keyed = "key" in panes[0] and any(p.get("key") is not None for p in panes)
        if keyed:
            key_kind = next(kind_of_value(p["key"]) for p in panes if p.get("key") is not None)
    if o.value_type is not None:
        fields = struct_fields(o.value_type)
        record = fields is not None
        values = [(n, kind_of_spark_type(t)) for n, t in fields] if fields is not None else \
            [(o.value_column, kind_of_spark_type(o.value_type))]
    elif values is None:
        values = _values_of(o, panes, table_kinds)
        record = any(isinstance(p.get("value"), dict) for p in panes)
    if keyed and key_kind is None:
        key_kind = table_kinds.get(o.key_column)
    if keyed and key_kind == "json":
        raise TableSinkError(f"{o.label}, {o.where}: the key is a record or a list; a table "
                             "sink needs a key of one column (string, integer, ...)")
    unknown = [n for n, k in values or [] if k is None] + (["key"] if keyed and key_kind is None else [])
    if values is None or unknown:
        raise TableSinkError(
            f"{o.label}, {o.where}: cannot tell the type of column(s) "
            f"{unknown or [o.value_column]} from batch values that are all null and no table exists yet; "
            "give the sink value_type='<Spark DDL type>'")
    kinds = [(n, k) for n, k in values if k is not None]  # (all of them: none is unknown)
    taken = {o.key_column, *WINDOW_COLUMNS, *o.optional}
    clashing = [n for n, _ in values if n in taken or not NAME.match(n)]
    if clashing:
        raise TableSinkError(f"{o.label}, {o.where}: value field(s) {clashing} cannot be columns "
                             f"(taken by the key, window or optional columns, or not plain SQL names)")
    if o.mode == "add" and (record or kinds[0][1] not in ("bigint", "double") and
                               not kinds[0][1].startswith("decimal")):
        raise TableSinkError(f"{o.label}, {o.where}: mode 'add' adds the panes' values, which "
                             f"must be one number, not {'a record' if record else kinds[0][1]}")
    return TableColumns(key=(o.key_column, key_kind) if keyed and key_kind is not None else None,
                        values=tuple(kinds), record=record, optional=o.optional)


def _values_of(o: ShapeOptions, panes: list[dict], table_kinds: dict[str, Optional[str]]
               ) -> Optional[list[tuple[str, Optional[str]]]]:
    """A value's columns from the local runner's values: a dict's fields, or one column."""
    records = [p["value"] for p in panes if isinstance(p.get("value"), dict)]
    if records:
        names: dict[str, Optional[str]] = {}
        for value in records:
            for name, item in value.items():
                if names.get(name) is None:
                    names[name] = kind_of_value(item)
        return [(n, k or table_kinds.get(n)) for n, k in names.items()]
    kind = next((kind_of_value(p["value"]) for p in panes if p.get("value") is not None), None)
    if kind is None and not panes and o.value_column not in table_kinds:
        return None
    return [(o.value_column, kind or table_kinds.get(o.value_column))]


def check_table(o: ShapeOptions, existing: dict, layout: TableColumns) -> None:
    """Refuse a table that lacks a column the sink writes, holds one of another kind, has a column the
    sink cannot leave null, or another primary key."""
    found = existing["columns"]
    for name, kind in layout.columns():
        if name not in found:
            raise TableSinkError(f"{o.label}: table {o.table!r} has no column {name!r}, "
                                 f"which the sink writes (its columns: {', '.join(found)}); drop or rename the "
                                 "table, or write to another one")
        if not same_kind(kind, kind_of_sql_type(found[name]["type"])):
            raise TableSinkError(f"{o.label}: table {o.table!r}, column {name!r} is "
                                 f"{found[name]['type']} in the database, the sink writes {kind} "
                                 f"({sql_type(kind).compile()}) there")
    extra = [n for n, c in found.items() if n not in dict(layout.columns()) and not c.get("nullable", True)
             and c.get("default") is None]
    if extra:
        raise TableSinkError(f"{o.label}: table {o.table!r} has column(s) {extra} that "
                             "cannot be null and that the sink does not write")
    if sorted(existing["primary_key"]) != sorted(layout.primary_key):
        raise TableSinkError(f"{o.label}: table {o.table!r} has primary key "
                             f"{existing['primary_key']}, the sink needs {layout.primary_key} (one row per key "
                             "and window)")
