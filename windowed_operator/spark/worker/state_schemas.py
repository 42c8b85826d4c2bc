"""The processor's state variables: their names, their schemas as pyspark types built in Python,
and their declaration.

A schema given to ``getValueState``/``getMapState`` as a DDL string is parsed by the JVM: one more
round trip to the state server per string, and the processor declares its state in every task of
every micro-batch (six strings: measured as a few percent of a Nexmark worker's busy time).  The
same schemas built here are the ones the JVM's parser returns (nullable fields, no metadata), so a
checkpoint sees no change.  A key type this table does not know stays a DDL string.

This module imports nothing of the library's but pyspark's types: the deferred processor
(``deferred``) declares the state with it on the driver, where nothing else is needed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from pyspark.sql.types import (BinaryType, BooleanType, ByteType, DataType, DateType, DoubleType, FloatType,
                               IntegerType, LongType, ShortType, StringType, StructField, StructType,
                               TimestampNTZType, TimestampType)

_PRIMITIVES: dict[str, type[DataType]] = {
    "string": StringType, "bigint": LongType, "long": LongType, "int": IntegerType, "integer": IntegerType,
    "smallint": ShortType, "short": ShortType, "tinyint": ByteType, "byte": ByteType, "double": DoubleType,
    "float": FloatType, "real": FloatType, "boolean": BooleanType, "binary": BinaryType, "date": DateType,
    "timestamp": TimestampType, "timestamp_ltz": TimestampType, "timestamp_ntz": TimestampNTZType,
}


def schema(*fields: tuple[str, str]) -> Union[StructType, str]:
    """``schema(("key", "bigint"), ...)``: a StructType, or the DDL string where a type is not a
    primitive this module knows (the JVM parses it)."""
    found = [_PRIMITIVES.get(type_name.strip().lower()) for _, type_name in fields]
    types = [t for t in found if t is not None]
    if len(types) < len(found):
        return ", ".join(f"{name} {type_name}" for name, type_name in fields)
    return StructType([StructField(name, t(), True) for (name, _), t in zip(fields, types)])


#: The pickled layout of version 5 and before (declared only to detect it).
STATE_NAME = "windowed_operator_state"
#: The group's record, each key's record, and the parts (due index, pane log): ``group_store``.
META_STATE = "wo_group"
KEYS_STATE = "wo_keys"
DUE_STATE = "wo_due"


@dataclass(frozen=True)
class DeclaredState:
    """The state variables of one task, declared in the processor's ``init`` (the only time Spark
    allows it)."""

    old_value: Any
    meta: Any
    keys: Any
    parts: Any


def declare_state(handle: Any, key_type: Optional[str]) -> DeclaredState:
    return DeclaredState(
        old_value=handle.getValueState(STATE_NAME, schema(("blob", "binary"))),
        meta=handle.getValueState(META_STATE, schema(("meta", "string"))),
        keys=handle.getMapState(KEYS_STATE, schema(("key", key_type or "int")), schema(("record", "string"))),
        parts=handle.getMapState(DUE_STATE, schema(("domain", "string"), ("bucket", "bigint"), ("part", "int")),
                                 schema(("entries", "string"))))
