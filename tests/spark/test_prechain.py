"""The scan stage's session fold (``prechain.PreChaining``) on Arrow batches, without a JVM: the chains
it hands on, their elements back from bytes, and the one bad-element rule (a null key or a NaN value
raises the reader's error, as the processor's rows do)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from accumulations import Count, Sum
from windowed_operator import KeyedWindowedOperator, SessionWindows
from windowed_operator.engine.columnar import columnar_form
from windowed_operator.elements import BadElementError
from windowed_operator.spark.scan.prechain import PreChaining, chain_elements, value_dtype


def chaining(accumulation, value_type="bigint"):
    op = KeyedWindowedOperator(SessionWindows(5), accumulation, key="user", timestamp="ts")
    value = "amount" if value_type is not None else None
    return PreChaining(form=columnar_form(accumulation), key_column="user", time_column="ts", value_column=value,
                       key_type="string", value_type=value_type, reader=op.build_reader(), gap=5)


def folded(fold, **columns):
    out = pa.Table.from_batches(list(fold([pa.RecordBatch.from_pydict(columns)])))
    return out.to_pydict()


def test_a_keys_elements_within_a_gap_of_each_other_are_one_chain_with_their_sum():
    fold = chaining(Sum("amount"))
    rows = folded(fold, user=["a", "b", "a", "a", "a"], ts=[10, 3, 14, 0, 19], amount=[1, 2, 4, 8, 16])
    # a: 0 | 10, 14 (14 - 10 < 5) | 19 (19 - 14 = 5: proto-sessions only touch); b: 3
    assert list(zip(rows["user"], rows["__wo_first"], rows["__wo_last"], rows["__wo_n"], rows["__wo_agg0"])) == [
        ("a", 0, 0, 1, 8), ("a", 10, 14, 2, 5), ("a", 19, 19, 1, 16), ("b", 3, 3, 1, 2)]
    times, values = chain_elements(rows["__wo_times"][1], rows["__wo_values"][1], value_dtype("bigint"))
    assert times.tolist() == [10, 14] and values.tolist() == [1, 4]


def test_a_count_carries_times_only():
    rows = folded(chaining(Count(), value_type=None), user=["a", "a"], ts=[7, 5])
    assert "__wo_values" not in rows
    assert chain_elements(rows["__wo_times"][0], None, None)[0].tolist() == [5, 7]


def test_sums_that_could_wrap_go_element_by_element():
    rows = folded(chaining(Sum("amount")), user=["a", "a"], ts=[0, 1], amount=[2 ** 62, 2 ** 62])
    assert rows["__wo_n"] == [1, 1]  # (the processor sums them exactly and names the overflow)


@pytest.mark.parametrize("columns,reason", [
    ({"user": ["a", None], "ts": [0, 1], "amount": [1.0, 2.0]}, r"missing_key\): key is null"),
    ({"user": ["a", "a"], "ts": [0, 1], "amount": [1.0, float("nan")]},
     r"invalid_value\): value field 'amount' is null \(nan\)")], ids=["null key", "NaN value"])
def test_a_bad_row_raises_the_readers_error(columns, reason):
    with pytest.raises(BadElementError, match=reason):
        folded(chaining(Sum("amount"), value_type="double"), **columns)


@pytest.mark.parametrize("columns,reason", [
    ({"user": ["a", "a", None], "ts": [0, 2 ** 62, 1], "amount": [1.0, 2.0, 3.0]}, r"invalid_timestamp\)"),
    ({"user": ["a", None, "a"], "ts": [0, 1, 2 ** 62], "amount": [1.0, 2.0, 3.0]}, r"missing_key\)"),
    ({"user": ["a", "a", None], "ts": [0, 1, 2], "amount": [1.0, float("nan"), 3.0]}, r"invalid_value\)"),
    ({"user": ["a", "a", "a"], "ts": [0, None, 2 ** 62], "amount": [1.0, 2.0, 3.0]}, r"timestamp"),
], ids=["time before null key", "null key before time", "NaN before null key", "null time before time"])
def test_of_several_bad_rows_the_first_raises(columns, reason):
    """As the processor meets rows in order, the scan stage raises the error of the first bad row,
    whatever makes each bad (``preaggregate.checked_event_times``, every scan fold's one rule)."""
    with pytest.raises(BadElementError, match=reason):
        folded(chaining(Sum("amount"), value_type="double"), **columns)


def test_float_values_travel_as_float64():
    rows = folded(chaining(Sum("amount"), value_type="double"), user=["a", "a"], ts=[0, 1], amount=[0.5, 0.25])
    _, values = chain_elements(rows["__wo_times"][0], rows["__wo_values"][0], value_dtype("double"))
    assert values.dtype == np.float64 and values.tolist() == [0.5, 0.25] and rows["__wo_agg0"] == [0.75]


def test_a_fold_over_the_event_time_column_reads_it_once():
    """``Sum("ts")`` with ``timestamp="ts"``: the chain's values are its times (issue 56)."""
    op = KeyedWindowedOperator(SessionWindows(5), Sum("ts"), key="user", timestamp="ts")
    fold = PreChaining(form=columnar_form(Sum("ts")), key_column="user", time_column="ts", value_column="ts",
                       key_type="string", value_type="bigint", reader=op.build_reader(), gap=5)
    assert fold.input_columns == ["user", "ts"]
    rows = folded(fold, user=["a", "a", "b"], ts=[10, 12, 3])
    assert list(zip(rows["user"], rows["__wo_n"], rows["__wo_agg0"])) == [("a", 2, 22), ("b", 1, 3)]
