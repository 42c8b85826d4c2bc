"""Quantiles per window from a KLL sketch (Apache DataSketches): ``Quantiles`` (several) and
``ApproxPercentile`` (one).

A quantile ``q`` is the smallest value ``v`` with at least a fraction ``q`` of the window's values
at most ``v`` (the nearest rank: ``sorted(values)[ceil(q * n) - 1]``, the minimum for ``q = 0``),
which is what Spark's ``percentile_approx`` returns.  While a window holds at most ``k`` values the
sketch keeps them all and the answer is exact; beyond, the rank of the answer is within the sketch's
normalized rank error (about 1.3% at the default k = 200, 99% of the time).  The state is the
sketch's serialized bytes; sketches merge, so sessions and pane combination work with them.  An
empty window outputs null.  A retraction of an ``ApproxPercentile`` pane is its previous value
negated (the numeric rule); of a ``Quantiles`` pane, its previous list, marked ``is_retraction``.
"""
from __future__ import annotations

from typing import Any, ClassVar, Optional

import numpy as np
from pydantic import Field, field_validator

from .base import numeric_refusal
from .sketch import SketchAccumulation


class _KllAccumulation(SketchAccumulation):
    """What both share: a KLL sketch of doubles, held as its bytes."""

    k: int = Field(default=200, ge=8, le=65535, description="the sketch's accuracy parameter (state grows with it)")

    def _new(self) -> Any:
        import datasketches

        return datasketches.kll_doubles_sketch(self.k)

    def _from_bytes(self, data: bytes) -> Any:
        import datasketches

        return datasketches.kll_doubles_sketch.deserialize(data)

    def _to_bytes(self, sketch: Any) -> bytes:
        return sketch.serialize()

    def _update(self, sketch: Any, items: Any) -> None:
        sketch.update(np.asarray(items, dtype=np.float64))

    def _merged(self, a: Any, b: Any) -> Any:
        a.merge(b)
        return a

    def rank_error(self) -> float:
        """The sketch's normalized rank error for quantile queries (99% confidence)."""
        import datasketches

        return datasketches.kll_doubles_sketch.get_normalized_rank_error(self.k, False)

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        return numeric_refusal(input_type)


def _fraction(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"a quantile is a fraction between 0 and 1, got {value!r}")
    return value


class Quantiles(_KllAccumulation):
    """The window's values at each of ``fractions`` (default the median, 90th and 99th percentiles),
    as a list in the order given."""

    _positional: ClassVar[tuple[str, ...]] = ("field",)
    fractions: tuple[float, ...] = Field(default=(0.5, 0.9, 0.99), min_length=1)

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, fractions: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(_fraction(f) for f in fractions)

    def get_output(self, accumulated: Optional[bytes]) -> Optional[list]:
        if accumulated is None:
            return None
        return [float(v) for v in self._load(accumulated).get_quantiles(list(self.fractions), True)]

    def output_type(self, input_type: str) -> Optional[str]:
        return "array<double>"


class ApproxPercentile(_KllAccumulation):
    """The window's value at ``percentile`` (a fraction: 0.5 is the median)."""

    _positional: ClassVar[tuple[str, ...]] = ("field", "percentile")
    percentile: float = 0.5

    @field_validator("percentile")
    @classmethod
    def _percentile(cls, percentile: float) -> float:
        return _fraction(percentile)

    def get_output(self, accumulated: Optional[bytes]) -> Optional[float]:
        if accumulated is None:
            return None
        return float(self._load(accumulated).get_quantile(self.percentile, True))

    def output_type(self, input_type: str) -> Optional[str]:
        return "double"
