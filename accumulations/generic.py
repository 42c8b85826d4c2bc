"""Accumulations built from user functions: Reduce(fn) and Combine(create, add, merge, extract)."""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Optional

from .base import Accumulation

_EMPTY = None


class Reduce(Accumulation[Any, Any, Any]):
    """Folds inputs with an associative ``fn(a, b)``; an empty window outputs ``None``."""

    _positional: ClassVar[tuple[str, ...]] = ("fn",)
    fn: Callable[[Any, Any], Any]
    result_type: Optional[str] = None

    def default_accumulated_value(self) -> Any:
        return _EMPTY

    def accumulate(self, accumulated: Any, value: Any) -> Any:
        return value if accumulated is _EMPTY else self.fn(accumulated, value)

    def merge(self, a1: Any, a2: Any) -> Any:
        if a1 is _EMPTY:
            return a2
        if a2 is _EMPTY:
            return a1
        return self.fn(a1, a2)

    def get_output(self, accumulated: Any) -> Any:
        return accumulated

    def output_type(self, input_type: str) -> Optional[str]:
        return self.result_type or input_type


class Combine(Accumulation[Any, Any, Any]):
    """Beam's CombineFn shape: ``create() -> A``, ``add(A, I) -> A``, ``merge(A, A) -> A``, ``extract(A) -> O``."""

    _positional: ClassVar[tuple[str, ...]] = ("create", "add", "merge_fn", "extract")
    create: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    merge_fn: Callable[[Any, Any], Any]
    extract: Callable[[Any], Any]
    retract: Optional[Callable[[Any], Any]] = None
    result_type: Optional[str] = None

    def default_accumulated_value(self) -> Any:
        return self.create()

    def accumulate(self, accumulated: Any, value: Any) -> Any:
        return self.add(accumulated, value)

    def merge(self, a1: Any, a2: Any) -> Any:
        return self.merge_fn(a1, a2)

    def get_output(self, accumulated: Any) -> Any:
        return self.extract(accumulated)

    def output_type(self, input_type: str) -> Optional[str]:
        return self.result_type

    def get_retraction(self, output: Any) -> Any:
        if self.retract is not None:
            return self.retract(output)
        return super().get_retraction(output)
