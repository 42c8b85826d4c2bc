"""``fired_by=True`` on Spark: every pane's cause, firing watermark and holding partition equal the
local runner's on the same batches, on the object engine and on the array (table) engines alike."""
from __future__ import annotations

import datetime as dt
import random
import warnings
from collections import Counter

import pytest

from accumulations import Count, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder
from windowed_operator.time import shown_time

from .harness import BASE, pane_tuple, run_local_like_spark, run_spark

pytestmark = pytest.mark.spark

DELAY = 3_000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def make_batches(seed: int) -> list[list[dict]]:
    rng = random.Random(seed)
    return [[{"user": rng.choice("abc"), "amount": rng.randint(1, 9), "ts": BASE + 6_000 * (b + 1) - rng.randint(0, 16_000)}
             for _ in range(8)] for b in range(5)]


def sessions():
    return KeyedWindowedOperator(
        SessionWindows(2_500), Sum("amount"), key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
        trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
        .accumulating_and_retracting_fired_panes(), allowed_lateness=1_000, fired_by=True)


def tumbling():
    return KeyedWindowedOperator(
        TimeWindows(5_000), Count(), key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
        trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=3).accumulating_fired_panes(),
        allowed_lateness=2_000, fired_by=True)


def spark_firings(store: dict) -> Counter:
    def ms(moment):
        return None if moment is None else (moment.replace(tzinfo=dt.timezone.utc) - EPOCH) // dt.timedelta(milliseconds=1)

    return Counter((*pane_tuple(r), r["fired_by"], ms(r["firing_watermark"]), r["held_back_by"])
                   for rows in store.values() for r in rows)


def local_firings(runner) -> Counter:
    return Counter((p.key, shown_time(p.window_start), shown_time(p.window_end), p.value, p.timing.value, p.index,
                    p.is_first, p.is_last, p.is_retraction, shown_time(p.timestamp), p.firing.fired_by,
                    shown_time(p.firing.watermark), p.firing.held_back_by) for p in runner.outputs)


@pytest.mark.parametrize("make_operator", [sessions, tumbling])
@pytest.mark.parametrize("vectorized", [True, False], ids=["array engine", "object engine"])
def test_fired_by_on_spark_equals_the_local_runner(spark, tmp_path, make_operator, vectorized):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = make_operator()
    batches = make_batches(5)
    expected = local_firings(run_local_like_spark(op, batches, DELAY))
    found = spark_firings(run_spark(spark, op, batches, tmp_path, vectorized=vectorized))
    assert found == expected
    causes = {row[10] for row in expected}
    assert {"early_count", "watermark", "end_of_input"} <= causes, causes
    if make_operator is sessions:
        assert {"merge", "late_count"} <= causes, causes
