"""Exactly-once restart from a checkpoint, late-data output on Spark, and clear user errors."""
import json
import warnings
from collections import Counter

import pytest
from pyspark.errors import StreamingQueryException

from accumulations import Combine, Mean, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder
from windowed_operator.spark.base.errors import SparkOperatorError

from .harness import BASE, END_COLUMN, MARKED_SCHEMA, SCHEMA, local_panes, pane_tuple, run_local_like_spark, run_spark, write_batches

pytestmark = pytest.mark.spark

DELAY = 2_000


def session_op(**kw):
    trig = (TriggerOption.at_watermark().with_early_firings_at_every(count=1).with_late_firings_at_every(count=1)
            .accumulating_and_retracting_fired_panes())
    return KeyedWindowedOperator(SessionWindows(3_000), Sum("amount"), trigger=trig, allowed_lateness=20_000,
                                 key="user", timestamp="ts", watermark=bounded_disorder(DELAY), **kw)


BATCHES = [
    [{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "b", "amount": 2, "ts": BASE + 1_500}],
    [{"user": "a", "amount": 3, "ts": BASE + 3_000}],
    [{"user": "a", "amount": 4, "ts": BASE + 12_000}, {"user": "b", "amount": 1, "ts": BASE + 14_000}],
    # after the restart: a late row within allowed lateness that bridges a's first two sessions
    [{"user": "a", "amount": 5, "ts": BASE + 5_500}],
    [{"user": "a", "amount": 6, "ts": BASE + 30_000}],
]


def _file_sink(directory):
    directory.mkdir(parents=True, exist_ok=True)

    def write(batch_df, batch_id):
        rows = batch_df.selectExpr("*", "unix_millis(window_start) as ws", "unix_millis(window_end) as we",
                                   "unix_millis(timestamp) as ts_ms").drop("window_start", "window_end",
                                                                          "timestamp").collect()
        tmp = directory / f".batch-{batch_id:05d}.tmp"
        tmp.write_text("".join(json.dumps(r.asDict(), default=str) + "\n" for r in rows))
        tmp.replace(directory / f"batch-{batch_id:05d}.json")  # idempotent: a replayed batch overwrites itself
    return write


def _read_sink(directory):
    rows = []
    for path in sorted(directory.glob("batch-*.json")):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return Counter(pane_tuple(r) for r in rows)


def test_restart_from_checkpoint_equals_one_uninterrupted_run(spark, tmp_path):
    op = session_op()
    expected = local_panes(run_local_like_spark(op, BATCHES, DELAY))
    source, sink, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"

    def run_available():
        df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        query = (op.apply(df, end_of_input=END_COLUMN).writeStream.foreachBatch(_file_sink(sink)).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()

    write_batches(source, BATCHES[:3], flush=False)
    run_available()
    first_run = _read_sink(sink)
    # the second half arrives while the query is down
    all_files = write_batches(tmp_path / "staging", BATCHES)
    for i in range(3, len(all_files)):
        (tmp_path / "staging" / f"batch-{i:05d}.json").replace(source / f"batch-{i:05d}.json")
    run_available()
    combined = _read_sink(sink)
    assert first_run and combined != first_run
    assert combined == expected
    late_merge = [p for p in combined if p[0] == "a" and p[1] == BASE + 1_000 and p[2] == BASE + 8_500]
    assert late_merge, "the late row after the restart merged a's sessions"


def test_late_rows_beyond_lateness_go_to_the_late_data_output(spark, tmp_path):
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                               watermark=bounded_disorder(DELAY), late_data_output=True)
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}],
               [{"user": "a", "amount": 2, "ts": BASE + 25_000}],
               [{"user": "a", "amount": 7, "ts": BASE + 2_000}, {"user": "a", "amount": 3, "ts": BASE + 24_000}]]
    runner = run_local_like_spark(op, batches, DELAY)
    store = run_spark(spark, op, batches, tmp_path)
    rows = [r for b in store.values() for r in b]
    late = [r for r in rows if r["record_type"] == "late"]
    assert [(r["key"], r["reason"], json.loads(r["element"])["amount"]) for r in late] == [("a", "expired", 7)]
    assert runner.dropped_counts == {"expired": 1}
    assert Counter(pane_tuple(r) for r in rows if r["record_type"] == "pane") == local_panes(runner)


def test_bad_rows_go_to_dead_letters_on_spark(spark, tmp_path):
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                               watermark=bounded_disorder(DELAY), on_bad_element="dead_letter")
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "a", "amount": 2, "ts": None}]]
    rows = [r for b in run_spark(spark, op, batches, tmp_path).values() for r in b]
    assert [(r["record_type"], r["reason"]) for r in rows if r["record_type"] != "pane"] == [
        ("dead_letter", "missing_timestamp")]
    assert [r["value"] for r in rows if r["record_type"] == "pane"] == [1]


def _stream(spark, tmp_path):
    (tmp_path / "in").mkdir(exist_ok=True)
    return spark.readStream.schema(SCHEMA).json(str(tmp_path / "in"))


def test_missing_timestamp_column_is_named(spark, tmp_path):
    op = KeyedWindowedOperator(TimeWindows(10), Sum("amount"), key="user", timestamp="event_time")
    with pytest.raises(SparkOperatorError, match="'event_time'"):
        op.apply(_stream(spark, tmp_path))


def test_non_streaming_dataframe_is_refused(spark):
    op = KeyedWindowedOperator(TimeWindows(10), Sum("amount"), key="user", timestamp="ts")
    with pytest.raises(SparkOperatorError, match="streaming"):
        op.apply(spark.createDataFrame([("a", 1, 2)], SCHEMA))


def test_unmappable_output_type_is_named(spark, tmp_path):
    acc = Combine(list, lambda a, x: a + [x], lambda a, b: a + b, lambda a: {"n": len(a)})
    op = KeyedWindowedOperator(TimeWindows(10), acc, key="user", timestamp="ts", watermark=bounded_disorder(5))
    with pytest.raises(SparkOperatorError, match="Combine.*value_type"):
        op.apply(_stream(spark, tmp_path))


def test_upstream_watermark_needs_with_watermark(spark, tmp_path):
    op = KeyedWindowedOperator(TimeWindows(10), Sum("amount"), key="user", timestamp="ts")
    with pytest.raises(SparkOperatorError, match="withWatermark"):
        op.apply(_stream(spark, tmp_path))


def test_wrong_timestamp_type_is_named(spark, tmp_path):
    op = KeyedWindowedOperator(TimeWindows(10), Sum("amount"), key="user", timestamp="user",
                               watermark=bounded_disorder(5))
    with pytest.raises(SparkOperatorError, match="'user' has type string"):
        op.apply(_stream(spark, tmp_path))


def test_a_null_row_fails_the_preaggregated_query_with_the_processors_error(spark, tmp_path):
    """Pre-aggregation drops nothing silently: a row with a null time raises the same error as the
    element path (on_bad_element="raise")."""
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                               watermark=bounded_disorder(DELAY))
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "a", "amount": 2, "ts": None}]]
    with pytest.raises(Exception, match="missing_timestamp"):
        run_spark(spark, op, batches, tmp_path)


#: One of the bad rows' errors (either may be met first); a null prints as None on every path.
NULL_FIELD_OR_KEY = r"invalid_value\): value field 'amount' is null \(None\)|missing_key\): key is null \(None\)"
BAD_ROWS = [[{"user": "a", "amount": 5, "ts": BASE + 1_000}, {"user": "a", "amount": 6, "ts": BASE + 2_000},
             {"user": "a", "amount": "abc", "ts": BASE + 3_000},  # the JSON reader turns it into a null
             {"user": "a", "amount": 7, "ts": BASE + 4_000}, {"user": None, "amount": 3, "ts": BASE + 5_000}]]
PATHS = {"element": ({"vectorized": False}, TriggerOption.default()),
         "array": ({}, TriggerOption.at_watermark().with_early_firings_at_every(count=100)),
         "columnar": ({"preaggregate": False}, TriggerOption.default()),
         "preaggregated": ({}, TriggerOption.default())}


@pytest.mark.parametrize("path", ["element", "array", "columnar"])
def test_one_bad_element_rule_on_every_path_dead_letters(spark, tmp_path, path):
    """A null key and a value the reader could not type are dead letters with their reason on every
    path; the good rows still sum; the dead letters' JSON keeps integers and has no NaN."""
    options, trigger = PATHS[path]
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts", trigger=trigger,
                               watermark=bounded_disorder(DELAY), on_bad_element="dead_letter")
    rows = [r for b in run_spark(spark, op, BAD_ROWS, tmp_path, **options).values() for r in b]
    assert [(r["key"], r["value"]) for r in rows if r["record_type"] == "pane"] == [("a", 18)]
    dead = sorted((r["reason"], r["element"]) for r in rows if r["record_type"] == "dead_letter")
    assert [reason for reason, _ in dead] == ["invalid_value", "missing_key"]
    assert json.loads(dead[0][1]) == {"user": "a", "amount": None, "ts": BASE + 3_000}
    assert json.loads(dead[1][1]) == {"user": None, "amount": 3, "ts": BASE + 5_000}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_one_bad_element_rule_on_every_path_raises(spark, tmp_path, path):
    options, trigger = PATHS[path]
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts", trigger=trigger,
                               watermark=bounded_disorder(DELAY))
    # the two bad rows are in different key groups: either may be met first
    with pytest.raises(Exception, match=NULL_FIELD_OR_KEY):
        run_spark(spark, op, BAD_ROWS, tmp_path, **options)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_int64_overflow_is_the_same_error_on_every_path(spark, tmp_path, path):
    """A Sum past 2^63 - 1 wraps nowhere (Arrow's and numpy's sums would): the query fails with one
    message naming the operator, the column, the key and the window."""
    options, trigger = PATHS[path]
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts", trigger=trigger,
                               watermark=bounded_disorder(DELAY), name="totals")
    batches = [[{"user": "a", "amount": 2 ** 62, "ts": BASE + i} for i in range(3)]]
    with pytest.raises(Exception, match=(
            rf"operator 'totals': the value of window \[{BASE}, {BASE + 10_000}\) of key 'a' over column 'amount' "
            rf"is {3 * 2 ** 62}, which does not fit a 64-bit integer")):
        run_spark(spark, op, batches, tmp_path, **options)


@pytest.mark.parametrize("watermark", ["idle timeout", "partition"])  # (ProcessingTime and EventTime mode)
def test_int64_overflow_is_the_same_error_in_every_time_mode(spark, tmp_path, watermark):
    """Heartbeats (an idle timeout, a per-partition watermark) and ProcessingTime mode change nothing:
    the sum is caught as integers, before any float conversion (a heartbeat's null in an integer
    column made the frame's column float: ``scan.heartbeat.filler``), with the one message."""
    idle = {"idle timeout": 60_000, "partition": None}[watermark]
    part = None if watermark == "idle timeout" else "user"
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts", name="totals",
                               watermark=bounded_disorder(DELAY, idle_timeout=idle, partition=part))
    batches = [[{"user": "a", "amount": 2 ** 62, "ts": BASE + i} for i in range(3)],
               [{"user": "a", "amount": 1, "ts": BASE + 20_000}]]
    with pytest.raises(Exception, match=(
            rf"operator 'totals': the value of window \[{BASE}, {BASE + 10_000}\) of key 'a' over column 'amount' "
            rf"is {3 * 2 ** 62}, which does not fit a 64-bit integer")):
        run_spark(spark, op, batches, tmp_path, **({"clock_times": [1_000_000, 1_001_000]} if idle else {}))


# -- restarts with a changed operator ----------------------------------------------------------------
RESTART_BATCHES = [
    [{"user": u, "amount": i + 1, "ts": BASE + 1_000 * i + 7 * j} for j, u in enumerate("abcdefgh")]
    for i in range(4)
] + [[{"user": u, "amount": 10, "ts": BASE + 25_000 + j} for j, u in enumerate("abcdefgh")]]


def _tumbling(**kw):
    options = dict(key="user", timestamp="ts", watermark=bounded_disorder(DELAY))
    options.update(kw)
    window = options.pop("window", TimeWindows(10_000))
    accumulation = options.pop("accumulation", Sum("amount"))
    return KeyedWindowedOperator(window, accumulation, **options)


def _run_in_two_halves(spark, tmp_path, first, second, second_options=None, between=lambda: None, split=2,
                       first_options=None):
    """Run ``first`` over the first batches, then ``second`` over the rest from the same checkpoint."""
    source, sink, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"

    def run_available(op, options):
        df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        query = (op.apply(df, end_of_input=END_COLUMN, **options).writeStream.foreachBatch(_file_sink(sink))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination()

    all_files = write_batches(tmp_path / "staging", RESTART_BATCHES)
    source.mkdir()
    for i in range(split):
        (tmp_path / "staging" / f"batch-{i:05d}.json").replace(source / f"batch-{i:05d}.json")
    run_available(first, first_options or {})
    between()
    for i in range(split, len(all_files)):
        (tmp_path / "staging" / f"batch-{i:05d}.json").replace(source / f"batch-{i:05d}.json")
    run_available(second, second_options or {})
    return _read_sink(sink)


@pytest.mark.parametrize("second, second_options, named", [
    (_tumbling(window=TimeWindows(20_000)), {}, "window changed from TimeWindows(size=10000"),
    (_tumbling(), {"key_groups": 3}, "key groups changed from 16 to 3"),
    (_tumbling(accumulation=Mean("amount")), {}, "accumulation changed from Sum(field='amount') to Mean"),
], ids=["window size", "key groups", "accumulation"])
def test_a_restart_the_state_cannot_follow_is_refused_naming_what_changed(spark, tmp_path, second, second_options,
                                                                          named):
    with pytest.raises(StreamingQueryException) as caught:
        _run_in_two_halves(spark, tmp_path, _tumbling(), second, second_options)
    assert named in str(caught.value)


def test_safe_changes_and_another_session_continue_exactly(spark, tmp_path):
    """Lateness (lowered), outputs and accumulating -> retracting may change; the session's shuffle partition
    count may too (the checkpoint keeps its own, and key groups never follow it).  (The default
    trigger's columnar state has no retracting form: that change is refused as a layout change.)  Both
    runs are told the checkpoint (``apply(checkpoint=...)``): the first start on 2 state partitions takes
    16 key groups placed 8 to a partition (``driver.key_groups``) and keeps them in the checkpoint, and the
    restart under 5 shuffle partitions reads them back."""
    from windowed_operator.spark.driver.key_groups import RECORD, balanced_values

    late_firings = TriggerOption.at_watermark().with_late_firings_at_every(count=1)
    first = _tumbling(trigger=late_firings.accumulating_fired_panes(), allowed_lateness=5_000)
    second = _tumbling(allowed_lateness=1_000, late_data_output=True,
                       trigger=late_firings.accumulating_and_retracting_fired_panes())
    expected = local_panes(run_local_like_spark(first, RESTART_BATCHES, DELAY))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    told = {"checkpoint": str(tmp_path / "checkpoint")}
    try:
        rows = _run_in_two_halves(spark, tmp_path, first, second, first_options=told, second_options=told,
                                  between=lambda: spark.conf.set("spark.sql.shuffle.partitions", "5"))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert rows == expected
    on_time = Counter((p[0], p[1]) for p in rows if p[4] == "ON_TIME")
    assert len(on_time) == 16 and set(on_time.values()) == {1}, "every window fired one whole ON_TIME pane"
    assert before == "2" and json.loads((tmp_path / "checkpoint" / RECORD).read_text()) == {
        "key_groups": 16, "values": list(balanced_values(16, 2)), "partitions_at_first_start": 2}


@pytest.mark.parametrize("options", [{}, {"preaggregate": False}], ids=["chained", "rows"])
def test_sessions_chained_in_the_scan_stage_raise_the_same_errors(spark, tmp_path, options):
    """Sessions chained before the shuffle (``prechain``) follow the one bad-element rule and name an
    int64 overflow as the rows handed one by one do (values that could wrap go element by element)."""
    op = KeyedWindowedOperator(SessionWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                               watermark=bounded_disorder(DELAY), name="totals")
    with pytest.raises(Exception, match=NULL_FIELD_OR_KEY):
        run_spark(spark, op, BAD_ROWS, tmp_path / "bad", **options)
    batches = [[{"user": "a", "amount": 2 ** 62, "ts": BASE + i} for i in range(3)]]
    with pytest.raises(Exception, match=(
            rf"operator 'totals': the value of window \[{BASE}, {BASE + 10_002}\) of key 'a' over column 'amount' "
            rf"is {3 * 2 ** 62}, which does not fit a 64-bit integer")):
        run_spark(spark, op, batches, tmp_path / "overflow", **options)
