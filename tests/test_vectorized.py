"""The vectorized path equals the element-by-element path on the same bundles (hypothesis)."""
from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import AllMax, Count, Max, Mean, Min, Sum, TopN
from accumulations.rows import Rows
from triggers import AfterCount, Repeatedly, TriggerOption
from windowed_operator import CumulativeWindows, GlobalWindow, KeyedWindowedOperator, TimestampCombiner, TimeWindows
from windowed_operator.engine.key_state import KeyState
from windowed_operator.engine.vectorized import process_batch_arrays, supports_vectorized

from helpers import near_boundaries
from windowed_operator.engine.build import build_core

WINDOWS = {"tumbling": TimeWindows(10), "hopping": TimeWindows(10).slide_by(5),
           "uneven": TimeWindows(9, offset=2).slide_by(4), "cumulative": CumulativeWindows(20, 5),
           "global": GlobalWindow()}
ACCS = {"sum": Sum(), "count": Count(), "min": Min(), "max": Max(), "mean": Mean()}
TRIGGERS = {
    "default": TriggerOption.default(),
    "early_late_count": TriggerOption.at_watermark().with_early_firings_at_every(count=3)
    .with_late_firings_at_every(count=1).accumulating_and_retracting_fired_panes(),
    "early_time": TriggerOption.at_watermark().with_early_firings_at_every(duration=4).accumulating_fired_panes(),
    "once_count": TriggerOption.of(AfterCount(4)),
    "repeated_count": TriggerOption.of(Repeatedly(AfterCount(2))),
}

batch = st.tuples(st.lists(near_boundaries(-5, 90), min_size=0, max_size=12),  # timestamps of one bundle
                  near_boundaries(-10, 100),  # the watermark before it (it never moves back)
                  st.integers(0, 6))  # processing-time advance before it
streams = st.lists(batch, min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(steps=streams, window=st.sampled_from(sorted(WINDOWS)), acc=st.sampled_from(sorted(ACCS)),
       trigger=st.sampled_from(sorted(TRIGGERS)), lateness=st.sampled_from([0, 7]),
       combiner=st.sampled_from(list(TimestampCombiner)))
def test_vectorized_path_equals_plain_path(steps, window, acc, trigger, lateness, combiner):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(WINDOWS[window], ACCS[acc], trigger=TRIGGERS[trigger], allowed_lateness=lateness,
                                   timestamp_combiner=combiner)
    plain_core, fast_core = build_core(op), build_core(op)
    assert supports_vectorized(fast_core)
    plain_state, fast_state = KeyState(), KeyState()
    watermark, now, counter = -100, 0, 0
    for stamps, mark, tick in steps:
        watermark = max(watermark, mark)
        now += tick
        values = list(range(counter, counter + len(stamps)))
        counter += len(stamps)
        plain = plain_core.process_batch("k", plain_state, [(ts, v, None) for ts, v in zip(stamps, values)],
                                         watermark, now)
        fast = process_batch_arrays(fast_core, "k", fast_state, np.array(stamps, dtype=np.int64),
                                    np.array(values, dtype=np.int64), watermark, now, lambda i: values[i])
        assert fast.outputs == plain.outputs
        assert [(d.reason, d.element, d.timestamp) for d in fast.dropped] == \
            [(d.reason, d.element, d.timestamp) for d in plain.dropped]
        assert fast_state == plain_state
    final = 10**6
    assert process_batch_arrays(fast_core, "k", fast_state, np.zeros(0, dtype=np.int64), None, final, now,
                                lambda i: None).outputs == plain_core.process_batch("k", plain_state, [], final,
                                                                                     now).outputs


RANKED = {"all_max": AllMax(field="price"), "top_2": TopN(2, field="price"), "all_max_of_values": AllMax()}


@settings(max_examples=200, deadline=None)
@given(steps=streams, window=st.sampled_from(sorted(WINDOWS)), acc=st.sampled_from(sorted(RANKED)),
       trigger=st.sampled_from(sorted(TRIGGERS)), prices=st.lists(st.integers(0, 3), min_size=60, max_size=60))
def test_rows_kept_by_rank_equal_the_plain_path(steps, window, acc, trigger, prices):
    """AllMax and TopN fold whole rows (``Rows``) or a column on the array path: the same rows kept,
    ties in input order, as element by element (few distinct prices: many ties)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(WINDOWS[window], RANKED[acc], trigger=TRIGGERS[trigger])
    plain_core, fast_core = build_core(op), build_core(op)
    assert supports_vectorized(fast_core)
    plain_state, fast_state = KeyState(), KeyState()
    watermark, now, counter = -100, 0, 0
    for stamps, mark, tick in steps:
        watermark = max(watermark, mark)
        now += tick
        ids = list(range(counter, counter + len(stamps)))
        counter += len(stamps)
        price = [prices[i % len(prices)] for i in ids]
        if acc == "all_max_of_values":
            plain_values: list = price
            fast_values: object = np.array(price, dtype=np.int64)
        else:
            plain_values = [{"id": i, "price": p, "note": f"bid {i}"} for i, p in zip(ids, price)]
            fast_values = Rows({"id": np.array(ids, dtype=np.int64), "price": np.array(price, dtype=np.int64),
                                "note": np.array([f"bid {i}" for i in ids], dtype=object)}, len(ids))
        plain = plain_core.process_batch("k", plain_state, [(ts, v, None) for ts, v in zip(stamps, plain_values)],
                                         watermark, now)
        fast = process_batch_arrays(fast_core, "k", fast_state, np.array(stamps, dtype=np.int64), fast_values,
                                    watermark, now, lambda i: plain_values[i])
        assert fast.outputs == plain.outputs
        assert fast_state == plain_state


def test_rows_index_as_numpy_columns_do():
    rows = Rows({"a": np.arange(5), "b": np.array(list("vwxyz"), dtype=object)})
    assert len(rows) == 5 and len(rows[1:3]) == 2 and len(rows[np.array([4, 0])]) == 2
    assert rows[np.array([4, 0])].records() == [{"a": 4, "b": "z"}, {"a": 0, "b": "v"}]
    assert type(rows.records()[0]["a"]) is int  # Python values, as pandas' to_dict gives
    try:
        rows.column("price")
    except KeyError as exc:
        assert "price" in str(exc) and "a, b" in str(exc)
    else:
        raise AssertionError("a missing field must name itself")


INHERITED = [(0, 10), (10, 20), (5, 15), (-10, 0), (20, 40)]


@settings(max_examples=300, deadline=None)
@given(steps=streams, acc=st.sampled_from(sorted(ACCS)), trigger=st.sampled_from(sorted(TRIGGERS)),
       lateness=st.sampled_from([0, 7]), picks=st.lists(st.integers(0, len(INHERITED) - 1), min_size=40, max_size=40),
       undo=st.lists(st.booleans(), min_size=40, max_size=40))
def test_inherited_windows_on_the_array_path_equal_the_plain_path(steps, acc, trigger, lateness, picks, undo):
    """A chained stage without a window option keeps each upstream pane's window: the array path
    takes those windows as given (``process_arrays(windows=...)``) and equals the element path.
    Behind an invertible accumulation some elements are upstream retractions, folded out of their
    window (``RetractedValue`` on the element path, ``retracted=`` on the array path), whatever
    the mix of retractions and panes in a bundle and window."""
    from windowed_operator.panes import RetractedValue
    from windowed_operator.windows.base import Window

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(None, ACCS[acc], trigger=TRIGGERS[trigger], allowed_lateness=lateness)
    plain_core, fast_core = build_core(op), build_core(op)
    assert supports_vectorized(fast_core) and fast_core.kind == "inherited"
    invertible = ACCS[acc].supports_subtract()
    plain_state, fast_state = KeyState(), KeyState()
    watermark, now, counter = -100, 0, 0
    for stamps, mark, tick in steps:
        watermark = max(watermark, mark)
        now += tick
        ids = list(range(counter, counter + len(stamps)))
        counter += len(stamps)
        windows = [INHERITED[picks[i % len(picks)]] for i in ids]
        stamps = [start + (ts % (end - start)) for ts, (start, end) in zip(stamps, windows)]  # inside their window
        retracted = [invertible and undo[i % len(undo)] for i in ids]
        read = [RetractedValue(i) if r else i for i, r in zip(ids, retracted)]
        plain = plain_core.process_batch("k", plain_state, [(ts, v, Window(*w)) for ts, v, w in zip(stamps, read, windows)],
                                         watermark, now)
        fast = process_batch_arrays(fast_core, "k", fast_state, np.array(stamps, dtype=np.int64),
                                    np.array(ids, dtype=np.int64), watermark, now, lambda i: read[i],
                                    (np.array([w[0] for w in windows], dtype=np.int64),
                                     np.array([w[1] for w in windows], dtype=np.int64)),
                                    retracted=np.array(retracted, dtype=bool))
        assert fast.outputs == plain.outputs
        assert [(d.reason, d.element, d.timestamp) for d in fast.dropped] == \
            [(d.reason, d.element, d.timestamp) for d in plain.dropped]
        assert fast_state == plain_state
