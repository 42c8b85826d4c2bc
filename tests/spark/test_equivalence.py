"""The Spark runner's panes equal the local runner's for the same batches and watermarks."""
import random
import warnings

import pytest

from collections import Counter

from accumulations import AllMax, Sum, ToList
from triggers import TriggerOption
from windowed_operator import (CumulativeWindows, GlobalWindow, KeyedWindowedOperator, SessionWindows, SlidingWindows,
                               TimeWindows, WindowedOperator, bounded_disorder)

from .harness import (BASE, END_COLUMN, MARKED_SCHEMA, local_panes, run_local_like_spark, run_spark, spark_panes,
                      write_batches)

pytestmark = pytest.mark.spark

DELAY = 3_000


def make_batches(seed: int, n_batches: int = 5, per_batch: int = 8) -> list[list[dict]]:
    """Event times move forward ~6 s per batch with up to 8 s of disorder, so some rows are late."""
    rng = random.Random(seed)
    batches = []
    for b in range(n_batches):
        front = BASE + 6_000 * (b + 1)
        batches.append([{"user": rng.choice("abc"), "amount": rng.randint(1, 9),
                         "ts": front - rng.randint(0, 8_000)} for _ in range(per_batch)])
    return batches


def operator(window, trigger, lateness=10_000, acc=None, keyed=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if keyed:
            return KeyedWindowedOperator(window, acc or Sum("amount"), trigger=trigger, allowed_lateness=lateness,
                                         key="user", timestamp="ts", watermark=bounded_disorder(DELAY))
        return WindowedOperator(window, acc or Sum("amount"), trigger=trigger, allowed_lateness=lateness,
                                timestamp="ts", watermark=bounded_disorder(DELAY))


EARLY_LATE_COUNTS = TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)

CASES = {
    "tumbling-default-discarding": (TimeWindows(10_000), TriggerOption.default(), 1),
    "hopping-early-late-count-accumulating": (TimeWindows(10_000).slide_by(5_000),
                                              EARLY_LATE_COUNTS.accumulating_fired_panes(), 2),
    "sessions-early-late-count-retracting": (SessionWindows(4_000),
                                             EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes(), 3),
    "sessions-default-retracting": (SessionWindows(4_000),
                                    TriggerOption.default().accumulating_and_retracting_fired_panes(), 6),
    "per-record-sliding-default-accumulating": (SlidingWindows(5_000),
                                                TriggerOption.default().accumulating_fired_panes(), 4),
    "cumulative-early-late-count-retracting": (CumulativeWindows(20_000, 5_000),
                                               EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes(), 5),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_spark_equals_local_runner(spark, tmp_path, case):
    window, trigger, seed = CASES[case]
    op = operator(window, trigger)
    batches = make_batches(seed)
    expected = local_panes(run_local_like_spark(op, batches, DELAY))
    assert expected, "the stream must produce panes"
    assert spark_panes(run_spark(spark, op, batches, tmp_path)) == expected


def boundary_batches() -> list[list[dict]]:
    """Watermarks (largest event time - DELAY) that land exactly on the rules' boundaries of the
    window [BASE, BASE + 10 s) with 10 s of lateness: its max timestamp (not yet reached), its end
    (reached), max timestamp + lateness (still live) and one past that (expired); each next batch
    brings a row of that window.  A second key keeps a row at the watermark itself (on time)."""
    end, lateness = BASE + 10_000, 10_000
    marks = [end - 1, end, end - 1 + lateness, end + lateness]
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}]]
    for i, mark in enumerate(marks):
        batches[-1].append({"user": "b", "amount": 1, "ts": mark + DELAY})  # moves the watermark to ``mark``
        batches.append([{"user": "a", "amount": 10 ** (i + 1), "ts": BASE + 2_000 + i},
                        {"user": "b", "amount": 7, "ts": mark}])  # at the watermark: never late
    return batches


@pytest.mark.parametrize("trigger", ["default", "early-late"])
def test_spark_equals_local_runner_at_window_boundaries(spark, tmp_path, trigger):
    """The columnar path (default trigger) and the array path (early/late counts) on Spark, with
    Spark's event-time timers, against the local runner, at the millisecond boundaries."""
    trigger_option = (TriggerOption.default().accumulating_fired_panes() if trigger == "default"
                      else EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes())
    op = operator(TimeWindows(10_000), trigger_option, lateness=10_000)
    batches = boundary_batches()
    runner = run_local_like_spark(op, batches, DELAY)
    expected = local_panes(runner)
    on_time = [p for p in expected if p[0] == "a" and p[1] == BASE and p[4] == "ON_TIME" and not p[8]]
    assert [p[3] for p in on_time] == [11]  # 1 + 10: the row after the watermark reached end - 1 is on time
    assert sorted(p[3] for p in expected if p[0] == "a" and p[1] == BASE and p[4] == "LATE"
                  and not p[8]) == [111, 1111]  # + 100 at the end, + 1000 at max ts + lateness
    assert runner.dropped_counts == {"expired": 1}  # + 10000 came after expiry
    assert spark_panes(run_spark(spark, op, batches, tmp_path)) == expected


def test_spark_labels_panes_after_an_early_pane_as_beam_does(spark, tmp_path):
    """Issue 61: a count trigger's EARLY pane releases the window's holds, so its next pane after the
    end is LATE (key a) unless an element arrived on time since (key e); an unfired on-time element
    holds the window to its end (key c).  The watermark (key b's rows) reaches the end of
    [BASE, BASE + 10 s) for the third batch."""
    from triggers import AfterCount, Repeatedly

    op = operator(TimeWindows(10_000), TriggerOption.of(Repeatedly(AfterCount(2))).discarding_fired_panes())
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "a", "amount": 2, "ts": BASE + 1_500},
                {"user": "c", "amount": 4, "ts": BASE + 2_000},
                {"user": "e", "amount": 8, "ts": BASE + 1_000}, {"user": "e", "amount": 16, "ts": BASE + 1_200}],
               [{"user": "e", "amount": 32, "ts": BASE + 3_000}, {"user": "b", "amount": 1, "ts": BASE + 13_000}],
               [{"user": "a", "amount": 64, "ts": BASE + 4_000}, {"user": "a", "amount": 128, "ts": BASE + 4_500},
                {"user": "c", "amount": 256, "ts": BASE + 5_000}, {"user": "e", "amount": 512, "ts": BASE + 6_000}]]
    expected = local_panes(run_local_like_spark(op, batches, DELAY))
    first = {(p[0], p[5]): (p[3], p[4]) for p in expected if p[1] == BASE}
    assert first == {("a", 0): (3, "EARLY"), ("a", 1): (192, "LATE"), ("c", 0): (260, "ON_TIME"),
                     ("e", 0): (24, "EARLY"), ("e", 1): (544, "ON_TIME")}
    assert spark_panes(run_spark(spark, op, batches, tmp_path)) == expected


def test_the_global_window_fires_at_the_end_of_input(spark, tmp_path):
    op = operator(GlobalWindow(), TriggerOption.default(), lateness=0)
    batches = make_batches(10, n_batches=3, per_batch=5)
    expected = local_panes(run_local_like_spark(op, batches, DELAY))
    totals = Counter()
    for row in batches[0] + batches[1] + batches[2]:
        totals[row["user"]] += row["amount"]
    assert {p[0]: p[3] for p in expected} == dict(totals) and all(p[4] == "ON_TIME" for p in expected)
    assert spark_panes(run_spark(spark, op, batches, tmp_path)) == expected


def test_global_window_panes_can_be_collected_to_python(spark, tmp_path):
    """Beam's global-window bounds (+-292,000 years) fit Spark's timestamps but not Python's: they and
    the end-of-time pane's timestamp are shown as null, so collect() and toPandas() work."""
    op = operator(GlobalWindow(), TriggerOption.default(), lateness=0)
    write_batches(tmp_path / "in", make_batches(4, n_batches=2, per_batch=3))
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    (op.apply(df, end_of_input=END_COLUMN).writeStream.format("memory").queryName("global_panes")
     .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start().awaitTermination())
    rows = spark.sql("select * from global_panes").collect()
    assert rows and all(r.window_start is None and r.window_end is None and r.timestamp is None for r in rows)


BY_TIME = TriggerOption.at_watermark().with_early_firings_at_every(duration=1_000)


@pytest.mark.parametrize("window,trigger", [
    ("tumbling", BY_TIME.with_late_firings_at_every(duration=1_000).discarding_fired_panes()),
    ("hopping", BY_TIME.with_late_firings_at_every(count=1).accumulating_and_retracting_fired_panes()),
    ("sessions", BY_TIME.with_late_firings_at_every(duration=1_000).accumulating_and_retracting_fired_panes())],
    ids=["tumbling", "hopping-retracting", "sessions-retracting"])
def test_processing_time_triggers_with_a_controlled_clock(spark, tmp_path, window, trigger):
    """Firings by processing time on the columnar window and session tables (pre-aggregated where the
    windows have panes; keys whose firing is due found by the group's processing-time index) equal
    the local runner under the same clock."""
    option = {"tumbling": TimeWindows(10_000), "hopping": TimeWindows(10_000).slide_by(5_000),
              "sessions": SessionWindows(3_000)}[window]
    op = operator(option, trigger)
    batches = make_batches(6, n_batches=4, per_batch=6)
    clock = [0, 500, 1_700, 2_000, 3_500, 5_000]
    runner = run_local_like_spark(op, batches, DELAY, clock_times=clock)
    expected = local_panes(runner)
    assert any(p[4] == "EARLY" for p in expected)
    assert spark_panes(run_spark(spark, op, batches, tmp_path, clock_times=clock, key_groups=4)) == expected
    if window != "sessions":  # (folded per (key, pane) before the shuffle: the window table takes partials)
        (tmp_path / "plan").mkdir()
        stream = spark.readStream.schema("user string, amount bigint, ts bigint").json(str(tmp_path / "plan"))
        assert "MapInArrow PreAggregation" in op.apply(stream)._jdf.queryExecution().logical().toString()


def test_non_keyed_operator_with_a_list_output(spark, tmp_path):
    op = operator(TimeWindows(10_000), TriggerOption.default(), acc=ToList("amount"), keyed=False)
    batches = make_batches(7, n_batches=3)
    expected = local_panes(run_local_like_spark(op, batches, DELAY))
    got = spark_panes(run_spark(spark, op, batches, tmp_path))
    normalise = lambda c: sorted((p[1], p[2], tuple(sorted(p[3]))) for p in c.elements())  # noqa: E731
    assert normalise(got) == normalise(expected)


def test_rows_kept_whole_on_the_array_path_equal_the_element_path(spark, tmp_path):
    """AllMax keeps whole rows: the array path ranks a column of the batch's rows (``Rows``) and keeps
    ties in the element path's order; hopping windows, early and late count firings, a late row."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(TimeWindows(10_000).slide_by(2_000), AllMax(field="amount"),
                                   trigger=EARLY_LATE_COUNTS.accumulating_fired_panes(), allowed_lateness=4_000,
                                   key="user", timestamp="ts", watermark=bounded_disorder(DELAY))
    batches = make_batches(9, n_batches=4, per_batch=12)
    for i, batch in enumerate(batches):  # few distinct amounts: ties
        for row in batch:
            row["amount"] = row["amount"] % 3
    batches[3].append({"user": "b", "amount": 2, "ts": BASE + 17_500})
    fast = run_spark(spark, op, batches, tmp_path / "fast", key_groups=4, vectorized=True)
    plain = run_spark(spark, op, batches, tmp_path / "plain", key_groups=100_000, vectorized=False)
    rows = lambda store: sorted(repr(sorted(r.items())) for b in store.values() for r in b)  # noqa: E731
    assert rows(fast) == rows(plain)
    assert any(len(r["value"]) > 1 for b in fast.values() for r in b), "the stream should have ties"


@pytest.mark.parametrize("window,trigger", [("tumbling", "early-late"), ("hopping", "early-late"),
                                            ("hopping", "default"), ("sessions", "default")])
def test_array_path_and_key_groups_equal_the_element_path(spark, tmp_path, window, trigger):
    """The fast paths (array folding; the columnar path for the default trigger; 64 key groups)
    against the element-by-element path with one key per group, on the same Spark batches, late
    panes and late-data rows included."""
    option = {"tumbling": TimeWindows(10_000), "hopping": TimeWindows(10_000).slide_by(2_000),
              "sessions": SessionWindows(3_000)}[window]
    if window == "sessions":  # the columnar session path, retractions of merged sessions included
        trigger_option, lateness = TriggerOption.default().accumulating_and_retracting_fired_panes(), 10_000
    elif trigger == "default":
        trigger_option, lateness = TriggerOption.default().accumulating_fired_panes(), 4_000
    else:
        trigger_option, lateness = EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes(), 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = KeyedWindowedOperator(option, Sum("amount"), trigger=trigger_option, allowed_lateness=lateness,
                                   key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
                                   late_data_output=True)
    batches = make_batches(8, n_batches=5, per_batch=12)
    batches[3].append({"user": "a", "amount": 100, "ts": BASE - 30_000})  # beyond lateness: late data
    batches[4].append({"user": "b", "amount": 50, "ts": BASE + 17_500})  # late, within 4 s of lateness for some
    if window == "sessions":  # a session fires, then a late row within lateness grows it: retracted
        batches += [[{"user": "a", "amount": 1, "ts": BASE + 60_000}, {"user": "b", "amount": 2, "ts": BASE + 61_000}],
                    [{"user": "c", "amount": 3, "ts": BASE + 75_000}],
                    [{"user": "a", "amount": 4, "ts": BASE + 62_500}]]
    fast = run_spark(spark, op, batches, tmp_path / "fast", key_groups=64, vectorized=True)
    plain = run_spark(spark, op, batches, tmp_path / "plain", key_groups=100_000, vectorized=False)
    rows = lambda store: Counter(tuple(sorted(r.items())) for b in store.values() for r in b)  # noqa: E731
    assert rows(fast) == rows(plain)
    assert any(r["record_type"] == "late" for b in fast.values() for r in b)
    if trigger == "default":
        assert any(r["timing"] == "LATE" for b in fast.values() for r in b)
    if window == "sessions":
        assert any(r["is_retraction"] for b in fast.values() for r in b)


@pytest.mark.parametrize("window,acc,mode", [("tumbling", "sum", "discarding"), ("hopping", "mean", "accumulating"),
                                             ("cumulative", "min", "discarding"), ("hopping", "count", "discarding"),
                                             ("tumbling", "sum", "early-late-retracting"),
                                             ("hopping", "count", "early-late-accumulating")])
def test_preaggregated_partials_equal_the_plain_path(spark, tmp_path, window, acc, mode):
    """Pre-aggregation (partials per (key, pane) folded in the scan stage by Arrow) against the
    element-by-element path on the same batches: same panes (late ones included), same number of
    late elements dropped (a partial carries its element count, which count triggers count: the
    columnar window path)."""
    from accumulations import Count, Mean, Min

    option = {"tumbling": TimeWindows(10_000), "hopping": TimeWindows(10_000).slide_by(2_000),
              "cumulative": CumulativeWindows(12_000, 3_000)}[window]
    accumulation = {"sum": Sum("amount"), "mean": Mean("amount"), "min": Min("amount"), "count": Count()}[acc]
    trigger = {"discarding": TriggerOption.default(), "accumulating": TriggerOption.default().accumulating_fired_panes(),
               "early-late-retracting": EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes(),
               "early-late-accumulating": EARLY_LATE_COUNTS.accumulating_fired_panes()}[mode]
    op = operator(option, trigger, lateness=4_000, acc=accumulation)
    batches = make_batches(9, n_batches=5, per_batch=14)
    batches[3].append({"user": "a", "amount": 100, "ts": BASE - 30_000})  # beyond lateness: dropped
    batches[4].append({"user": "b", "amount": 50, "ts": BASE + 17_500})  # within lateness for some windows
    _check_fold_against_the_plain_path(spark, tmp_path, op, batches, "PreAggregation", min_drops=1)


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "non-keyed"])
def test_preselected_rows_equal_the_plain_path(spark, tmp_path, keyed):
    """Pre-selection (AllMax: only each (key, pane)'s top rows cross the shuffle, ``preselect.py``)
    against the element path: same panes, late ones included, and the same late rows dropped (two
    late rows of one pane: one is left out before the operator, the other counts for both)."""
    op = operator(TimeWindows(10_000).slide_by(2_000), TriggerOption.default().accumulating_fired_panes(),
                  lateness=4_000, acc=AllMax(field="amount"), keyed=keyed)
    batches = make_batches(11, n_batches=5, per_batch=14)
    batches[3] += [{"user": "a", "amount": 100, "ts": BASE - 30_000}, {"user": "a", "amount": 7, "ts": BASE - 29_999}]
    batches[4].append({"user": "b", "amount": 50, "ts": BASE + 17_500})  # within lateness for some windows
    _check_fold_against_the_plain_path(spark, tmp_path, op, batches, "PreSelection", min_drops=2)


def test_windows_before_1970_fire_and_hold_back_no_other_key(spark, tmp_path):
    """Spark's watermark never goes below 1970 and its timers below 0 never fire once later ones exist:
    a key with a window before 1970 fires it once the watermark passes 1970, and keys hashed into
    other groups (8 groups here) fire as usual."""
    op = operator(TimeWindows(10_000), TriggerOption.default(), lateness=0)
    batches = [[{"user": "old", "amount": 1, "ts": -15_000}, {"user": "new", "amount": 2, "ts": 101_000}],
               [{"user": "new", "amount": 3, "ts": 125_000}], [{"user": "new", "amount": 4, "ts": 145_000}]]
    expected = local_panes(run_local_like_spark(op, batches, DELAY))
    assert ("old", -20_000, -10_000, 1, "ON_TIME", 0, True, True, False, -10_001) in expected
    assert spark_panes(run_spark(spark, op, batches, tmp_path, key_groups=8)) == expected


@pytest.mark.parametrize("acc,mode", [("sum", "accumulating"), ("count", "early-late-retracting"),
                                      ("mean", "discarding"), ("max", "accumulating"),
                                      ("count", "early-count-discarding")])
def test_prechained_sessions_equal_the_plain_path(spark, tmp_path, acc, mode):
    """Pre-chaining (a batch's session elements folded per key into chains in the scan stage,
    ``prechain.py``) against the element-by-element path on the same batches: same panes, late ones
    and retractions of merged sessions included, and the same late elements dropped, among them the
    expired first element of a chain whose later element is live (the chain is split)."""
    from accumulations import Count, Max, Mean

    accumulation = {"sum": Sum("amount"), "mean": Mean("amount"), "max": Max("amount"), "count": Count()}[acc]
    trigger = {"discarding": TriggerOption.default(), "accumulating": TriggerOption.default().accumulating_fired_panes(),
               "early-late-retracting": EARLY_LATE_COUNTS.accumulating_and_retracting_fired_panes(),
               "early-count-discarding": TriggerOption.at_watermark().with_early_firings_at_every(count=3)
               .discarding_fired_panes()}[mode]
    op = operator(SessionWindows(4_000), trigger, lateness=4_000, acc=accumulation)
    batches = make_batches(12, n_batches=5, per_batch=14)
    batches[3].append({"user": "a", "amount": 100, "ts": BASE - 30_000})  # beyond lateness: dropped
    # the watermark reaches BASE + 97 s; then a's elements at 87.5 s (its session [87.5, 91.5) s has
    # expired: dropped) and 90 s (live) are one chain
    batches += [[{"user": "c", "amount": 1, "ts": BASE + 100_000}],
                [{"user": "a", "amount": 5, "ts": BASE + 87_500}, {"user": "a", "amount": 6, "ts": BASE + 90_000},
                 {"user": "b", "amount": 7, "ts": BASE + 96_000}, {"user": "b", "amount": 8, "ts": BASE + 98_000}]]
    _check_fold_against_the_plain_path(spark, tmp_path, op, batches, "PreChaining", min_drops=2)


def _check_fold_against_the_plain_path(spark, tmp_path, op, batches, fold, min_drops):
    """A scan-stage fold (``fold``: the ``mapInArrow`` function's class) against the element path on
    the same batches: the same panes, late ones among them, and the same late elements dropped (at
    least ``min_drops``); the fold is in the plan, and ``preaggregate=False`` takes it out."""
    pre_drops, plain_drops = spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0)
    fast = run_spark(spark, op, batches, tmp_path / "fast", key_groups=4, drop_counter=pre_drops)
    plain = run_spark(spark, op, batches, tmp_path / "plain", key_groups=100_000, vectorized=False,
                      drop_counter=plain_drops)
    rows = lambda store: sorted(repr(sorted(r.items())) for b in store.values() for r in b)  # noqa: E731
    assert rows(fast) == rows(plain)  # (as sorted text: a pre-selected value is a list)
    assert any(r["timing"] == "LATE" for b in fast.values() for r in b)
    assert pre_drops.value == plain_drops.value >= min_drops
    (tmp_path / "plan").mkdir()
    stream = spark.readStream.schema("user string, amount bigint, ts bigint").json(str(tmp_path / "plan"))
    assert f"MapInArrow {fold}" in op.apply(stream)._jdf.queryExecution().logical().toString()
    assert f"MapInArrow {fold}" not in op.apply(stream, preaggregate=False)._jdf.queryExecution().logical().toString()


def test_a_late_element_is_the_input_row_on_the_element_and_the_array_path_as_locally(spark, tmp_path):
    """With ``value=``, a late element is still the row that arrived (its time in epoch ms), not the
    value read from it: on the array path, on the element path and in the local runner alike."""
    import json

    op = KeyedWindowedOperator(TimeWindows(10_000), Sum(), key="user", timestamp="ts", value="amount",
                               allowed_lateness=0, watermark=bounded_disorder(DELAY), late_data_output=True)
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}], [{"user": "a", "amount": 2, "ts": BASE + 30_000}],
               [{"user": "a", "amount": 3, "ts": BASE + 2_000}]]
    row = {"user": "a", "amount": 3, "ts": BASE + 2_000}
    assert [d.element for d in run_local_like_spark(op, batches, DELAY).late_data] == [row]
    for vectorized in (True, False):
        rows = [r for b in run_spark(spark, op, batches, tmp_path / str(vectorized), vectorized=vectorized).values()
                for r in b if r["record_type"] == "late"]
        assert [{k: v for k, v in json.loads(r["element"]).items() if k != END_COLUMN} for r in rows] == [row]
