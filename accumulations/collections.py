"""Accumulations whose output is a collection: ToList, TopN and AllMax."""
from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional

import numpy as np
from pydantic import Field

from .base import Accumulation, FieldAccumulation
from .rows import Rows


class ToList(FieldAccumulation[list, list]):
    """Every input of the window, in arrival order (merged lists are concatenated in window order)."""

    def default_accumulated_value(self) -> list:
        return []

    def accumulate(self, accumulated: list, value: Any) -> list:
        accumulated.append(self.extract(value))  # the core owns accumulated values; outputs are copies
        return accumulated

    def merge(self, a1: list, a2: list) -> list:
        return a1 + a2

    def get_output(self, accumulated: list) -> list:
        return list(accumulated)

    def output_type(self, input_type: str) -> Optional[str]:
        return f"array<{input_type}>"


class _Ranked:
    """What TopN and AllMax share: inputs ranked by ``field`` or ``key``, kept as a list that merges.
    (A plain mixin: the classes declare their own fields, so that their field order, and with it the
    repr a checkpoint's fingerprint stores, stays as it was.)"""

    if TYPE_CHECKING:
        field: Optional[str]
        key: Optional[Callable[[Any], Any]]

    def _rank(self, value: Any) -> Any:
        if self.key is not None:
            return self.key(value)
        if self.field is not None:
            return value[self.field] if isinstance(value, dict) else getattr(value, self.field)
        return value

    def default_accumulated_value(self) -> list:
        """An empty list: no input ranked yet."""
        return []

    def accumulate(self, accumulated: list, value: Any) -> list:
        """Merge one input into the kept list (``merge`` of the list with ``[value]``)."""
        return self.merge(accumulated, [value])  # type: ignore[attr-defined]

    def get_output(self, accumulated: list) -> list:
        """A copy of the kept inputs."""
        return list(accumulated)

    def output_type(self, input_type: str) -> Optional[str]:
        """An array of the input's type."""
        return f"array<{input_type}>"

    # -- the array path: a batch of inputs (a numpy column, or whole rows as ``Rows``) -------------
    def folds_rows(self) -> bool:
        """True: the array path may hand whole inputs as rows (``accumulations.rows.Rows``)."""
        return True

    def fold_array(self, values: Any) -> list:
        """The fold of ``values`` in order: ranked as one numpy column where the ranking field is a
        column of numbers without NaN (dicts built only for the rows kept), else input by input."""
        if len(values) == 0:
            return []
        ranks = self._array_ranks(values)
        if ranks is None:
            inputs = values.records() if isinstance(values, Rows) else values.tolist()
            return self.accumulate_all([], inputs)  # type: ignore[attr-defined]
        kept = self._kept_positions(ranks)
        return values.records(kept) if isinstance(values, Rows) else values[kept].tolist()

    def _array_ranks(self, values: Any) -> Optional[np.ndarray]:
        if self.key is not None:
            return None
        if isinstance(values, Rows):
            if self.field is None:
                return None
            ranks = values.column(self.field)
        elif self.field is None:
            ranks = values
        else:
            return None
        if ranks.dtype.kind not in "iuf" or (ranks.dtype.kind == "f" and np.isnan(ranks).any()):
            return None  # (NaN does not order: the fold input by input says what it does)
        return ranks

    def _kept_positions(self, ranks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _kept_per_group(self) -> int:
        """How many of a group's largest ranks can be kept (ties at the last one included)."""
        raise NotImplementedError

    def candidates(self, ranks: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Which inputs can be kept by the fold of any set of inputs that holds their whole group
        (``groups``: integer codes; ``ranks``: numbers without NaN): those ranked among their group's
        top ``_kept_per_group``, ties included. A window that is a union of groups (panes) keeps only
        such inputs, so the others can be left out before the fold (Spark's pre-selection)."""
        if len(ranks) == 0:
            return np.zeros(0, dtype=bool)
        if self._kept_per_group() == 1:
            # each group's largest rank, in one pass: no sort (the sort was most of q7's pre-selection)
            largest = np.full(int(groups.max()) + 1, ranks.min(), dtype=ranks.dtype)
            np.maximum.at(largest, groups, ranks)
            return ranks >= largest[groups]
        order = np.lexsort((ranks, groups))  # by group, ranks ascending
        sorted_groups = groups[order]
        ends = np.append(np.flatnonzero(np.diff(sorted_groups)) + 1, len(order))  # one past each group's last
        starts = np.concatenate(([0], ends[:-1]))
        threshold_at = np.maximum(ends - self._kept_per_group(), starts)
        thresholds = ranks[order][threshold_at]
        group_index = np.repeat(np.arange(len(ends)), ends - starts)
        keep = np.empty(len(ranks), dtype=bool)
        keep[order] = ranks[order] >= thresholds[group_index]
        return keep


class TopN(_Ranked, Accumulation[Any, list, list]):
    """The ``n`` largest inputs (by ``field`` or ``key``), largest first."""

    _positional: ClassVar[tuple[str, ...]] = ("n",)
    n: int = Field(gt=0, description="how many values to keep")
    field: Optional[str] = None
    key: Optional[Callable[[Any], Any]] = None

    def merge(self, a1: list, a2: list) -> list:
        return heapq.nlargest(self.n, a1 + a2, key=self._rank)

    def _kept_positions(self, ranks: np.ndarray) -> np.ndarray:
        # largest first; among equal ranks the earlier input first (as heapq.nlargest keeps them)
        ascending = np.lexsort((np.arange(len(ranks))[::-1], ranks))  # ties: the later input first
        return ascending[::-1][:self.n]

    def _kept_per_group(self) -> int:
        return self.n


class AllMax(_Ranked, Accumulation[Any, list, list]):
    """Every input ranked largest (by ``field`` or ``key``), all of them on a tie, in arrival order:
    Nexmark's "hot items" and "highest bid" keep every auction or bid tied for the top, where
    ``TopN(1)`` would pick one arbitrarily."""

    field: Optional[str] = None
    key: Optional[Callable[[Any], Any]] = None

    def merge(self, a1: list, a2: list) -> list:
        if not a1 or not a2:
            return [*a1, *a2]
        top1, top2 = self._rank(a1[0]), self._rank(a2[0])
        if top1 == top2:
            return [*a1, *a2]
        return list(a1) if top1 > top2 else list(a2)

    def _kept_positions(self, ranks: np.ndarray) -> np.ndarray:
        return np.flatnonzero(ranks == ranks.max())

    def _kept_per_group(self) -> int:
        return 1
