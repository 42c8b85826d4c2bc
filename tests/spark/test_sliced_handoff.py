"""Sliced handoff: a local session's workers hand the library's processors each key group's rows as
slices of pyspark's Arrow batches, the same frames pyspark's row-by-row regrouping would build."""
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Sum
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder
from windowed_operator.spark.base.handoff import PACK_CONF, SLICED_HANDOFF_ENV, enabled, row_by_row, workers_slice
from windowed_operator.spark.worker.sliced import key_runs, stock_function_fits

from .harness import BASE, run_spark, spark_panes
from .test_packed_input import GROUP, _table

pytestmark = pytest.mark.spark


def _workers_slice_now(spark) -> list[bool]:
    def _slicing(rows):  # (nested: pickled by value, the workers cannot import the tests)
        import pandas as pd
        import pyspark.worker

        for _ in rows:
            pass
        yield pd.DataFrame({"slices": [bool(getattr(pyspark.worker.read_udfs, "_slices_key_groups", False))]})

    return [r.slices for r in spark.range(2, numPartitions=2).mapInPandas(_slicing, "slices boolean").collect()]


def test_the_pinned_pyspark_builds_the_function_slices_stand_in_for():
    """If a pyspark release renames what its transformWithStateInPandas function holds, slicing
    steps aside (the row path runs, slower): this fails first, so that it is noticed."""
    assert stock_function_fits()


def test_a_local_session_s_workers_slice_and_row_by_row_turns_it_off(spark):
    assert workers_slice(spark.conf) and _workers_slice_now(spark) == [True, True]
    with row_by_row(spark):
        assert spark.conf.get(PACK_CONF) == "false"
        assert _workers_slice_now(spark) == [False, False]  # (a daemon started without it)
    assert spark.conf.get(PACK_CONF, None) is None and SLICED_HANDOFF_ENV not in spark.sparkContext.environment
    assert _workers_slice_now(spark) == [True, True]


def test_slicing_is_off_only_for_false():
    assert enabled({}) and enabled({SLICED_HANDOFF_ENV: "true"}) and enabled({SLICED_HANDOFF_ENV: ""})
    assert not enabled({SLICED_HANDOFF_ENV: "FALSE "})


class _Conf(dict):
    def get(self, name, default=None):
        return super().get(name, default)


def test_input_is_packed_by_default_only_where_the_workers_do_not_slice():
    daemon = {"spark.python.daemon.module": "windowed_operator.spark.worker_daemon"}
    assert workers_slice(_Conf(daemon))
    assert not workers_slice(_Conf())  # the stock daemon (a cluster)
    assert not workers_slice(_Conf({**daemon, f"spark.executorEnv.{SLICED_HANDOFF_ENV}": "false"}))


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 120), groups=st.integers(1, 5), batch_rows=st.integers(1, 50), seed=st.integers(0, 99))
def test_a_key_group_s_runs_are_the_frames_of_the_row_path(rows, groups, batch_rows, seed):
    """Rows sorted by group (as Spark sorts a stateful operator's input), cut into Arrow batches of
    any size: each group's runs, in order, make the frame pyspark's row path builds for it (same
    values, order and dtypes: nulls, NaN, narrow integers, float32, dates, structs, lists,
    timestamps), and each group comes once, as consecutive runs."""
    table = _table(rows, seed)
    table = table.set_column(table.schema.get_field_index(GROUP), GROUP,
                             pa.array(sorted(v % groups for v in table.column(GROUP).to_pylist()), pa.int64()))
    key_offset = table.schema.get_field_index(GROUP)
    value_offsets = list(range(table.num_columns))
    runs = list(key_runs(iter(table.to_batches(max_chunksize=batch_rows)), [key_offset], value_offsets,
                         "America/New_York"))
    keys = [key for key, _ in runs]
    assert all(type(k) is int for key in keys for k in key)  # (Python values, as the row path passes them)
    seen = [key for i, key in enumerate(keys) if i == 0 or keys[i - 1] != key]
    assert len(seen) == len(set(seen))
    expected = _row_path_by_group(table, batch_rows, key_offset, "America/New_York")
    assert [key for (key,) in seen] == list(expected)
    for (group,) in seen:
        frames = [frame for key, frame in runs if key == (group,)]
        assert all(list(frame.index) == list(range(len(frame))) for frame in frames)
        pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True), expected[group])


def _row_path_by_group(table: pa.Table, batch_rows: int, key_offset: int, timezone: str) -> dict:
    """pyspark 4.3's regrouping (worker.py, ``row_stream`` and ``generate_data_batches``): each Arrow
    batch to pandas as a whole, a tuple per row, the rows of each key's run as one DataFrame (the
    processor concatenates a key's frames, so one frame per key here)."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    rows: dict = {}
    for batch in table.to_batches(max_chunksize=batch_rows):
        for row in pd.concat(ArrowBatchTransformer.to_pandas(batch, timezone=timezone), axis=1).itertuples(index=False):
            rows.setdefault(row[key_offset], []).append(row)
    frames = {}
    for key, key_rows in rows.items():
        frames[key] = pd.DataFrame(key_rows)
        frames[key].columns = table.column_names
    return frames


def _hopping_sums():
    return KeyedWindowedOperator(TimeWindows(6_000).slide_by(2_000), Sum("amount"), key="user", timestamp="ts",
                                 watermark=bounded_disorder(3_000), late_data_output=True,
                                 on_bad_element="dead_letter")


def _batches() -> list[list[dict]]:
    users = ["a", "b", "c", "d", "e", None]
    return [[{"user": users[(i * 7 + b) % 6], "amount": (i % 5) or None, "ts": BASE + b * 4_000 + (i * 37) % 5_000}
             for i in range(40)] for b in range(4)]


def test_sliced_packed_and_row_by_row_give_the_same_output_with_groups_across_arrow_batches(spark, tmp_path):
    """Arrow batches of 3 rows: every key group spans batches, so its runs come from several."""
    outputs = {}
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "3")
    try:
        outputs["sliced"] = run_spark(spark, _hopping_sums(), _batches(), tmp_path / "sliced")
        spark.conf.set(PACK_CONF, "true")
        try:
            outputs["packed"] = run_spark(spark, _hopping_sums(), _batches(), tmp_path / "packed")
        finally:
            spark.conf.unset(PACK_CONF)
        with row_by_row(spark):
            outputs["rows"] = run_spark(spark, _hopping_sums(), _batches(), tmp_path / "rows")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    def everything(store):
        return sorted(repr(sorted(row.items())) for rows in store.values() for row in rows)

    assert spark_panes(outputs["rows"])
    assert everything(outputs["sliced"]) == everything(outputs["rows"])
    assert everything(outputs["packed"]) == everything(outputs["rows"])
