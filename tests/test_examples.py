"""Every example runs (local mode here; tests/spark/test_examples_spark.py runs the Spark modes)."""
import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ad_click_join_reports_ctr_per_campaign_and_minute(capsys):
    example = load("ad_click_join")
    assert example.main(["--impressions", "300"]) == 0
    out = capsys.readouterr().out
    assert "free-shipping" in out and "clicks beyond the watermark (dropped, counted)" in out
    impressions, clicks = example.generate(300)
    result = example.run_local(impressions, clicks)
    # Brute force: the watermark batch i sees is min over both inputs of (largest event time of
    # batches < i) - 10 s; a click is dropped when that has passed its minute's end; a kept click
    # counts for its impression when both fall in the same minute.
    minute_of = lambda ts: ts - (ts - example.START) % example.MINUTE  # noqa: E731
    left_batches, right_batches = example.arrival_batches(impressions), example.arrival_batches(clicks)
    seen = {"left": None, "right": None}
    kept_clicks, dropped = {}, 0
    for lefts, rights in zip(left_batches, right_batches):
        marks = [float("-inf") if seen[s] is None else seen[s] - 10_000 for s in seen]
        watermark = min(marks)
        for click in rights:
            if watermark >= minute_of(click["ts"]) + example.MINUTE - 1:
                dropped += 1
            else:
                kept_clicks[click["ad_id"]] = click["ts"]
        for side, rows in (("left", lefts), ("right", rights)):
            if rows:
                top = max(r["ts"] for r in rows)
                seen[side] = top if seen[side] is None else max(seen[side], top)
    shown: dict = {}
    for imp in impressions:
        minute = minute_of(imp["ts"])
        clicked = imp["ad_id"] in kept_clicks and minute_of(kept_clicks[imp["ad_id"]]) == minute
        shown.setdefault((imp["campaign"], minute), []).append(1.0 if clicked else 0.0)
    assert result["ctr"] == {k: sum(v) / len(v) for k, v in shown.items()}
    assert result["late_clicks"] == dropped > 0


# -- the pipeline examples (examples/pipelines/*.yaml), in the local runner on small data ------------------
def pipeline_example(name: str, scale: int, root: Path):
    """The example's YAML file, copied to ``root`` with its data generated next to it."""
    import shutil

    runner_module = load_from(EXAMPLES / "pipelines" / "run.py", "pipelines_run")
    shutil.copy(EXAMPLES / "pipelines" / f"{name}.yaml", root / f"{name}.yaml")
    runner_module.generate(name, scale, root=root)
    from windowed_operator.pipeline import load_pipeline
    from windowed_operator.pipeline.local_run import run_pipeline_runners

    return runner_module, run_pipeline_runners(load_pipeline(root / f"{name}.yaml"))


def load_from(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_clickstream_sessions_retract_and_fire_late(tmp_path):
    _, runners = pipeline_example("clickstream_sessions", 400, tmp_path)
    panes = runners["sessions"].outputs
    assert any(p.is_retraction for p in panes) and any(p.timing.value == "LATE" for p in panes)
    # per session, panes minus retractions net to its final count
    net: dict = {}
    for p in panes:
        net[(p.key, p.window_start, p.window_end)] = net.get((p.key, p.window_start, p.window_end), 0) + p.value
    final = {}
    for p in panes:
        if not p.is_retraction:
            final[(p.key, p.window_start, p.window_end)] = p.value
    merged_away = {k for k, v in net.items() if v == 0}
    assert {k: v for k, v in net.items() if k not in merged_away} == {k: v for k, v in final.items()
                                                                         if k not in merged_away}


def test_sessions_table_holds_each_live_sessions_count(tmp_path):
    """examples/pipelines/sessions_table.yaml (run --local): one row per session still standing, its
    last count."""
    import io
    import sqlite3

    from windowed_operator.pipeline import load_pipeline
    from windowed_operator.pipeline.local_run import run_pipeline_locally

    pipeline_example("sessions_table", 400, tmp_path)
    run = run_pipeline_locally(load_pipeline(tmp_path / "sessions_table.yaml"), out=io.StringIO())
    live: dict = {}
    for p in run.panes("sessions"):
        if p.is_retraction:
            del live[(p.key, p.window_start)]
        else:
            live[(p.key, p.window_start)] = p.value
    with sqlite3.connect(tmp_path / "data" / "sessions_table" / "sessions.db") as db:
        rows = db.execute("SELECT key, value FROM sessions ORDER BY key, window_start").fetchall()
    assert rows == [(key, value) for (key, _), value in sorted(live.items())] and len(rows) > 20


def test_iot_averages_take_late_readings_and_count_the_later_ones(tmp_path):
    module, runners = pipeline_example("iot_sliding_average", 600, tmp_path)
    runner = runners["averages"]
    assert any(p.timing.value == "LATE" for p in runner.outputs)
    assert runner.dropped_counts["expired"] == len(runner.late_data) > 0


def test_sensor_outage_closes_the_windows_before_the_outage_during_it(tmp_path):
    """The uplink is down from 20 s to 35 s of processing time (one file per second): the window
    [15 s, 20 s) closes during the outage, 5 s of quiet plus what it needs after it; the buffered
    readings then update it and [20 s, 25 s) as LATE panes, and one too old for both is expired."""
    module, runners = pipeline_example("sensor_outage", 0, tmp_path)
    runner = runners["means"]
    closed_at = {(p.key, (p.window_start - module.START) // 1_000): now
                 for p, (_, now, _) in zip(runner.outputs, runner.emitted_at) if p.timing.value == "ON_TIME"}
    assert all(25_000 < closed_at[(f"sensor-{s}", 15)] < 35_000 for s in range(3))  # during the outage
    late = {(p.window_start - module.START) // 1_000 for p in runner.outputs if p.timing.value == "LATE"}
    assert late == {15, 20}
    assert runner.dropped_counts["expired"] == len(runner.late_data) >= 1


def test_fraud_check_flags_the_bursting_card(tmp_path):
    _, runners = pipeline_example("fraud_per_record", 600, tmp_path)
    panes = runners["spend_10m"].outputs
    assert len(panes) == 600  # one window per payment
    assert {p.key for p in panes if p.value > 1_500} == {"card-99"}


def test_cumulative_revenue_ends_each_day_at_the_day_total(tmp_path):
    import pandas as pd

    module, runners = pipeline_example("cumulative_revenue", 500, tmp_path)
    orders = pd.concat(pd.read_parquet(f) for f in sorted((tmp_path / "data" / "cumulative_revenue" /
                                                           "orders").glob("*.parquet")))
    orders = orders[orders.end_of_input.isna()] if "end_of_input" in orders else orders  # the marker file
    day = orders.ts - (orders.ts - module.START) % 86_400_000
    expected = orders.groupby([orders.store, day]).amount.sum().round(6).to_dict()
    got = {(p.key, p.window_start): round(p.value, 6) for p in runners["revenue_today"].outputs
           if p.window_end - p.window_start == 86_400_000}
    assert got == expected


def test_two_stream_join_pairs_impressions_with_their_clicks(tmp_path):
    _, runners = pipeline_example("ad_click_join", 300, tmp_path)
    panes = runners["joined"].outputs
    clicked = sum(1 for p in panes for _, click in p.value if click is not None)
    unclicked = sum(1 for p in panes for _, click in p.value if click is None)
    assert clicked > 0 and unclicked > clicked and clicked + unclicked >= 300 - 10


def test_session_summary_chain_averages_the_sessions_latest_counts(tmp_path):
    _, runners = pipeline_example("session_summary", 400, tmp_path)
    sessions = runners["sessions"].outputs
    assert any(p.is_retraction for p in sessions) and any(p.timing.value == "LATE" for p in sessions)
    live: dict = {}  # each session's latest count; a retraction takes the session out
    for p in sessions:
        window = (p.key, p.window_start, p.window_end)
        if p.is_retraction:
            live.pop(window, None)
        else:
            live[window] = (p.value, p.timestamp)
    by_five_minutes: dict = {}
    for count, timestamp in live.values():
        by_five_minutes.setdefault(timestamp - (timestamp % 300_000), []).append(count)
    expected = {start: sum(counts) / len(counts) for start, counts in by_five_minutes.items()}
    got = {p.window_start: p.value for p in runners["clicks_per_session"].outputs}  # the last pane per window
    assert got.keys() == expected.keys()
    assert all(abs(got[w] - expected[w]) < 1e-9 for w in expected)


def test_a_pipeline_examples_spark_mode_runs_the_readme_cli_command(monkeypatch, capsys):
    """``run.py NAME --spark`` writes the data, then runs ``windowed-operator run FILE`` on local
    Spark (the README commands test runs that command on Spark, on the same pipeline)."""
    import subprocess
    import sys

    calls = []
    monkeypatch.setattr(subprocess, "call", lambda command: calls.append(command) or 0)
    spec = importlib.util.spec_from_file_location("pipelines_run", EXAMPLES / "pipelines" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["clickstream_sessions", "--spark", "--scale", "200"]) == 0
    assert calls == [[sys.executable, "-m", "windowed_operator.cli", "run",
                      str(EXAMPLES / "pipelines" / "clickstream_sessions.yaml"), "--master", "local[2]"]]
    assert any((EXAMPLES / "pipelines" / "data" / "clickstream_sessions" / "clicks").iterdir())
    assert "clickstream_sessions on Spark:" in capsys.readouterr().out
