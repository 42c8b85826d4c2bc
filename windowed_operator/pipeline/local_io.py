"""The local runner's sources and sinks: the same rows, types and files a Spark run would see.

``run --local`` is a way to try a pipeline file without a JVM, so it must not be a different
pipeline: a file source is read with its declared schema (undeclared columns dropped, a value the
type cannot take becomes null, as Spark's readers make it, and then a bad element by the one
rule), and sinks receive rows with the Spark output's columns (timestamps, ``pane_index``,
late-data and dead-letter records) per bundle, as Spark's sinks receive micro-batches.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..ddl import parse_columns
from ..elements import element_json
from ..panes import FIRING_COLUMNS, INPUT_COLUMN, OUTPUT_COLUMNS, SIDE_OUTPUT_COLUMNS, DroppedElement, PaneRecord
from ..time import shown_datetime

_INTEGRAL = {"tinyint": 8, "byte": 8, "smallint": 16, "short": 16, "int": 32, "integer": 32, "bigint": 64, "long": 64}
_FLOATING = {"float", "real", "double"}
_TIMESTAMPS = {"timestamp", "timestamp_ltz", "timestamp_ntz"}
UTC = dt.timezone.utc


def _integral(value: Any, bits: int, from_text: bool) -> Optional[int]:
    if from_text and isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if -(1 << (bits - 1)) <= value < (1 << (bits - 1)) else None


def _floating(value: Any, from_text: bool) -> Optional[float]:
    if from_text and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _timestamp(value: Any) -> Optional[dt.datetime]:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # Spark reads a number as seconds
        return dt.datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # the session time zone is UTC
    return None


def _boolean(value: Any, from_text: bool) -> Optional[bool]:
    if isinstance(value, bool):
        return value
    if from_text and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _string(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def column_caster(ddl_type: str, from_text: bool) -> Callable[[Any], Any]:
    """How one declared column turns what a file holds into that type (None where Spark gives null)."""
    if ddl_type in _INTEGRAL:
        bits = _INTEGRAL[ddl_type]
        return lambda v: _integral(v, bits, from_text)
    if ddl_type in _FLOATING:
        return lambda v: _floating(v, from_text)
    if ddl_type in _TIMESTAMPS:
        return _timestamp
    if ddl_type == "boolean":
        return lambda v: _boolean(v, from_text)
    if ddl_type == "string" or ddl_type.startswith(("varchar", "char")):
        return _string
    return lambda v: v  # decimals, dates, nested types: as the file has them


def typed_rows(raw: Sequence[dict], schema: str, *, from_text: bool = False) -> list[dict]:
    """Rows with exactly the declared columns, each cast to its type; a missing column or empty CSV
    field is null."""
    casters = [(name, column_caster(kind, from_text)) for name, kind in parse_columns(schema)]
    rows = []
    for row in raw:
        typed = {}
        for name, cast in casters:
            value = row.get(name)
            typed[name] = None if value is None or (from_text and value == "") else cast(value)
        rows.append(typed)
    return rows


def read_file(path: Path, fmt: str, schema: str, options: dict[str, str]) -> list[dict]:
    """One file of a files source as typed rows (a malformed JSON line is a row of nulls, as in
    Spark's permissive mode: it then fails as a bad element, not silently)."""
    if fmt == "json":
        raw = []
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                parsed = {}
            raw.append(parsed if isinstance(parsed, dict) else {})
        return typed_rows(raw, schema)
    if fmt == "csv":
        names = [name for name, _ in parse_columns(schema)]
        with path.open(newline="") as handle:
            if options.get("header", "true").lower() == "true":
                raw = list(csv.DictReader(handle, delimiter=options.get("sep", ",")))
            else:
                raw = [dict(zip(names, record)) for record in csv.reader(handle, delimiter=options.get("sep", ","))]
        return typed_rows(raw, schema, from_text=True)
    import pyarrow.parquet as pq

    return typed_rows(pq.read_table(path).to_pylist(), schema)


# -- sinks ---------------------------------------------------------------------------------------



def _row(keyed: bool, pane: tuple, side: Optional[tuple], merge: bool = False,
         firing: Optional[tuple] = None) -> dict:
    """Values in ``OUTPUT_COLUMNS`` order (then ``FIRING_COLUMNS``' where given, and
    ``SIDE_OUTPUT_COLUMNS``', then a merge's input), as a row with those names."""
    row = dict(zip(OUTPUT_COLUMNS, pane))
    if not keyed:
        del row["key"]
    if firing is not None:
        row.update(zip(FIRING_COLUMNS, firing))
    if side is not None:
        row.update(zip(SIDE_OUTPUT_COLUMNS, side))
        if merge:
            row[INPUT_COLUMN] = side[-1]
    return row


def pane_row(pane: PaneRecord, keyed: bool, side_outputs: bool, merge: bool = False) -> dict:
    """A pane as the Spark runner's output row (same columns, same names; ``merge``: a merge's, whose
    side outputs add ``input``; with its ``firing``, the ``fired_by`` columns)."""
    firing = pane.firing
    return _row(keyed, (pane.key, shown_datetime(pane.window_start), shown_datetime(pane.window_end), pane.value, pane.timing.value,
                        pane.index, pane.is_first, pane.is_last, pane.is_retraction, shown_datetime(pane.timestamp)),
                ("pane", None, None, None, None) if side_outputs else None, merge,
                None if firing is None else (firing.fired_by, shown_datetime(firing.watermark), firing.held_back_by))


def _side_values(dropped: DroppedElement, record_type: str) -> tuple:
    """The side columns' values, then the input the element came on (a merge's)."""
    return (record_type, dropped.reason.value, element_json(dropped.element), shown_datetime(dropped.timestamp),
            dropped.input)


def dropped_row(dropped: DroppedElement, record_type: str, keyed: bool, merge: bool = False,
                fired_by: bool = False) -> dict:
    """A late-data or dead-letter record as the Spark runner's output row: no pane columns (nor
    ``fired_by``'s, where the operator has them)."""
    return _row(keyed, (dropped.key, *[None] * (len(OUTPUT_COLUMNS) - 1)), _side_values(dropped, record_type), merge,
                (None, None, None) if fired_by else None)


def side_row(dropped: DroppedElement, record_type: str, keyed: bool, merge: bool = False) -> dict:
    """A late-data or dead-letter record as a row of the Spark side output (``spark.plan.outputs``): the
    key (keyed operators) and the side columns only (a merge's: and ``input``)."""
    values = _side_values(dropped, record_type)
    return {**({"key": dropped.key} if keyed else {}), **dict(zip(SIDE_OUTPUT_COLUMNS, values)),
            **({INPUT_COLUMN: values[-1]} if merge else {})}


def _cell(value: Any, truncate: bool) -> str:
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3].removesuffix(".000")
    elif value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = str(value).lower()
    else:
        text = str(value)
    return text[:17] + "..." if truncate and len(text) > 20 else text


def console_table(batch_id: int, rows: list[dict], num_rows: int, truncate: bool) -> str:
    """One bundle as Spark's console sink shows a micro-batch: a header, at most ``num_rows`` rows."""
    lines = ["-" * 43, f"Batch: {batch_id}", "-" * 43]
    if not rows:
        return "\n".join(lines + ["(no rows)"])
    shown = rows[:num_rows]
    headers = list(shown[0])
    cells = [[_cell(r[h], truncate) for h in headers] for r in shown]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    rule = "+" + "+".join("-" * w for w in widths) + "+"
    lines += [rule, "|" + "|".join(h.ljust(w) for h, w in zip(headers, widths)) + "|", rule]
    lines += ["|" + "|".join(c.ljust(w) for c, w in zip(row, widths)) + "|" for row in cells]
    lines.append(rule)
    if len(rows) > num_rows:
        lines.append(f"only showing top {num_rows} rows")
    return "\n".join(lines)


def write_rows(directory: Path, batch_id: int, rows: list[dict], fmt: str) -> Optional[Path]:
    """One bundle's rows as one file of ``fmt`` under ``directory`` (nothing for an empty bundle, as
    Spark writes no part file for an empty micro-batch)."""
    if not rows:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"part-{batch_id:05d}.{fmt}"
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
        return path

    def text(value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return value

    path.write_text("".join(json.dumps({k: text(v) for k, v in row.items() if v is not None}, default=str) + "\n"
                            for row in rows))
    return path
