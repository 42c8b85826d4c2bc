"""Integer sums past 2^63 - 1: an error naming the operator, column, key and window on every path
(element, array, columnar), exact when the total comes back into range; never a wrapped number."""
import numpy as np
import pytest

from accumulations import Mean, Sum
from accumulations.int64 import exact, may_wrap
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, WindowOverflowError
from windowed_operator.engine.columnar import ColumnarCore, PaneTable, Panes
from windowed_operator.engine.key_state import KeyState
from windowed_operator.time import MAX_TIMESTAMP
from windowed_operator.engine.vectorized import process_batch_arrays
from windowed_operator.engine.build import build_core

BIG = 2 ** 62
OVER = [BIG, BIG, BIG]  # 3 * 2^62 does not fit
BACK = [BIG, BIG, -BIG, -BIG + 5]  # passes 2^63 on the way, ends at 5


def operator(trigger=None, acc=None):
    return KeyedWindowedOperator(TimeWindows(10), acc or Sum("n"), key="k", timestamp="ts", name="totals",
                                 trigger=trigger or TriggerOption.default())


def element_path(values, acc=None):
    runner = operator(acc=acc).local_runner()
    runner.add_elements(*[{"k": "a", "n": v, "ts": i} for i, v in enumerate(values)])
    return [p.value for p in runner.finish()]


def array_path(values, acc=None):
    core = build_core(operator(TriggerOption.at_watermark().with_early_firings_at_every(count=100), acc))
    state = KeyState()
    process_batch_arrays(core, "a", state, np.arange(len(values), dtype=np.int64), np.array(values, dtype=np.int64),
                         0, 0, lambda i: values[i])
    return [p.value for p in core.process_batch("a", state, [], MAX_TIMESTAMP, 0).outputs]


def columnar_path(values, acc=None):
    op = operator(acc=acc)
    columnar = ColumnarCore(op.window, op.accumulation, op.trigger, 0, label=op.label(), column="n")
    out = Panes()
    table = columnar.process(PaneTable(), np.array(["a"] * len(values), dtype=object),
                             np.arange(len(values), dtype=np.int64), np.array(values, dtype=np.int64), 0, out, [],
                             lambda i: values[i], processing_time=0)
    columnar.on_watermark(table, MAX_TIMESTAMP, out)
    return out.values.tolist()


PATHS = {"element": element_path, "array": array_path, "columnar": columnar_path}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_sum_past_int64_is_an_error_naming_operator_column_key_and_window(path):
    with pytest.raises(WindowOverflowError) as info:
        PATHS[path](OVER)
    assert str(info.value).startswith(
        f"operator 'totals': the value of window [0, 10) of key 'a' over column 'n' is {3 * BIG}, "
        "which does not fit a 64-bit integer")


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_sum_that_comes_back_into_range_is_exact(path):
    assert PATHS[path](BACK) == [5]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_mean_of_huge_integers_does_not_wrap(path):
    assert PATHS[path](OVER, acc=Mean("n")) == [float(BIG)]


def test_the_wrap_guard():
    assert not may_wrap(np.array([BIG // 4, -BIG // 4])) and may_wrap(np.array([BIG, 1]))
    assert not may_wrap(np.array([1.5e300, 1e300]))  # floats never wrap
    assert exact(np.array(OVER)).sum() == 3 * BIG


def test_stored_accumulators_past_int64_beside_small_ones_come_back_exact():
    """A key's stored sums read back as one column (``state.records``): numpy would make
    [3 * 2^62, 1] float64 (rounded, and past the overflow check); they stay Python integers."""
    from windowed_operator.state.records import _column

    for values in ([3 * BIG, 1], [3 * BIG, -1], [3 * BIG], [2 ** 64 + 1, 1]):
        column = _column(values)
        assert column.dtype == object and column.tolist() == values
    assert _column([1, 2]).dtype == np.int64 and _column([1.5, 2.0]).dtype == np.float64
