"""Merge operators on Spark: the same panes as the local runner, and joins equal to brute force."""
import random
from collections import Counter, defaultdict

import pytest

from accumulations.merge import Cogroup, InnerJoin, LeftOuterJoin
from triggers import TriggerOption
from windowed_operator import (KeyedWindowedMergeOperator, SessionWindows, TimeWindows, UpstreamWatermark,
                               bounded_disorder)
from windowed_operator.elements import element_json
from windowed_operator.merge_operator import InputOptions
from windowed_operator.spark.base.errors import SparkOperatorError

from .harness import BASE, RIGHT_SCHEMA, SCHEMA, run_local_merge_like_spark, run_spark_merge, spark_watermarks

pytestmark = pytest.mark.spark

DELAY = 3_000
RETRACTING = (TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
              .accumulating_and_retracting_fired_panes())


def make_sides(seed: int, n_batches: int = 5):
    """Clicks (left) and page views (right); the views' event times run 5 s behind the clicks', so
    the right input holds the watermark back; some rows of both are late."""
    rng = random.Random(seed)
    left, right = [], []
    for b in range(n_batches):
        front = BASE + 6_000 * (b + 1)
        left.append([{"user": rng.choice("ab"), "amount": rng.randint(1, 9), "ts": front - rng.randint(0, 9_000)}
                     for _ in range(4)])
        right.append([{"user": rng.choice("ab"), "page": rng.choice(["home", "cart", "buy"]),
                       "ts": front - 5_000 - rng.randint(0, 9_000)} for _ in range(4)])
    return left, right


def merge_op(window, acc, trigger, lateness=6_000):
    return KeyedWindowedMergeOperator(window, acc, trigger=trigger, allowed_lateness=lateness, key="user",
                                      timestamp="ts", watermark=bounded_disorder(DELAY),
                                      left=InputOptions(value="amount"), right=InputOptions(value="page"))


def normalize(value):
    if isinstance(value, dict) or hasattr(value, "asDict"):
        value = value if isinstance(value, dict) else value.asDict()
        return (tuple(sorted(value["left"])), tuple(sorted(value["right"])))
    return tuple(sorted((tuple(p) if not hasattr(p, "asDict") else (p["left"], p["right"])) for p in value))


def spark_rows(store):
    return Counter((r["key"], r["ws"], r["we"], normalize(r["value"]), r["timing"], r["pane_index"], r["is_first"],
                    r["is_last"], r["is_retraction"], r["ts_ms"]) for rows in store.values() for r in rows)


def local_rows(runner):
    return Counter((p.key, p.window_start, p.window_end, normalize(p.value), p.timing.value, p.index, p.is_first,
                    p.is_last, p.is_retraction, p.timestamp) for p in runner.outputs)


CASES = {
    "tumbling-inner-join-early-late-retracting": (TimeWindows(10_000), InnerJoin(), RETRACTING, 11),
    "hopping-left-outer-default": (TimeWindows(10_000).slide_by(5_000), LeftOuterJoin(), TriggerOption.default(), 12),
    "sessions-cogroup-early-late-retracting": (SessionWindows(4_000), Cogroup(), RETRACTING, 13),
    # (no allowed lateness: the window log, ``windowed_operator.state.window_log``)
    "tumbling-inner-join-default-no-lateness": (TimeWindows(10_000), InnerJoin(), TriggerOption.default(), 14, 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_merge_on_spark_equals_local_runner(spark, tmp_path, case):
    window, acc, trigger, seed, *lateness = CASES[case]
    op = merge_op(window, acc, trigger, *lateness)
    left, right = make_sides(seed)
    expected = local_rows(run_local_merge_like_spark(op, left, right, DELAY))
    got = spark_rows(run_spark_merge(spark, op, left, right, tmp_path))
    assert got == expected
    if trigger is RETRACTING:  # the data exercises what the case is about
        assert any(row[8] for row in expected), "no retraction in the expected panes"


@pytest.mark.parametrize("lateness", [0, 30_000], ids=["window-log", "per-key"])
def test_an_inner_join_emits_nothing_for_windows_where_one_side_arrived(spark, tmp_path, lateness):
    """As SQL, Flink and Beam users expect: user b only clicks, user c only views, a's second window
    has views only; only a's first window, which has both, emits a pane (Spark equals local)."""
    left = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "b", "amount": 2, "ts": BASE + 2_000}],
            [{"user": "b", "amount": 3, "ts": BASE + 12_000}], [{"user": "b", "amount": 4, "ts": BASE + 40_000}]]
    right = [[{"user": "a", "page": "home", "ts": BASE + 3_000}, {"user": "c", "page": "cart", "ts": BASE + 4_000}],
             [{"user": "a", "page": "buy", "ts": BASE + 14_000}], [{"user": "c", "page": "home", "ts": BASE + 40_000}]]
    op = merge_op(TimeWindows(10_000), InnerJoin(), TriggerOption.default(), lateness)
    store = run_spark_merge(spark, op, left, right, tmp_path)
    assert spark_rows(store) == local_rows(run_local_merge_like_spark(op, left, right, DELAY))
    assert [(r["key"], r["ws"], normalize(r["value"])) for rows in store.values() for r in rows] == [
        ("a", BASE, ((1, "home"),))]


def test_inner_join_on_spark_equals_brute_force(spark, tmp_path):
    """Independently of the local runner: the panes net (pairs minus retracted pairs) to the cross
    product of every row that was not late, with lateness judged by the minimum watermark."""
    lateness = 2_000
    op = merge_op(TimeWindows(10_000), InnerJoin(), RETRACTING, lateness=lateness)
    left, right = make_sides(21)
    marks = spark_watermarks({"left": left, "right": right}, DELAY)
    kept = defaultdict(lambda: ([], []))
    for i, batch in enumerate(zip(left, right)):
        watermark = min(marks[i].values())
        for side, rows in enumerate(batch):
            for row in rows:
                start = row["ts"] - (row["ts"] - BASE) % 10_000
                if watermark < start + 10_000 - 1 + lateness:
                    kept[(row["user"], start)][side].append(row["amount"] if side == 0 else row["page"])
    expected = {k: Counter((a, p) for a in lefts for p in rights) for k, (lefts, rights) in kept.items()}
    store = run_spark_merge(spark, op, left, right, tmp_path)
    net = defaultdict(Counter)
    for rows in store.values():
        for r in rows:
            for pair in r["value"]:
                net[(r["key"], r["ws"])][(pair["left"], pair["right"])] += -1 if r["is_retraction"] else 1
    assert {k: +v for k, v in net.items() if +v} == {k: v for k, v in expected.items() if v}
    assert sum(len(v) for v in expected.values()) > 10
    assert all(-v == Counter() for v in net.values())


def test_merge_errors_name_the_input_and_column(spark, tmp_path):
    left = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    right = spark.readStream.schema(RIGHT_SCHEMA).json(str(tmp_path))
    op = merge_op(TimeWindows(10_000), InnerJoin(), TriggerOption.default())
    with pytest.raises(SparkOperatorError, match="right timestamp column 'when' is not in the DataFrame"):
        op.apply(left, right, right_timestamp="when")
    with pytest.raises(SparkOperatorError, match="right input.*needs a streaming DataFrame"):
        op.apply(left, spark.createDataFrame([("a", "x", 1)], RIGHT_SCHEMA))
    with pytest.raises(SparkOperatorError, match="key columns differ in type: left 'user' is string, right 'amount' "
                                                 "is bigint"):
        op.apply(left, left, right_key="amount")
    with pytest.raises(SparkOperatorError, match=r"idle timeouts on Spark need watermark=bounded_disorder\(...\)"):
        op.model_copy(update={"idle_timeout": 5000, "watermark": UpstreamWatermark()}).apply(left, right)
    with pytest.raises(SparkOperatorError, match="cannot map the output of InnerJoin"):
        merge_op(TimeWindows(10_000), InnerJoin(lambda a, b: a), TriggerOption.default()).apply(left, right)


def test_a_join_on_the_array_path_reports_late_rows_and_dead_letters_as_the_local_runner(spark, tmp_path):
    """The window log's batch of arrays (tumbling, the default trigger, no allowed lateness): rows
    with a null value field are dead letters (the element path's rule), rows whose window expired
    are late data carrying ``(side, value)``, and the panes equal the local runner's."""
    import json

    op = merge_op(TimeWindows(10_000), InnerJoin(), TriggerOption.default(), lateness=0).model_copy(
        update={"late_data_output": True, "on_bad_element": "dead_letter"})
    left, right = make_sides(31, n_batches=6)
    left[2][0]["amount"] = None
    right[3][1]["page"] = None
    for batch in (4, 5):  # the first window expired by then (the watermark is past BASE + 10 s)
        left[batch].append({"user": "a", "amount": 3, "ts": BASE + 500 + batch})
        right[batch].append({"user": "b", "page": "home", "ts": BASE + 9_999})
    runner = run_local_merge_like_spark(op, left, right, DELAY)
    store = run_spark_merge(spark, op, left, right, tmp_path)
    rows = [r for batch in store.values() for r in batch]
    panes = Counter((r["key"], r["ws"], r["we"], normalize(r["value"]), r["timing"], r["pane_index"], r["is_first"],
                     r["is_last"], r["is_retraction"], r["ts_ms"]) for r in rows if r["record_type"] == "pane")
    assert panes == local_rows(runner)
    canonical = lambda text: json.dumps(json.loads(text), sort_keys=True)  # noqa: E731
    # a late element is its input's row (times in epoch ms), its input named, as the local runner's
    late = Counter((r["input"], canonical(r["element"])) for r in rows if r["record_type"] == "late")
    assert late == Counter((d.input, canonical(element_json(d.element))) for d in runner.late_data)
    assert sum(late.values()) >= 3 and {side for side, _ in late} == {"left", "right"}, "the data has late rows"
    dead = sorted((r["input"], r["reason"]) for r in rows if r["record_type"] == "dead_letter")
    assert dead == sorted((d.input, d.reason.value) for d in runner.dead_letters) == [
        ("left", "invalid_value"), ("right", "invalid_value")]
    # a dead letter is the input's row, as the local runner keeps it (not the union's internal columns)
    assert sorted(json.dumps(json.loads(r["element"]), sort_keys=True) for r in rows
                  if r["record_type"] == "dead_letter") == sorted(
        json.dumps(d.element, sort_keys=True) for d in runner.dead_letters)


def _plain(value):
    """A pane value as the local runner gives it: Spark's rows as dicts, a pair struct as a tuple."""
    if hasattr(value, "asDict"):
        value = value.asDict(recursive=True)
    if isinstance(value, dict) and set(value) == {"left", "right"}:
        return (_plain(value["left"]), _plain(value["right"]))
    if isinstance(value, dict):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(sorted((_plain(v) for v in value), key=repr))
    return value


@pytest.mark.parametrize("trigger,lateness", [(TriggerOption.default(), 0), (RETRACTING, 6_000)],
                         ids=["window-log", "retracting"])
def test_value_records_of_a_merge_reach_the_panes_as_the_local_runner_reads_them(spark, tmp_path, trigger, lateness):
    """A record of fields per input ({output field: column}): the pane type is the struct of those
    columns' types (it was each input's whole row, which turned every record into nulls), on the
    array path (the window log) and the element path alike; a null field makes the row a dead letter."""
    op = KeyedWindowedMergeOperator(TimeWindows(10_000), InnerJoin(), trigger=trigger, allowed_lateness=lateness,
                                    key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
                                    left=InputOptions(value={"amt": "amount"}),
                                    right=InputOptions(value={"p": "page", "t": "ts"}),
                                    on_bad_element="dead_letter")
    left, right = make_sides(5)
    right[1][0]["page"] = None
    runner = run_local_merge_like_spark(op, left, right, DELAY)
    expected = Counter((p.key, p.window_start, p.window_end, _plain(p.value), p.is_retraction)
                       for p in runner.outputs)
    store = run_spark_merge(spark, op, left, right, tmp_path)
    rows = [r for batch in store.values() for r in batch]
    got = Counter((r["key"], r["ws"], r["we"], _plain(r["value"]), r["is_retraction"])
                  for r in rows if r["record_type"] == "pane")
    assert got == expected
    pairs = [pair for (_, _, _, value, _) in expected for pair in value]
    assert pairs and all(dict(left_record)["amt"] is not None and dict(right_record)["p"] for left_record, right_record
                         in pairs)
    assert [r["reason"] for r in rows if r["record_type"] == "dead_letter"] == ["invalid_value"]


def test_merge_value_records_and_callables_get_their_types_or_a_clear_error(spark, tmp_path):
    left = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    right = spark.readStream.schema(RIGHT_SCHEMA).json(str(tmp_path))
    base = merge_op(TimeWindows(10_000), Cogroup(), TriggerOption.default())
    records = base.model_copy(update={"left": InputOptions(value={"amt": "amount"}),
                                      "right": InputOptions(value={"p": "page"})})
    value = records.apply(left, right).schema["value"].dataType.simpleString()
    assert value == "struct<left:array<struct<amt:bigint>>,right:array<struct<p:string>>>"
    with pytest.raises(SparkOperatorError, match=r"right value record fields \{'p': 'pages'\} name columns that are "
                                                 "not in the right DataFrame"):
        records.model_copy(update={"right": InputOptions(value={"p": "pages"})}).apply(left, right)
    called = base.model_copy(update={"right": InputOptions(value=lambda row: row["page"].upper())})
    with pytest.raises(SparkOperatorError, match="over inputs bigint and of a callable value extractor to a Spark "
                                                 "type; pass value_type="):
        called.apply(left, right)
    assert called.apply(left, right, value_type="struct<left:array<bigint>,right:array<string>>") is not None
    marked_left = spark.readStream.schema(f"{SCHEMA}, end_of_input boolean").json(str(tmp_path))
    marked_right = spark.readStream.schema(f"{RIGHT_SCHEMA}, end_of_input boolean").json(str(tmp_path))
    rows = base.model_copy(update={"left": InputOptions(), "right": InputOptions()})
    whole = rows.apply(marked_left, marked_right, end_of_input="end_of_input").schema["value"].dataType
    assert whole.simpleString() == ("struct<left:array<struct<user:string,amount:bigint,ts:bigint>>,"
                                    "right:array<struct<user:string,page:string,ts:bigint>>>")  # (no marker field)


@pytest.mark.parametrize("side, field, named", [("right", "ts", r"right input: timestamp 'ts' is null \(None\)"),
                                                ("left", "user", r"left input: key is null \(None\)")])
def test_a_bad_row_of_a_join_is_named_by_its_input_and_column(spark, tmp_path, side, field, named):
    """Not by the columns the union of the inputs uses inside (issue 56): the error names the input
    and the user's column, and shows the input's row."""
    op = merge_op(TimeWindows(10_000), InnerJoin(), TriggerOption.default())
    left, right = make_sides(7, n_batches=2)
    (left if side == "left" else right)[1][0][field] = None
    with pytest.raises(Exception, match=named) as caught:
        run_spark_merge(spark, op, left, right, tmp_path)
    lines = [line for line in str(caught.value).splitlines() if "bad element (" in line]
    assert lines and not any("__wo_" in line for line in lines)
