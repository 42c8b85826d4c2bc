"""Per-key state as data: what the codec stores is JSON, and a core continued from decoded state
gives exactly the panes it gives from the state it kept."""
import datetime as dt
import json
import math
from collections import OrderedDict
from decimal import Decimal
from enum import IntEnum

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Count, Mean, Sum, ToList, TopN
from triggers import AfterCount, Repeatedly, TriggerOption
from windowed_operator import (CumulativeWindows, GlobalWindow, KeyedWindowedOperator, SessionWindows,
                               SlidingWindows, TimeWindows)
from windowed_operator.engine.key_state import KeyState
from windowed_operator.state.codec import KeyStateCodec, StateEncodingError

from helpers import near_boundaries
from windowed_operator.engine.build import build_core

EARLY_LATE = (TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1))
OPERATORS = {
    "sessions retracting mean": KeyedWindowedOperator(
        SessionWindows(10), Mean(), trigger=EARLY_LATE.accumulating_and_retracting_fired_panes(), allowed_lateness=15),
    "hopping to_list": KeyedWindowedOperator(TimeWindows(10).slide_by(5), ToList(), trigger=EARLY_LATE,
                                             allowed_lateness=5),
    "tumbling top_n processing time": KeyedWindowedOperator(
        TimeWindows(10), TopN(2), trigger=TriggerOption.at_watermark().with_early_firings_at_every(4)),
    "tumbling late firings by processing time": KeyedWindowedOperator(
        TimeWindows(10), Sum(), trigger=TriggerOption.at_watermark().with_late_firings_at_every(50),
        allowed_lateness=10),
    "per-record sliding sum": KeyedWindowedOperator(SlidingWindows(9), Sum(), allowed_lateness=7),
    "cumulative count": KeyedWindowedOperator(CumulativeWindows(30, 10), Count()),
    "global count repeatedly": KeyedWindowedOperator(GlobalWindow(), Count(),
                                                     trigger=TriggerOption.of(Repeatedly(AfterCount(3)))),
}

step = st.tuples(st.lists(near_boundaries(0, 60), max_size=4), st.integers(0, 8), st.integers(0, 3))


def _run(core, state, steps, clock):
    """Steps of (element times, watermark step, processing-time step) for one key."""
    outputs, watermark, now = [], clock[0], clock[1]
    for times, wm_step, pt_step in steps:
        watermark += wm_step
        now += pt_step
        elements = sorted((t, t % 7 + 1, None) for t in times)
        emission = core.process_batch("k", state, elements, watermark, now)
        outputs += emission.outputs
    return outputs, (watermark, now)


@pytest.mark.parametrize("name", sorted(OPERATORS))
@settings(max_examples=40, deadline=None)
@given(first=st.lists(step, max_size=6), second=st.lists(step, max_size=6))
def test_a_core_continues_from_decoded_state_as_from_its_own(name, first, second):
    op = OPERATORS[name]
    core, codec = build_core(op), KeyStateCodec()
    state = KeyState()
    _, clock = _run(core, state, first, (-5, 0))
    text = codec.encode(state)
    json.loads(text)  # plain JSON
    restored = codec.decode(text)
    assert codec.encode(restored) == text
    kept, _ = _run(core, state, second, clock)
    continued, _ = _run(build_core(op), restored, second, clock)
    assert continued == kept


@pytest.mark.parametrize("value", [
    0, -2 ** 70, 1.5, float("nan"), float("inf"), "s", None, True, (1, "a"), [1, (2, 3)], {"a": 1, 2: (3,)},
    {(1, 2): [3]}, {1, 2}, b"\x00\xff", dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc), dt.date(1969, 7, 20),
    Decimal("1.10"), [], (), {},
])
def test_values_keep_their_types(value):
    codec = KeyStateCodec()
    back = codec.read_value(json.loads(json.dumps(codec.value(value))))
    if isinstance(value, float) and value != value:
        assert back != back
    else:
        assert back == value and type(back) is type(value)


@pytest.mark.parametrize("value", [np.float64("nan"), np.float64("-inf"), np.float32(1.5), np.int64(-3)])
def test_numpy_scalars_read_back_as_the_python_numbers_they_hold(value):
    """(A numpy float is a float subclass whose repr names numpy: its special values once stored a
    text that could not be read back.)"""
    back = KeyStateCodec().read_value(json.loads(json.dumps(KeyStateCodec().value(value))))
    assert type(back) is type(value.item())
    assert repr(back) == repr(value.item())


class Opaque:
    pass


def test_a_value_of_another_type_is_refused_naming_it_unless_pickle_is_allowed():
    with pytest.raises(StateEncodingError, match=r"test_state_codec.Opaque .* state_encoding='pickle'"):
        KeyStateCodec().value(Opaque())
    pickled = KeyStateCodec(allow_pickle=True).value([Opaque()])
    assert pickled[1][0][0] == "p"
    with pytest.raises(StateEncodingError, match="reading it runs code"):
        KeyStateCodec().read_value(pickled)
    assert isinstance(KeyStateCodec(allow_pickle=True).read_value(pickled)[0], Opaque)


def test_a_record_is_a_json_object_and_the_older_pair_list_form_still_reads():
    """A dict whose keys are all strings (a row a join keeps) is stored as a JSON object; other dicts
    as key-value pairs; checkpoints written before records had their tag hold the pair form."""
    codec = KeyStateCodec()
    row = {"id": 7, "name": "Ann", "bids": [1, 2.5], "at": None}
    assert codec.value(row) == ["r", {"id": 7, "name": "Ann", "bids": ["l", [1, 2.5]], "at": None}]
    assert codec.value({1: "a", "b": 2}) == ["d", [[1, "a"], ["b", 2]]]
    older = ["d", [["id", 7], ["name", "Ann"], ["bids", ["l", [1, 2.5]]], ["at", None]]]
    for stored in (codec.value(row), older):
        read = codec.read_value(json.loads(json.dumps(stored)))
        assert read == row and list(read) == list(row)


def _tagged(value):
    """The tagged form as the module docstring states it, for the types below (a brute-force model)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else ["f", repr(float(value))]
    if isinstance(value, np.generic):
        return _tagged(value.item())
    if isinstance(value, list):
        return ["l", [_tagged(v) for v in value]]
    if isinstance(value, tuple):
        return ["t", [_tagged(v) for v in value]]
    if isinstance(value, dict):
        if all(type(k) is str for k in value):
            return ["r", {k: _tagged(v) for k, v in value.items()}]
        return ["d", [[_tagged(k), _tagged(v)] for k, v in value.items()]]
    raise AssertionError(value)


class Level(IntEnum):
    LOW = 1


class Name(str):
    pass


class Row(list):
    pass


_leaves = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=3),
                    st.sampled_from([Level.LOW, Name("n"), np.int64(-3), np.float64("nan"), np.bool_(True)]))
_values = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple), st.lists(inner, max_size=3).map(Row),
    st.dictionaries(st.text(max_size=2), inner, max_size=3),
    st.dictionaries(st.text(max_size=2), inner, max_size=3).map(OrderedDict),
    st.dictionaries(st.one_of(st.text(max_size=2), st.integers(-3, 3)), inner, max_size=3),
    st.dictionaries(st.integers(-3, 3), inner, max_size=3).map(OrderedDict)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=_values)
def test_exact_types_and_their_subclasses_take_the_same_tagged_form(value):
    """The encoder dispatches exact built-in types by identity before its isinstance chain: a
    subclass (an IntEnum, a str or list subclass, an OrderedDict) or a numpy scalar, at any depth,
    gets the form its base type gets."""
    encoded = KeyStateCodec().value(value)
    assert repr(encoded) == repr(_tagged(value))  # (repr: an IntEnum or a str subclass left as it is shows)
