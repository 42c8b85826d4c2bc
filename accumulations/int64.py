"""Exact integer folds over numpy arrays.

numpy's int64 arithmetic wraps silently past 2^63 - 1.  Every vectorized integer sum (the array and
columnar paths, pre-aggregation) first asks ``may_wrap``: a run of values can only leave int64 when
their absolute values add up to that much, so a cheap float64 estimate with a margin of 2x decides
when to fold with exact Python integers instead (object arrays; rare, and slower).  Whether a
*result* fits a 64-bit integer (Spark's bigint) is then checked where windows are output.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

INT64_MIN = -(2 ** 63)
INT64_MAX = 2 ** 63 - 1
_SAFE_TOTAL = 2.0 ** 62


def may_wrap(values: Any) -> bool:
    """Whether an int64 sum of some run of ``values`` could leave the int64 range."""
    return (isinstance(values, np.ndarray) and values.dtype.kind in "iu" and len(values) > 0
            and float(np.abs(values, dtype=np.float64).sum()) >= _SAFE_TOTAL)


def exact(values: Any) -> Any:
    """``values`` as Python integers (an object array) when an int64 sum of them could wrap."""
    return values.astype(object) if may_wrap(values) else values


def scalar(value: Any) -> Any:
    """A numpy scalar as a Python one (Python integers from object arrays stay as they are)."""
    return value.item() if isinstance(value, np.generic) else value


def fits_int64(value: Any) -> bool:
    """Whether an integer output fits a signed 64-bit integer (non-integers always 'fit')."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return True
    return INT64_MIN <= int(value) <= INT64_MAX


def first_outside_int64(values: np.ndarray) -> Optional[int]:
    """The index of the first integer of an array that does not fit int64, or None."""
    if values.dtype.kind == "u":
        outside = np.flatnonzero(values > np.iinfo(np.int64).max)
        return int(outside[0]) if len(outside) else None
    if values.dtype != object:
        return None
    for i, value in enumerate(values.tolist()):
        if not fits_int64(value):
            return i
    return None
