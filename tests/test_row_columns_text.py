"""A group's session or window rows written as one text of columns come back as the same table: keys
of any type the state codec holds, accumulator values beyond int64 or not plain JSON, rows at the
time sentinels."""
from __future__ import annotations

import json
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from windowed_operator.state import row_columns_text

from windowed_operator.engine.columnar_panes import object_array
from windowed_operator.engine.columnar_triggers import NOT_SET, RowTable
from windowed_operator.state.row_columns_text import key_runs, rows_text, table_of
from windowed_operator.time import MAX_TIMESTAMP, MIN_TIMESTAMP

keys = st.one_of(st.integers(-2 ** 63, 2 ** 63 - 1), st.text(alphabet='ab"\\\t', max_size=3),
                 st.tuples(st.integers(0, 3), st.text(alphabet="xy", max_size=2)))
times = st.one_of(st.sampled_from([MIN_TIMESTAMP, MAX_TIMESTAMP, MAX_TIMESTAMP - 1, 0, -1, 1]),
                  st.integers(MIN_TIMESTAMP, MAX_TIMESTAMP))
#: An accumulator column is typed as the engine keeps it: int64, float64 (special values too), or
#: Python objects (integers past int64, None); last panes hold any output.
ACC_COLUMNS = {"int64": (st.integers(-2 ** 63, 2 ** 63 - 1), np.int64),
               "float64": (st.floats(allow_nan=True, allow_infinity=True), np.float64),
               "object": (st.one_of(st.none(), st.integers(2 ** 63, 2 ** 70)), object)}
outputs = st.one_of(st.none(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(alphabet='a"\n', max_size=2), st.tuples(st.integers(), st.booleans()))


@st.composite
def tables(draw):
    runs = draw(st.lists(st.tuples(keys, st.integers(1, 3)), max_size=5, unique_by=lambda run: run[0]))
    n = sum(length for _, length in runs)
    column = lambda element: draw(st.lists(element, min_size=n, max_size=n))  # noqa: E731
    ints = lambda: np.array(column(st.integers(0, 50)), dtype=np.int64)  # noqa: E731
    bools = lambda: np.array(column(st.booleans()), dtype=bool)  # noqa: E731
    acc_kinds = draw(st.lists(st.sampled_from(sorted(ACC_COLUMNS)), min_size=1, max_size=2))
    acc = []
    for kind in acc_kinds:
        element, dtype = ACC_COLUMNS[kind]
        acc.append(object_array(column(element)) if dtype is object else np.array(column(element), dtype=dtype))
    return RowTable(keys=object_array([key for key, length in runs for _ in range(length)]),
                    starts=np.array(column(times), dtype=np.int64), ends=np.array(column(times), dtype=np.int64),
                    acc=acc, pending=ints(), hold=bools(),
                    nonspeculative=ints(), index=ints(), last=object_array(column(outputs)), late=bools(),
                    count=ints(), fire_at=np.array(column(st.sampled_from([NOT_SET, 0, 1_700])), dtype=np.int64),
                    closed=bools(), watermark=draw(times))


def _columns(table: RowTable) -> dict:
    """Every column as Python values, types kept (repr: a tuple is not a list, NaN equals NaN)."""
    return {name: repr(value.tolist() if isinstance(value, np.ndarray) else [a.tolist() for a in value])
            for name, value in vars(table).items() if name != "watermark"}


@contextmanager
def packing(rows: int):
    """Texts packed from ``rows`` rows on (the tests' tables are small: 1 packs every text)."""
    before = row_columns_text.PACKED_ROWS
    row_columns_text.PACKED_ROWS = rows
    try:
        yield
    finally:
        row_columns_text.PACKED_ROWS = before


#: Every text packed, and every text of lists (as state version 8 wrote them, and small texts still are).
FORMS = pytest.mark.parametrize("packed_rows", [1, 10 ** 9], ids=["packed", "lists"])


@FORMS
@given(table=tables(), kind=st.sampled_from(["sessions", "windows"]))
def test_rows_come_back_from_their_text(packed_rows, table, kind):
    with packing(packed_rows):
        text = rows_text(table, kind)
    assert "\n" not in text
    read_kind, back = table_of(text, table.watermark)
    assert read_kind == kind and back.watermark == table.watermark and len(back) == len(table)
    assert _columns(back) == _columns(table)
    assert back.starts.dtype == np.int64 and back.hold.dtype == bool
    # (an object column of None and big integers may come back typed only when it has no rows)
    assert all(b.dtype == a.dtype or not len(a) for a, b in zip(table.acc, back.acc) if a.dtype != object)


def test_each_key_is_written_once_with_its_row_count():
    table = RowTable(keys=object_array(["a", "a", ("b", 1)]), starts=np.array([0, 10, 0]), ends=np.array([10, 20, 5]),
                     acc=[np.array([1, 2, 3])], pending=np.zeros(3, dtype=np.int64), hold=np.zeros(3, dtype=bool),
                     nonspeculative=np.zeros(3, dtype=np.int64), index=np.zeros(3, dtype=np.int64),
                     last=object_array([None, None, 4]), late=np.zeros(3, dtype=bool), count=np.zeros(3, dtype=np.int64),
                     fire_at=np.full(3, NOT_SET), closed=np.zeros(3, dtype=bool))
    assert rows_text(table, "windows").startswith('["windows",["a",["t",["b",1]]],[2,1],[0,10,0],[10,20,5],')
    with packing(1):  # (the bounds packed: u1 bytes from the column's least value, base64; the last panes with their None rows)
        assert rows_text(table, "windows").startswith('["windows",["a",["t",["b",1]]],[2,1],"u1:0:AAoA","u1:5:BQ8A",')
        assert rows_text(table, "windows").endswith(',["u1:1:AAEC"],"u1:0:AAAE:wA=="]')
    firsts, lengths = key_runs(table.keys)
    assert firsts.tolist() == [0, 2] and lengths.tolist() == [2, 1]


#: A text as state versions 7 and 8 wrote it: every column a list of values or the one value of every row.
VERSION_8_TEXT = ('["windows",["a",["t",["b",1]]],[2,1],[0,10,0],[10,20,5],0,false,0,0,false,0,'
                  f'{NOT_SET},false,[[1,2,3],[1.5,["f","nan"],2.0]],[null,null,4]]')


def test_a_text_written_by_state_version_8_is_read():
    kind, table = table_of(VERSION_8_TEXT, 7)
    assert kind == "windows" and table.watermark == 7
    assert table.keys.tolist() == ["a", "a", ("b", 1)] and table.starts.tolist() == [0, 10, 0]
    assert table.ends.tolist() == [10, 20, 5] and table.fire_at.tolist() == [NOT_SET] * 3
    assert table.acc[0].dtype == np.int64 and table.acc[0].tolist() == [1, 2, 3]
    assert repr(table.acc[1].tolist()) == "[1.5, nan, 2.0]" and table.last.tolist() == [None, None, 4]


def test_texts_of_both_versions_read_together_as_one_table():
    """A group's shards written before and after packing (a restart writes only the shards it reads)."""
    import json

    from windowed_operator.state.row_columns_text import table_of_parts

    old = json.loads(VERSION_8_TEXT)
    _, table = table_of(VERSION_8_TEXT, 0)
    table.keys = object_array(["c", "c", "d"])
    with packing(1):
        new = json.loads(rows_text(table, "windows"))
    both = table_of_parts([old, new], 0)
    assert both.keys.tolist() == ["a", "a", ("b", 1), "c", "c", "d"]
    assert both.starts.tolist() == [0, 10, 0] * 2 and both.last.tolist() == [None, None, 4] * 2
    assert both.acc[0].dtype == np.int64 and both.acc[0].tolist() == [1, 2, 3] * 2
    assert repr(both.acc[1].tolist()) == "[1.5, nan, 2.0, 1.5, nan, 2.0]"


@given(st.lists(st.one_of(st.none(), st.integers(-2 ** 64, 2 ** 64), st.floats(allow_nan=True), st.booleans()),
                max_size=20))
def test_last_panes_pack_only_where_their_types_come_back(values):
    """Integers within int64 (or floats) beside None are packed, and come back as the same Python values;
    anything else (a bool, an integer past int64, a mix) stays a list."""
    from windowed_operator.state.row_columns_text import column_values, packed

    n = len(values)
    table = RowTable(keys=object_array(["k"] * n), starts=np.arange(n), ends=np.arange(n) + 1, acc=[],
                     pending=np.zeros(n, dtype=np.int64), hold=np.zeros(n, dtype=bool),
                     nonspeculative=np.zeros(n, dtype=np.int64), index=np.zeros(n, dtype=np.int64),
                     last=object_array(values), late=np.zeros(n, dtype=bool), count=np.zeros(n, dtype=np.int64),
                     fire_at=np.full(n, NOT_SET), closed=np.zeros(n, dtype=bool))
    with packing(1):
        stored = json.loads(rows_text(table, "windows"))[-1]
    kinds = {type(v) for v in values if v is not None}
    fits = kinds == {float} or (kinds == {int} and all(-2 ** 63 <= v < 2 ** 63 for v in values if v is not None))
    assert isinstance(stored, str) == (fits and n > 0)
    assert (stored is None) == (n > 0 and all(v is None for v in values))  # (no pane yet: null)
    assert repr(column_values(stored, n)) == repr(values) or not isinstance(stored, str)
    with packing(1):
        assert repr(table_of(rows_text(table, "windows"), 0)[1].last.tolist()) == repr(values)
    assert packed(np.zeros(0, dtype=np.int64)) == "u1:0:"


@FORMS
@given(pieces=st.lists(tables(), min_size=1, max_size=4), data=st.data())
def test_pieces_of_a_table_come_back_as_the_table(packed_rows, pieces, data):
    """A table cut into texts at key boundaries (``rows_texts``), read back from the parsed texts in
    one pass (``table_of_parts``), is the table."""
    import json

    from windowed_operator.state.row_columns_text import rows_texts, table_of_parts
    from windowed_operator.state.row_shards import joined

    width = len(pieces[0].acc)
    pieces = [p for p in pieces if len(p.acc) == width and p.acc and all(
        a.dtype == b.dtype for a, b in zip(p.acc, pieces[0].acc))]
    seen, kept = set(), []
    for piece in pieces:  # (no key in two pieces)
        keys = set(map(repr, piece.keys.tolist()))
        if not keys & seen:
            kept.append(piece)
            seen |= keys
    table = joined(kept, 0)
    firsts, _ = key_runs(table.keys)
    cuts = sorted(set(data.draw(st.lists(st.sampled_from([*firsts.tolist()[1:], len(table)]), max_size=3)))
                  | {len(table)})
    with packing(packed_rows):
        texts = rows_texts(table, "sessions", cuts) if len(table) else []
    assert len(texts) == (len(cuts) if len(table) else 0)
    back = table_of_parts([json.loads(text) for text in texts], 0) if texts else table
    assert _columns(back) == _columns(table)


def test_a_column_every_row_shares_is_written_once():
    """A global window's bounds and a trigger's shared phase are one value each, not a list of them."""
    n = 3
    table = RowTable(keys=object_array(["a", "b", "c"]), starts=np.full(n, MIN_TIMESTAMP), ends=np.full(n, MAX_TIMESTAMP),
                     acc=[np.array([1, 2, 3])], pending=np.array([1, 0, 2]), hold=np.zeros(n, dtype=bool),
                     nonspeculative=np.zeros(n, dtype=np.int64), index=np.zeros(n, dtype=np.int64),
                     last=object_array([None, None, 4]), late=np.zeros(n, dtype=bool), count=np.array([1, 0, 2]),
                     fire_at=np.array([5, NOT_SET, 7]), closed=np.zeros(n, dtype=bool))
    with packing(1):
        text = rows_text(table, "windows")
    assert text.startswith(f'["windows",["a","b","c"],[1,1,1],{MIN_TIMESTAMP},{MAX_TIMESTAMP},"u1:0:AQAC",false,0,0,false,')
    assert _columns(table_of(text, 0)[1]) == _columns(table)
