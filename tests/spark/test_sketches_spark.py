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
