"""An accumulation may fold the event-time column itself (``Max("ts")`` with ``timestamp="ts"``): the
scan-stage folds read that column once (Arrow refuses a struct with a field twice), and every path
gives the local runner's panes (issue 56, item 4)."""
import pytest

from accumulations import ApproxCountDistinct, Max, Sum
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder

from .harness import BASE, local_panes, run_local_like_spark, run_spark, spark_panes

pytestmark = pytest.mark.spark

DELAY = 2_000
BATCHES = [
    [{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "b", "amount": 2, "ts": BASE + 4_000},
     {"user": "a", "amount": 3, "ts": BASE + 2_500}],
    [{"user": "a", "amount": 1, "ts": BASE + 12_000}, {"user": "b", "amount": 5, "ts": BASE + 3_000}],
    [{"user": "a", "amount": 1, "ts": BASE + 26_000}, {"user": "a", "amount": 1, "ts": BASE + 11_000}],
]


def _op(window, accumulation, **kw):
    return KeyedWindowedOperator(window, accumulation, key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
                                 **kw)


CASES = {
    "element": (_op(TimeWindows(10_000), Max("ts")), {"vectorized": False}),
    "pane log": (_op(TimeWindows(10_000), Max("ts")), {"preaggregate": False}),
    "columnar rows": (_op(TimeWindows(10_000), Max("ts"), allowed_lateness=5_000), {"preaggregate": False}),
    "pre-aggregated": (_op(TimeWindows(10_000).slide_by(5_000), Max("ts"), allowed_lateness=5_000), {}),
    "sessions chained": (_op(SessionWindows(3_000), Sum("ts")), {}),
    "sessions rows": (_op(SessionWindows(3_000), Sum("ts")), {"preaggregate": False}),
    "sketch": (_op(TimeWindows(10_000), ApproxCountDistinct("ts")), {}),
}


@pytest.mark.parametrize("path", sorted(CASES))
def test_an_accumulation_over_the_event_time_column_equals_the_local_runner(spark, tmp_path, path):
    op, options = CASES[path]
    expected = local_panes(run_local_like_spark(op, BATCHES, DELAY))
    assert expected
    assert spark_panes(run_spark(spark, op, BATCHES, tmp_path, **options)) == expected
