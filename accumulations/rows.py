"""Whole inputs as columns: the array path's form of rows for accumulations that keep rows.

AllMax and TopN keep whole inputs (a bid, not its price). Element by element, each input is a dict
that goes through the core's per-element machinery; as ``Rows`` a micro-batch of them is a few
numpy columns, ranked with one array operation, and dicts are built only for the rows kept.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Union

import numpy as np


class Rows:
    """Inputs as named columns of one length; indexing (a slice, a position array) gives the rows
    it selects, in that order, as another ``Rows``."""

    __slots__ = ("columns", "length")

    def __init__(self, columns: Mapping[str, np.ndarray], length: Optional[int] = None) -> None:
        self.columns = dict(columns)
        lengths = {len(values) for values in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"Rows: columns of different lengths {sorted(lengths)}")
        self.length = lengths.pop() if lengths else (length or 0)

    @classmethod
    def of_frame(cls, frame: Any, names: Iterable[str]) -> "Rows":
        """The columns ``names`` of a pandas DataFrame, each as the values ``to_dict("records")``
        gives for it (numbers as numbers; anything else as the objects pandas holds)."""
        columns = {}
        for name in names:
            series = frame[name]
            kind = series.dtype.kind
            columns[name] = series.to_numpy() if kind in "iufb" else series.to_numpy(dtype=object)
        return cls(columns, len(frame))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Union[slice, np.ndarray]) -> "Rows":
        picked = {name: values[index] for name, values in self.columns.items()}
        length = len(range(*index.indices(self.length))) if isinstance(index, slice) else len(index)
        return Rows(picked, length)

    def column(self, name: str) -> np.ndarray:
        if name not in self.columns:
            raise KeyError(f"the inputs have no field {name!r} (they have {', '.join(self.columns)})")
        return self.columns[name]

    def records(self, positions: Optional[np.ndarray] = None) -> list[dict]:
        """Rows as dicts (all of them, or those at ``positions``), with Python values."""
        names = list(self.columns)
        picked = [(self.columns[n] if positions is None else self.columns[n][positions]).tolist() for n in names]
        count = self.length if positions is None else len(positions)
        if not names:
            return [{} for _ in range(count)]
        return [dict(zip(names, values)) for values in zip(*picked)]


__all__ = ["Rows"]
