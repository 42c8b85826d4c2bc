"""A pipeline file runs on Spark and produces what the same operator produces in the local runner."""
import io
import textwrap
from collections import Counter

import pytest

from windowed_operator.pipeline import parse_pipeline
from windowed_operator.spark import END_OF_INPUT
from windowed_operator.spark.pipeline_run import run_pipeline
from windowed_operator.testing import TestStream

pytestmark = pytest.mark.spark

ROWS = [{"user": u, "amount": a, "ts": 1_700_000_000_000 + t}
        for u, a, t in [("a", 1, 0), ("b", 2, 1_000), ("a", 3, 12_000), ("a", 4, 5_000), ("b", 5, 31_000),
                        ("a", 6, 45_000)]]


def test_pipeline_runs_on_spark_like_the_local_runner(spark, tmp_path):
    late = {"user": "a", "amount": 100, "ts": 1_700_000_002_000}  # arrives after the watermark passed its window
    rows = [*ROWS, late, {"end_of_input": True, "ts": END_OF_INPUT}]
    text = textwrap.dedent(f"""
        name: spend
        checkpoint: {tmp_path / "checkpoints"}
        sources:
          payments:
            memory:
              schema: "user string, amount bigint, ts bigint, end_of_input boolean"
              end_of_input: end_of_input
              rows_per_batch: 2
              rows: {rows!r}
        operators:
          - name: spend
            input: payments
            key: user
            timestamp: ts
            window: {{tumbling: {{size: 10s}}}}
            accumulation: {{sum: {{field: amount}}}}
            watermark: {{bounded_disorder: 20s}}
        sinks:
          - {{input: spend, memory: {{query_name: spend_panes}}}}
    """)
    pipeline = parse_pipeline(text)
    out = io.StringIO()
    run_pipeline(pipeline, spark=spark, workdir=tmp_path / "work", out=out, poll_seconds=0.5)
    got = Counter((r["key"], r["ws"], r["value"], r["timing"]) for r in spark.sql(
        "select key, unix_millis(window_start) as ws, value, timing from spend_panes").collect())
    op = pipeline.build_operators()["spend"]
    local = op.run_local(TestStream().add_elements(ROWS))
    assert got == Counter((p.key, p.window_start, p.value, p.timing.value) for p in local)
    assert "spend_panes: batch" in out.getvalue() and "input rows" in out.getvalue()
    assert "late rows dropped 1," in out.getvalue().splitlines()[-1]
