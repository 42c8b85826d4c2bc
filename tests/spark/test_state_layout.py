"""The per-key state layout on Spark: data only unless pickling is allowed; readable with Spark's
state data source."""
import json
from fractions import Fraction

import pytest

from accumulations import Combine, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.time import time_text

from .harness import BASE, END_COLUMN, MARKED_SCHEMA, run_spark, write_batches

pytestmark = pytest.mark.spark

BATCHES = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "b", "amount": 2, "ts": BASE + 2_000}],
           [{"user": "a", "amount": 3, "ts": BASE + 3_000}]]


def _fraction_sum():
    """An accumulator whose state is not plain data (a Fraction)."""
    return KeyedWindowedOperator(
        TimeWindows(10_000), Combine(lambda: Fraction(0), lambda a, v: a + Fraction(v["amount"]),
                                     lambda a, b: a + b, float, result_type="double"),
        key="user", timestamp="ts", watermark=bounded_disorder(2_000))


def test_a_value_that_is_not_data_is_refused_naming_its_type(spark, tmp_path):
    with pytest.raises(Exception, match=r"the state holds a fractions.Fraction .* state_encoding='pickle'"):
        run_spark(spark, _fraction_sum(), BATCHES, tmp_path)


def test_state_encoding_pickle_allows_it(spark, tmp_path):
    store = run_spark(spark, _fraction_sum(), BATCHES, tmp_path, state_encoding="pickle")
    assert sorted((r["key"], r["value"]) for b in store.values() for r in b) == [("a", 4.0), ("b", 2.0)]


def test_the_state_is_readable_with_the_state_data_source(spark, tmp_path):
    from windowed_operator.spark.inspect import describe_checkpoint, key_records

    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                               watermark=bounded_disorder(2_000), allowed_lateness=3_600_000,
                               trigger=TriggerOption.at_watermark().with_late_firings_at_every(count=1))
    write_batches(tmp_path / "in", BATCHES, flush=False)  # no end of input: the windows stay
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    query = (op.apply(df, end_of_input=END_COLUMN, vectorized=False).writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    rows = {r["key"]: json.loads(r["record"]) for r in key_records(spark, str(tmp_path / "checkpoint")).collect()}
    assert set(rows) == {"a", "b"}
    event_due, processing_due, state = rows["a"]  # (a record: its due times and its state, by position)
    (window,) = state["windows"]
    assert (window["start"], window["end"], window["acc"]) == (BASE, BASE + 10_000, 4)
    lines = list(describe_checkpoint(spark, str(tmp_path / "checkpoint")))
    assert lines[0].endswith("2 key(s) with state:") and any("acc=4" in line for line in lines)
    # the window [BASE, BASE + 10 s) closes once the watermark reaches its end plus the hour of lateness
    window_line = next(line for line in lines if "acc=4" in line)
    assert f"closes at watermark {time_text(BASE + 10_000 + 3_600_000)} acc=4" in window_line, window_line
