"""A pipeline file runs on Spark and produces what the same operator produces in the local runner."""
import io
import textwrap
from collections import Counter

import pytest

from windowed_operator.pipeline import parse_pipeline
from windowed_operator.spark import END_OF_INPUT
from windowed_operator.error_summary import error_summary
from windowed_operator.spark.driver.key_groups import murmur3_int, recorded_key_groups
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
    totals = run_pipeline(pipeline, spark=spark, workdir=tmp_path / "work", out=out)
    sunk = spark.sql("select key, unix_millis(window_start) as ws, value, timing from spend_panes").collect()
    got = Counter((r["key"], r["ws"], r["value"], r["timing"]) for r in sunk)
    op = pipeline.build_operators()["spend"]
    local = op.run_local(TestStream().add_elements(ROWS))
    assert got == Counter((p.key, p.window_start, p.value, p.timing.value) for p in local)
    lines = out.getvalue().splitlines()
    # One line per completed batch (each once, in order), then the totals, which match the sink.
    batch_lines = [line for line in lines if line.startswith("spend_panes: batch ")]
    assert [line.split(":")[1] for line in batch_lines] == [f" batch {i}" for i in range(len(batch_lines))]
    assert batch_lines[0].startswith("spend_panes: batch 0: 2 rows in, 0 panes out") and "watermark none yet" in batch_lines[0]
    assert "watermark end of input" in batch_lines[-1]
    # (the end-of-input marker row is no row in: rows - 1)
    assert totals["spend_panes"].panes == len(sunk) and totals["spend_panes"].input_rows == len(rows) - 1
    assert lines[-1] == (f"spend_panes: {len(batch_lines)} batches, {len(rows) - 1} rows in, {len(sunk)} panes out, "
                         "1 late rows dropped")
    # The sink's query applied the operator with its checkpoint: key groups balanced over its 2 state partitions.
    kept = recorded_key_groups(str(tmp_path / "checkpoints" / "spend-0"))
    assert kept is not None and kept.count == 16 and kept.values is not None
    assert [murmur3_int(v) % 2 for v in kept.values] == [g % 2 for g in range(16)]


def test_a_failed_query_is_raised_and_summarized_in_one_line(spark, tmp_path):
    text = textwrap.dedent(f"""
        name: bad_rows
        checkpoint: {tmp_path / "checkpoints"}
        sources:
          payments:
            memory:
              schema: "user string, amount bigint, ts bigint"
              rows: [{{user: a, amount: 1, ts: 1700000000000}}, {{amount: 2, ts: 1700000001000}}]
        operators:
          - {{name: spend, input: payments, key: user, timestamp: ts, window: {{tumbling: {{size: 10s}}}},
             accumulation: {{sum: {{field: amount}}}}, watermark: {{bounded_disorder: 0s}}}}
        sinks:
          - {{input: spend, memory: {{query_name: bad_rows_panes}}}}
    """)
    with pytest.raises(Exception) as raised:
        run_pipeline(parse_pipeline(text), spark=spark, workdir=tmp_path / "work", out=io.StringIO())
    assert len(str(raised.value)) > 1000  # what Spark raises: traceback, Java frames, plan
    summary = error_summary(raised.value)
    assert summary.startswith("BadElementError: bad element (missing_key): key is null") and "\n" not in summary
    assert "'amount': 2" in summary and "SQLSTATE" not in summary
    assert not any(q.isActive for q in spark.streams.active if q.name == "bad_rows_panes")


def test_run_local_writes_what_spark_writes(spark, tmp_path):
    """`run --local` is the same pipeline: a files sink gets the same rows (panes, late data, dead
    letters with the same columns and values) from the local runner as from Spark."""
    import json

    from test_pipeline_local_run import write_pipeline

    from windowed_operator.pipeline import load_pipeline
    from windowed_operator.pipeline.local_run import run_pipeline_locally

    def sunk(directory):
        return sorted(json.dumps(json.loads(line), sort_keys=True) for f in directory.glob("part-*.json")
                      for line in f.read_text().splitlines())

    local_dir, spark_dir = tmp_path / "local", tmp_path / "spark"
    for directory in (local_dir, spark_dir):
        directory.mkdir()
        write_pipeline(directory, """
            - {input: spend, files: {path: out, format: json}}
            - {input: spend, output: panes, files: {path: panes, format: json}}
            - {input: spend, output: side, files: {path: side, format: json}}
        """, end_marker=True)
    run_pipeline_locally(load_pipeline(local_dir / "pipeline.yaml"), out=io.StringIO())
    run_pipeline(load_pipeline(spark_dir / "pipeline.yaml"), spark=spark, workdir=tmp_path / "work", out=io.StringIO())
    local_rows, spark_rows = sunk(local_dir / "out"), sunk(spark_dir / "out")
    assert len(local_rows) == 5 and local_rows == spark_rows
    # the panes alone and the late data and dead letters alone (``output:``), the same both ways
    assert sunk(local_dir / "panes") == sunk(spark_dir / "panes") and len(sunk(spark_dir / "panes")) == 3
    assert sunk(local_dir / "side") == sunk(spark_dir / "side") and len(sunk(spark_dir / "side")) == 2
    assert all(set(json.loads(r)) <= {"key", "record_type", "reason", "element", "element_timestamp"}
               for r in sunk(spark_dir / "side"))
