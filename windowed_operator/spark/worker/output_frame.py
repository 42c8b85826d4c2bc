"""One call's output rows as the one pandas frame pyspark turns into Arrow at the least cost.

pyspark converts each frame a stateful processor yields on its own, column by column, at a fixed
cost per frame and column whatever the rows: about 1.4 ms for a pane frame of 13 columns, where a
call of q11 (bids per bidder session) yields a few hundred rows (``benchmarks/nexmark``: the
conversion was a fifth of q11's Python time, three frames a call).  So a call yields one frame:

- every phase's rows and the call's count row together (``PHASE_COLUMN`` tells the phases apart,
  the counts are a row of their own, as before);
- columns of a primitive Spark type as Arrow arrays already, which pyspark takes as they are
  rather than converting each and scanning it for nulls; a column Arrow cannot take exactly (a
  float in a bigint column, a value of a struct type) stays a pandas column, converted and checked
  by pyspark as before, errors included;
- columns labelled by position, in the schema's order: pyspark then takes them by position rather
  than reordering a copy of the frame by name (``assignColumnsByName`` applies to string labels).

Together: 0.73 ms against 1.40 ms per frame of 200 rows (``PandasToArrowConversion.convert``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

#: Spark DDL types whose values the processor's columns hold as plain Python or numpy scalars.
ARROW_TYPES = {"bigint": pa.int64(), "long": pa.int64(), "int": pa.int32(), "integer": pa.int32(),
               "boolean": pa.bool_(), "string": pa.string(), "double": pa.float64()}

Columns = dict[str, Any]


def output_frame(fields: Sequence[tuple[str, str]], parts: list[Columns], event_time: Optional[str] = None,
                 event_times: Optional[Callable[[Any], pd.Series]] = None) -> Optional[pd.DataFrame]:
    """The frame of ``parts`` (column dicts, numpy arrays or lists, in any order of names) in the
    order of ``fields`` (name, DDL type); ``event_time``: the field computed from the rows'
    ``timestamp`` by ``event_times``.  None where the parts hold no rows."""
    parts = [part for part in parts if _length(part)]
    if not parts:
        return None
    data: dict[int, Any] = {}
    for position, (name, type_name) in enumerate(fields):
        if name == event_time:
            assert event_times is not None
            data[position] = event_times(_joined([part["timestamp"] for part in parts]))
        else:
            data[position] = _column(_joined([part[name] for part in parts]), type_name)
    return pd.DataFrame(data, copy=False)


def _length(part: Columns) -> int:
    return len(next(iter(part.values()))) if part else 0


def _joined(pieces: list[Any]) -> Any:
    """One column of the parts' pieces: an array where every piece is one, else a list."""
    if len(pieces) == 1:
        return pieces[0]
    if all(isinstance(piece, np.ndarray) for piece in pieces):
        return np.concatenate(pieces)
    return [value for piece in pieces for value in (piece.tolist() if isinstance(piece, np.ndarray) else piece)]


def _column(values: Any, type_name: str) -> Any:
    arrow_type = ARROW_TYPES.get(type_name.strip().lower())
    if arrow_type is not None:
        try:  # (``from_pandas``: NaN is null, as pyspark's own conversion takes it)
            return pd.arrays.ArrowExtensionArray(pa.array(values, type=arrow_type, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass  # (pyspark converts it, and reports what it cannot)
    if isinstance(values, np.ndarray):
        return values
    return pd.Series(values, dtype=object)
