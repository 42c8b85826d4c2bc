"""An Arrow table's rows as the pandas frame pyspark's row path would hand the stateful processor.

pyspark 4.3's ``transformWithStateInPandas`` converts each Arrow batch to pandas, walks it with
``itertuples`` and builds a frame per grouping key from the tuples.  The library's two faster
handoffs (``packed_input``: a key group's rows packed in the scan stage; ``sliced_handoff``: a key
group's run of each Arrow batch) skip that walk, so they must give the processor the frame it would
have built: the same values, the same dtypes.  This is that conversion, stated once for both.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd
import pyarrow as pa


def rows_frame(table: pa.Table, timezone: Optional[str]) -> pd.DataFrame:
    """``table``'s rows converted as pyspark's row path converts them (``timezone``: the session's,
    for timestamps); column names as in ``table``."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    records = [i for i, field in enumerate(table.schema) if _plain_record(field.type)]
    others = [i for i in range(table.num_columns) if i not in records]
    converted = iter(ArrowBatchTransformer.to_pandas(table.select(others), timezone=timezone)  # type: ignore[arg-type]
                     if others else [])
    columns = [_records(table.column(i)) if i in records else next(converted) for i in range(table.num_columns)]
    frame = pd.concat(columns, axis=1) if columns else pd.DataFrame(index=range(table.num_rows))
    frame.columns = table.column_names
    return _widened_as_tuples_make_them(frame)


#: Arrow field types whose Python values (``to_pylist``) are the ones pyspark's conversion gives a
#: struct's fields (checked against it value by value in ``tests/spark/test_packed_input.py``).
_PLAIN_FIELD_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_boolean)


def _plain_record(arrow_type: pa.DataType) -> bool:
    """A struct of plain fields: a merge's whole row of numbers and strings, say."""
    return pa.types.is_struct(arrow_type) and all(any(is_type(field.type) for is_type in _PLAIN_FIELD_TYPES)
                                                  for field in arrow_type)


def _records(column: pa.ChunkedArray) -> pd.Series:
    """A struct column as pyspark converts it (a dict per row, None for a null row), in one Arrow
    call: pyspark converts a struct row by row in Python (about 2 us a row of a merge's whole row,
    measured), Arrow's ``to_pylist`` builds the same dicts in C++."""
    values = np.empty(len(column), dtype=object)
    values[:] = column.to_pylist()
    return pd.Series(values, dtype=object)


def _widened_as_tuples_make_them(frame: pd.DataFrame) -> pd.DataFrame:
    """The row path builds its frame from tuples of Python values, so pandas infers each column's
    dtype again: narrower integers come back int64 and float32 float64 (measured); the rest keep
    their dtype."""
    widened = {name: np.int64 if column.dtype.kind in "iu" else np.float64
               for name, column in frame.items()
               if (column.dtype.kind in "iu" and column.dtype != np.int64)
               or (column.dtype.kind == "f" and column.dtype != np.float64)}
    return frame.astype(widened) if widened else frame


