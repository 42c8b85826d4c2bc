"""Chained stages planned as Spark's own aggregation (``spark.windowed_operator.nativeStages``) give
the local chain's panes, and stages the rule does not cover keep the Python plan."""
import sys
import warnings
from collections import Counter
from contextlib import contextmanager

import pytest
from pyspark import cloudpickle

from accumulations import AllMax, Count, Max, Mean, Min, Sum
from accumulations.base import Accumulation
from triggers import TriggerOption
from windowed_operator import (CumulativeWindows, KeyedWindowedOperator, SessionWindows, TimeWindows,
                               WindowedOperator, bounded_disorder)
from windowed_operator.spark.base.errors import SparkOperatorError
from windowed_operator.spark.driver.feed import feed_of
from windowed_operator.spark.driver.native_stage import NATIVE_STAGES_CONF
from windowed_operator.time import shown_time

from .harness import END_COLUMN, MARKED_SCHEMA, pane_tuple, run_local_like_spark, write_batches
from .test_checkpoint_settings import _started
from .test_equivalence import DELAY, make_batches

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # NullWhenEven runs on Spark's Python workers

EARLY = TriggerOption.at_watermark().with_early_firings_at_every(count=2)


class RetractedAsItself(Count):
    """A count whose retraction carries the output itself, not its negation."""

    def get_retraction(self, output):
        return output


def counts(window=None, trigger=None, acc=None, lateness=0, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(window or TimeWindows(10_000).slide_by(5_000), acc or Count(),
                                     trigger=trigger or TriggerOption.default(), allowed_lateness=lateness,
                                     key="user", timestamp="ts", watermark=bounded_disorder(DELAY), **options)


NATIVE = {
    "hopping-count-then-max": lambda: counts().then(WindowedOperator(None, Max())),
    "hot-users-all-max-of-a-record": lambda: counts().then(
        KeyedWindowedOperator(None, AllMax(field="num"), key="window_start", value={"user": "key", "num": "value"})),
    "retracting-early-counts-then-count-per-key": lambda: counts(
        trigger=EARLY.accumulating_and_retracting_fired_panes()).then(KeyedWindowedOperator(None, Count())),
    "retracting-early-counts-then-sum-per-window": lambda: counts(
        trigger=EARLY.accumulating_and_retracting_fired_panes()).then(
        KeyedWindowedOperator(None, Sum(), key="window_start", value="value")),
    "discarding-early-sums-then-min-of-cumulative": lambda: counts(
        CumulativeWindows(10_000, 5_000), EARLY.discarding_fired_panes(), Sum("amount")).then(
        WindowedOperator(None, Min())),
}


@contextmanager
def native_stages(spark, value="true"):
    spark.conf.set(NATIVE_STAGES_CONF, value)
    try:
        yield
    finally:
        spark.conf.unset(NATIVE_STAGES_CONF)


def _sorted_records(value):
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float)):
        return tuple(sorted(tuple(sorted((v.asDict() if hasattr(v, "asDict") else v).items())) for v in value))
    return value


def _source(spark, tmp_path):
    return spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "src"))


@pytest.mark.parametrize("case", sorted(NATIVE))
def test_a_native_stage_gives_the_local_chains_panes(spark, tmp_path, case):
    chain = NATIVE[case]()
    batches = make_batches(13, n_batches=6)
    runner = run_local_like_spark(chain, batches, DELAY)
    expected = Counter((r.key, shown_time(r.window_start), shown_time(r.window_end), _sorted_records(r.value),
                        r.timing.value, r.index, r.is_first, r.is_last, r.is_retraction, shown_time(r.timestamp))
                       for r in runner.outputs)
    assert expected
    if case == "hot-users-all-max-of-a-record":
        assert any(len(pane[3]) > 1 for pane in expected), "ties: several users share a window's top"
    if case.startswith("retracting"):
        assert any(p.is_retraction for p in runner.runners[0].outputs), "the upstream retracts"
    write_batches(tmp_path / "src", batches)
    with native_stages(spark):
        out = chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN)
    assert feed_of(out).native_stage and stateful_python_operators(out) == 1
    rows, query = _run(out.selectExpr("*", "unix_millis(window_start) as ws", "unix_millis(window_end) as we",
                                      "unix_millis(timestamp) as ts_ms"), tmp_path)
    got = Counter(pane_tuple({**row.asDict(), "value": _sorted_records(row["value"])}) for row in rows)
    assert got == expected
    # its counts under its name in the observed metrics, as a Python stage's
    observed = [p.observedMetrics.get(feed_of(out).observation) for p in query.recentProgress]
    assert sum(m["panes"] for m in observed if m) == len(rows)
    assert all(m["late_rows_dropped"] == 0 and m["bad_rows"] == 0 for m in observed if m)


PYTHON = {
    "off by default": (lambda: counts().then(WindowedOperator(None, Max())), None),
    "sessions upstream": (lambda: counts(SessionWindows(4_000)).then(WindowedOperator(None, Sum())), "true"),
    "allowed lateness upstream": (lambda: counts(lateness=5_000).then(WindowedOperator(None, Sum())), "true"),
    "early firings downstream": (lambda: counts().then(WindowedOperator(None, Sum(), trigger=EARLY)), "true"),
    "no Spark aggregate": (lambda: counts().then(WindowedOperator(None, Mean())), "true"),
    "a retracting upstream summed by another attribute": (lambda: counts(
        trigger=EARLY.accumulating_and_retracting_fired_panes()).then(
        KeyedWindowedOperator(None, Sum(), key="window_start", value="index")), "true"),
    "keyed by the value": (lambda: counts().then(KeyedWindowedOperator(None, Count(), key="value", value="value")),
                           "true"),
    "a time of its own": (lambda: counts().then(WindowedOperator(None, Max(), timestamp="window_start")), "true"),
    "a declared output type": (lambda: counts().then(WindowedOperator(None, Max(), value_type="double")), "true"),
    "a retraction that is no negation": (lambda: counts(
        trigger=EARLY.accumulating_and_retracting_fired_panes(), acc=RetractedAsItself()).then(
        WindowedOperator(None, Sum())), "true"),
    "a callable key": (lambda: counts().then(KeyedWindowedOperator(None, Sum(), key=len, value="value", key_type="int")), "true"),
}


@pytest.mark.parametrize("case", sorted(PYTHON))
def test_stages_outside_the_rule_keep_the_python_plan(spark, tmp_path, case):
    make, setting = PYTHON[case]
    chain = make()
    (tmp_path / "src").mkdir()
    with native_stages(spark, setting) if setting else _nothing():
        out = chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN)
    assert not feed_of(out).native_stage
    assert stateful_python_operators(out) == 2


def test_an_ansi_off_session_keeps_a_sum_stage_in_python(spark, tmp_path):
    """Spark's sum wraps past 64 bits without ANSI mode, where the Python stage's sum is an error."""
    (tmp_path / "src").mkdir()
    chain = counts().then(WindowedOperator(None, Sum()))
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        with native_stages(spark):
            assert not feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN)).native_stage
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    with native_stages(spark):
        assert feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN)).native_stage


def test_in_a_chain_of_three_only_the_last_stage_may_run_natively(spark, tmp_path):
    (tmp_path / "src").mkdir()
    chain = counts().then(KeyedWindowedOperator(None, Sum())).then(WindowedOperator(None, Max()))
    with native_stages(spark):
        out = chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN)
    assert feed_of(out).native_stage
    assert stateful_python_operators(out) == 2  # the first two stages


def stateful_python_operators(df) -> int:
    return df._jdf.queryExecution().logical().toString().count("TransformWithStateInPySpark")


@contextmanager
def _nothing():
    yield


def test_a_stage_after_a_native_stage_is_refused_with_the_setting_named(spark, tmp_path):
    (tmp_path / "src").mkdir()
    with native_stages(spark):
        out = counts().then(KeyedWindowedOperator(None, Sum())).apply(_source(spark, tmp_path),
                                                                      end_of_input=END_COLUMN)
        with pytest.raises(SparkOperatorError, match=NATIVE_STAGES_CONF.replace(".", r"\.")):
            KeyedWindowedOperator(None, Count()).apply(out)


def test_apply_told_a_new_checkpoint_plans_native_stages_and_the_checkpoint_keeps_them(spark, tmp_path):
    """``apply(df, checkpoint=...)`` sees whether the query is new: a new checkpoint gets native stages
    (recorded beside Spark's files); a restart plans what the checkpoint records, whatever the session
    says now; a session's setting given for a new checkpoint wins (``checkpoint_settings``)."""
    import json

    from windowed_operator.spark.base.checkpoint_record import RECORD

    (tmp_path / "src").mkdir()
    chain = counts().then(WindowedOperator(None, Max()))
    new = tmp_path / "new"
    out = chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=str(new))
    assert feed_of(out).native_stage and stateful_python_operators(out) == 1
    assert json.loads((new / RECORD).read_text())[NATIVE_STAGES_CONF] is True
    _started(new)
    assert feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=str(new))).native_stage
    with native_stages(spark, "false"), pytest.raises(SparkOperatorError, match=r"was started with true"):
        chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=str(new))
    with native_stages(spark, "false"):
        off = chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=str(tmp_path / "off"))
    assert not feed_of(off).native_stage and stateful_python_operators(off) == 2
    assert json.loads((tmp_path / "off" / RECORD).read_text())[NATIVE_STAGES_CONF] is False


def test_a_checkpoint_started_without_the_setting_recorded_keeps_the_sessions_setting(spark, tmp_path):
    """A checkpoint an ``apply`` not told it started (or one from before the record) was planned with
    the session's setting then: off, unless the session gives it now; nothing is recorded in it (what
    the session had then cannot be told here), and a record in a directory Spark never started binds
    nothing."""
    from windowed_operator.spark.base.checkpoint_record import read_record

    (tmp_path / "src").mkdir()
    chain = counts().then(WindowedOperator(None, Max()))
    old = _started(tmp_path / "old")
    out = chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=old)
    assert not feed_of(out).native_stage and stateful_python_operators(out) == 2
    given = _started(tmp_path / "given")
    with native_stages(spark):
        assert feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=given)).native_stage
    assert not feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=given)).native_stage
    for started in ("old", "given"):
        assert NATIVE_STAGES_CONF not in read_record(str(tmp_path / started))
    # applied told a new checkpoint, never started, then applied again under another setting
    fresh = str(tmp_path / "fresh")
    assert feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=fresh)).native_stage
    with native_stages(spark, "false"):
        assert not feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=fresh)).native_stage
    # not told the checkpoint: the session's setting, off by default
    assert not feed_of(chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN)).native_stage


def test_a_chain_told_its_checkpoint_restarts_native_and_gives_the_local_chains_panes(spark, tmp_path):
    """Run to the middle of the input, then restarted told the checkpoint: the same native plan, and
    the panes of the two runs are those of one local run."""
    import shutil

    chain = NATIVE["hopping-count-then-max"]()
    batches = make_batches(7, n_batches=6)
    expected = Counter((r.key, shown_time(r.window_start), shown_time(r.window_end), _sorted_records(r.value),
                        r.timing.value, r.index, r.is_first, r.is_last, r.is_retraction, shown_time(r.timestamp))
                       for r in run_local_like_spark(chain, batches, DELAY).outputs)
    write_batches(tmp_path / "all", batches)
    files = sorted((tmp_path / "all").iterdir())
    (tmp_path / "src").mkdir()
    rows = []
    for part in (files[:3], files[3:]):
        for file in part:
            shutil.copy2(file, tmp_path / "src" / file.name)  # (its time too: the source reads files in time order)
        out = chain.apply(_source(spark, tmp_path), end_of_input=END_COLUMN, checkpoint=str(tmp_path / "checkpoint"))
        assert feed_of(out).native_stage
        more, _ = _run(out.selectExpr("*", "unix_millis(window_start) as ws", "unix_millis(window_end) as we",
                                      "unix_millis(timestamp) as ts_ms"), tmp_path)
        rows += more
    assert expected and Counter(pane_tuple(row.asDict()) for row in rows) == expected


def test_the_setting_takes_only_true_or_false(spark, tmp_path):
    (tmp_path / "src").mkdir()
    with native_stages(spark, "yes"):
        with pytest.raises(SparkOperatorError, match="nativeStages must be true or false, not 'yes'"):
            counts().then(WindowedOperator(None, Max())).apply(_source(spark, tmp_path), end_of_input=END_COLUMN)


class NullWhenEven(Accumulation):
    """A count whose output is null when it is even: a custom upstream whose panes may hold null."""

    def default_accumulated_value(self):
        return 0

    def accumulate(self, accumulated, value):
        return accumulated + 1

    def merge(self, a1, a2):
        return a1 + a2

    def get_output(self, accumulated):
        return None if accumulated % 2 == 0 else accumulated


def _run(out, tmp_path):
    rows = []
    query = (out.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    finally:
        query.stop()
    return rows, query


def test_a_null_value_stops_the_query_naming_the_window_as_the_python_stage_refuses_it(spark, tmp_path):
    """Spark's sum would skip the null: the native stage stops the query instead (on_bad_element='raise')."""
    from .harness import BASE

    write_batches(tmp_path / "src", [[{"user": "a", "amount": 1, "ts": BASE + 1_000},
                                      {"user": "a", "amount": 1, "ts": BASE + 2_000},
                                      {"user": "b", "amount": 1, "ts": BASE + 3_000}]])
    upstream = counts(TimeWindows(10_000), acc=NullWhenEven(), value_type="bigint")
    with native_stages(spark):
        out = upstream.then(WindowedOperator(None, Sum(), name="total")).apply(_source(spark, tmp_path),
                                                                             end_of_input=END_COLUMN)
        assert feed_of(out).native_stage
        with pytest.raises(Exception, match=r"operator 'total': a pane of .* has a null value \(window "
                                            rf"{BASE}, {BASE + 10_000} ms\)"):
            _run(out, tmp_path)

