"""One encoding of a late element or a dead letter, whatever the operator and the runner: the
element as it arrived (a one-input operator's row, a merge input's row, never the value read from
it), its instants as epoch ms, and a merge's side rows naming the input they came on."""
from __future__ import annotations

import datetime as dt
import io
import json
import textwrap

import numpy as np
import pandas as pd

from accumulations import Sum
from accumulations.merge import InnerJoin
from windowed_operator import InputOptions, KeyedWindowedMergeOperator, KeyedWindowedOperator, TimeWindows
from windowed_operator.elements import element_json
from windowed_operator.panes import PaneRecord, Timing
from windowed_operator.pipeline import load_pipeline
from windowed_operator.pipeline.local_run import run_pipeline_locally

BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def test_a_late_element_is_the_row_that_arrived_not_the_value_read_from_it():
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum(), key="user", timestamp="ts", value="amount",
                               allowed_lateness=0, late_data_output=True)
    runner = op.local_runner()
    runner.add_elements({"user": "a", "amount": 1, "ts": 1_000, "note": "x"})
    runner.advance_watermark_to(30_000)
    runner.add_elements({"user": "a", "amount": 2, "ts": 9_999, "note": "late"})
    [late] = runner.late_data
    assert late.element == {"user": "a", "amount": 2, "ts": 9_999, "note": "late"}
    assert (late.key, late.timestamp, late.input) == ("a", 9_999, None)


def test_a_merges_late_elements_and_dead_letters_are_its_inputs_rows_with_the_input_named():
    op = KeyedWindowedMergeOperator(TimeWindows(10_000), InnerJoin(), key="user", timestamp="ts", allowed_lateness=0,
                                    late_data_output=True, on_bad_element="dead_letter",
                                    left=InputOptions(value={"amt": "amount"}))
    runner = op.local_runner()
    runner.add_elements("left", {"user": "a", "amount": 1, "ts": 1_000})
    runner.add_elements("right", {"user": "a", "page": "x", "ts": 2_000})
    runner.advance_watermark_to("left", 30_000)
    runner.advance_watermark_to("right", 30_000)
    runner.add_elements("left", {"user": "a", "amount": 2, "ts": 1_500}, {"user": "a", "amount": None, "ts": 1_600})
    runner.add_elements("right", {"user": "a", "page": "y", "ts": 2_500})
    assert [(d.input, d.element, d.reason.value) for d in runner.late_data] == [
        ("left", {"user": "a", "amount": 2, "ts": 1_500}, "expired"),   # (the row, not its value {"amt": 2})
        ("right", {"user": "a", "page": "y", "ts": 2_500}, "expired")]
    assert [(d.input, d.element, d.reason.value) for d in runner.dead_letters] == [
        ("left", {"user": "a", "amount": None, "ts": 1_600}, "invalid_value")]


def test_element_json_writes_instants_as_epoch_ms_and_a_pane_as_its_output_row():
    row = {"ts": pd.Timestamp("2026-01-01 00:00:01.5"), "at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
           "none": pd.NaT, "np": np.datetime64("2026-01-01T00:00:02"), "n": np.int64(3), "x": float("nan")}
    assert json.loads(element_json(row)) == {"ts": BASE + 1_500, "at": BASE, "none": None, "np": BASE + 2_000,
                                             "n": 3, "x": None}
    pane = PaneRecord("a", 0, 10, 5, Timing.ON_TIME, 0, True, True, False, 9)
    assert json.loads(element_json(pane)) == {
        "key": "a", "window_start": 0, "window_end": 10, "value": 5, "timing": "ON_TIME", "pane_index": 0,
        "is_first": True, "is_last": True, "is_retraction": False, "timestamp": 9}


def test_run_local_side_rows_of_a_merge_name_their_input(tmp_path):
    data = tmp_path / "data"
    for name, rows in {"orders": [[{"user": "a", "amount": 1, "ts": BASE}],
                                  [{"user": "a", "amount": 2, "ts": BASE + 30_000}],
                                  [{"user": "a", "amount": 3, "ts": BASE + 1_000}]],
                       "payments": [[{"user": "a", "paid": 1, "ts": BASE + 500}],
                                    [{"user": "b", "paid": 2, "ts": BASE + 31_000}],
                                    [{"user": "b", "paid": 3, "ts": BASE + 32_000}]]}.items():
        (data / name).mkdir(parents=True)
        for i, batch in enumerate(rows):
            (data / name / f"part-{i}.json").write_text("".join(json.dumps(r) + "\n" for r in batch))
    path = tmp_path / "join.yaml"
    path.write_text(textwrap.dedent("""
        name: join
        checkpoint: ckpt
        sources:
          orders: {files: {path: data/orders, format: json, max_files_per_trigger: 1,
                           schema: "user string, amount bigint, ts bigint"}}
          payments: {files: {path: data/payments, format: json, max_files_per_trigger: 1,
                             schema: "user string, paid bigint, ts bigint"}}
        operators:
          - {name: joined, left: orders, right: payments, key: user, timestamp: ts, window: {tumbling: {size: 10s}},
             accumulation: {inner_join: {}}, watermark: {bounded_disorder: 1s}, late_data_output: true}
        sinks:
          - {input: joined, output: side, memory: {query_name: side}}
          - {input: joined, memory: {query_name: mixed}}
    """))
    run = run_pipeline_locally(load_pipeline(path), out=io.StringIO())
    side, mixed = ([row for bundle in bundles for row in bundle] for bundles in run.sink_rows)
    assert [(r["input"], r["reason"], json.loads(r["element"])) for r in side] == [
        ("left", "expired", {"user": "a", "amount": 3, "ts": BASE + 1_000})]
    assert list(side[0]) == ["key", "record_type", "reason", "element", "element_timestamp", "input"]
    assert {r["input"] for r in mixed if r["record_type"] == "pane"} == {None}
