"""Nexmark on Spark, on a small stream: each query's final results with our operators equal the
brute-force model's, and native Spark's equal them where Spark can express the query (the
benchmark, ``benchmarks/nexmark/run.py``, checks the same on its large stream)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from nexmark import queries as Q  # noqa: E402
from nexmark import spark_queries as S  # noqa: E402
from nexmark.generator import NexmarkConfig, generate, write_files  # noqa: E402
from windowed_operator.spark.driver.feed import feed_of  # noqa: E402
from windowed_operator.spark.driver.native_stage import NATIVE_STAGES_CONF  # noqa: E402

pytestmark = pytest.mark.spark

STREAM = NexmarkConfig(events=4_000, rate=1_000, max_disorder_ms=300, seed=4)
CONFIG = Q.QueryConfig(max_disorder_ms=300, early_count=20, window_ms=500, period_ms=250, session_gap_ms=60,
                       processing_interval_ms=300, lateness_ms=500)


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    events = generate(STREAM)
    directory = tmp_path_factory.mktemp("nexmark") / "events"
    write_files(events, directory, 2_000, fmt="parquet", end_marker=True)
    return events, directory


@pytest.mark.parametrize("query", Q.QUERIES)
def test_ours_and_native_on_spark_equal_the_model(spark, stream, tmp_path, query):
    events, directory = stream
    expected = Q.model(query, events.persons, events.auctions, events.bids, CONFIG)
    assert len(expected) > 5
    # q5's and q5r's later stages run as Spark's own aggregation, as the benchmark runs them
    with S.library_setting(spark, NATIVE_STAGES_CONF, "true"):
        out = S.ours(query, CONFIG, S.source(spark, directory))
        assert feed_of(out).native_stage == (query in ("q5", "q5r"))
    ours = S.run_to_end(out, tmp_path / "ours", S.end_watermark(query, CONFIG)).rows
    assert Q.final_result(query, S.ours_panes(ours, query)) == expected
    native = S.native(query, CONFIG, S.source(spark, directory))
    assert (native is None) == (query not in S.NATIVE)
    if native is not None:
        if query == "q11":  # Spark merges sessions that touch (bids exactly one gap apart); Beam does not
            spark_rule = Q.model(query, events.persons, events.auctions, events.bids, CONFIG,
                                 touching_sessions_merge=True)
            assert spark_rule != expected, "the stream should show the difference"
            expected = spark_rule
        assert S.native_result(query, S.run_to_end(native, tmp_path / "native").rows) == expected


def test_the_minimal_q8_processor_emits_our_panes(spark, stream, tmp_path):
    """``batch_overhead.py``'s minimal q8 processor, the bound set against native Spark, does q8's
    work: the same panes as ours (a pane per key and window with a pair), whose pairs are the
    model's."""
    from nexmark.batch_overhead import minimal_q8_plan

    events, directory = stream

    def panes(rows: list) -> list:
        return sorted((int(key), int(start), int(end), sorted((v["id"], v["name"], v["reserve"]) for v in value))
                      for key, start, end, value in rows)

    minimal = S.run_to_end(minimal_q8_plan(S.source(spark, directory), CONFIG), tmp_path / "minimal").rows
    ours = S.ours_panes(S.run_to_end(S.ours("q8", CONFIG, S.source(spark, directory)), tmp_path / "ours").rows, "q8")
    assert panes((r["key"], r["ws"], r["we"], r["value"]) for r in minimal) == \
        panes((p.key, p.start, p.end, p.value) for p in ours)
    assert minimal and all(r["value"] for r in minimal)
    expected = Q.model("q8", events.persons, events.auctions, events.bids, CONFIG)
    assert Q._multiset((int(r["ws"]), int(v["id"]), v["name"], int(v["reserve"]))
                       for r in minimal for v in r["value"]) == expected


def test_run_takes_a_setting_for_a_query_and_refuses_a_malformed_one():
    from nexmark.run import parse_settings

    assert parse_settings(["q8:packInput=false", "q5r:nativeStages=true"]) == {
        "q8": ("packInput", "false"), "q5r": ("nativeStages", "true")}
    for bad in ("q9:packInput=false", "q8:packInput", "q8=packInput", "q8:=false"):
        with pytest.raises(ValueError, match="expected QUERY:NAME=VALUE"):
            parse_settings([bad])
    with pytest.raises(ValueError, match="q8 already has packInput=false"):
        parse_settings(["q8:packInput=false", "q8:paneLog=true"])


@pytest.mark.parametrize("handoff", ["row by row", "packed", "sliced"])
def test_the_packing_crossover_joins_equal_their_models_each_way(spark, stream, tmp_path, handoff):
    """``packing_crossover.py`` times two joins handed over each way: each must give its model."""
    from nexmark import packing_crossover as P

    events, directory = stream
    for join in P.JOINS:
        expected = P.model(join, events, CONFIG)
        assert len(expected) > 5
        done = P.run(spark, join, CONFIG, directory, tmp_path / join, handoff)
        assert P.result(join, done.rows) == expected
    assert spark.conf.get(P.PACK_CONF, None) is None
    with pytest.raises(ValueError, match="handoff must be one of"):
        P.run(spark, "q8", CONFIG, directory, tmp_path / "bad", "packed ")


@pytest.mark.parametrize("side", ["native", *S.HANDOFFS])
def test_the_handoffs_benchmark_runs_equal_the_model(spark, stream, tmp_path, side):
    """``handoffs.py`` times q5r (a chain whose first stage takes every bid) natively and with each
    handoff: every run checks itself against the model, and a wrong handoff name is refused."""
    from nexmark import handoffs as H

    events, directory = stream
    assert H.timed(spark, "q5r", side, CONFIG, events, directory, tmp_path / "ckpt") > 0
    with pytest.raises(ValueError, match="handoff must be one of"):
        with S.handoff(spark, "sliced "):
            pass
