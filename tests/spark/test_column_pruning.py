"""Only the columns the processor reads go to Python: the columnar engine reads the key, the event
time, the value column and a session gap column; with a late-data or dead-letter output rows leave
whole, so every column goes.  Sessions are chained in the scan stage where nothing is kept aside
(``prechain``): the fold takes the same columns, and the row path (``preaggregate=False``) too."""
import re
import warnings

import pytest

from accumulations import Count, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, bounded_disorder
from windowed_operator.spark.base.handoff import PACK_CONF

from .harness import BASE, MARKED_SCHEMA, local_panes, run_local_like_spark, run_spark, spark_panes

pytestmark = pytest.mark.spark

DELAY = 3_000


def _sessions(accumulation, **options):
    early = TriggerOption.at_watermark().with_early_firings_at_every(count=2).accumulating_fired_panes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(SessionWindows(4_000), accumulation, trigger=early, key="user", timestamp="ts",
                                     allowed_lateness=1_000, watermark=bounded_disorder(DELAY), **options)


def _batches() -> list[list[dict]]:
    return [[{"user": u, "amount": a, "ts": BASE + t} for u, a, t in
             [("a", 1, 1_000), ("b", 2, 2_500), ("a", 3, 3_000), ("c", 1, 9_000), ("a", 2, 3_999)]],
            [{"user": "a", "amount": 4, "ts": BASE + 12_000}, {"user": "c", "amount": 2, "ts": BASE + 10_000},
             {"user": "b", "amount": 7, "ts": BASE + 6_499}],
            [{"user": "b", "amount": 5, "ts": BASE + 20_000}, {"user": "a", "amount": 6, "ts": BASE + 14_000}]]


def _processor_inputs(spark, tmp_path, op, preaggregate=True) -> list[str]:
    """The columns the plan hands to Python: the session fold's arguments (``PreChaining``), or
    PackRows', or the stateful UDF's."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    df = spark.readStream.schema(MARKED_SCHEMA).json(str(tmp_path))
    text = op.apply(df, end_of_input="end_of_input", preaggregate=preaggregate)._jdf.queryExecution().analyzed() \
        .toString()
    found = (re.search(r"PreChaining\(([^)]*)\)", text) or re.search(r"PackRows\(([^)]*)\)", text)
             or re.search(r"transformWithStateUDF\(([^)]*)\)", text))
    assert found, text
    return [re.sub(r"#\d+L?$", "", arg.strip()) for arg in found.group(1).split(",")]


@pytest.mark.parametrize("packed", ["true", "false"])
def test_a_count_ships_the_key_and_time_only_and_its_panes_are_the_local_runners(spark, tmp_path, packed):
    spark.conf.set(PACK_CONF, packed)
    try:
        assert _processor_inputs(spark, tmp_path / "plan", _sessions(Count()), preaggregate=False) == \
            ["user", "ts", "__wo_group"]
        out = run_spark(spark, _sessions(Count()), _batches(), tmp_path / "run", preaggregate=False)
    finally:
        spark.conf.unset(PACK_CONF)
    expected = local_panes(run_local_like_spark(_sessions(Count()), _batches(), DELAY))
    assert spark_panes(out) == expected and expected


def test_a_sum_ships_its_value_column_too(spark, tmp_path):
    assert _processor_inputs(spark, tmp_path / "plan", _sessions(Sum("amount")), preaggregate=False) == \
        ["user", "amount", "ts", "__wo_group"]
    out = run_spark(spark, _sessions(Sum("amount")), _batches(), tmp_path / "run", preaggregate=False)
    assert spark_panes(out) == local_panes(run_local_like_spark(_sessions(Sum("amount")), _batches(), DELAY))


@pytest.mark.parametrize("accumulation,read", [(Count(), ["user", "ts"]), (Sum("amount"), ["user", "ts", "amount"])],
                         ids=["count", "sum"])
def test_the_session_fold_reads_the_key_time_and_value_only(spark, tmp_path, accumulation, read):
    """Chaining sessions in the scan stage takes the columns the row path would ship, no more; its
    panes are the local runner's."""
    assert _processor_inputs(spark, tmp_path / "plan", _sessions(accumulation)) == read
    out = run_spark(spark, _sessions(accumulation), _batches(), tmp_path / "run")
    assert spark_panes(out) == local_panes(run_local_like_spark(_sessions(accumulation), _batches(), DELAY))


def test_with_dead_letters_whole_rows_go_and_a_dead_letter_carries_every_column(spark, tmp_path):
    op = _sessions(Count(), on_bad_element="dead_letter")
    assert _processor_inputs(spark, tmp_path / "plan", op) == ["user", "amount", "ts", "__wo_group"]
    batches = _batches()
    batches[1].append({"user": None, "amount": 99, "ts": BASE + 12_500})
    out = run_spark(spark, op, batches, tmp_path / "run")
    letters = [row for rows in out.values() for row in rows if row.get("record_type") == "dead_letter"]
    assert len(letters) == 1 and '"amount": 99' in letters[0]["element"], letters
