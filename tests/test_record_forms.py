"""A key's stored record, by position (state version 7), and the named fields of version 6: both
are read into the same state, and writing always gives the positional form."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from windowed_operator.engine.columnar import ColumnarForm
from windowed_operator.state.records import (KeyPanes, KeyPanesCodec, KeyRows, KeySessionsCodec, KeyWindowsCodec,
                                             stored_columns)
from windowed_operator.engine.columnar_triggers import NOT_SET
from windowed_operator.state.group_state import read_record, record_text
from windowed_operator.time import MAX_TIMESTAMP, MIN_TIMESTAMP

times = st.integers(MIN_TIMESTAMP, MAX_TIMESTAMP)
#: Accumulator values and last panes: beyond int64, strings JSON must escape, special floats, tuples.
values = st.one_of(st.none(), st.integers(-2 ** 70, 2 ** 70), st.text(alphabet='a"\\\n\té', max_size=3),
                   st.floats(allow_nan=True, allow_infinity=True),
                   st.tuples(st.integers(), st.text(alphabet="b\t", max_size=2)))


@st.composite
def key_rows(draw):
    n = draw(st.integers(0, 4))
    column = lambda element: draw(st.lists(element, min_size=n, max_size=n))  # noqa: E731
    return KeyRows(starts=column(times), ends=column(times), acc=[column(values), column(values)],
                   pending=column(st.integers(0, 9)), hold=column(st.booleans()),
                   nonspeculative=column(st.integers(0, 9)), index=column(st.integers(0, 9)), last=column(values),
                   late=column(st.booleans()), count=column(st.integers(0, 9)),
                   fire_at=column(st.sampled_from([NOT_SET, 0, 1_700, MAX_TIMESTAMP - 1])),
                   closed=column(st.booleans()))


@st.composite
def key_panes(draw):
    n = draw(st.integers(0, 4))
    column = lambda element: draw(st.lists(element, min_size=n, max_size=n))  # noqa: E731
    return KeyPanes(starts=column(times), first_watermark=column(times), acc=[column(values)],
                    late=draw(st.dictionaries(times, st.integers(1, 5), max_size=3)))


def _same(a, b) -> bool:
    """Equal, types too (a tuple is not a list), with NaN equal to itself (a float column may hold one)."""
    return repr(a) == repr(b)


def _through_a_record(codec, state, due=(15, None)):
    """The state written as a stored record and read back, with the record's text."""
    text = record_text(codec.to_data(state), list(due))
    data, read_due = read_record(json.loads(text))
    assert read_due == list(due)
    return codec.from_data(data), text


@given(key_rows(), st.sampled_from([KeySessionsCodec, KeyWindowsCodec]))
def test_rows_come_back_from_their_record(rows, codec_type):
    back, text = _through_a_record(codec_type(ColumnarForm("sum")), rows)
    assert "\n" not in text and text.startswith("[15,null,[")
    assert _same(back, rows)


@given(key_panes())
def test_pane_rows_come_back_from_their_record(panes):
    back, _ = _through_a_record(KeyPanesCodec(), panes)
    assert _same(back, panes)


def test_a_record_holds_no_field_names():
    rows = KeyRows(starts=[MIN_TIMESTAMP], ends=[MAX_TIMESTAMP], acc=[[12]], pending=[3], hold=[True],
                   nonspeculative=[0], index=[4], last=[None], late=[False], count=[0], fire_at=[NOT_SET],
                   closed=[False])
    text = record_text(KeyWindowsCodec(ColumnarForm("count")).to_data(rows), [MAX_TIMESTAMP, 1_700])
    assert text == (f'[{MAX_TIMESTAMP},1700,["windows",[{MIN_TIMESTAMP}],[{MAX_TIMESTAMP}],[3],[true],[0],[4],'
                    '[false],[0],null,[false],[[12]],[null]]]')


# -- state version 6: named fields ----------------------------------------------------------------
def test_version_6_window_rows_are_read():
    old = {"state": {"rows": "windows", "starts": [0, 10], "ends": [10, 20], "pending": [1, 0], "hold": [True, False],
                     "nonspeculative": [0, 1], "index": [0, 2], "late": [False, True], "count": [1, 0],
                     "fire_at": [1_700, NOT_SET], "closed": [False, True], "acc": [[5, 0]], "last": [None, 7]},
           "due": [20, 1_700]}
    data, due = read_record(json.loads(json.dumps(old)))
    rows = KeyWindowsCodec(ColumnarForm("sum")).from_data(data)
    assert due == [20, 1_700]
    assert rows == KeyRows(starts=[0, 10], ends=[10, 20], acc=[[5, 0]], pending=[1, 0], hold=[True, False],
                           nonspeculative=[0, 1], index=[0, 2], last=[None, 7], late=[False, True], count=[1, 0],
                           fire_at=[1_700, NOT_SET], closed=[False, True])


def test_version_6_session_rows_without_processing_time_or_trigger_columns_are_read():
    """``fire_at`` was left out when no row waited on processing time, and session rows written before
    count triggers had no trigger columns: the phase comes from the end-of-window hold."""
    old = {"starts": [0], "ends": [6], "pending": [2], "hold": [True], "nonspeculative": [0], "index": [0],
           "acc": [[3]], "last": [None]}
    rows = KeySessionsCodec(ColumnarForm("sum")).from_data(old)
    assert (rows.late, rows.count, rows.closed, rows.fire_at) == ([False], [0], [False], [NOT_SET])
    assert stored_columns(old)["kind"] == "sessions"


def test_version_6_pane_rows_are_read_with_and_without_late_counts():
    codec = KeyPanesCodec()
    assert codec.from_data({"starts": [10], "first_watermark": [4], "acc": [[2.5]], "late": [[20, 1]]}) == \
        KeyPanes([10], [4], [[2.5]], {20: 1})
    assert codec.from_data({"starts": [10], "first_watermark": [4], "acc": [[2.5]]}) == KeyPanes([10], [4], [[2.5]])
