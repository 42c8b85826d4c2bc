"""Sessions with a gap per row on Spark equal the local runner on the same batches: a gap column
expression (milliseconds, and Spark's day-time intervals), a named column, a callable on the row;
rows whose gap is not positive are dead letters on both."""
import sys
import warnings

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F

from accumulations import Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, bounded_disorder
from windowed_operator.spark.base.errors import SparkOperatorError

from .harness import local_panes, run_local_like_spark, run_spark, spark_panes
from .test_equivalence import DELAY, EARLY_LATE_COUNTS, make_batches

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the gap callable runs on Spark's Python workers


def gap_ms(row: dict) -> int:
    """The local twin of the Spark gap expressions below: 700 ms per unit of amount."""
    return row["amount"] * 700


GAPS = {  # (built when a session exists: Columns need one)
    "column-expression-ms": lambda: F.col("amount") * 700,
    "day-time-interval": lambda: F.expr("make_dt_interval(0, 0, 0, amount * 0.7)"),
    "callable": lambda: gap_ms,
}


def operator(gap, trigger, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(SessionWindows(gap=gap), Sum("amount"), trigger=trigger, allowed_lateness=5_000,
                                     key="user", timestamp="ts", watermark=bounded_disorder(DELAY), **kwargs)


@pytest.mark.parametrize("gap", sorted(GAPS))
def test_row_gaps_on_spark_equal_the_local_runner(spark, tmp_path, gap):
    trigger = (EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes() if gap == "callable"
               else TriggerOption.default().accumulating_fired_panes())
    batches = make_batches(7, n_batches=5, per_batch=10)
    expected = local_panes(run_local_like_spark(operator(gap_ms, trigger), batches, DELAY))
    assert len({(p[1], p[2]) for p in expected}) > 3, "the stream must make several sessions"
    assert len({p[2] - p[1] for p in expected}) > 3, "sessions of several lengths"
    assert spark_panes(run_spark(spark, operator(GAPS[gap](), trigger), batches, tmp_path)) == expected


def test_rows_with_a_bad_gap_are_dead_letters_on_both(spark, tmp_path):
    batches = make_batches(3, n_batches=3, per_batch=8)
    batches[1].append({"user": "a", "amount": 0, "ts": batches[1][0]["ts"]})
    trigger = TriggerOption.default()
    local = run_local_like_spark(operator(gap_ms, trigger, on_bad_element="dead_letter"), batches, DELAY)
    [letter] = local.dead_letters
    assert letter.reason.value == "invalid_gap" and "the session gap 0 is not positive" in letter.detail
    store = run_spark(spark, operator(F.col("amount") * 700, trigger, on_bad_element="dead_letter"), batches,
                      tmp_path)
    dead = [r for rows in store.values() for r in rows if r["record_type"] == "dead_letter"]
    assert [(r["reason"], '"amount": 0' in r["element"]) for r in dead] == [("invalid_gap", True)]
    assert spark_panes(store) == local_panes(local)


def test_a_gap_column_must_exist(spark, tmp_path):
    df = spark.readStream.schema("user string, amount bigint, ts bigint").json(str(tmp_path))
    with pytest.raises(SparkOperatorError, match=r"session gap column 'gap_ms' is not in the DataFrame"):
        operator("gap_ms", TriggerOption.default()).apply(df)
    with pytest.raises(SparkOperatorError, match=r"session gap expression .* does not resolve"):
        operator(F.col("nope") * 2, TriggerOption.default()).apply(df)


def user_gap(element: dict) -> int:
    return 3_000 if element["user"] == "a" else 6_000


def test_a_merge_of_sessions_with_row_gaps_equals_the_local_runner(spark, tmp_path):
    """Each input's gap from a column expression or a callable on the input's row (the local runner's
    callable); sessions merge across inputs."""
    from accumulations import Cogroup
    from windowed_operator import KeyedWindowedMergeOperator
    from windowed_operator.merge_operator import InputOptions

    from .harness import run_local_merge_like_spark, run_spark_merge
    from .test_merge_spark import local_rows, make_sides, spark_rows

    def merge(gap):
        return KeyedWindowedMergeOperator(SessionWindows(gap=gap), Cogroup(), allowed_lateness=6_000, key="user",
                                          timestamp="ts", watermark=bounded_disorder(DELAY),
                                          left=InputOptions(value="amount"), right=InputOptions(value="page"))

    left, right = make_sides(21)
    runner = run_local_merge_like_spark(merge(user_gap), left, right, DELAY)
    lengths = {p.window_end - p.window_start for p in runner.outputs}
    assert len(lengths) > 3 and len(runner.outputs) > 5
    for name, gap in (("expression", F.when(F.col("user") == "a", 3_000).otherwise(6_000)), ("callable", user_gap)):
        assert spark_rows(run_spark_merge(spark, merge(gap), left, right, tmp_path / name)) == local_rows(runner)
