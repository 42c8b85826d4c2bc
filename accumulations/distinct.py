"""Distinct counts per window: exact (``CountDistinct``) and a HyperLogLog sketch (``ApproxCountDistinct``).

Both merge, so session merges, pane combination and chains work with them.  Their accumulators are
data: the exact count keeps each value with its multiplicity (a dict, so that a retraction from an
upstream stage can take a value out again: ``subtract``); the sketch keeps the bytes Apache
DataSketches serializes it to (a sketch object is rebuilt from them to fold, and written back), so
a checkpoint never holds a pickle.  A retraction of a pane is its previous count negated (the
numeric rule), so a downstream Sum of panes and retractions equals the final counts.
"""
from __future__ import annotations

from typing import Any, ClassVar, Literal, Optional

import numpy as np
from pydantic import Field

from .base import FieldAccumulation
from .sketch import SketchAccumulation

_UNHASHABLE = ("struct", "map", "array")


def _unhashable_refusal(ddl: str) -> Optional[str]:
    return ("it takes values that can be told apart by equality (numbers, strings, dates, timestamps, booleans, "
            "binary)" if ddl.startswith(_UNHASHABLE) else None)


class CountDistinct(FieldAccumulation[dict, int]):
    """The exact number of distinct values (or of distinct ``field`` values) of the window.

    Memory grows with the distinct values of each window (use ``ApproxCountDistinct`` for large ones);
    values compare by Python equality (``1 == 1.0``)."""

    def default_accumulated_value(self) -> dict:
        return {}

    def accumulate(self, accumulated: dict, value: Any) -> dict:
        item = self.extract(value)
        accumulated[item] = accumulated.get(item, 0) + 1  # the core owns accumulated values
        return accumulated

    def merge(self, a1: dict, a2: dict) -> dict:
        big, small = (a1, a2) if len(a1) >= len(a2) else (a2, a1)
        merged = dict(big)
        for item, count in small.items():
            merged[item] = merged.get(item, 0) + count
        return merged

    def subtract(self, accumulated: dict, value: Any) -> dict:
        item = self.extract(value)
        left = accumulated.get(item, 0) - 1
        if left > 0:
            accumulated[item] = left
        else:
            accumulated.pop(item, None)
        return accumulated

    def get_output(self, accumulated: dict) -> int:
        return len(accumulated)

    def fold_array(self, values: Any) -> dict:
        items = values.tolist() if isinstance(values, np.ndarray) else list(values)
        folded: dict = {}
        for item in items:
            folded[item] = folded.get(item, 0) + 1
        return folded

    def output_type(self, input_type: str) -> Optional[str]:
        return "bigint"

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        return _unhashable_refusal(input_type)


def _hll_item(value: Any) -> Any:
    """What the sketch hashes: integers as 64-bit integers, floats as doubles, text as text, and any
    other value (dates, decimals, bytes) as its text; so 1 and 1.0 are two values to the sketch."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value) if -(2 ** 63) <= value < 2 ** 63 else str(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


class ApproxCountDistinct(SketchAccumulation):
    """The number of distinct values, estimated by a HyperLogLog sketch (Apache DataSketches).

    ``lg_k`` (4..21) sets the size: 2**lg_k registers, relative standard error about
    ``1.04 / sqrt(2**lg_k)`` (1.6% at the default 12); counts below about ``2**lg_k / 16`` are exact.
    ``hll_type``: HLL_4 (smallest state), HLL_6 or HLL_8 (fastest).  Output: the estimate rounded to
    an integer.  The state is the sketch's serialized bytes."""

    _positional: ClassVar[tuple[str, ...]] = ("field",)
    lg_k: int = Field(default=12, ge=4, le=21, description="log2 of the sketch's registers")
    hll_type: Literal["HLL_4", "HLL_6", "HLL_8"] = "HLL_8"

    def _new(self) -> Any:
        import datasketches

        return datasketches.hll_sketch(self.lg_k, getattr(datasketches.tgt_hll_type, self.hll_type))

    def _from_bytes(self, data: bytes) -> Any:
        import datasketches

        return datasketches.hll_sketch.deserialize(data)

    def _to_bytes(self, sketch: Any) -> bytes:
        return sketch.serialize_compact()

    def _update(self, sketch: Any, items: Any) -> None:
        for item in (items.tolist() if isinstance(items, np.ndarray) else items):  # (Python scalars hash as such)
            sketch.update(_hll_item(item))

    def _merged(self, a: Any, b: Any) -> Any:
        import datasketches

        union = datasketches.hll_union(self.lg_k)
        union.update(a)
        union.update(b)
        return union.get_result(getattr(datasketches.tgt_hll_type, self.hll_type))

    def get_output(self, accumulated: Optional[bytes]) -> int:
        return 0 if accumulated is None else int(round(self._load(accumulated).get_estimate()))

    def bounds(self, accumulated: Optional[bytes], std_devs: int = 2) -> tuple[int, int]:
        """The sketch's own confidence interval for the count (1, 2 or 3 standard deviations)."""
        if accumulated is None:
            return 0, 0
        sketch = self._load(accumulated)
        return int(sketch.get_lower_bound(std_devs)), int(np.ceil(sketch.get_upper_bound(std_devs)))

    def output_type(self, input_type: str) -> Optional[str]:
        return "bigint"

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        return _unhashable_refusal(input_type)
