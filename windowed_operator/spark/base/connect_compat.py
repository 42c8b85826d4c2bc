"""Building the operator's plan on Spark Connect without analysing the DataFrame.

Spark Declarative Pipelines (``pyspark.pipelines``, which runs on Spark Connect) forbid anything
that analyses a DataFrame inside a query function.  pyspark 4.3's Connect
``GroupedData.transformWithStateInPandas`` reads ``self._df.columns`` (an analysis request), and a
DDL output schema is parsed by the server (another one).  When apply() was given the input schema,
the columns and the output schema are known on the client, so this module builds the same plan node
with them (``pyspark.sql.connect.plan.TransformWithStateInPandas``: the code pyspark runs, minus the
two requests).  Everything else uses the public API.
"""
from __future__ import annotations

import re
from typing import Any

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType)

_PRIMITIVES: dict[str, DataType] = {
    "string": StringType(), "bigint": LongType(), "long": LongType(), "int": IntegerType(), "integer": IntegerType(),
    "smallint": ShortType(), "short": ShortType(), "tinyint": ByteType(), "byte": ByteType(),
    "double": DoubleType(), "float": FloatType(), "boolean": BooleanType(), "binary": BinaryType(),
    "date": DateType(), "timestamp": TimestampType(), "timestamp_ntz": TimestampNTZType(),
}


def is_connect(df: Any) -> bool:
    return type(df).__module__.startswith("pyspark.sql.connect")


def parse_ddl_schema(text: str) -> StructType:
    """``name type, name type, ...`` (top-level column list) parsed on the client."""
    fields, rest = _fields(text.strip(), separator=" ", closing="")
    if rest.strip():
        raise ValueError(f"cannot parse schema {text!r}")
    return StructType(fields)


def _parse(text: str) -> tuple[DataType, str]:
    text = text.lstrip()
    lower = text.lower()
    if lower.startswith("array<"):
        element, rest = _parse(text[6:])
        return ArrayType(element, True), _expect(rest, ">")
    if lower.startswith("map<"):
        key, rest = _parse(text[4:])
        value, rest = _parse(_expect(rest, ","))
        return MapType(key, value, True), _expect(rest, ">")
    if lower.startswith("struct<"):
        fields, rest = _fields(text[7:], separator=":", closing=">")
        return StructType(fields), _expect(rest, ">")
    match = re.match(r"decimal\((\d+)\s*,\s*(\d+)\)", lower)
    if match:
        return DecimalType(int(match.group(1)), int(match.group(2))), text[match.end():]
    match = re.match(r"[a-z_]+", lower)
    if not match or match.group(0) not in _PRIMITIVES:
        raise ValueError(f"unknown type at {text[:30]!r}")
    return _PRIMITIVES[match.group(0)], text[match.end():]


def _fields(text: str, separator: str, closing: str) -> tuple[list[StructField], str]:
    fields = []
    rest = text.lstrip()
    while rest and not (closing and rest.startswith(closing)):
        match = re.match(r"`?([A-Za-z0-9_]+)`?\s*" + (":" if separator == ":" else r"\s"), rest)
        if not match:
            raise ValueError(f"cannot parse field at {rest[:30]!r}")
        type_, rest = _parse(rest[match.end():])
        fields.append(StructField(match.group(1), type_, True))
        rest = rest.lstrip()
        if rest.startswith(","):
            rest = rest[1:].lstrip()
    return fields, rest


def _expect(text: str, token: str) -> str:
    text = text.lstrip()
    if not text.startswith(token):
        raise ValueError(f"expected {token!r} at {text[:30]!r}")
    return text[len(token):]


def transform_with_state(df: Any, group_column: str, processor: Any, output_schema: StructType, time_mode: str,
                         columns: list[str], event_time_column: str = "") -> Any:
    """``df.groupBy(group_column).transformWithStateInPandas(...)`` on Spark Connect, analysis-free."""
    from pyspark.sql.connect import plan
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    from pyspark.sql.connect.udf import UserDefinedFunction
    from pyspark.sql.functions import col
    from pyspark.sql.streaming.stateful_processor_util import TransformWithStateInPandasUdfUtils
    from pyspark.util import PythonEvalType

    udf_util = TransformWithStateInPandasUdfUtils(processor, time_mode)
    udf_obj = UserDefinedFunction(udf_util.transformWithStateUDF, returnType=output_schema,
                                  evalType=PythonEvalType.SQL_TRANSFORM_WITH_STATE_PANDAS_UDF)
    return ConnectDataFrame(
        plan.TransformWithStateInPandas(
            child=df._plan, grouping_cols=[col(group_column)], function=udf_obj, output_schema=output_schema,
            output_mode="Append", time_mode=time_mode, event_time_col_name=event_time_column, cols=columns,
            initial_state_plan=None, initial_state_grouping_cols=None),
        session=df._session)


def map_in_arrow(df: Any, func: Any, schema: StructType, columns: list[str]) -> Any:
    """``df.select(*columns).mapInArrow(func, schema)``, analysis-free on Spark Connect (where
    ``mapInArrow`` asks the server for the input's columns, which Spark Declarative Pipelines refuse
    inside a query function): the columns are the ones selected, known here."""
    selected = df.select(*columns)
    if not is_connect(df):
        return selected.mapInArrow(func, schema)
    from pyspark.sql.connect import plan
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    from pyspark.sql.connect.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    udf_obj = UserDefinedFunction(func, returnType=schema, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    out = ConnectDataFrame(plan.MapPartitions(child=selected._plan, function=udf_obj, cols=list(columns),
                                              is_barrier=False, profile=None), session=selected._session)
    out._cached_schema = schema
    return out
