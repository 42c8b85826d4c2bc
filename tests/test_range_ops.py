"""The composite-key sort and the running maximum per run equal numpy's and pandas' own forms."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from windowed_operator.engine.range_ops import (expand_ends, factorize, lex_searchsorted, lexsort_ints,
                                                running_max_by_run)

#: Values clustered (so that ties are many), near epoch milliseconds, and spans too wide for a
#: composite key (the fallback).
VALUES = st.one_of(st.integers(0, 5), st.integers(1_700_000_000_000, 1_700_000_000_020),
                   st.integers(-(1 << 62), 1 << 62))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4).flatmap(lambda width: st.lists(st.tuples(*[VALUES] * width), max_size=40)))
def test_lexsort_ints_is_numpys_lexsort(rows: list[tuple[int, ...]]) -> None:
    width = len(rows[0]) if rows else 2
    keys = tuple(np.array([row[i] for row in rows], dtype=np.int64) for i in range(width))
    assert lexsort_ints(keys).tolist() == np.lexsort(keys).tolist()


def test_lexsort_ints_takes_the_composite_key_only_where_it_fits() -> None:
    narrow = (np.array([3, 1, 2, 1]), np.array([7, 7, 7, 7]))
    assert lexsort_ints(narrow).tolist() == [1, 3, 2, 0]  # (ties in input order)
    wide = (np.array([1 << 40, 0]), np.array([0, 1 << 40]), np.array([1 << 40, 0]))
    assert lexsort_ints(wide).tolist() == np.lexsort(wide).tolist() == [1, 0]
    floats = (np.array([0.5, 0.25]),)
    assert lexsort_ints(floats).tolist() == [1, 0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), VALUES), max_size=40))
def test_running_max_by_run_is_the_grouped_cummax(rows: list[tuple[int, int]]) -> None:
    rows.sort(key=lambda row: row[0])
    codes = np.array([row[0] for row in rows], dtype=np.int64)
    values = np.array([row[1] for row in rows], dtype=np.int64)
    expected = pd.Series(values, dtype=np.int64).groupby(codes).cummax().to_numpy() if rows else values
    assert running_max_by_run(codes, values).tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 300), st.integers(0, 70_000)), max_size=60),
       st.lists(st.tuples(st.integers(0, 59), st.integers(0, 59)), max_size=4),
       st.sampled_from([0, -(1 << 40), 1_700_000_000_000]))
def test_lexsort_ints_by_codes_and_times_mostly_in_order_is_numpys_lexsort(rows, swaps, base) -> None:
    """(times, codes) with the times mostly ascending, a few out of order, and codes of 8 or 16 bits
    or wider: the path that sorts the times, then radix-sorts the codes."""
    times = sorted(base + t for t, _ in rows)
    for i, j in swaps:
        if i < len(times) and j < len(times):
            times[i], times[j] = times[j], times[i]
    keys = (np.array(times, dtype=np.int64), np.array([c for _, c in rows], dtype=np.int64))
    assert lexsort_ints(keys).tolist() == np.lexsort(keys).tolist()


def test_lexsort_ints_keeps_input_order_among_ties_on_a_large_batch() -> None:
    """Many equal (time, code) pairs in 20,000 rows: each tie stays in input order, as np.lexsort keeps it."""
    rng = np.random.default_rng(7)
    times = np.sort(rng.integers(0, 500, 20_000)) + 1_700_000_000_000
    times[rng.integers(0, 20_000, 500)] -= 3  # a few out of order
    for codes in (rng.integers(0, 200, 20_000), rng.integers(0, 60_000, 20_000)):
        assert lexsort_ints((times, codes)).tolist() == np.lexsort((times, codes)).tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), VALUES), max_size=30),
       st.lists(st.tuples(st.integers(-1, 7), VALUES), max_size=10))
def test_lex_searchsorted_is_a_search_of_the_sorted_pairs(rows, queries) -> None:
    """The first row at or after each (code, time), for times near zero, near epoch milliseconds and
    spanning most of int64 (where a composite key of code and time cannot hold both: the ranked form)."""
    import bisect

    rows = sorted(rows)
    codes = np.array([c for c, _ in rows], dtype=np.int64)
    times = np.array([t for _, t in rows], dtype=np.int64)
    q_codes = np.array([c for c, _ in queries], dtype=np.int64)
    q_times = np.array([t for _, t in queries], dtype=np.int64)
    assert lex_searchsorted(codes, times, q_codes, q_times).tolist() == [bisect.bisect_left(rows, q) for q in queries]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 60), st.integers(0, 60)), max_size=12),
       st.sampled_from([1, 3, 10]), st.sampled_from([0, 1_700_000_000_000]))
def test_expand_ends_is_every_aligned_end_in_each_codes_intervals(rows, step, base) -> None:
    codes = np.array([c for c, _, _ in rows], dtype=np.int64)
    lo = np.array([base + step * a for _, a, _ in rows], dtype=np.int64)
    hi = np.array([base + step * b for _, _, b in rows], dtype=np.int64)
    expected = sorted({(c, base + step * e) for c, a, b in rows for e in range(a, b + 1)})
    got_codes, got_ends = expand_ends(codes, lo, hi, step)
    assert list(zip(got_codes.tolist(), got_ends.tolist())) == expected


#: Keys as a group's column holds them: strings, integers, tuples, and nulls (None and NaN, one group).
KEYS = st.one_of(st.sampled_from(["a", "b", "", None, float("nan")]), st.integers(-3, 3),
                 st.tuples(st.integers(0, 2), st.sampled_from(["x", "y"])))


@settings(max_examples=300, deadline=None)
@given(st.lists(KEYS, max_size=30))
def test_factorize_groups_keys_in_order_of_first_appearance(keys: list) -> None:
    """pandas' hash table (a null-aware second pass only where a key is null) gives the codes of a
    dict keyed by the values, nulls one group, and each code's first key."""
    array = np.empty(len(keys), dtype=object)
    array[:] = keys
    codes, uniques = factorize(array)
    norm = [None if k is None or (isinstance(k, float) and k != k) else k for k in keys]
    model = {}
    expected = [model.setdefault(k, len(model)) for k in norm]
    assert codes.tolist() == expected and codes.dtype == np.int64
    firsts = [keys[norm.index(k)] for k in model]
    assert [repr(u) for u in uniques.tolist()] == [repr(f) for f in firsts]
