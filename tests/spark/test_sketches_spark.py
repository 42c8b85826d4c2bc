"""Distinct counts and quantiles on Spark equal the local runner on the same batches, with their
output types mapped to Spark's (bigint, double, array<double>)."""
import pytest

from accumulations import ApproxCountDistinct, ApproxPercentile, CountDistinct, Quantiles
from triggers import TriggerOption
from windowed_operator import SessionWindows, TimeWindows

from .harness import local_panes, run_local_like_spark, run_spark, spark_panes
from .test_equivalence import DELAY, EARLY_LATE_COUNTS, make_batches, operator

pytestmark = pytest.mark.spark

CASES = {
    "distinct-users-per-window": (TimeWindows(10_000), ApproxCountDistinct("user"), TriggerOption.default(), False),
    "distinct-amounts-hopping-retracting": (TimeWindows(10_000).slide_by(5_000), CountDistinct("amount"),
                                            EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes(), True),
    "quantiles-of-sessions-retracting": (SessionWindows(4_000), Quantiles("amount", fractions=(0.5, 0.9)),
                                         EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes(), True),
    "median-per-window": (TimeWindows(10_000), ApproxPercentile("amount", 0.5),
                          TriggerOption.default().accumulating_fired_panes(), True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sketches_on_spark_equal_the_local_runner(spark, tmp_path, case):
    window, accumulation, trigger, keyed = CASES[case]
    op = operator(window, trigger, acc=accumulation, keyed=keyed)
    batches = make_batches(11, n_batches=5, per_batch=12)
    expected = local_panes(run_local_like_spark(op, batches, DELAY))
    assert len(expected) >= 4
    assert spark_panes(run_spark(spark, op, batches, tmp_path)) == expected


PREFOLDED = {
    "distinct-users-non-keyed": (ApproxCountDistinct("user"), False),
    "amount-quantiles-keyed": (Quantiles("amount", fractions=(0.5, 0.9)), True),
}


@pytest.mark.parametrize("case", sorted(PREFOLDED))
def test_prefolded_sketches_equal_the_plain_path(spark, tmp_path, case):
    """Pre-folding (one sketch per (key, pane) crosses the shuffle, ``prefold.py``) against the plain
    array path: same panes, late ones included, and the same late rows dropped (two late rows of one
    pane fold into one sketch, which counts for both)."""
    from .harness import BASE

    accumulation, keyed = PREFOLDED[case]
    op = operator(TimeWindows(10_000).slide_by(2_000), TriggerOption.default().accumulating_fired_panes(),
                  lateness=4_000, acc=accumulation, keyed=keyed)
    batches = make_batches(17, n_batches=5, per_batch=14)
    batches[3] += [{"user": "a", "amount": 100, "ts": BASE - 30_000}, {"user": "a", "amount": 7, "ts": BASE - 29_999}]
    batches[4].append({"user": "b", "amount": 50, "ts": BASE + 17_500})  # within lateness for some windows
    fold_drops, plain_drops = spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0)
    fast = run_spark(spark, op, batches, tmp_path / "fast", drop_counter=fold_drops)
    plain = run_spark(spark, op, batches, tmp_path / "plain", preaggregate=False, drop_counter=plain_drops)
    assert spark_panes(fast) == spark_panes(plain)
    assert any(r["timing"] == "LATE" for b in fast.values() for r in b)
    assert fold_drops.value == plain_drops.value >= 2
    (tmp_path / "plan").mkdir()
    stream = spark.readStream.schema("user string, amount bigint, ts bigint").json(str(tmp_path / "plan"))
    assert "MapInArrow PreFolding" in op.apply(stream)._jdf.queryExecution().logical().toString()
    assert "MapInArrow PreFolding" not in op.apply(stream, preaggregate=False)._jdf.queryExecution().logical().toString()


def test_prefolding_folds_each_key_and_pane_into_one_sketch():
    """The scan-stage function alone: one row per (key, pane), weighted, whose sketch is the fold of its rows."""
    import numpy as np
    import pyarrow as pa

    from windowed_operator.spark.scan.prefold import PreFolding
    from windowed_operator.spark.scan.preselect import WEIGHT_COLUMN

    acc = Quantiles("v", fractions=(0.0, 0.5, 1.0))
    layout = TimeWindows(10).slide_by(5).pane_layout()
    rows = [("a", 1, 3.0), ("b", 2, 5.0), ("a", 4, 1.0), ("a", 6, 9.0), ("b", 3, 4.0), ("a", 9, 2.0)]
    batch = pa.RecordBatch.from_pylist([{"k": k, "ts": ts, "v": v} for k, ts, v in rows])
    folding = PreFolding(layout=layout, accumulation=acc, key_column="k", time_column="ts", value_column="v",
                         reader=None)
    [out] = list(folding(iter([batch])))
    got = {(r["k"], r["ts"]): (acc.get_output(r["v"]), r[WEIGHT_COLUMN]) for r in out.to_pylist()}
    expected = {}
    for (key, pane) in {(k, ts - ts % 5) for k, ts, _ in rows}:
        values = [v for k, ts, v in rows if k == key and ts - ts % 5 == pane]
        expected[(key, pane)] = (acc.get_output(acc.fold_array(np.array(values))), len(values))
    assert got == expected
