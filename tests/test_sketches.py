"""Distinct counts and quantiles per window: CountDistinct (exact), ApproxCountDistinct (HyperLogLog),
Quantiles and ApproxPercentile (KLL).

Pane for pane they equal the exact answer computed from ``ToList``'s pane over the same stream (every
window family, trigger and mode, session merges included): small windows are exact for the sketches
too.  Large windows stay within the sketches' documented error bounds.  Their state is data (the
sketch's bytes), retractions can be folded out downstream, and the array path equals the element path.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accumulations import (ApproxCountDistinct, ApproxPercentile, CountDistinct, Quantiles, Sum, ToList)
from triggers import TriggerOption
from windowed_operator import GlobalWindow, KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.pipeline import parse_pipeline
from windowed_operator.engine.key_state import KeyState
from windowed_operator.state.codec import KeyStateCodec
from windowed_operator.testing import TestStream, TimestampedValue
from windowed_operator.engine.vectorized import process_batch_arrays, supports_vectorized

from helpers import near_boundaries, stream_of
from test_properties import MODES, TRIGGERS
from windowed_operator.engine.build import build_core


def nearest_rank(values: list, q: float) -> float:
    """The smallest value with at least a fraction q of the values at or below it."""
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


FRACTIONS = (0.0, 0.25, 0.5, 0.9, 1.0)
EXACT = {  # accumulation, and the exact answer from a window's inputs (a list; None for an empty window)
    "count_distinct": (CountDistinct(), lambda values: len(set(values))),
    "approx_count_distinct": (ApproxCountDistinct(lg_k=10), lambda values: len(set(values))),
    "quantiles": (Quantiles(fractions=FRACTIONS),
                  lambda values: [nearest_rank(values, q) for q in FRACTIONS] if values else None),
    "approx_percentile": (ApproxPercentile(percentile=0.9),
                          lambda values: nearest_rank(values, 0.9) if values else None),
}
WINDOWS = {"tumbling": TimeWindows(10), "hopping": TimeWindows(10).slide_by(5), "sessions": SessionWindows(5),
           "global": GlobalWindow()}

element = st.tuples(st.sampled_from("ab"), st.integers(-3, 12), near_boundaries(0, 80))
step = st.one_of(st.tuples(st.just("elements"), st.lists(element, min_size=1, max_size=6)),
                 st.tuples(st.just("watermark"), near_boundaries(0, 100)),
                 st.tuples(st.just("processing"), st.integers(1, 20)))
streams = st.lists(step, min_size=1, max_size=14)


def run(window, accumulation, trigger, stream, lateness=5):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(window, accumulation, trigger=trigger, allowed_lateness=lateness)
    return op.run_local(stream_of(stream, lambda k, v, ts: TimestampedValue((k, v), ts)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(EXACT)), window=st.sampled_from(sorted(WINDOWS)),
       trigger=st.sampled_from(sorted(TRIGGERS)), mode=st.sampled_from(MODES), stream=streams)
def test_every_pane_is_the_exact_answer_over_the_panes_inputs(name, window, trigger, mode, stream):
    accumulation, exact = EXACT[name]
    option = TRIGGERS[trigger]._with(mode=mode)
    lists = run(WINDOWS[window], ToList(), option, stream)
    sketched = run(WINDOWS[window], accumulation, option, stream)
    assert [(p.key, p.window_start, p.window_end, p.timing, p.index, p.is_retraction) for p in sketched] == \
        [(p.key, p.window_start, p.window_end, p.timing, p.index, p.is_retraction) for p in lists]
    for pane, listed in zip(sketched, lists):
        expected = exact(listed.value)
        if listed.is_retraction and isinstance(expected, (int, float)):
            expected = -expected  # a number retracts as its negation
        assert pane.value == expected, (pane, listed)


# -- large windows: the sketches' documented bounds ------------------------------------------------------
@pytest.mark.parametrize("lg_k,hll_type", [(12, "HLL_8"), (10, "HLL_4"), (14, "HLL_6")])
def test_approx_distinct_counts_stay_within_the_sketch_error(lg_k, hll_type):
    rng = np.random.default_rng(lg_k)
    acc = ApproxCountDistinct(lg_k=lg_k, hll_type=hll_type)
    relative_error = 1.04 / math.sqrt(2 ** lg_k)
    for distinct in (1_000, 30_000, 200_000):
        values = rng.integers(0, distinct, size=distinct * 2)
        true = len(np.unique(values))
        halves = [acc.fold_array(values[: distinct]), acc.fold_array(values[distinct:])]
        element_by_element = acc.accumulate_all(acc.default_accumulated_value(), values[:5_000].tolist())
        for state in (acc.merge(*halves), element_by_element):
            n = true if state is not element_by_element else len(np.unique(values[:5_000]))
            low, high = acc.bounds(state, 3)
            assert low <= n <= high
            assert abs(acc.get_output(state) - n) <= 3 * relative_error * n


def test_quantiles_of_large_windows_are_within_the_rank_error():
    rng = np.random.default_rng(7)
    values = rng.lognormal(3, 1, size=300_000)
    fractions = (0.01, 0.5, 0.9, 0.99, 0.999)
    acc = Quantiles(fractions=fractions, k=200)
    parts = np.array_split(values, 7)
    state = acc.default_accumulated_value()
    for part in parts:  # merged as panes and sessions merge
        state = acc.merge(state, acc.fold_array(part))
    ordered = np.sort(values)
    for q, answer in zip(fractions, acc.get_output(state)):
        rank = np.searchsorted(ordered, answer, side="right") / len(values)
        assert abs(rank - q) <= acc.rank_error(), (q, rank)
    assert acc.rank_error() < 0.014


# -- paths, state, retractions --------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(sorted(EXACT)), batches=st.lists(st.tuples(
    st.lists(st.tuples(near_boundaries(-5, 60), st.integers(0, 9)), max_size=10), near_boundaries(-10, 80)),
    min_size=1, max_size=6))
def test_the_array_path_equals_the_element_path(name, batches):
    op = KeyedWindowedOperator(TimeWindows(10).slide_by(5), EXACT[name][0], allowed_lateness=7)
    plain_core, fast_core = build_core(op), build_core(op)
    assert supports_vectorized(fast_core)
    plain_state, fast_state, watermark = KeyState(), KeyState(), -100
    for rows, mark in batches:
        watermark = max(watermark, mark)
        stamps, values = [ts for ts, _ in rows], [v for _, v in rows]
        plain = plain_core.process_batch("k", plain_state, [(ts, v, None) for ts, v in rows], watermark, 0)
        fast = process_batch_arrays(fast_core, "k", fast_state, np.array(stamps, dtype=np.int64),
                                    np.array(values, dtype=np.int64), watermark, 0, lambda i: values[i])
        assert fast.outputs == plain.outputs


@pytest.mark.parametrize("name", sorted(EXACT))
def test_state_is_data_that_round_trips(name):
    accumulation = EXACT[name][0]
    core = build_core(KeyedWindowedOperator(SessionWindows(5), accumulation))
    state = KeyState()
    core.process_batch("k", state, [(ts, v, None) for ts, v in [(1, 3), (2, 4), (3, 3), (20, 1)]], 0, 0)
    codec = KeyStateCodec(allow_pickle=False)
    text = codec.encode(state)
    assert '"p"' not in text  # no pickle anywhere
    assert codec.decode(text) == state
    if name != "count_distinct":
        assert '["b",' in text  # the sketch's own serialized bytes


def test_a_retraction_of_a_distinct_count_is_its_previous_estimate_and_sums_out_downstream():
    """Retracting sessions of distinct pages per user; downstream, the sum over a user's sessions
    equals the sum of the final sessions' counts (retractions are the previous estimates, negated)."""
    trigger = TriggerOption.at_watermark().with_early_firings_at_every(count=1).accumulating_and_retracting_fired_panes()
    sessions = KeyedWindowedOperator(SessionWindows(5), ApproxCountDistinct(), trigger=trigger)
    total = KeyedWindowedOperator(GlobalWindow(), Sum())
    stream = (TestStream().add_elements(TimestampedValue(("a", "p1"), 1)).add_elements(TimestampedValue(("a", "p2"), 8))
              .add_elements(TimestampedValue(("a", "p1"), 5))  # bridges [1,6) and [8,13): both retracted
              .add_elements(TimestampedValue(("a", "p3"), 30)).advance_watermark_to_infinity())
    upstream = sessions.run_local(stream)
    assert [(p.window_start, p.window_end, p.value) for p in upstream if p.is_retraction] == [
        (1, 6, -1), (8, 13, -1), (1, 13, -2), (30, 35, -1)]  # each the window's previous estimate, negated
    out = sessions.then(total).run_local(stream)
    assert [p.value for p in out] == [2 + 1]  # [1,13) saw p1, p2; [30,35) saw p3


def test_count_distinct_folds_out_an_upstreams_retractions():
    """Distinct per-user totals over the users' final windows: CountDistinct has an inverse."""
    retracting = TriggerOption.at_watermark().with_early_firings_at_every(count=1) \
        .accumulating_and_retracting_fired_panes()
    per_user = KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=retracting)
    distinct_totals = KeyedWindowedOperator(None, CountDistinct(), key=lambda pane: "all", value="value")
    stream = TestStream().add_elements(TimestampedValue(("a", 2), 1), TimestampedValue(("b", 2), 2)) \
        .add_elements(TimestampedValue(("a", 1), 3)).advance_watermark_to_infinity()
    out = per_user.then(distinct_totals).run_local(stream)
    assert [p.value for p in out if not p.is_retraction][-1] == 2  # totals 3 and 2 (a's early 2 folded out)


def test_parameters_are_checked_and_types_map_to_spark():
    for bad in [lambda: ApproxCountDistinct(lg_k=3), lambda: ApproxCountDistinct(hll_type="HLL_5"),
                lambda: Quantiles(fractions=(0.5, 1.5)), lambda: Quantiles(fractions=()),
                lambda: ApproxPercentile("x", -0.1), lambda: Quantiles(k=4)]:
        with pytest.raises(ValueError):
            bad()
    assert ApproxPercentile("latency", 0.99).percentile == 0.99
    assert [a.output_type("bigint") for a, _ in EXACT.values()] == ["bigint", "bigint", "array<double>", "double"]
    assert CountDistinct().input_type_refusal("array<string>") and not CountDistinct().input_type_refusal("string")
    assert Quantiles().input_type_refusal("string") and not Quantiles().input_type_refusal("double")
    assert ApproxCountDistinct().get_output(None) == 0 and Quantiles().get_output(None) is None


def test_pipeline_files_name_them():
    text = """\
name: sketches
sources:
  clicks: {memory: {schema: "user string, page string, latency double, ts bigint", rows: [{user: a, ts: 1}]}}
operators:
  - {name: users, input: clicks, timestamp: ts, window: {tumbling: {size: 1m}},
     accumulation: {approx_count_distinct: {field: user, lg_k: 14}}}
  - {name: pages, input: clicks, key: user, timestamp: ts, window: {tumbling: {size: 1m}},
     accumulation: {count_distinct: {field: page}}}
  - {name: p99, input: clicks, timestamp: ts, window: {tumbling: {size: 1m}},
     accumulation: {approx_percentile: {field: latency, percentile: 0.99}}}
  - {name: spread, input: clicks, timestamp: ts, window: {tumbling: {size: 1m}},
     accumulation: {quantiles: {field: latency, fractions: [0.5, 0.9]}}}
sinks:
  - {input: users, console: {}}
"""
    ops = parse_pipeline(text).build_operators()
    assert ops["users"].accumulation == ApproxCountDistinct("user", lg_k=14)
    assert ops["pages"].accumulation == CountDistinct("page")
    assert ops["p99"].accumulation == ApproxPercentile("latency", 0.99)
    assert ops["spread"].accumulation == Quantiles("latency", fractions=(0.5, 0.9))


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(["approx_count_distinct", "quantiles", "approx_percentile"]), batches=st.lists(st.tuples(
    st.lists(st.tuples(near_boundaries(-5, 60), st.integers(0, 9)), max_size=10), near_boundaries(-10, 80)),
    min_size=1, max_size=6))
def test_partials_folded_per_pane_equal_the_element_path(name, batches):
    """What the Spark scan stage hands on (one sketch per pane, weighted by its rows), merged into every
    window over the pane, equals folding the elements (default trigger, hopping windows)."""
    option = TimeWindows(10).slide_by(5)
    op = KeyedWindowedOperator(option, EXACT[name][0], allowed_lateness=7)
    plain_core, fast_core = build_core(op), build_core(op)
    layout = option.pane_layout()
    acc = EXACT[name][0]
    plain_state, fast_state, watermark = KeyState(), KeyState(), -100
    for rows, mark in batches:
        watermark = max(watermark, mark)
        plain = plain_core.process_batch("k", plain_state, [(ts, v, None) for ts, v in rows], watermark, 0)
        panes: dict = {}
        for ts, v in rows:
            panes.setdefault(int(layout.pane_start(np.array([ts]))[0]), []).append(v)
        starts = sorted(panes)
        partials = np.empty(len(starts), dtype=object)
        partials[:] = [acc.fold_array(np.array(panes[s])) for s in starts]
        fast = process_batch_arrays(fast_core, "k", fast_state, np.array(starts, dtype=np.int64), partials, watermark,
                                    0, lambda i: None, weights=np.array([len(panes[s]) for s in starts]))
        assert fast.outputs == plain.outputs
        assert sum(len(panes[int(d.timestamp)]) for d in fast.dropped) == len(plain.dropped)
