"""verify-restarts without Spark: each run's outputs placed apart, committed file rows read from
Spark's log only, differences counted as multisets, and the verdict's lines."""
from __future__ import annotations

import json
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq

from windowed_operator.pipeline import load_pipeline
from windowed_operator.spark.verify import Verdict, _differences, batch_cuts, isolated, outputs, recut


def pipeline_file(tmp_path):
    (tmp_path / "in").mkdir()
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent("""\
        checkpoint: ckpt
        sources: {clicks: {files: {path: in, format: json, schema: "user string, ts bigint"}}}
        operators:
          - {name: counts, input: clicks, key: user, timestamp: ts, window: {tumbling: {size: 10s}},
             accumulation: {count: {}}, trigger: {kind: at_watermark, mode: accumulating}}
        sinks:
          - {input: counts, files: {path: out, format: parquet}}
          - {input: counts, table: {url: "duckdb:///r.duckdb", table: counts}}
        """))
    return load_pipeline(path)


def test_each_run_writes_its_own_checkpoints_and_outputs_and_reads_its_sources(tmp_path):
    pipeline = pipeline_file(tmp_path)
    run = isolated(pipeline, tmp_path / "runs" / "killed")
    assert run.checkpoint == str(tmp_path / "runs" / "killed" / "checkpoints")
    assert [s.checkpoint for s in run.sinks] == [str(tmp_path / "runs" / "killed" / "checkpoints" / f"sink-{i}")
                                                 for i in range(2)]
    assert run.sinks[0].files.path == str(tmp_path / "runs" / "killed" / "out" / "sink-0")
    assert run.sinks[1].table.url == f"duckdb:///{tmp_path / 'runs' / 'killed' / 'tables.duckdb'}"
    assert run.sources == pipeline.sources and pipeline.sinks[0].files.path == str(tmp_path / "out")


def test_a_file_sink_counts_only_the_files_its_log_committed(tmp_path):
    run = isolated(pipeline_file(tmp_path), tmp_path / "run")
    out = tmp_path / "run" / "out" / "sink-0"
    (out / "_spark_metadata").mkdir(parents=True)
    for name, users in (("part-0.parquet", ["a", "b"]), ("part-1.parquet", ["c"])):
        pq.write_table(pa.table({"key": users, "value": [1] * len(users)}), out / name)
    (out / "_spark_metadata" / "0").write_text("v1\n" + json.dumps({"path": f"file://{out / 'part-0.parquet'}",
                                                                     "action": "add"}) + "\n")
    rows = outputs(run.model_copy(update={"sinks": run.sinks[:1]}))  # (part-1: a killed batch's file, not in the log)
    assert [dict(r)["key"] for r in next(iter(rows.values()))] == ["'a'", "'b'"]


def test_differences_count_repeated_rows():
    assert _differences([(1,), (2,), (2,)], [(2,), (1,), (2,), (2,)]) == ([], [(2,)])
    assert _differences([(1,)], [(3,)]) == ([(1,)], [(3,)])


def test_the_verdict_names_each_sink_and_the_rows_that_differ():
    verdict = Verdict(kills=2, moments=["1.0 s after a start", "0.5 s after batch 3 committed"],
                      differences={"sinks[1] (counts -> table counts)": ([("a", 1)], [("a", 2)])},
                      rows={"sinks[0] (counts -> files)": 4, "sinks[1] (counts -> table counts)": 3})
    assert verdict.lines() == [
        "2 kill(s) landed: 1.0 s after a start; 0.5 s after batch 3 committed",
        "  sinks[0] (counts -> files): equal (4 rows)",
        "  sinks[1] (counts -> table counts): DIFFERENT: 1 row(s) only in the uninterrupted run, 1 only in the run "
        "with kills",
        "    uninterrupted only: ('a', 1)",
        "    with kills only:    ('a', 2)",
        "verdict: the outputs DIFFER (a sink applied a batch twice or lost one, or the pipeline is not deterministic)"]
    assert not verdict.equal and Verdict(0, []).equal


def _offsets(checkpoint, ends):
    """An offset log as Spark writes it: a version line, the batch's metadata, a line per source."""
    (checkpoint / "offsets").mkdir(parents=True)
    for batch, end in enumerate(ends):
        (checkpoint / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": batch}) + f'\n{{"logOffset":{end}}}')
    (checkpoint / "offsets" / ".0.crc").write_text("")


def test_batch_cuts_find_a_restart_that_read_two_files_in_one_batch(tmp_path):
    """Spark's file source logs a batch's files before the batch's offsets: killed between the two,
    the query reads them with the next file in one batch (files 2 and 3 in batch 2 here), which
    ``batch_cuts`` sees; a batch without new input (the repeated end) is no other cut."""
    _offsets(tmp_path / "clean" / "sink-0", [0, 1, 2, 3, 4, 4])
    _offsets(tmp_path / "killed" / "sink-0", [0, 1, 3, 4])
    _offsets(tmp_path / "clean" / "sink-1", [0, 1, 1, 2])
    _offsets(tmp_path / "killed" / "sink-1", [0, 1, 2])
    clean, killed = batch_cuts(tmp_path / "clean"), batch_cuts(tmp_path / "killed")
    assert clean == {"sink-0": [f'{{"logOffset":{n}}}' for n in range(5)],
                     "sink-1": [f'{{"logOffset":{n}}}' for n in range(3)]}
    assert [q for q, ends in killed.items() if recut(clean[q], ends)] == ["sink-0"]


def test_only_the_batches_both_offset_logs_hold_are_compared():
    """Spark keeps the last ``minBatchesToRetain`` offsets: a longer run's log starts later."""
    assert not recut(["1", "2", "3", "4"], ["3", "4"]) and not recut(["3", "4"], ["2", "3", "4"])
    assert recut(["1", "2", "3", "4"], ["2", "4"]) and recut(["1"], ["2"])


def test_a_verdict_says_which_sinks_had_their_input_cut_otherwise():
    table, files = "sinks[0] (counts -> table counts)", "sinks[1] (counts -> files)"
    verdict = Verdict(kills=1, moments=["0.5 s after batch 1 committed"], recut=[table],
                      differences={table: ([("a", 1)], [("a", 2)])}, rows={table: 3, files: 4})
    lines = verdict.lines()
    assert lines[1] == f"  {files}: equal (4 rows)"
    assert lines[-2].startswith("    its input was cut into other micro-batches in the run with kills (likely Spark's "
                                "file source")
    assert lines[-1].startswith("verdict: the outputs DIFFER where the input was cut otherwise: if keys, windows or "
                                "final values differ")
    # a difference in a sink whose input was cut as in the uninterrupted run keeps the plain verdict
    other = Verdict(kills=1, moments=[], recut=[files], differences={table: ([("a", 1)], [])}, rows={table: 3, files: 4})
    assert other.lines()[1] == f"  {files}: equal (4 rows; its input was cut into other micro-batches in the run with kills)"
    assert other.lines()[-1].startswith("verdict: the outputs DIFFER (a sink applied a batch twice")
