"""The processor's one output frame converts to the Arrow batch pyspark made of the frames it replaced.

Checked with pyspark's own conversion (what its worker calls on each frame a stateful processor
yields), without a JVM: the frame by position with Arrow columns against a frame by name with the
same values as plain pandas columns, the form the processor yielded before.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.conversion import PandasToArrowConversion
from pyspark.sql.types import (ArrayType, BooleanType, DoubleType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from windowed_operator.spark.worker.output_frame import output_frame

FIELDS = [("key", "bigint"), ("window_start", "bigint"), ("value", "double"), ("timing", "string"),
          ("pane_index", "int"), ("is_first", "boolean"), ("late", "bigint")]
SPARK_TYPES = {"bigint": LongType(), "double": DoubleType(), "string": StringType(), "int": IntegerType(),
               "boolean": BooleanType(), "array<bigint>": ArrayType(LongType()), "timestamp": TimestampType()}


def converted(frame: pd.DataFrame, fields: list[tuple[str, str]]) -> object:
    schema = StructType([StructField(name, SPARK_TYPES[t]) for name, t in fields])
    return PandasToArrowConversion.convert([frame], StructType([StructField("_0", schema)]), timezone="UTC",
                                           safecheck=True, arrow_cast=True, assign_cols_by_name=True,
                                           int_to_decimal_coercion_enabled=False)


def by_name(parts: list[dict], fields: list[tuple[str, str]]) -> pd.DataFrame:
    """The former form: each part a frame by name of plain pandas columns, the parts concatenated."""
    frames = [pd.DataFrame({name: pd.Series(part[name].tolist() if isinstance(part[name], np.ndarray)
                                            else part[name], dtype=object) for name, _ in fields}) for part in parts]
    return pd.concat(frames, ignore_index=True)


def test_typed_parts_list_parts_and_a_count_row_make_the_batch_the_former_frames_made() -> None:
    panes = {"key": np.array([3, 4]), "window_start": np.array([1_000, 2_000]), "value": np.array([1.5, np.nan]),
             "timing": np.array(["EARLY", "ON_TIME"], dtype=object), "pane_index": np.array([0, 1], dtype=np.int32),
             "is_first": np.array([True, False]), "late": np.full(2, None, dtype=object)}
    dead_letters = {"key": [5, None], "window_start": [None, None], "value": [None, 2.0], "timing": [None, "LATE"],
                    "pane_index": [None, 2], "is_first": [None, True], "late": [None, None]}
    counts = {name: [None] for name, _ in FIELDS} | {"late": [7]}
    parts = [panes, dead_letters, counts]
    frame = output_frame(FIELDS, parts)
    assert frame is not None and list(frame.columns) == list(range(len(FIELDS)))
    new, old = converted(frame, FIELDS), converted(by_name(parts, FIELDS), FIELDS)
    assert new.equals(old)
    rows = new.column(0).to_pylist()
    assert rows[1]["value"] is None  # (NaN is null, as pyspark takes it)
    assert rows[4]["late"] == 7 and rows[4]["key"] is None


def test_a_column_arrow_cannot_take_exactly_is_left_to_pyspark_and_its_error() -> None:
    fields = [("key", "bigint"), ("value", "bigint")]
    frame = output_frame(fields, [{"key": np.array([1]), "value": np.array([1.5])}])
    assert frame is not None and isinstance(frame[1].to_numpy(), np.ndarray)
    with pytest.raises(Exception, match="value"):
        converted(frame, fields)


def test_nested_values_and_the_event_time_column() -> None:
    fields = [("value", "array<bigint>"), ("timestamp", "bigint"), ("event_time", "timestamp")]
    seen = []

    def event_times(timestamps: object) -> pd.Series:
        seen.append(list(timestamps))  # type: ignore[call-overload]
        return pd.Series(pd.to_datetime([10_000, math.nan], unit="ms", utc=True))

    part = {"value": [[1, 2], []], "timestamp": [9, None]}
    frame = output_frame(fields, [part], "event_time", event_times)
    assert frame is not None and seen == [[9, None]]
    rows = converted(frame, fields).column(0).to_pylist()
    assert rows[0]["value"] == [1, 2] and rows[1]["value"] == [] and rows[1]["event_time"] is None


def test_no_rows_no_frame() -> None:
    assert output_frame(FIELDS, []) is None
    assert output_frame(FIELDS, [{name: np.zeros(0) for name, _ in FIELDS}]) is None
