"""Sum, Count, Min, Max, Mean: the numeric accumulations, all mergeable."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .base import Accumulation, FieldAccumulation, is_numeric_type, numeric_refusal, orderable_refusal, sum_type
from .int64 import exact, scalar


class Sum(FieldAccumulation[Any, Any]):
    """The sum of the values (or of ``field`` of each element): integers stay exact Python integers
    (past 64 bits a window is an error on output, never a wrapped number); a retraction is the
    negation."""

    def default_accumulated_value(self) -> Any:
        return 0

    def accumulate(self, accumulated: Any, value: Any) -> Any:
        return accumulated + self.extract(value)

    def merge(self, a1: Any, a2: Any) -> Any:
        return a1 + a2

    def get_output(self, accumulated: Any) -> Any:
        return accumulated

    def subtract(self, accumulated: Any, value: Any) -> Any:
        return accumulated - self.extract(value)

    def fold_array(self, values: Any) -> Any:
        return scalar(exact(values).sum()) if len(values) else 0

    def fold_segments(self, values: Any, starts: Any) -> list:
        return np.add.reduceat(exact(values), starts).tolist()

    def output_type(self, input_type: str) -> Optional[str]:
        return sum_type(input_type)

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        return numeric_refusal(input_type)


class Count(Accumulation[Any, int, int]):
    """The number of elements, whatever their values (no field needed)."""

    def default_accumulated_value(self) -> int:
        return 0

    def accumulate(self, accumulated: int, value: Any) -> int:
        return accumulated + 1

    def merge(self, a1: int, a2: int) -> int:
        return a1 + a2

    def get_output(self, accumulated: int) -> int:
        return accumulated

    def subtract(self, accumulated: int, value: Any) -> int:
        return accumulated - 1

    def fold_array(self, values: Any) -> int:
        return len(values)

    def fold_segments(self, values: Any, starts: Any) -> list:
        return np.diff(np.append(starts, len(values))).tolist()

    def output_type(self, input_type: str) -> Optional[str]:
        return "bigint"


class Min(FieldAccumulation[Optional[Any], Optional[Any]]):
    """Output is ``None`` for a window with no inputs (an empty pane)."""

    def default_accumulated_value(self) -> Optional[Any]:
        return None

    def accumulate(self, accumulated: Any, value: Any) -> Any:
        value = self.extract(value)
        return value if accumulated is None or value < accumulated else accumulated

    def merge(self, a1: Any, a2: Any) -> Any:
        if a1 is None:
            return a2
        if a2 is None:
            return a1
        return a2 if a2 < a1 else a1

    def fold_array(self, values: Any) -> Any:
        return values.min().item() if len(values) else None

    def fold_segments(self, values: Any, starts: Any) -> list:
        return np.minimum.reduceat(values, starts).tolist()

    def get_output(self, accumulated: Any) -> Any:
        return accumulated

    def output_type(self, input_type: str) -> Optional[str]:
        return input_type if not input_type.startswith(("struct", "map", "array")) else None

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        return orderable_refusal(input_type)


class Max(FieldAccumulation[Optional[Any], Optional[Any]]):
    """Output is ``None`` for a window with no inputs (an empty pane)."""

    def default_accumulated_value(self) -> Optional[Any]:
        return None

    def accumulate(self, accumulated: Any, value: Any) -> Any:
        value = self.extract(value)
        return value if accumulated is None or value > accumulated else accumulated

    def merge(self, a1: Any, a2: Any) -> Any:
        if a1 is None:
            return a2
        if a2 is None:
            return a1
        return a2 if a2 > a1 else a1

    def fold_array(self, values: Any) -> Any:
        return values.max().item() if len(values) else None

    def fold_segments(self, values: Any, starts: Any) -> list:
        return np.maximum.reduceat(values, starts).tolist()

    def get_output(self, accumulated: Any) -> Any:
        return accumulated

    def output_type(self, input_type: str) -> Optional[str]:
        return input_type if not input_type.startswith(("struct", "map", "array")) else None

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        return orderable_refusal(input_type)


class Mean(FieldAccumulation[tuple, Optional[float]]):
    """Accumulates ``(sum, count)``; output is ``None`` for an empty window."""

    def default_accumulated_value(self) -> tuple:
        return (0, 0)

    def accumulate(self, accumulated: tuple, value: Any) -> tuple:
        return (accumulated[0] + self.extract(value), accumulated[1] + 1)

    def merge(self, a1: tuple, a2: tuple) -> tuple:
        return (a1[0] + a2[0], a1[1] + a2[1])

    def get_output(self, accumulated: tuple) -> Optional[float]:
        return accumulated[0] / accumulated[1] if accumulated[1] else None

    def subtract(self, accumulated: tuple, value: Any) -> tuple:
        return (accumulated[0] - self.extract(value), accumulated[1] - 1)

    def fold_array(self, values: Any) -> tuple:
        return (scalar(exact(values).sum()) if len(values) else 0, len(values))

    def fold_segments(self, values: Any, starts: Any) -> list:
        sums = np.add.reduceat(exact(values), starts).tolist()
        counts = np.diff(np.append(starts, len(values))).tolist()
        return list(zip(sums, counts))

    def output_type(self, input_type: str) -> Optional[str]:
        return "double" if is_numeric_type(input_type) else None

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        return numeric_refusal(input_type)
