"""Accumulations over two inputs: the business logic of a windowed merge (join, cogroup).

A ``MergeAccumulation`` folds left inputs ``I1`` with ``accumulate1`` and right inputs ``I2`` with
``accumulate2`` into one accumulated value per window, so a window's join result is recomputed from
everything both sides sent: a late element of either side changes the output, and the accumulation
modes (including retractions) apply to it exactly as to a one-input accumulation.

``SidedAccumulation`` adapts a merge accumulation to the one-input protocol over ``(side, value)``
pairs; that is how the one semantic core runs merges (and merges session windows across sides).
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Generic, Optional, TypeVar

import numpy as np

from .base import Accumulation
from .config import Config

I1 = TypeVar("I1")
I2 = TypeVar("I2")
A = TypeVar("A")
O = TypeVar("O")

LEFT = "left"
RIGHT = "right"
SIDES = (LEFT, RIGHT)


class MergeAccumulation(Config, Generic[I1, I2, A, O]):
    """Subclass and implement ``default_accumulated_value``, ``accumulate1``, ``accumulate2``, ``merge``
    and ``get_output``; ``get_retraction`` defaults to the output itself (marked ``is_retraction``)."""

    def default_accumulated_value(self) -> A:
        """The accumulated value of a window with no input from either side.

        Called once for each new window; must return a fresh value, the identity of ``merge``, and (on
        Spark) plain data, as ``Accumulation.default_accumulated_value``.
        """
        raise NotImplementedError

    def accumulate1(self, accumulated: A, left: I1) -> A:
        """Fold one element of the left input into a window's accumulated value and return the result.

        The core calls it for each left element of each window it is assigned to (both inputs feed one
        core as ``(side, value)`` elements); it may update ``accumulated`` in place.  Must agree with
        ``merge``, as ``Accumulation.accumulate``.
        """
        raise NotImplementedError

    def accumulate2(self, accumulated: A, right: I2) -> A:
        """Fold one element of the right input into a window's accumulated value and return the result.

        The core calls it for each right element of each window it is assigned to; the same rules as
        ``accumulate1``.
        """
        raise NotImplementedError

    def merge(self, a1: A, a2: A) -> A:
        """Combine two accumulated values of one key: called when sessions merge and when the window log
        folds the parts earlier micro-batches wrote (``a1`` the earlier).  Must be associative, with
        ``default_accumulated_value()`` as its identity.
        """
        raise NotImplementedError

    def get_output(self, accumulated: A) -> O:
        """The value of a pane (the join's pairs, the cogroup's lists), called each time a pane of the window
        fires; must not change ``accumulated``.
        """
        raise NotImplementedError

    def get_retraction(self, output: O) -> O:
        """The value of the retraction of an earlier pane whose value was ``output``: in retracting mode the
        core calls it before each re-fired pane.  By default the output itself, marked by the record's
        ``is_retraction`` flag; must be its own inverse.
        """
        return output

    def is_result(self, output: O) -> bool:
        """Whether a pane whose value is ``output`` is emitted (``Accumulation.is_result``): True by
        default; a join's empty list of pairs is no result."""
        return True

    def output_type(self, left_type: str, right_type: str) -> Optional[str]:
        """The output's DDL type given each side's input type, or None when it cannot be known."""
        return None

    def folds_sided_arrays(self) -> bool:
        """Whether ``fold_sided_segments`` is implemented (the array path of a merge uses it)."""
        return False

    def fold_sided_segments(self, values: "SidedValues", starts: np.ndarray) -> list:
        """The accumulated value of each segment ``values[starts[i]:starts[i + 1]]``, equal to folding
        its inputs one by one (``accumulate1`` or ``accumulate2`` by side) from the default."""
        raise NotImplementedError(f"{type(self).__name__} has no vectorized form")


class SidedValues:
    """A batch of a merge's inputs as arrays: ``left`` marks the left input's, ``values`` holds each
    input's value.  Indexing keeps the two aligned, as the array path slices its values."""

    __slots__ = ("left", "values")

    def __init__(self, left: np.ndarray, values: np.ndarray) -> None:
        self.left = np.asarray(left, dtype=bool)
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: Any) -> "SidedValues":
        return SidedValues(self.left[index], self.values[index])


class _BothSides(MergeAccumulation[Any, Any, tuple, Any]):
    """Keeps every input of both sides (in arrival order): joins need all of them to re-pair."""

    def default_accumulated_value(self) -> tuple:
        return ([], [])

    def accumulate1(self, accumulated: tuple, left: Any) -> tuple:
        accumulated[0].append(left)  # the core owns accumulated values; outputs are fresh lists
        return accumulated

    def accumulate2(self, accumulated: tuple, right: Any) -> tuple:
        accumulated[1].append(right)
        return accumulated

    def merge(self, a1: tuple, a2: tuple) -> tuple:
        return (a1[0] + a2[0], a1[1] + a2[1])

    def folds_sided_arrays(self) -> bool:
        # a subclass that changes how inputs are kept folds them its own way
        return all(getattr(type(self), name) is getattr(_BothSides, name)
                   for name in ("default_accumulated_value", "accumulate1", "accumulate2", "merge"))

    def fold_sided_segments(self, values: SidedValues, starts: np.ndarray) -> list:
        """Each segment's left and right inputs, each side in the segment's order: list slices of
        the two sides' values, so a segment costs two slices, not a call per input."""
        lefts_at, rights_at = np.flatnonzero(values.left), np.flatnonzero(~values.left)
        lefts, rights = values.values[lefts_at].tolist(), values.values[rights_at].tolist()
        bounds = np.append(starts, len(values))
        left_bounds = np.searchsorted(lefts_at, bounds).tolist()
        right_bounds = np.searchsorted(rights_at, bounds).tolist()
        return [(lefts[left_bounds[i]:left_bounds[i + 1]], rights[right_bounds[i]:right_bounds[i + 1]])
                for i in range(len(starts))]


class _PairJoin(_BothSides):
    """Pairs of a window's left and right inputs, as ``(left, right)`` or ``join(left, right)``."""

    _positional: ClassVar[tuple[str, ...]] = ("join",)
    join: Optional[Callable[[Any, Any], Any]] = None
    #: DDL type of ``join``'s result, needed on Spark when ``join`` is given.
    result_type: Optional[str] = None

    def _pair(self, left: Any, right: Any) -> Any:
        return (left, right) if self.join is None else self.join(left, right)

    def _pairs(self, lefts: list, rights: list) -> list:
        raise NotImplementedError

    def get_output(self, accumulated: tuple) -> list:
        lefts, rights = accumulated
        return [self._pair(left, right) for left, right in self._pairs(lefts, rights)]

    def is_result(self, output: list) -> bool:
        """A window with no pair (an inner join's window where one side sent nothing, a left outer
        join's where the left did) emits no pane, as SQL emits no row."""
        return bool(output)

    def output_type(self, left_type: str, right_type: str) -> Optional[str]:
        if self.join is not None:
            return f"array<{self.result_type}>" if self.result_type else None
        return f"array<struct<left:{left_type},right:{right_type}>>"


class InnerJoin(_PairJoin):
    """Every left x right pair of the window; a window where one side sent nothing emits no pane."""

    def _pairs(self, lefts: list, rights: list) -> list:
        return [(left, right) for left in lefts for right in rights]


class LeftOuterJoin(_PairJoin):
    """Every left x right pair; a left without any right pairs with ``None``; a window where the
    left sent nothing emits no pane."""

    def _pairs(self, lefts: list, rights: list) -> list:
        if not rights:
            return [(left, None) for left in lefts]
        return [(left, right) for left in lefts for right in rights]


class FullOuterJoin(_PairJoin):
    """Every left x right pair; while one side is empty, each input of the other pairs with ``None``."""

    def _pairs(self, lefts: list, rights: list) -> list:
        if not rights:
            return [(left, None) for left in lefts]
        if not lefts:
            return [(None, right) for right in rights]
        return [(left, right) for left in lefts for right in rights]


class Cogroup(_BothSides):
    """The window's inputs grouped by side: ``{"left": [...], "right": [...]}`` (a pane for every
    window with inputs, one side empty or not)."""

    def get_output(self, accumulated: tuple) -> dict:
        return {LEFT: list(accumulated[0]), RIGHT: list(accumulated[1])}

    def output_type(self, left_type: str, right_type: str) -> Optional[str]:
        return f"struct<left:array<{left_type}>,right:array<{right_type}>>"


class SidedAccumulation(Accumulation[tuple, Any, Any]):
    """A merge accumulation seen as a one-input accumulation over ``(side, value)`` pairs."""

    inner: MergeAccumulation

    def default_accumulated_value(self) -> Any:
        return self.inner.default_accumulated_value()

    def accumulate(self, accumulated: Any, value: tuple) -> Any:
        side, payload = value
        if side == LEFT:
            return self.inner.accumulate1(accumulated, payload)
        return self.inner.accumulate2(accumulated, payload)

    def merge(self, a1: Any, a2: Any) -> Any:
        return self.inner.merge(a1, a2)

    def supports_fold_array(self) -> bool:
        return self.inner.folds_sided_arrays()

    def fold_array(self, values: SidedValues) -> Any:
        return self.inner.fold_sided_segments(values, np.zeros(1, dtype=np.int64))[0]

    def fold_segments(self, values: SidedValues, starts: Any) -> list:
        return self.inner.fold_sided_segments(values, np.asarray(starts, dtype=np.int64))

    def get_output(self, accumulated: Any) -> Any:
        return self.inner.get_output(accumulated)

    def get_retraction(self, output: Any) -> Any:
        return self.inner.get_retraction(output)

    def is_result(self, output: Any) -> bool:
        return self.inner.is_result(output)
