"""Mistakes apply() refuses before a query starts, naming the column, its type and what fits."""
import warnings

import pytest

from accumulations import Count, Max, Mean, Sum, ToList
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.spark.base.errors import SparkOperatorError

SCHEMA = "user string, page string, tags array<string>, amount bigint, ts bigint"


def stream(spark, tmp_path):
    (tmp_path / "in").mkdir()
    return spark.readStream.schema(SCHEMA).json(str(tmp_path / "in"))


def operator(accumulation, **options):
    return KeyedWindowedOperator(TimeWindows(10_000), accumulation, key="user", timestamp="ts",
                                 watermark=bounded_disorder(1_000), **options)


@pytest.mark.parametrize("accumulation,options,message", [
    (Sum("page"), {}, "Sum cannot fold column 'page' of type string; it takes numbers (tinyint, smallint, int, "
                      "bigint, float, double, decimal)"),
    (Mean(), {"value": "page"}, "Mean cannot fold column 'page' of type string; it takes numbers"),
    (Max("tags"), {}, "Max cannot fold column 'tags' of type array<string>; it takes values that can be ordered"),
    (Sum(), {}, "Sum cannot fold whole rows (struct<"),
])
def test_a_type_the_accumulation_cannot_take_is_refused_at_apply(spark, tmp_path, accumulation, options, message):
    df = stream(spark, tmp_path)
    with pytest.raises(SparkOperatorError) as info:
        operator(accumulation, **options).apply(df)
    assert message in str(info.value)
    with pytest.raises(SparkOperatorError, match="cannot fold"):  # naming an output type does not get it through
        operator(accumulation, **options).apply(df, value_type="bigint")


def test_types_it_takes_pass(spark, tmp_path):
    df = stream(spark, tmp_path)
    for accumulation in (Sum("amount"), Mean("amount"), Max("page"), Count()):
        assert operator(accumulation).apply(df).isStreaming


def test_a_callable_value_needs_its_output_type_named_unless_the_accumulation_knows_it(spark, tmp_path):
    """A callable's results are typed only when it runs: the panes' type is not guessed from the
    row's (that typed ToList's lists as lists of whole rows, and Spark filled them with nulls)."""
    df = stream(spark, tmp_path)
    doubled = {"value": lambda row: row["amount"] * 2}
    for accumulation in (ToList(), Sum(), Max()):
        with pytest.raises(SparkOperatorError, match=f"cannot map the output of {type(accumulation).__name__} over "
                                                     "the results of a callable value extractor to a Spark type; "
                                                     "pass value_type="):
            operator(accumulation, **doubled).apply(df)
    typed = operator(ToList(), **doubled).apply(df, value_type="array<bigint>")
    assert typed.schema["value"].dataType.simpleString() == "array<bigint>"
    assert operator(Count(), **doubled).apply(df).schema["value"].dataType.simpleString() == "bigint"


def test_a_batch_dataframe_gets_advice_that_works(spark):
    batch = spark.createDataFrame([("a", "p", ["x"], 1, 1)], SCHEMA)
    with pytest.raises(SparkOperatorError, match=r"batch DataFrame\. Read the same data with spark\.readStream.*"
                                                 r"op\.run_local\(TestStream\(\)"):
        operator(Sum("amount")).apply(batch)


@pytest.mark.parametrize("setting", ["packInput"])
def test_a_library_setting_that_is_not_true_or_false_is_refused_naming_it(spark, tmp_path, setting):
    """Read as the default, a typo would silently keep the path it was meant to switch off."""
    df = stream(spark, tmp_path)
    name = f"spark.windowed_operator.{setting}"
    try:
        spark.conf.set(name, "flase")
        with pytest.raises(SparkOperatorError, match=rf"^{name} must be true or false, not 'flase'$"):
            operator(Sum("amount")).apply(df)
        spark.conf.set(name, " FALSE ")
        assert operator(Sum("amount")).apply(df).isStreaming
    finally:
        spark.conf.unset(name)


@pytest.mark.parametrize("setting", ["paneLog", "rowShards", "keyShards"])
def test_a_removed_setting_is_warned_about_once_and_ignored(spark, tmp_path, setting, monkeypatch):
    """A job configured before the setting went still runs (its value, even a typo, is ignored),
    and is told once which setting to drop."""
    from windowed_operator.spark.base import settings

    monkeypatch.setattr(settings, "_warned", set())
    df = stream(spark, tmp_path)
    name = f"spark.windowed_operator.{setting}"
    try:
        spark.conf.set(name, "flase")
        with pytest.warns(UserWarning, match=rf"^{name} was removed and is ignored: "):
            assert operator(Sum("amount")).apply(df).isStreaming
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert operator(Sum("amount")).apply(df).isStreaming
    finally:
        spark.conf.unset(name)
