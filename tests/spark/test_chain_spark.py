"""Chains on Spark equal the local chain, pane for pane, on the same batches and watermarks."""
import json
import random
from collections import Counter
from pathlib import Path
import sys
import warnings

import pytest
from pyspark import cloudpickle

from accumulations import AllMax, Count, Max, Mean, Reduce, Sum
from accumulations.merge import LeftOuterJoin
from triggers import TriggerOption
from windowed_operator import (KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows, TimeWindows,
                               WindowedOperator, bounded_disorder)
from windowed_operator.merge_operator import InputOptions

from windowed_operator.spark import END_OF_INPUT
from windowed_operator.time import MIN_TIMESTAMP, shown_time

from .harness import (BASE, END_COLUMN, MARKED_SCHEMA, local_panes, pane_tuple, run_local_like_spark,
                      run_local_merge_like_spark, run_spark, run_spark_merge, spark_panes, spark_watermarks,
                      write_batches)
from .test_equivalence import DELAY, make_batches
from .test_restart_and_errors import _file_sink, _read_sink

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the key callables run on Spark's Python workers

EARLY_LATE = TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)


def first_stage(window, trigger=None, lateness=10_000, acc=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(window, acc or Sum("amount"), trigger=trigger or TriggerOption.default(),
                                     allowed_lateness=lateness, key="user", timestamp="ts",
                                     watermark=bounded_disorder(DELAY))


def initial(pane) -> str:
    return "ab" if pane.key in ("a", "b") else "c"


CHAINS = {
    "sessions-then-windowless-sum-rekeyed": lambda: first_stage(SessionWindows(4_000)).then(
        KeyedWindowedOperator(None, Sum(), key=initial, value="value", key_type="string")),
    "hopping-count-then-windowless-max": lambda: first_stage(TimeWindows(10_000).slide_by(5_000), acc=Count()).then(
        WindowedOperator(None, Max())),
    "retracting-sessions-then-sum": lambda: first_stage(
        SessionWindows(4_000), EARLY_LATE.accumulating_and_retracting_fired_panes()).then(WindowedOperator(None, Sum())),
    "retracting-hopping-count-then-mean-per-key": lambda: first_stage(
        TimeWindows(10_000).slide_by(5_000), EARLY_LATE.accumulating_and_retracting_fired_panes(), acc=Count()).then(
        KeyedWindowedOperator(None, Mean())),
    "three-stages": lambda: first_stage(TimeWindows(5_000), EARLY_LATE.accumulating_fired_panes()).then(
        KeyedWindowedOperator(None, Count())).then(WindowedOperator(TimeWindows(20_000), Mean(), allowed_lateness=5_000)),
}


def test_a_value_record_of_the_panes_fields_on_spark_equals_local_chain(spark, tmp_path):
    """The top user per window by count: the second stage's value is a record of the pane's key and
    value, read on Spark as columns, its Spark type inferred from the pane columns'."""
    chain = first_stage(TimeWindows(10_000).slide_by(5_000), acc=Count()).then(
        KeyedWindowedOperator(None, AllMax(field="num"), key="window_start", value={"user": "key", "num": "value"}))
    batches = make_batches(7, n_batches=6)
    runner = run_local_like_spark(chain, batches, DELAY)
    expected = Counter((r.key, shown_time(r.window_start), shown_time(r.window_end),
                        tuple(sorted(tuple(sorted(v.items())) for v in r.value)), r.timing.value, r.index, r.is_first,
                        r.is_last, r.is_retraction, shown_time(r.timestamp)) for r in runner.outputs)
    assert expected and any(len(pane[3]) > 1 for pane in expected), "ties: several users share a window's top"
    got = Counter()
    for rows in run_spark(spark, chain, batches, tmp_path).values():
        for row in rows:
            got[pane_tuple({**row, "value": tuple(sorted(tuple(sorted(v.asDict().items())) for v in row["value"]))})] += 1
    assert got == expected


@pytest.mark.parametrize("case", sorted(CHAINS))
def test_chain_on_spark_equals_local_chain(spark, tmp_path, case):
    chain = CHAINS[case]()
    batches = make_batches(7, n_batches=6)
    expected = local_panes(run_local_like_spark(chain, batches, DELAY))
    assert expected, "the chain must produce panes"
    assert spark_panes(run_spark(spark, chain, batches, tmp_path)) == expected


def test_a_late_element_refires_both_stages_consistently(spark, tmp_path):
    """A row late for stage 1 but within its lateness re-fires stage 1's window (LATE) in the batch
    whose watermark fired it ON_TIME; stage 2 takes the ON_TIME pane before its own watermark
    advances and the LATE pane after, so its window fires ON_TIME, then LATE with the new total."""
    upstream = first_stage(TimeWindows(10_000))
    downstream = KeyedWindowedOperator(None, Sum(), allowed_lateness=10_000,
                                       trigger=TriggerOption.default().accumulating_fired_panes())
    chain = upstream.then(downstream)
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "a", "amount": 2, "ts": BASE + 2_000}],
               [{"user": "b", "amount": 1, "ts": BASE + 15_000}],  # the watermark passes [BASE, BASE + 10 s)
               [{"user": "a", "amount": 5, "ts": BASE + 3_000}]]  # late, within 10 s of lateness
    runner = run_local_like_spark(chain, batches, DELAY)
    first = [(p.timing.value, p.value) for p in runner.runners[0].outputs if p.key == "a"]
    second = [(p.timing.value, p.value) for p in runner.outputs if p.key == "a"]
    assert first == [("ON_TIME", 3), ("LATE", 5)] and second == [("ON_TIME", 3), ("LATE", 8)]
    assert spark_panes(run_spark(spark, chain, batches, tmp_path)) == local_panes(runner)


def test_restart_mid_chain_equals_one_uninterrupted_run(spark, tmp_path):
    chain = CHAINS["three-stages"]()
    batches = make_batches(11, n_batches=6)
    expected = local_panes(run_local_like_spark(chain, batches, DELAY))
    source, sink, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"

    def run_available():
        df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        query = (chain.apply(df, end_of_input=END_COLUMN).writeStream.foreachBatch(_file_sink(sink))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination()

    write_batches(source, batches[:3], flush=False)
    run_available()
    first_run = _read_sink(sink)
    all_files = write_batches(tmp_path / "staging", batches)
    for i in range(3, len(all_files)):  # the rest arrives while the query is down
        (tmp_path / "staging" / f"batch-{i:05d}.json").replace(source / f"batch-{i:05d}.json")
    run_available()
    combined = _read_sink(sink)
    assert first_run and combined != first_run
    assert combined == expected


def test_join_then_windowless_mean_on_spark_equals_local_chain(spark, tmp_path):
    """The CTR shape: a keyed left-outer join per ad, then the click rate per campaign in the join's windows."""
    join = KeyedWindowedMergeOperator(
        TimeWindows(10_000), LeftOuterJoin(clicked_per_impression, result_type="struct<campaign:string,clicked:boolean>"),
        key="user", timestamp="ts", watermark=bounded_disorder(DELAY), left=InputOptions(), right=InputOptions())
    ctr = KeyedWindowedOperator(None, Mean(), key=campaign_of, value=was_clicked, key_type="string",
                                value_type="double", on_bad_element="dead_letter")
    chain = join.then(ctr)
    rng = random.Random(5)
    lefts = [[{"user": f"ad{b}{i}", "amount": rng.choice([1, 2]), "ts": BASE + 6_000 * b + rng.randint(0, 5_000)}
              for i in range(6)] for b in range(5)]
    rights = [[{"user": r["user"], "page": "click", "ts": r["ts"] + rng.randint(0, 2_000)}
               for r in rows if rng.random() < 0.5] for rows in lefts]
    runner = run_local_merge_like_spark(chain, lefts, rights, DELAY)
    expected = local_panes(runner)
    assert expected
    assert spark_panes(run_spark_merge(spark, chain, lefts, rights, tmp_path)) == expected


def clicked_per_impression(impression, click):
    return {"campaign": f"c{impression['amount']}", "clicked": click is not None}


def campaign_of(pane):
    return pane.value[0]["campaign"]


def was_clicked(pane):
    return 1.0 if any(pair["clicked"] for pair in pane.value) else 0.0


def test_a_chained_pipeline_file_runs_on_spark_as_run_local_does(spark, tmp_path):
    """examples/pipelines/session_summary.yaml: `run` (one Spark query for both operators) writes what
    `run --local` writes."""
    import io
    import json
    import shutil

    from windowed_operator.pipeline import load_pipeline
    from windowed_operator.pipeline.local_run import run_pipeline_locally
    from windowed_operator.spark.pipeline_run import run_pipeline

    examples = Path(__file__).resolve().parents[2] / "examples" / "pipelines"
    generator = load_module(examples / "run.py")
    sunk = {}
    for how in ("local", "spark"):
        root = tmp_path / how
        root.mkdir()
        text = (examples / "session_summary.yaml").read_text()
        (root / "pipeline.yaml").write_text(text.replace("console: {}", "files: {path: out, format: json}"))
        generator.generate("session_summary", 600, root=root)
        pipeline = load_pipeline(root / "pipeline.yaml")
        if how == "local":
            run_pipeline_locally(pipeline, out=io.StringIO())
        else:
            totals = run_pipeline(pipeline, spark=spark, workdir=tmp_path / "work", out=io.StringIO())
        sunk[how] = sorted(json.dumps(json.loads(line), sort_keys=True) for f in (root / "out").glob("part-*.json")
                           for line in f.read_text().splitlines())
        shutil.rmtree(root / "data")
    assert len(sunk["local"]) > 3 and sunk["spark"] == sunk["local"]
    assert [t.panes for t in totals.values()] == [len(sunk["spark"])]  # the summary's panes, not the sessions' too


def load_module(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("pipelines_run_for_chain_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- native Spark after the operator ----------------------------------------------------------------
def _native_totals_sink(store: dict):
    def collect(batch_df, batch_id):
        rows = batch_df.selectExpr("unix_millis(window.start) as start", "total").collect()
        store[batch_id] = [(r.start, r.total) for r in rows]
    return collect


def test_a_native_window_aggregation_after_the_operator_totals_its_final_panes(spark, tmp_path):
    """spark_event_time=True declares the panes' event time: a native 20 s window sum in append mode,
    in the same query, totals the operator's 10 s panes (final per window, no lateness)."""
    from pyspark.sql import functions as F

    op = first_stage(TimeWindows(10_000), lateness=0)
    batches = make_batches(3, n_batches=8)
    write_batches(tmp_path / "in", batches)
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    panes = op.apply(df, end_of_input=END_COLUMN, spark_event_time=True)
    native = (panes.where("event_time is not null").groupBy(F.window("event_time", "20 seconds"))
              .agg(F.sum("value").alias("total")))
    store: dict = {}
    (native.writeStream.outputMode("append").foreachBatch(_native_totals_sink(store))
     .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
     .awaitTermination())
    expected: dict[int, int] = {}
    for pane in run_local_like_spark(op, batches, DELAY).outputs:
        start = pane.window_start - pane.window_start % 20_000
        expected[start] = expected.get(start, 0) + pane.value
    got = [row for rows in store.values() for row in rows]
    assert len(expected) > 2 and sorted(got) == sorted(expected.items())


def test_panes_behind_the_previous_watermark_carry_no_event_time(spark, tmp_path):
    """Spark fails a query whose stateful operator emits an event-time row at or behind the previous
    batch's watermark, so such panes (LATE panes of a window fired in an earlier batch, and their
    retractions) have a null event_time (documented); every other pane's is its timestamp's last
    microsecond, which is never at the previous watermark."""
    op = first_stage(TimeWindows(10_000), EARLY_LATE.accumulating_and_retracting_fired_panes())
    batches = [*make_batches(7, n_batches=4),
               [{"user": "b", "amount": 1, "ts": BASE + 10_000}],  # late when its window fires: same batch
               [{"user": "b", "amount": 2, "ts": BASE + 10_500}]]  # late after the batch that fired it
    store = run_spark(spark, op, batches, tmp_path, spark_event_time=True)
    watermarks = [w["in"] for w in spark_watermarks({"in": batches}, DELAY)]  # batch i runs at watermarks[i]

    def previous_watermark(batch_id: int) -> int:
        return watermarks[batch_id - 1] if 0 < batch_id <= len(watermarks) else \
            END_OF_INPUT - DELAY if batch_id else MIN_TIMESTAMP

    kinds = set()
    for batch_id, rows in store.items():
        for r in rows:
            behind = r["ts_ms"] < previous_watermark(batch_id)
            kinds.add((r["timing"], behind))
            if behind:
                assert r["event_time"] is None, r
            else:
                assert r["event_time"] is not None, r
                assert r["event_time"].timestamp() * 1000 == pytest.approx(r["ts_ms"] + 0.999, abs=1e-3), r
    assert {("EARLY", False), ("ON_TIME", False), ("LATE", False), ("LATE", True)} <= kinds


def test_a_value_record_of_the_rows_columns_on_spark_equals_local_runner(spark, tmp_path):
    """On raw rows a record names columns (the event time as epoch ms); a record naming a missing
    column is refused before the query starts, naming the field."""
    from accumulations import ToList

    op = KeyedWindowedOperator(TimeWindows(10_000), ToList(), key="user", timestamp="ts",
                               watermark=bounded_disorder(DELAY), value={"amt": "amount", "at": "ts"})
    batches = make_batches(3, n_batches=4)
    runner = run_local_like_spark(op, batches, DELAY)
    expected = Counter((r.key, r.window_start, tuple(sorted(tuple(sorted(v.items())) for v in r.value)))
                       for r in runner.outputs)
    assert expected
    got = Counter((row["key"], row["ws"], tuple(sorted(tuple(sorted(v.asDict().items())) for v in row["value"])))
                  for rows in run_spark(spark, op, batches, tmp_path).values() for row in rows)
    assert got == expected
    from windowed_operator.spark.base.errors import SparkOperatorError

    df = spark.readStream.schema(MARKED_SCHEMA).json(str(tmp_path))
    with pytest.raises(SparkOperatorError, match=r"value record fields \{'amt': 'price'\} name columns that are not"):
        op.model_copy(update={"value": {"amt": "price"}}).apply(df)


def keep_none(a, b):
    return None


def test_a_null_upstream_pane_value_is_a_dead_letter_of_the_stage_that_sums_it(spark, tmp_path):
    """An upstream whose own function outputs None: Spark's stage reads the null pane value as the
    local chain does (a bad element, here a dead letter naming it), and sums the other panes."""
    upstream = KeyedWindowedOperator(TimeWindows(10_000), Reduce(keep_none, result_type="bigint"), key="user",
                                     timestamp="ts", value="amount", watermark=bounded_disorder(DELAY))
    chain = upstream.then(WindowedOperator(None, Sum(), on_bad_element="dead_letter"))
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "a", "amount": 2, "ts": BASE + 2_000},
                {"user": "b", "amount": 4, "ts": BASE + 3_000}],
               [{"user": "c", "amount": 7, "ts": BASE + 25_000}]]
    runner = run_local_like_spark(chain, batches, DELAY)
    local_dead = [(d.reason.value, d.detail) for d in runner.runners[1].dead_letters]
    assert local_dead == [("invalid_value", "the upstream pane's value is null (None)")]
    rows = [r for batch in run_spark(spark, chain, batches, tmp_path).values() for r in batch]
    dead = [r for r in rows if r["record_type"] == "dead_letter"]
    assert [r["reason"] for r in dead] == ["invalid_value"]
    assert spark_panes({0: [r for r in rows if r["record_type"] == "pane"]}) == local_panes(runner)
    assert sorted(r["value"] for r in rows if r["record_type"] == "pane") == [4, 7]


def _side_first_stage():
    return KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                                 watermark=bounded_disorder(DELAY), late_data_output=True,
                                 on_bad_element="dead_letter")


SIDE_CHAINS = {
    "two stages": lambda: _side_first_stage().then(
        WindowedOperator(None, Sum(), on_bad_element="dead_letter", late_data_output=True)),
    "through a stage without side outputs": lambda: _side_first_stage().then(
        KeyedWindowedOperator(None, Count())).then(WindowedOperator(None, Sum())),
}


@pytest.mark.parametrize("case", list(SIDE_CHAINS))
def test_every_stages_late_data_and_dead_letters_reach_the_chains_output(spark, tmp_path, case):
    """The first stage's dead letters (a null key, a null amount) and late data (an expired row) reach
    the chain's output tagged with their stage, as the local chain keeps each stage's (issue 56)."""
    chain = SIDE_CHAINS[case]()
    batches = [[{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": None, "amount": 2, "ts": BASE + 2_000},
                {"user": "b", "amount": None, "ts": BASE + 3_000}],
               [{"user": "c", "amount": 7, "ts": BASE + 25_000}],
               [{"user": "a", "amount": 5, "ts": BASE + 4_000}, {"user": "b", "amount": 3, "ts": BASE + 31_000}]]
    runner = run_local_like_spark(chain, batches, DELAY)
    expected = Counter((stage, "late" if d.reason.value in ("expired", "closed_window") else "dead_letter",
                        d.reason.value, json.dumps(d.element, sort_keys=True))
                       for stage, stage_runner in enumerate(runner.runners)
                       for d in [*stage_runner.late_data, *stage_runner.dead_letters])
    assert {(stage, kind) for stage, kind, _, _ in expected} == {(0, "late"), (0, "dead_letter")}
    rows = [r for batch in run_spark(spark, chain, batches, tmp_path).values() for r in batch]
    side = Counter((r["stage"], r["record_type"], r["reason"], json.dumps(json.loads(r["element"]), sort_keys=True))
                   for r in rows if r["record_type"] != "pane")
    assert side == expected
    assert spark_panes({0: [r for r in rows if r["record_type"] == "pane"]}) == local_panes(runner)
