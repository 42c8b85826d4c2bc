"""An operator's output as two DataFrames (``windowed_operator.spark.plan.outputs``): the panes typed and
non-null, the late data and dead letters equal to the local runner's, and both written by one
query whose table sink applies no batch twice when Spark replays one after a restart."""
from __future__ import annotations

import json
import warnings
from collections import Counter

import pytest
from pyspark.sql import types as T

from accumulations import Count, InnerJoin, Sum
from triggers import TriggerOption
from windowed_operator import (KeyedWindowedMergeOperator, KeyedWindowedOperator, TimeWindows, WindowedOperator,
                               bounded_disorder)
from windowed_operator.panes import OUTPUT_COLUMNS, SIDE_OUTPUT_COLUMNS
from windowed_operator.pipeline.local_io import side_row
from windowed_operator.sinks import TableSink
from windowed_operator.spark import Outputs, apply_outputs, split_outputs

from .harness import BASE, END_COLUMN, MARKED_SCHEMA, RIGHT_SCHEMA, release_batches, run_local_like_spark, \
    write_batches

pytestmark = pytest.mark.spark

DELAY = 2_000
NON_NULL = ["key", "window_start", "window_end", "timing", "pane_index", "is_first", "is_last", "is_retraction",
            "timestamp"]


def sums_operator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(TimeWindows(5_000), Sum("amount"), key="user", timestamp="ts",
                                     watermark=bounded_disorder(DELAY),
                                     trigger=TriggerOption.at_watermark().discarding_fired_panes(),
                                     late_data_output=True, on_bad_element="dead_letter")


BATCHES = [
    [{"user": "a", "amount": 1, "ts": BASE + 1_000}, {"user": "b", "amount": 2, "ts": BASE + 2_000}],
    [{"user": "a", "amount": 3, "ts": BASE + 9_000}, {"user": None, "amount": 4, "ts": BASE + 9_500}],
    [{"user": "b", "amount": 5, "ts": BASE + 1_500}, {"user": "a", "amount": 6, "ts": BASE + 14_000}],  # b: late
    [{"user": "c", "amount": 7, "ts": BASE + 16_000}, {"user": "a", "amount": 8, "ts": None}],  # a: no time
    [{"user": "c", "amount": 9, "ts": BASE + 4_000}, {"user": "b", "amount": 1, "ts": BASE + 21_000}],  # c: late
]


def _side_tuple(row: dict) -> tuple:
    element = {k: v for k, v in json.loads(row["element"]).items() if k != END_COLUMN and v is not None}
    moment = row["element_timestamp"]  # (aware from the local runner, naive local time from collect())
    return (row.get("key"), row["record_type"], row["reason"], json.dumps(element, sort_keys=True),
            None if moment is None else round(moment.timestamp() * 1000))


def test_panes_typed_and_side_rows_of_one_query_survive_a_replayed_batch(spark, tmp_path):
    op = sums_operator()
    staging, source, checkpoint = tmp_path / "staging", tmp_path / "in", tmp_path / "checkpoint"
    files = write_batches(staging, BATCHES)
    source.mkdir()
    outputs = apply_outputs(op, spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1)
                            .json(str(source)), end_of_input=END_COLUMN)
    assert isinstance(outputs, Outputs)
    # the panes: exactly the pane columns, the flags, indexes, key and times declared non-null
    assert outputs.panes.columns == OUTPUT_COLUMNS
    nullable = {f.name: f.nullable for f in outputs.panes.schema.fields}
    assert [name for name in NON_NULL if nullable[name]] == []
    assert isinstance(outputs.panes.schema["is_retraction"].dataType, T.BooleanType)
    # the side rows: the columns run --local's side sinks write
    assert outputs.side is not None and outputs.side.columns == ["key", *SIDE_OUTPUT_COLUMNS]
    assert [f.name for f in outputs.side.schema.fields if not f.nullable] == ["record_type", "reason", "element"]

    sink = TableSink(str(tmp_path / "spark.db"), "sums", mode="add", operator=op, columns=["batch_id"])
    side_rows: dict[int, list[dict]] = {}
    applied: list[tuple[int, bool]] = []
    dtypes: list[dict] = []

    def side(batch_df, batch_id):  # idempotent by batch id
        side_rows[batch_id] = [r.asDict() for r in batch_df.collect()]

    def panes(batch_df, batch_id):  # the table sink, recording what it did and the batch's pandas dtypes
        frame = batch_df.toPandas()
        if len(frame):
            dtypes.append({name: str(dtype) for name, dtype in frame.dtypes.items()})
        applied.append((batch_id, sink(batch_df, batch_id).applied))

    def start(pane_sink):
        return (outputs.write(panes=pane_sink, side=side).option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True).start())

    release_batches(staging, source, 3)
    start(sink).awaitTermination()  # (the TableSink itself as a sink)
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    replayed = int(commits[-1].name)
    commits[-1].unlink()  # as if the query had died after the sinks wrote the batch, before Spark committed it
    release_batches(staging, source, len(files))
    start(panes).awaitTermination()

    assert (replayed, False) in applied  # the replayed batch reached the table sink, which skipped it
    assert all(ok for batch_id, ok in applied if batch_id != replayed)
    local = run_local_like_spark(op, BATCHES, DELAY)
    reference = TableSink(str(tmp_path / "local.db"), "sums", mode="add", operator=op, columns=["batch_id"])
    reference(local.outputs, 0)
    strip = lambda rows: sorted(tuple(v for k, v in r.items() if k != "batch_id") for r in rows)  # noqa: E731
    assert strip(sink.rows()) == strip(reference.rows()) and len(reference.rows()) >= 4

    expected = Counter(_side_tuple(side_row(d, "late", True)) for d in local.late_data)
    expected += Counter(_side_tuple(side_row(d, "dead_letter", True)) for d in local.dead_letters)
    got = Counter(_side_tuple(r) for rows in side_rows.values() for r in rows)
    assert got == expected
    assert {kind for _, kind, *_ in expected} == {"late", "dead_letter"}

    assert dtypes, "some batch should have had panes"
    for seen in dtypes:
        assert seen["is_first"] == seen["is_last"] == seen["is_retraction"] == "bool"
        assert seen["value"] == "int64" and seen["pane_index"] == "int32" and seen["key"] == "object"
        assert seen["window_start"].startswith("datetime64")


def test_merges_and_chains_split_and_bad_input_is_named(spark, tmp_path):
    """Analysis only (no query runs): a merge's and a chain's parts, and the refusals."""
    left = spark.readStream.schema(MARKED_SCHEMA).json(str(tmp_path))
    right = spark.readStream.schema(RIGHT_SCHEMA).json(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merge = KeyedWindowedMergeOperator(TimeWindows(5_000), InnerJoin(), key="user", timestamp="ts",
                                           watermark=bounded_disorder(DELAY), late_data_output=True)
        chain = sums_operator().then(WindowedOperator(TimeWindows(10_000), Sum(), late_data_output=True))
    merged = apply_outputs(merge, left, right)
    assert merged.panes.columns == OUTPUT_COLUMNS and merged.side is not None
    assert not any(f.nullable for f in merged.panes.schema.fields if f.name in NON_NULL)
    assert merged.side.columns == ["key", *SIDE_OUTPUT_COLUMNS, "input"]  # (the input a side row came on)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merge_chain = merge.then(WindowedOperator(TimeWindows(10_000), Count(), late_data_output=True))
    merged_chain = apply_outputs(merge_chain, left, right)
    assert merged_chain.side is not None
    assert merged_chain.side.columns == [*SIDE_OUTPUT_COLUMNS, "input", "stage"]  # (later stages hand it on)
    chained = apply_outputs(chain, left, end_of_input=END_COLUMN)
    assert chained.panes.columns == OUTPUT_COLUMNS[1:]
    assert chained.side is not None and chained.side.columns == [*SIDE_OUTPUT_COLUMNS, "stage"]
    assert not chained.side.schema["stage"].nullable

    with pytest.raises(ValueError, match="'window_start'.*missing"):
        split_outputs(spark.range(3))
    with pytest.raises(ValueError, match="'reason'"):
        split_outputs(chained.mixed.drop("reason"))
    plain = apply_outputs(sums_operator().model_copy(update={"late_data_output": False, "on_bad_element": "raise"}),
                          left, end_of_input=END_COLUMN)
    assert plain.side is None and plain.panes.columns == OUTPUT_COLUMNS
    with pytest.raises(ValueError, match="no late-data or dead-letter output"):
        plain.write(side=print)
    with pytest.raises(TypeError, match="panes='table'"):
        merged.write(panes="table")
