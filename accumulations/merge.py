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

from .base import Accumulation, ParameterModel

I1 = TypeVar("I1")
I2 = TypeVar("I2")
A = TypeVar("A")
O = TypeVar("O")

LEFT = "left"
RIGHT = "right"
SIDES = (LEFT, RIGHT)


class MergeAccumulation(ParameterModel, Generic[I1, I2, A, O]):
    """Subclass and implement ``default_accumulated_value``, ``accumulate1``, ``accumulate2``, ``merge``
    and ``get_output``; ``get_retraction`` defaults to the output itself (marked ``is_retraction``)."""

    def default_accumulated_value(self) -> A:
        raise NotImplementedError

    def accumulate1(self, accumulated: A, left: I1) -> A:
        raise NotImplementedError

    def accumulate2(self, accumulated: A, right: I2) -> A:
        raise NotImplementedError

    def merge(self, a1: A, a2: A) -> A:
        raise NotImplementedError

    def get_output(self, accumulated: A) -> O:
        raise NotImplementedError

    def get_retraction(self, output: O) -> O:
        return output

    def output_type(self, left_type: str, right_type: str) -> Optional[str]:
        """The output's DDL type given each side's input type, or None when it cannot be known."""
        return None


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

    def output_type(self, left_type: str, right_type: str) -> Optional[str]:
        if self.join is not None:
            return f"array<{self.result_type}>" if self.result_type else None
        return f"array<struct<left:{left_type},right:{right_type}>>"


class InnerJoin(_PairJoin):
    """Every left x right pair of the window (nothing while one side is empty)."""

    def _pairs(self, lefts: list, rights: list) -> list:
        return [(left, right) for left in lefts for right in rights]


class LeftOuterJoin(_PairJoin):
    """Every left x right pair; a left without any right pairs with ``None``."""

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
    """The window's inputs grouped by side: ``{"left": [...], "right": [...]}``."""

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

    def get_output(self, accumulated: Any) -> Any:
        return self.inner.get_output(accumulated)

    def get_retraction(self, output: Any) -> Any:
        return self.inner.get_retraction(output)
