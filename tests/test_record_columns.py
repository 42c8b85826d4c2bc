"""A join's inputs stored by column read back exactly as the state codec's value-by-value form does."""
import json
from collections import OrderedDict
from enum import IntEnum

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowed_operator.state.record_columns import decode_records, decode_sided, encode_records, encode_sided
from windowed_operator.state.codec import KeyStateCodec

CODEC = KeyStateCodec()


class Level(IntEnum):
    HIGH = 3


_leaves = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=3),
                    st.sampled_from([Level.HIGH, np.int64(5), np.float64("nan")]))
_nested = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.lists(inner, max_size=2).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=2), st.integers(0, 2)), inner, max_size=2)), max_leaves=6)


@st.composite
def _records(draw):
    """A list of inputs: mostly records sharing their fields (rows of one DataFrame), sometimes with
    one that differs (another field order, a missing field, not a dict, a dict subclass)."""
    fields = draw(st.lists(st.text(max_size=3), max_size=4, unique=True))
    values = draw(st.lists(st.fixed_dictionaries({f: _nested for f in fields}), max_size=6))
    odd = draw(st.sampled_from([None, "reordered", "missing", "not a dict", "subclass", "integer key"]))
    if values and odd is not None:
        i = draw(st.integers(0, len(values) - 1))
        row = values[i]
        values[i] = {"reordered": dict(reversed(list(row.items()))), "missing": dict(list(row.items())[1:]),
                     "not a dict": tuple(row.values()), "subclass": OrderedDict(row),
                     "integer key": {**row, 0: "k"}}[odd]
    return values


def _by_value(values):
    """What the codec's value-by-value form reads back."""
    return [CODEC.read_value(json.loads(json.dumps(CODEC.value(v)))) for v in values]


def _stored(data):
    return json.loads(json.dumps(data, allow_nan=False))


@settings(max_examples=400, deadline=None)
@given(values=_records())
def test_records_by_column_read_back_as_the_value_by_value_form(values):
    data = encode_records(CODEC.value, values)
    back = decode_records(CODEC.read_value, _stored(data))
    expected = _by_value(values)
    # repr compares types and field order too (a float nan equals itself in repr)
    assert repr(back) == repr(expected)
    assert [type(v) for v in back] == [type(v) for v in expected]


def test_only_records_sharing_their_string_fields_in_order_take_the_column_form():
    rows = [{"id": 1, "name": "Ann"}, {"id": 2, "name": "Bob"}]
    assert encode_records(CODEC.value, rows) == {"f": ["id", "name"], "c": [[1, 2], ["Ann", "Bob"]], "n": 2}
    assert "v" in encode_records(CODEC.value, rows + [{"name": "Cy", "id": 3}])
    assert "v" in encode_records(CODEC.value, rows + [OrderedDict(id=3, name="Cy")])
    assert "v" in encode_records(CODEC.value, [{1: "a"}, {1: "b"}])
    assert encode_records(CODEC.value, [{}, {}]) == {"f": [], "c": [], "n": 2}
    assert decode_records(CODEC.read_value, {"f": [], "c": [], "n": 2}) == [{}, {}]
    assert encode_records(CODEC.value, []) == {"v": []}


@settings(max_examples=200, deadline=None)
@given(accs=st.lists(st.tuples(_records(), _records()), max_size=5))
def test_a_joins_accumulators_read_back_as_new_pairs_of_lists(accs):
    back = decode_sided(CODEC.read_value, _stored(encode_sided(CODEC.value, accs)))
    assert repr(back) == repr([(_by_value(lefts), _by_value(rights)) for lefts, rights in accs])
    assert all(type(acc) is tuple and type(acc[0]) is list and type(acc[1]) is list for acc in back)


def test_counts_that_do_not_match_the_inputs_are_refused():
    data = _stored(encode_sided(CODEC.value, [([{"a": 1}], []), ([], [{"b": 2}])]))
    data["l"] = [2, 0]
    with pytest.raises(ValueError, match="input counts"):
        decode_sided(CODEC.read_value, data)
