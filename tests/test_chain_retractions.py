"""Retractions flow downstream: a stage fed by a retracting stage folds each retraction out of its
window (Accumulation.subtract), so a downstream Sum, Count or Mean of the upstream panes stays exact;
an accumulation without an inverse is refused where the chain is built."""
from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Max, Mean, Sum
from helpers import near_boundaries
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, SlidingWindows, TimeWindows
from windowed_operator.testing import TestStream, TimestampedValue

SIZE, LATENESS = 10, 15
RETRACTING = (TriggerOption.at_watermark().with_early_firings_at_every(count=1).with_late_firings_at_every(count=1)
              .accumulating_and_retracting_fired_panes())
DOWNSTREAM = TriggerOption.at_watermark().with_late_firings_at_every(count=1).accumulating_fired_panes()


def chain(downstream_accumulation):
    per_user = KeyedWindowedOperator(TimeWindows(SIZE), Sum(), trigger=RETRACTING, allowed_lateness=LATENESS)
    overall = KeyedWindowedOperator(None, downstream_accumulation, key=lambda pane: "all", value="value",
                                    trigger=DOWNSTREAM, allowed_lateness=LATENESS)
    return per_user.then(overall)


def final_upstream_values(runner) -> dict[int, list[int]]:
    """Per window start, the last value each user's window fired (what survives its retractions)."""
    last: dict[tuple, int] = {}
    for pane in runner.runners[0].outputs:
        if not pane.is_retraction:
            last[(pane.window_start, pane.key)] = pane.value
    by_window: dict[int, list[int]] = defaultdict(list)
    for (start, _), value in last.items():
        by_window[start].append(value)
    return by_window


def final_downstream(runner) -> dict[int, object]:
    final = {}
    for pane in runner.outputs:
        if not pane.is_retraction:
            final[pane.window_start] = pane.value
    return final


steps = st.lists(st.one_of(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 9), near_boundaries(0, 60, periods=(SIZE,))),
             min_size=1, max_size=4).map(lambda rows: ("add", rows)),
    near_boundaries(0, 90, periods=(SIZE,), lateness=(0, LATENESS)).map(lambda w: ("watermark", w))),
    min_size=1, max_size=12)


@pytest.mark.parametrize("accumulation, model", [
    (Sum(), sum), (Count(), len), (Mean(), lambda values: sum(values) / len(values))])
@settings(max_examples=150, deadline=None)
@given(steps=steps)
def test_a_downstream_fold_of_retracting_panes_equals_the_fold_of_their_final_values(accumulation, model, steps):
    runner = chain(accumulation).local_runner()
    for kind, arg in steps:
        if kind == "add":
            runner.add_elements(*(TimestampedValue((user, amount), ts) for user, amount, ts in arg))
        else:
            runner.advance_watermark_to(arg)
    runner.finish()
    expected = {start: model(values) for start, values in final_upstream_values(runner).items()}
    got = final_downstream(runner)
    assert got.keys() == expected.keys()
    for start, value in expected.items():
        assert got[start] == pytest.approx(value), (start, got[start], value)


def test_a_count_downstream_counts_windows_not_panes_and_retractions():
    stream = (TestStream().add_elements(TimestampedValue(("a", 1), 1)).add_elements(TimestampedValue(("a", 2), 2))
              .add_elements(TimestampedValue(("b", 4), 3)))
    out = chain(Count()).run_local(stream)
    assert [p.value for p in out if not p.is_retraction] == [2]  # users a and b, though a fired twice


def test_merged_away_sessions_are_folded_out_downstream():
    trigger = TriggerOption.at_watermark().with_early_firings_at_every(count=1).accumulating_and_retracting_fired_panes()
    sessions = KeyedWindowedOperator(SessionWindows(5), Sum(), trigger=trigger)
    total = KeyedWindowedOperator(TimeWindows(100), Sum(), key=lambda pane: "all", value="value",
                                  timestamp="timestamp")
    stream = (TestStream().add_elements(TimestampedValue(("a", 1), 1)).add_elements(TimestampedValue(("a", 2), 10))
              .add_elements(TimestampedValue(("a", 4), 5)))  # bridges [1,6) and [10,15): both retracted
    out = sessions.then(total).run_local(stream)
    assert [p.value for p in out] == [7]


@pytest.mark.parametrize("downstream, message", [
    (KeyedWindowedOperator(None, Max(), name="busiest"), "operator 'busiest' cannot follow .*Max has no inverse"),
    (KeyedWindowedOperator(SlidingWindows(10), Sum(), name="recent"), "per-record sliding windows cannot fold"),
])
def test_a_downstream_that_cannot_undo_a_retraction_is_refused_at_construction(downstream, message):
    upstream = KeyedWindowedOperator(TimeWindows(SIZE), Sum(), trigger=RETRACTING, name="per_user")
    with pytest.raises(ValueError, match=message):
        upstream.then(downstream)
    KeyedWindowedOperator(TimeWindows(SIZE), Sum(), name="per_user").then(downstream)  # no retractions: fine
