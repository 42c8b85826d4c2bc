"""`run --local` is the same pipeline as on Spark: typed sources, the same output rows, sinks fed per bundle."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from windowed_operator.pipeline import PipelineError, load_pipeline
from windowed_operator.pipeline.local_io import typed_rows
from windowed_operator.pipeline.local_run import run_pipeline_locally

BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def write_pipeline(tmp_path: Path, sinks: str, extra: str = "", end_marker: bool = False) -> Path:
    """Three bundles: a bad value, on-time rows, a late row; ``end_marker`` adds the end-of-input file
    that lets Spark close the last window as the local runner does at the end."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    batches = [
        [{"user": "a", "amount": 1, "ts": BASE, "ignored": "x"}, {"user": "b", "amount": 2, "ts": BASE + 1_000},
         {"user": "a", "amount": "abc", "ts": BASE + 2_000}],     # a value the bigint column cannot take
        [{"user": "a", "amount": 3, "ts": BASE + 25_000}],         # moves the watermark past [0, 10 s)
        [{"user": "b", "amount": 100, "ts": BASE + 3_000}],        # behind it, past allowed lateness: late
    ]
    if end_marker:
        batches.append([{"end_of_input": True, "ts": 0}])
    for i, rows in enumerate(batches):
        part = data / f"part-{i:03d}.json"
        part.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(part, (1_700_000_000 + i, 1_700_000_000 + i))  # Spark reads files oldest first
    marker_column, marker = (", end_of_input boolean", ", end_of_input: end_of_input") if end_marker else ("", "")
    path = tmp_path / "pipeline.yaml"
    path.write_text(textwrap.dedent(f"""
        name: spend
        checkpoint: checkpoints
        sources:
          payments: {{files: {{path: data, format: json, max_files_per_trigger: 1,
                              schema: "user string, amount bigint, ts bigint{marker_column}"{marker}}}}}
        operators:
          - {{name: spend, input: payments, key: user, timestamp: ts, window: {{tumbling: {{size: 10s}}}},
             accumulation: {{sum: {{field: amount}}}}, watermark: {{bounded_disorder: 5s}},
             late_data_output: true, on_bad_element: dead_letter{extra}}}
        sinks:
    """) + textwrap.indent(textwrap.dedent(sinks), "  "))
    return path


def test_sources_are_read_with_the_declared_schema_as_spark_reads_them():
    schema = "user string, amount bigint, ratio double, ok boolean, ts timestamp"
    rows = typed_rows([{"user": 7, "amount": "12", "ratio": 1, "ok": "true", "ts": "2026-01-01T00:00:01Z", "x": 1},
                       {"user": "u", "amount": 2 ** 63, "ratio": "n", "ok": True, "ts": "yesterday"}], schema)
    assert list(rows[0]) == ["user", "amount", "ratio", "ok", "ts"]  # undeclared columns are not read
    assert rows[0]["user"] == "7" and rows[0]["amount"] is None and rows[0]["ratio"] == 1.0 and rows[0]["ok"] is None
    assert rows[0]["ts"].isoformat() == "2026-01-01T00:00:01+00:00"
    assert rows[1]["amount"] is None and rows[1]["ratio"] is None and rows[1]["ok"] is True and rows[1]["ts"] is None
    csv_rows = typed_rows([{"user": "u", "amount": "12", "ratio": "", "ok": "false", "ts": ""}], schema, from_text=True)
    assert csv_rows == [{"user": "u", "amount": 12, "ratio": None, "ok": False, "ts": None}]


def test_a_files_sink_gets_spark_shaped_rows_with_late_data_and_dead_letters(tmp_path):
    pipeline = load_pipeline(write_pipeline(tmp_path, "- {input: spend, files: {path: out, format: json}}"))
    run = run_pipeline_locally(pipeline, out=io.StringIO())
    files = sorted((tmp_path / "out").glob("part-*.json"))
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    by_type = {t: [r for r in rows if r["record_type"] == t] for t in ("pane", "late", "dead_letter")}
    assert [(r["key"], r["window_start"], r["value"], r["timing"], r["pane_index"]) for r in by_type["pane"]] == [
        ("a", "2026-01-01T00:00:00.000Z", 1, "ON_TIME", 0), ("b", "2026-01-01T00:00:00.000Z", 2, "ON_TIME", 0),
        ("a", "2026-01-01T00:00:20.000Z", 3, "ON_TIME", 0)]
    assert [(r["reason"], json.loads(r["element"])) for r in by_type["dead_letter"]] == [
        ("invalid_value", {"user": "a", "amount": None, "ts": BASE + 2_000})]
    assert [(r["key"], r["reason"], r["element_timestamp"]) for r in by_type["late"]] == [
        ("b", "expired", "2026-01-01T00:00:03.000Z")]
    assert run.totals["spend"].late_rows_dropped == 1 and run.totals["spend"].bad_rows == 1
    assert [f.name for f in files] == ["part-00000.json", "part-00001.json", "part-00002.json", "part-00003.json"]


def test_console_sinks_show_timestamps_and_at_most_num_rows(tmp_path, capsys):
    pipeline = load_pipeline(write_pipeline(tmp_path, "- {input: spend, console: {num_rows: 1}}"))
    run_pipeline_locally(pipeline)
    out = capsys.readouterr().out
    assert "|key|window_start" in out.replace(" ", "") and "2026-01-01 00:00:00" in out
    assert "only showing top 1 rows" in out and "Batch: 3" in out
    assert out.splitlines()[-1] == "spend: 4 bundles, 3 panes out, 1 late rows dropped, 1 bad rows"


def test_a_foreach_batch_sink_is_refused_locally_with_the_reason(tmp_path):
    """(its module, beside the pipeline file, is found and imported when the pipeline is loaded)"""
    (tmp_path / "beside_local_run.py").write_text("def f(df, batch_id):\n    pass\n")
    path = write_pipeline(tmp_path, "- {input: spend, foreach_batch: {function: beside_local_run.f}}")
    allow = __import__("windowed_operator.pipeline", fromlist=["CodePolicy"]).CodePolicy(allow_all=True)
    pipeline = load_pipeline(path, code=allow)
    with pytest.raises(ValueError, match=r"sinks\[0\]: a foreach_batch sink \(beside_local_run.f\) receives Spark "
                                         r"DataFrames"):
        run_pipeline_locally(pipeline, out=io.StringIO())
    (tmp_path / "beside_local_run.py").unlink()
    with pytest.raises(PipelineError, match=r"line \d+: sinks\[0\].foreach_batch: cannot import module 'nowhere' of "
                                            r"'nowhere.f'.*beside the pipeline file"):
        load_pipeline(write_pipeline(tmp_path, "- {input: spend, foreach_batch: {function: nowhere.f}}"), code=allow)


def test_the_cli_output_piped_to_head_ends_quietly(tmp_path):
    path = write_pipeline(tmp_path, "- {input: spend, console: {}}")
    result = subprocess.run(f"{sys.executable} -m windowed_operator.cli run {path} --local | head -2",
                            shell=True, capture_output=True, text=True, timeout=300)
    assert result.stdout.splitlines() == ["-" * 43, "Batch: 0"]
    assert result.stderr == ""


def test_without_pyspark_spark_commands_say_how_to_get_it(tmp_path, monkeypatch, capsys):
    import importlib.util

    from windowed_operator import cli

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real_find_spec(name, *a))
    path = write_pipeline(tmp_path, "- {input: spend, console: {}}")
    assert cli.main(["run", str(path)]) == 1
    assert "running on Spark needs pyspark: pip install 'windowed-operator[spark]'" in capsys.readouterr().err
    assert cli.main(["run", str(path), "--local"]) == 0  # the local runner needs no Spark


def test_global_window_panes_show_null_bounds_as_spark_does():
    """A sink row of the global window: its bounds and end-of-time timestamp are null, as on Spark
    (Python's datetime ends at year 9999; Beam's global window at +292,000 years)."""
    from accumulations import Sum
    from windowed_operator import GlobalWindow, KeyedWindowedOperator
    from windowed_operator.pipeline.local_io import pane_row
    from windowed_operator.testing import TestStream, TimestampedValue

    op = KeyedWindowedOperator(GlobalWindow(), Sum())
    pane, = op.run_local(TestStream().add_elements(TimestampedValue(("a", 2), 1_000)).advance_watermark_to_infinity())
    row = pane_row(pane, keyed=True, side_outputs=False)
    assert (row["window_start"], row["window_end"], row["timestamp"], row["value"]) == (None, None, None, 2)


def test_sinks_take_the_panes_or_the_late_data_and_dead_letters_alone(tmp_path):
    """``output: panes`` and ``output: side``: the two parts of the operator's output, as the Spark
    side output (``windowed_operator.spark.plan.outputs``) has them."""
    pipeline = load_pipeline(write_pipeline(tmp_path, """
        - {input: spend, output: panes, memory: {query_name: panes}}
        - {input: spend, output: side, memory: {query_name: side}}
        - {input: spend, memory: {query_name: mixed}}
    """))
    run = run_pipeline_locally(pipeline, out=io.StringIO())
    panes, side, mixed = ([row for bundle in bundles for row in bundle] for bundles in run.sink_rows)
    assert [list(row) for row in panes[:1]] == [["key", "window_start", "window_end", "value", "timing", "pane_index",
                                                 "is_first", "is_last", "is_retraction", "timestamp"]]
    assert all(value is not None for row in panes for name, value in row.items() if name != "value")
    shown = lambda moment: None if moment is None else moment.isoformat()  # noqa: E731
    assert [(r["key"], r["record_type"], r["reason"], json.loads(r["element"]), shown(r["element_timestamp"]))
            for r in side] == [("a", "dead_letter", "invalid_value", {"user": "a", "amount": None, "ts": BASE + 2_000},
                                None),
                               ("b", "late", "expired", {"user": "b", "amount": 100, "ts": BASE + 3_000},
                                "2026-01-01T00:00:03+00:00")]
    assert list(side[0]) == ["key", "record_type", "reason", "element", "element_timestamp"]
    # the mixed sink has both, pane columns null on side rows
    assert len(mixed) == len(panes) + len(side)
    assert [r for r in mixed if r["record_type"] != "pane"] == [
        {**dict.fromkeys(panes[0]), **r} for r in side]


@pytest.mark.parametrize("sink, sides, error", [
    ("{input: payments, output: panes, console: {}}", "late_data_output: true", "'payments' is a source"),
    ("{input: spend, output: side, console: {}}", "on_bad_element: raise", "has neither: give it late_data_output"),
    ("{input: spend, output: side, table: {url: 'sqlite:///r.db', table: t}}", "late_data_output: true",
     "a table sink keeps an operator's panes"),
    ("{input: spend, output: late, console: {}}", "late_data_output: true", "'all', 'panes' or 'side'"),
])
def test_a_sink_output_that_cannot_be_is_refused_with_its_place(tmp_path, sink, sides, error):
    path = write_pipeline(tmp_path, f"- {sink}")
    path.write_text(path.read_text().replace("late_data_output: true, on_bad_element: dead_letter", sides))
    with pytest.raises(PipelineError, match=error) as info:
        load_pipeline(path)
    assert "sinks" in str(info.value) and "output" in str(info.value)
