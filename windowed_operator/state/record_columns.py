"""A join's or cogroup's accumulators stored by column: the inputs they keep, one column per field.

A join keeps every input of a window (``accumulations.merge``: a pair of lists, the left inputs and
the right inputs), and its inputs are records: rows of a DataFrame, dicts with the same fields.
Encoded value by value (``state_codec``), each record is walked field by field in Python and
written with its field names; on Nexmark q8 that encoding and its decoding were most of the window
log's batch step besides firing.  Stored by column instead, the inputs of all of a part's windows
are concatenated, with each window's count, and the records become one list of field names and one
column of values per field: a column of numbers and strings is its own JSON (``records``'
``_encoded``), so the per-value walk is left to records that need it (nested values, special floats).

Exact by construction: every value goes through the state codec's tagged form; a list whose members
are not all dicts with the same string keys in the same order is kept value by value.
"""
from __future__ import annotations

from itertools import accumulate
from typing import Any, Callable

from .records import _decoded, _encoded

#: The stored form's fields: left and right counts per accumulator, then the left and right inputs.
LEFT_COUNTS, RIGHT_COUNTS, LEFTS, RIGHTS = "l", "r", "L", "R"


def encode_records(encode: Callable[[Any], Any], values: list) -> dict:
    """``{"f": field names, "c": a column per field, "n": how many}`` when every value is a dict with
    the same string keys in the same order; ``{"v": values}`` (each in its tagged form) otherwise."""
    if values and type(values[0]) is dict:
        fields = tuple(values[0])
        if all(type(f) is str for f in fields) and all(type(v) is dict and tuple(v) == fields for v in values):
            return {"f": list(fields), "c": [_encoded(encode, [v[f] for v in values]) for f in fields],
                    "n": len(values)}
    return {"v": _encoded(encode, values)}


def decode_records(read: Callable[[Any], Any], data: dict) -> list:
    """``encode_records``' values back: new dicts, fields in their stored order."""
    if "v" in data:
        return _decoded(read, data["v"])
    fields = data["f"]
    if not fields:
        return [{} for _ in range(data["n"])]
    return [dict(zip(fields, row)) for row in zip(*[_decoded(read, column) for column in data["c"]])]


def encode_sided(encode: Callable[[Any], Any], accs: list[tuple[list, list]]) -> dict:
    """Accumulators that are each a pair (left inputs, right inputs), as two columns of counts and
    the inputs of each side concatenated in accumulator order."""
    return {LEFT_COUNTS: [len(acc[0]) for acc in accs], RIGHT_COUNTS: [len(acc[1]) for acc in accs],
            LEFTS: encode_records(encode, [v for acc in accs for v in acc[0]]),
            RIGHTS: encode_records(encode, [v for acc in accs for v in acc[1]])}


def decode_sided(read: Callable[[Any], Any], data: dict) -> list[tuple[list, list]]:
    """``encode_sided``'s accumulators back, each a new pair of new lists."""
    lefts, rights = decode_records(read, data[LEFTS]), decode_records(read, data[RIGHTS])
    left_ends, right_ends = list(accumulate(data[LEFT_COUNTS])), list(accumulate(data[RIGHT_COUNTS]))
    if (left_ends[-1] if left_ends else 0) != len(lefts) or (right_ends[-1] if right_ends else 0) != len(rights):
        raise ValueError(f"a stored part's input counts ({len(lefts)} left, {len(rights)} right) do not match "
                         "its accumulators' counts")
    out = []
    left_start = right_start = 0
    for left_end, right_end in zip(left_ends, right_ends):
        out.append((lefts[left_start:left_end], rights[right_start:right_end]))
        left_start, right_start = left_end, right_end
    return out
