"""Table sinks in pipeline files: validated (URL scheme, table name, no credentials in the file, a
mode the operator's panes fit), and `run --local` keeps the table the panes make."""
from __future__ import annotations

import io
import json
import os
import sqlite3
import textwrap
from pathlib import Path

import pytest

from windowed_operator.pipeline import PipelineError, load_pipeline, parse_pipeline
from windowed_operator.pipeline.local_run import run_pipeline_locally

BASE = 1_700_000_000_000
BATCHES = [
    [{"user": "a", "amount": 1, "ts": BASE}, {"user": "a", "amount": 2, "ts": BASE + 1_000},
     {"user": "b", "amount": 5, "ts": BASE + 5_000}, {"user": "b", "amount": "bad", "ts": BASE + 5_500}],
    [{"user": "a", "amount": 3, "ts": BASE + 6_000}, {"user": "b", "amount": 4, "ts": BASE + 7_000}],
    [{"user": "a", "amount": 4, "ts": BASE + 3_500},          # bridges a's two sessions: they merge
     {"user": "b", "amount": 9, "ts": BASE}],                 # behind the watermark past lateness: late data
    [{"user": "a", "amount": 1, "ts": BASE + 40_000}],
    [{"end_of_input": True, "ts": 0}],
]


def write_pipeline(directory: Path, sink: str, mode: str = "accumulating_and_retracting",
                   accumulation: str = "{sum: {field: amount}}") -> Path:
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(BATCHES):
        part = data / f"part-{i:03d}.json"
        part.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(part, (1_700_000_000 + i, 1_700_000_000 + i))
    path = directory / "pipeline.yaml"
    path.write_text(textwrap.dedent(f"""
        name: sessions
        checkpoint: checkpoints
        sources:
          clicks: {{files: {{path: data, format: json, max_files_per_trigger: 1,
                            schema: "user string, amount bigint, ts bigint, end_of_input boolean",
                            end_of_input: end_of_input}}}}
        operators:
          - name: sessions
            input: clicks
            key: user
            timestamp: ts
            window: {{sessions: {{gap: 3s}}}}
            trigger: {{kind: at_watermark, early: {{count: 1}}, late: {{count: 1}}, mode: {mode}}}
            accumulation: {accumulation}
            allowed_lateness: 2s
            watermark: {{bounded_disorder: 2s}}
            late_data_output: true
            on_bad_element: dead_letter
        sinks:
          - {{input: sessions, table: {sink}}}
    """))
    return path


def rows_of(database: Path, table: str = "sessions") -> list[tuple]:
    with sqlite3.connect(database) as db:
        return db.execute(f"SELECT key, window_start, window_end, value FROM {table} "
                          "ORDER BY key, window_start").fetchall()


def test_run_local_keeps_the_table_of_the_panes(tmp_path):
    path = write_pipeline(tmp_path, "{url: 'sqlite:///results.db', table: sessions, mode: upsert, "
                                    "columns: [timing, batch_id]}")
    run = run_pipeline_locally(load_pipeline(path), out=io.StringIO())
    expected: dict = {}  # the panes' latest values, retracted windows removed
    for pane in run.panes("sessions"):
        window = (pane.key, pane.window_start, pane.window_end)
        if pane.is_retraction:
            assert expected.pop(window) == -pane.value
        else:
            expected[window] = pane.value
    assert any(p.is_retraction and p.is_last for p in run.panes("sessions")), "a session should be merged away"
    assert run.runners["sessions"].late_data and run.runners["sessions"].dead_letters
    got = rows_of(tmp_path / "results.db")  # (relative to the pipeline file)
    stamp = lambda ms: str(__import__("datetime").datetime.utcfromtimestamp(ms / 1000)) + ".000000"  # noqa: E731
    assert got == [(k, stamp(s), stamp(e), v) for (k, s, e), v in sorted(expected.items())]
    assert len(got) == 3
    before = rows_of(tmp_path / "results.db")  # a rerun applies nothing twice
    run_pipeline_locally(load_pipeline(path), out=io.StringIO())
    assert rows_of(tmp_path / "results.db") == before


def test_run_local_into_a_duckdb_file_beside_the_pipeline(tmp_path):
    pytest.importorskip("duckdb_engine", reason='no DuckDB driver: pip install -e ".[duckdb]"')
    import duckdb

    sqlite_path = write_pipeline(tmp_path, "{url: 'sqlite:///results.db', table: sessions, mode: upsert}")
    run_pipeline_locally(load_pipeline(sqlite_path), out=io.StringIO())
    path = write_pipeline(tmp_path, "{url: 'duckdb:///results.duckdb', table: sessions, mode: upsert}")
    assert load_pipeline(path).sinks[0].table.url == f"duckdb:///{tmp_path / 'results.duckdb'}"
    run_pipeline_locally(load_pipeline(path), out=io.StringIO())
    with duckdb.connect(str(tmp_path / "results.duckdb"), read_only=True) as db:
        got = db.execute("SELECT key, epoch_ms(window_start), epoch_ms(window_end), value FROM sessions "
                         "ORDER BY key, window_start").fetchall()
    with sqlite3.connect(tmp_path / "results.db") as db:
        same = db.execute("SELECT key, window_start, window_end, value FROM sessions ORDER BY key, window_start")
        stamp = lambda text: round(__import__("datetime").datetime.fromisoformat(text + "+00:00").timestamp() * 1000)  # noqa: E731
        assert got == [(k, stamp(s), stamp(e), v) for k, s, e, v in same.fetchall()]
    assert len(got) == 3


def test_a_pipeline_file_turns_the_audit_on(tmp_path):
    path = write_pipeline(tmp_path, "{url: 'sqlite:///results.db', table: sessions, audit: 2}")
    assert load_pipeline(path).sinks[0].table.build().audit == 2
    run_pipeline_locally(load_pipeline(path), out=io.StringIO())
    with sqlite3.connect(tmp_path / "results.db") as db:
        kept = db.execute("SELECT count(*), max(batch_id) FROM windowed_operator_sink_batches").fetchone()
        last = db.execute("SELECT batch_id FROM windowed_operator_sink_progress").fetchone()[0]
    assert kept == (2, last)


def test_run_local_adds_the_panes_of_discarding_counts(tmp_path):
    path = write_pipeline(tmp_path, "{url: 'sqlite:///results.db', table: counts, mode: add}", mode="discarding",
                          accumulation="{count: {}}")
    run = run_pipeline_locally(load_pipeline(path), out=io.StringIO())
    totals: dict = {}
    for pane in run.panes("sessions"):
        window = (pane.key, pane.window_start, pane.window_end)
        totals[window] = totals.get(window, 0) + pane.value
    assert [(k, v) for k, _, _, v in rows_of(tmp_path / "results.db", "counts")] == \
        [(k, v) for (k, _, _), v in sorted(totals.items())]


def test_the_url_can_come_from_the_environment(tmp_path, monkeypatch):
    path = write_pipeline(tmp_path, "{url_env: RESULTS_URL, table: sessions}")
    monkeypatch.setenv("RESULTS_URL", f"sqlite:///{tmp_path / 'env.db'}")
    run_pipeline_locally(load_pipeline(path), out=io.StringIO())
    assert len(rows_of(tmp_path / "env.db")) == 3
    monkeypatch.delenv("RESULTS_URL")
    with pytest.raises(ValueError, match="environment variable RESULTS_URL \\(url_env\\) is not set"):
        run_pipeline_locally(load_pipeline(path), out=io.StringIO())


@pytest.mark.parametrize("sink, message", [
    ("{url: 'mysql://host/db', table: t}", "sinks\\[0\\].table.url: .*the scheme must be one of sqlite, postgresql"),
    ("{url: 'postgresql://bob:secret@host/db', table: t}",
     "url holds a password: credentials come from the environment, never from the file"),
    ("{url: 'postgresql://host/db?password=secret', table: t}", "url holds a password parameter"),
    ("{url: 'sqlite:///r.db', url_env: R, table: t}", "give url .* or url_env .*, one of them"),
    ("{table: t}", "give url .* or url_env"),
    ("{url: 'sqlite:///r.db', table: 'drop table; x'}", "sinks\\[0\\].table.table: String should match pattern"),
    ("{url: 'sqlite:///r.db', table: t, mode: replace}", "sinks\\[0\\].table.mode: Input should be 'upsert' or 'add'"),
    ("{url: 'sqlite:///r.db', table: t, columns: [watermark]}", "sinks\\[0\\].table.columns\\[0\\]: Input should be 'timing'"),
    ("{url: 'sqlite:///r.db', table: t, value_type: 'bigintt'}", "unknown type 'bigintt'"),
    ("{url: 'sqlite:///r.db', table: t, mode: add}",
     "sinks\\[0\\].table.mode: operator 'sessions' accumulates fired panes: .*counts elements twice"),
])
def test_table_sinks_are_validated(tmp_path, sink, message):
    path = write_pipeline(tmp_path, sink)
    with pytest.raises(PipelineError, match=message):
        load_pipeline(path)


def test_upsert_of_a_discarding_operator_is_refused(tmp_path):
    path = write_pipeline(tmp_path, "{url: 'sqlite:///r.db', table: t, mode: upsert}", mode="discarding")
    with pytest.raises(PipelineError, match="sinks\\[0\\].table.mode: operator 'sessions' discards fired panes.*mode='add'"):
        load_pipeline(path)


def test_a_table_sink_reads_an_operator_not_a_source(tmp_path):
    path = write_pipeline(tmp_path, "{url: 'sqlite:///r.db', table: t}")
    path.write_text(path.read_text().replace("{input: sessions, table:", "{input: clicks, table:"))
    with pytest.raises(PipelineError, match="sinks\\[0\\].table: a table sink keeps the panes of an operator; 'clicks' "
                                            "is a source"):
        load_pipeline(path)


def test_a_sqlite_file_outside_the_pipelines_directory_needs_permission(tmp_path):
    path = write_pipeline(tmp_path / "p", "{url: 'sqlite:///../r.db', table: t}")
    with pytest.raises(PipelineError, match="sinks\\[0\\].table.url: path '../r.db' leaves the pipeline's directory"):
        load_pipeline(path)
    assert load_pipeline(path, outside_paths=True).sinks[0].table.url == f"sqlite:///{tmp_path / 'r.db'}"
