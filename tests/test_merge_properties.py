"""Property tests: merge operators against a brute-force model of two-sided streams.

The model replays the stream with its own two-input watermark (minimum over inputs that are not
idle, the largest when all are; idle = marked, or silent for the idle timeout), decides from the
window definitions which elements were dropped, and computes each (key, window)'s join result by
brute force.  In accumulating-and-retracting mode the panes minus their retractions must net to that
result, whatever fired when; the last pane of every window must equal it; drop counts must agree.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accumulations.merge import Cogroup, FullOuterJoin, InnerJoin, LeftOuterJoin
from triggers import TriggerOption
from windowed_operator import KeyedWindowedMergeOperator, TimeWindows
from windowed_operator.testing import TimestampedValue, TwoInputTestStream
from windowed_operator.time import MIN_TIMESTAMP

from helpers import near_boundaries

SIDES = ("left", "right")
IDLE_TIMEOUT = 10

element = st.tuples(st.sampled_from("ab"), near_boundaries(0, 60))
step = st.one_of(
    st.tuples(st.just("elements"), st.sampled_from(SIDES), st.lists(element, min_size=1, max_size=4)),
    st.tuples(st.just("watermark"), st.sampled_from(SIDES), near_boundaries(0, 80)),
    st.tuples(st.just("idle"), st.sampled_from(SIDES), st.none()),
    st.tuples(st.just("processing"), st.none(), st.integers(1, 8)),
)
streams = st.lists(step, min_size=1, max_size=16)

WINDOWS = {"tumbling": TimeWindows(10), "hopping": TimeWindows(10).slide_by(5)}
ACCUMULATIONS = {"inner": InnerJoin(), "left_outer": LeftOuterJoin(), "full_outer": FullOuterJoin(),
                 "cogroup": Cogroup()}
TRIGGER = (TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
           .accumulating_and_retracting_fired_panes())


def model_windows(option, ts):
    period = option.period or option.size
    return [(s, s + option.size) for s in range(ts - option.size - period, ts + 1)
            if s % period == 0 and s <= ts < s + option.size]


def model_result(name, lefts, rights):
    if name == "cogroup":
        return {"left": sorted(lefts), "right": sorted(rights)}
    pairs = [(lft, rgt) for lft in lefts for rgt in rights]
    if name in ("left_outer", "full_outer") and not rights:
        pairs = [(lft, None) for lft in lefts]
    if name == "full_outer" and not lefts:
        pairs = [(None, rgt) for rgt in rights]
    return sorted(pairs, key=repr)


def normalize(name, value):
    if name == "cogroup":
        return {"left": sorted(value["left"]), "right": sorted(value["right"])}
    return sorted(value, key=repr)


def run_model(window, lateness, steps):
    upstream = {side: MIN_TIMESTAMP for side in SIDES}
    last_activity = {side: 0 for side in SIDES}
    marked = set()
    now, current = 0, MIN_TIMESTAMP
    kept = defaultdict(lambda: ([], []))
    dropped = 0
    counter = 0

    def recompute():
        nonlocal current
        active = [upstream[s] for s in SIDES if s not in marked and now - last_activity[s] < IDLE_TIMEOUT]
        candidate = min(active) if active else max(upstream.values())
        current = max(current, candidate)

    stream = TwoInputTestStream()
    for kind, side, arg in steps:
        if kind == "elements":
            items = []
            for key, ts in arg:
                counter += 1
                label = f"{side[0]}{counter}"
                items.append(TimestampedValue((key, label), ts))
                # Beam's LateDataUtils: a window expires once max_timestamp + lateness < watermark
                windows = [w for w in model_windows(window, ts) if not w[1] - 1 + lateness < current]
                if not windows:
                    dropped += 1
                for w in windows:
                    kept[(key, w)][SIDES.index(side)].append(label)
            stream.add_elements(side, *items)
            last_activity[side] = now
            marked.discard(side)
        elif kind == "watermark":
            stream.advance_watermark_to(side, arg)
            upstream[side] = max(upstream[side], arg)
            last_activity[side] = now
            marked.discard(side)
        elif kind == "idle":
            stream.mark_idle(side)
            marked.add(side)
        else:
            stream.advance_processing_time(arg)
            now += arg
        recompute()
    return stream, kept, dropped


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=streams, window_name=st.sampled_from(sorted(WINDOWS)), acc_name=st.sampled_from(sorted(ACCUMULATIONS)),
       lateness=st.sampled_from([0, 15]))
def test_merge_operator_equals_brute_force(steps, window_name, acc_name, lateness):
    window = WINDOWS[window_name]
    stream, kept, dropped = run_model(window, lateness, steps)
    op = KeyedWindowedMergeOperator(window, ACCUMULATIONS[acc_name], trigger=TRIGGER, allowed_lateness=lateness,
                                    idle_timeout=IDLE_TIMEOUT)
    runner = op.local_runner()
    runner.run(stream)
    assert sum(runner.dropped_counts.values()) == dropped

    last: dict = {}
    net: dict = defaultdict(Counter)
    for pane in runner.outputs:
        where = (pane.key, (pane.window_start, pane.window_end))
        items = ([repr(normalize(acc_name, pane.value))] if acc_name == "cogroup"
                 else [repr(p) for p in pane.value])
        sign = -1 if pane.is_retraction else 1
        for item in items:
            net[where][item] += sign
        if not pane.is_retraction:
            last[where] = normalize(acc_name, pane.value)
    expected = {where: model_result(acc_name, lefts, rights) for where, (lefts, rights) in kept.items()}
    # a join's window without a pair emits no pane (SQL emits no row); a cogroup's always does
    expected = {where: result for where, result in expected.items() if acc_name == "cogroup" or result}
    assert last == expected
    for where, result in expected.items():
        items = [repr(result)] if acc_name == "cogroup" else [repr(p) for p in result]
        assert +net[where] == Counter(items) and -net[where] == Counter()
    assert runner.states == {}
