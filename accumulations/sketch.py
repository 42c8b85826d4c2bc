"""What every sketch accumulation shares: the accumulator is the sketch's serialized bytes.

A checkpoint then holds data, not a pickle, and a runner may ship a partial sketch across a shuffle
(``partials_are_bytes``).  Each fold rebuilds the sketch from its bytes, updates it with all of its
inputs at once and writes it back; an empty window holds None rather than an empty sketch's bytes.
A family says how to make, read, write, update and merge its sketch.
"""
from __future__ import annotations

from typing import Any, Optional

from .base import FieldAccumulation


class SketchAccumulation(FieldAccumulation[Optional[bytes], Any]):
    def _new(self) -> Any:
        raise NotImplementedError

    def _from_bytes(self, data: bytes) -> Any:
        raise NotImplementedError

    def _to_bytes(self, sketch: Any) -> bytes:
        raise NotImplementedError

    def _update(self, sketch: Any, items: Any) -> None:
        """Add ``items`` (inputs already extracted: a list, or a numpy array from ``fold_array``) to ``sketch``."""
        raise NotImplementedError

    def _merged(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def _load(self, accumulated: Optional[bytes]) -> Any:
        return self._new() if accumulated is None else self._from_bytes(accumulated)

    def partials_are_bytes(self) -> bool:
        return True

    def default_accumulated_value(self) -> Optional[bytes]:
        return None  # an empty sketch, without its bytes

    def accumulate(self, accumulated: Optional[bytes], value: Any) -> bytes:
        return self._folded(accumulated, [self.extract(value)])

    def accumulate_all(self, accumulated: Optional[bytes], values: list) -> Optional[bytes]:
        return self._folded(accumulated, [self.extract(v) for v in values]) if values else accumulated

    def fold_array(self, values: Any) -> Optional[bytes]:
        return self._folded(None, values) if len(values) else None

    def _folded(self, accumulated: Optional[bytes], items: Any) -> bytes:
        sketch = self._load(accumulated)
        self._update(sketch, items)
        return self._to_bytes(sketch)

    def merge(self, a1: Optional[bytes], a2: Optional[bytes]) -> Optional[bytes]:
        if a1 is None or a2 is None:
            return a2 if a1 is None else a1
        return self._to_bytes(self._merged(self._from_bytes(a1), self._from_bytes(a2)))
