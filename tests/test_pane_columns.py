"""A chained stage's read of upstream panes as columns (``pane_columns.read_pane_columns``) equals
its element reader's read of each pane (``panes.pane_from_row`` then ``ElementReader.read``), and
declines whatever the reader must read itself."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import AllMax, Count, Mean, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, WindowedOperator
from windowed_operator.engine.pane_columns import read_pane_columns
from windowed_operator.panes import RetractedValue, pane_from_row
from windowed_operator.time import MIN_TIMESTAMP

from helpers import near_boundaries

RETRACTING = TriggerOption.at_watermark().with_early_firings_at_every(count=2).accumulating_and_retracting_fired_panes()


def upstream(keyed: bool, acc=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if keyed:
            return KeyedWindowedOperator(TimeWindows(10).slide_by(5), acc or Count(), trigger=RETRACTING)
        return WindowedOperator(TimeWindows(10).slide_by(5), acc or Count(), trigger=RETRACTING)


#: Downstream stages that read only the pane's fields (the column read applies) ...
COLUMNAR = {
    "windowless-sum": lambda: WindowedOperator(None, Sum()),
    "per-key-mean": lambda: KeyedWindowedOperator(None, Mean()),
    "by-window-start": lambda: KeyedWindowedOperator(None, Sum(), key="window_start", value="value"),
    "by-pane-index": lambda: KeyedWindowedOperator(None, Count(), key="index", value="value"),
    "own-windows": lambda: KeyedWindowedOperator(TimeWindows(20), Sum()),
    # a record of the pane's fields: read as Rows, one column per field
    "record-of-fields": lambda: KeyedWindowedOperator(None, AllMax(field="num"), key="window_start",
                                                      value={"num": "value", "start": "window_start", "n": "index"}),
}
#: ... and ones that read through a callable, a field of the value, or the pane's timing enum.
ROW_BY_ROW = {
    "callable-key": lambda: KeyedWindowedOperator(None, Sum(), key=lambda p: p.key % 2, value="value"),
    "callable-value": lambda: WindowedOperator(None, Sum(), value=lambda v: v * 2),
    "by-timing": lambda: KeyedWindowedOperator(None, Count(), key="timing", value="value"),
    "whole-pane": lambda: KeyedWindowedOperator(None, Count(), key="window_start"),
    "own-timestamp": lambda: WindowedOperator(TimeWindows(20), Sum(), timestamp="window_start"),
    "record-with-timing": lambda: KeyedWindowedOperator(None, AllMax(field="num"), key="window_start",
                                                        value={"num": "value", "when": "timing"}),
}

panes = st.lists(st.tuples(st.integers(0, 6), near_boundaries(-20, 60), st.integers(-50, 50), st.booleans(),
                           st.integers(0, 3)), min_size=0, max_size=30)


def frame_of(rows, keyed: bool, key_kind: str) -> pd.DataFrame:
    columns = {
        "window_start": [(ts // 5) * 5 - 5 for _, ts, _, _, _ in rows],
        "window_end": [(ts // 5) * 5 + 5 for _, ts, _, _, _ in rows],
        "value": [(-v if r else v) for _, _, v, r, _ in rows],  # a retraction row holds the negated output
        "timing": ["EARLY" if i == 0 else "ON_TIME" for *_, i in rows],
        "pane_index": [i for *_, i in rows],
        "is_first": [i == 0 for *_, i in rows],
        "is_last": [False for _ in rows],
        "is_retraction": [r for _, _, _, r, _ in rows],
        "timestamp": [(ts // 5) * 5 + 4 for _, ts, _, _, _ in rows],
    }
    if keyed:
        columns = {"key": [k if key_kind == "int" else f"user-{k}" for k, *_ in rows], **columns}
    frame = pd.DataFrame(columns)
    return frame.astype({c: "int64" for c in ("window_start", "window_end", "value", "pane_index", "timestamp")})


def per_row(frame: pd.DataFrame, downstream, up) -> list:
    reader = downstream.build_reader()
    out = []
    for record in frame.to_dict("records"):
        read = reader.read(pane_from_row(record, up), MIN_TIMESTAMP, 0)
        window = (read.window.start, read.window.end) if read.window is not None else None
        out.append((read.key, read.timestamp, read.value, window))
    return out


def by_columns(frame: pd.DataFrame, downstream, up):
    columns = {c: frame[c].to_numpy() for c in frame.columns}
    read = read_pane_columns(columns, downstream.build_reader(), up.keyed, up.core_accumulation().get_retraction)
    if read is None:
        return None
    out = []
    for i in range(len(read.timestamps)):
        key = read.keys[i].item() if isinstance(read.keys[i], np.generic) else read.keys[i]
        window = (int(read.windows[0][i]), int(read.windows[1][i])) if read.windows is not None else None
        out.append((key, int(read.timestamps[i]), read.element(i), window))
    return out


@settings(max_examples=150, deadline=None)
@given(rows=panes, case=st.sampled_from(sorted(COLUMNAR)), keyed=st.booleans(), key_kind=st.sampled_from(["int", "str"]))
def test_the_column_read_equals_the_readers_read_of_each_pane(rows, case, keyed, key_kind):
    downstream = COLUMNAR[case]()
    if downstream.keyed and downstream.key is None and not keyed:
        return  # (a keyed stage without key= needs a keyed upstream: refused where the chain is built)
    up = upstream(keyed)
    frame = frame_of(rows, keyed, key_kind)
    expected = per_row(frame, downstream, up)
    got = by_columns(frame, downstream, up)
    assert got is not None, "a stage reading only the pane's fields is read as columns"
    assert got == expected
    plain = [v.value if isinstance(v, RetractedValue) else v for _, _, v, _ in got]
    assert all(type(x) is int for v in plain for x in (v.values() if isinstance(v, dict) else [v]))


@pytest.mark.parametrize("case", sorted(ROW_BY_ROW))
def test_stages_reading_through_the_reader_are_declined(case):
    up = upstream(True)
    frame = frame_of([(1, 12, 3, False, 0), (2, 14, 5, True, 1)], True, "int")
    assert by_columns(frame, ROW_BY_ROW[case](), up) is None


def test_nulls_and_non_numbers_are_left_to_the_reader():
    """A null key or value is the reader's to reject (with its reason), a struct value its to read."""
    up = upstream(True)
    frame = frame_of([(1, 12, 3, False, 0), (2, 14, 5, True, 1)], True, "str")
    null_key = frame.astype({"key": object})
    null_key.loc[0, "key"] = None
    assert by_columns(null_key, KeyedWindowedOperator(None, Sum()), up) is None
    null_value = frame.astype({"value": "float64"})
    null_value.loc[1, "value"] = np.nan
    assert by_columns(null_value, WindowedOperator(None, Sum()), up) is None
    structs = frame.assign(value=[{"n": 3}, {"n": -5}])
    assert by_columns(structs, WindowedOperator(None, Sum("n")), upstream(True, Sum())) is None
    # a float column without nulls is read as it is, as the reader reads it
    floats = frame.astype({"value": "float64"})
    assert by_columns(floats, WindowedOperator(None, Sum()), up) == per_row(floats, WindowedOperator(None, Sum()), up)


def test_a_record_of_the_panes_fields_is_read_as_rows_and_keeps_the_key_column():
    from accumulations.rows import Rows

    up = upstream(True)
    frame = frame_of([(1, 12, 3, False, 0), (2, 14, 5, True, 1), (3, 14, 4, False, 0)], True, "str")
    stage = KeyedWindowedOperator(None, AllMax(field="num"), key="window_start", value={"auction": "key", "num": "value"})
    columns = {c: frame[c].to_numpy() for c in frame.columns}
    read = read_pane_columns(columns, stage.build_reader(), True, up.core_accumulation().get_retraction)
    assert isinstance(read.values, Rows) and read.values.column("auction").tolist() == ["user-1", "user-2", "user-3"]
    assert by_columns(frame, stage, up) == per_row(frame, stage, up)
    null_key = frame.astype({"key": object})
    null_key.loc[0, "key"] = None  # the reader rejects it, naming the field: left to it
    assert by_columns(null_key, stage, up) is None
