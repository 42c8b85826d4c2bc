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

from .harness import _wait_for, _wait_for_file  # noqa: E402

pytestmark = pytest.mark.spark

STREAM = NexmarkConfig(events=4_000, rate=1_000, max_disorder_ms=300, seed=4)
CONFIG = Q.QueryConfig(max_disorder_ms=300, early_count=20, window_ms=500, period_ms=250, session_gap_ms=60,
                       processing_interval_ms=300, lateness_ms=500)


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    events = generate(STREAM)
    directory = tmp_path_factory.mktemp("nexmark") / "events"
    files = write_files(events, directory, 2_000, fmt="parquet", end_marker=True)
    return events, directory, files


def _run(spark, out, checkpoint: Path, files: int = 0) -> list[dict]:
    """All rows of the query to the end of its input: ``availableNow``, or, with ``files`` (a query
    in processing-time mode, where Spark always has timers pending and availableNow would not end),
    a processing-time trigger stopped once the last file and two batches after it are done."""
    store: dict = {}

    def collect(batch_df, batch_id):
        columns = [c for c in batch_df.columns if c not in ("window_start", "window_end", "timestamp")]
        if "window_start" in batch_df.columns:
            batch_df = batch_df.selectExpr(*columns, "unix_millis(window_start) as ws", "unix_millis(window_end) as we")
        store[batch_id] = [r.asDict(recursive=True) for r in batch_df.collect()]

    writer = out.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
    if not files:
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        query = writer.trigger(processingTime="200 milliseconds").start()
        try:
            _wait_for_file(query, files - 1)
            done = query.lastProgress["batchId"]
            _wait_for(lambda: query.lastProgress["batchId"] >= done + 2)
        finally:
            query.stop()
    return [row for rows in store.values() for row in rows]


@pytest.mark.parametrize("query", Q.QUERIES)
def test_ours_and_native_on_spark_equal_the_model(spark, stream, tmp_path, query):
    events, directory, files = stream
    expected = Q.model(query, events.persons, events.auctions, events.bids, CONFIG)
    assert len(expected) > 5
    ours = _run(spark, S.ours(query, CONFIG, S.source(spark, directory)), tmp_path / "ours",
                files=files if query in S.PROCESSING_TIME else 0)
    assert Q.final_result(query, S.ours_panes(ours, query)) == expected
    native = S.native(query, CONFIG, S.source(spark, directory))
    assert (native is None) == (query not in S.NATIVE)
    if native is not None:
        if query == "q11":  # Spark merges sessions that touch (bids exactly one gap apart); Beam does not
            spark_rule = Q.model(query, events.persons, events.auctions, events.bids, CONFIG,
                                 touching_sessions_merge=True)
            assert spark_rule != expected, "the stream should show the difference"
            expected = spark_rule
        assert S.native_result(query, _run(spark, native, tmp_path / "native")) == expected
