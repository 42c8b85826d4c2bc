"""Packed input: each key group's rows of a scan partition reach the processor as one Arrow payload,
and the processor works on the same frame pyspark's row-by-row handoff would have given it."""
import datetime as dt
import warnings
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from accumulations import Count, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder
from windowed_operator.spark.base.handoff import PACK_CONF
from windowed_operator.spark.scan.packing import PACKED_POSITION, PackRows, unpack_rows

from .harness import BASE, run_spark, spark_panes

pytestmark = pytest.mark.spark

GROUP = "__wo_group"


def _row_path(table: pa.Table, timezone: str) -> pd.DataFrame:
    """What pyspark 4.3's transformWithStateInPandas makes of the rows (worker.py, row_stream and
    generate_data_batches): pandas per Arrow batch, a tuple per row, a DataFrame of the tuples."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    rows = []
    for batch in table.to_batches(max_chunksize=3):
        rows += list(pd.concat(ArrowBatchTransformer.to_pandas(batch, timezone=timezone), axis=1)
                     .itertuples(index=False))
    frame = pd.DataFrame(rows)
    frame.columns = table.column_names
    return frame


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ints = rng.integers(-5, 5, n)
    return pa.table({
        "key": pa.array([f"k{i}" if i % 7 else None for i in ints], pa.string()),
        "ts": pa.array(rng.integers(0, 10**12, n), pa.int64()),
        "amount": pa.array([int(i) if i % 5 else None for i in ints], pa.int64()),
        "price": pa.array([float("nan") if i == 0 else float(i) / 3 for i in ints], pa.float64()),
        "flag": pa.array([bool(i % 2) if i % 3 else None for i in ints], pa.bool_()),
        "small": pa.array(ints.astype(np.int32), pa.int32()),
        "tiny": pa.array(ints.astype(np.int8), pa.int8()),
        "single": pa.array(ints.astype(np.float32) / 3, pa.float32()),
        "day": pa.array([dt.date(2026, 1, 1 + int(i) + 5) if i else None for i in ints], pa.date32()),
        "payload": pa.array([{"a": int(i), "b": f"s{i}"} if i % 4 else None for i in ints],
                            pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "tags": pa.array([[int(i), int(i) + 1] if i % 6 else None for i in ints], pa.list_(pa.int64())),
        "at": pa.array([dt.datetime(2026, 1, 1) + dt.timedelta(milliseconds=int(t)) for t in ints],
                       pa.timestamp("us", tz="UTC")),
        GROUP: pa.array(rng.integers(0, 4, n), pa.int64()),
    })


def _packed(table: pa.Table, **options) -> pa.Table:
    """What ``PackRows`` yields for one chunk, as one table."""
    return pa.Table.from_batches(list(PackRows(GROUP, **options)._pack(table)))


@pytest.mark.parametrize("max_pack_rows", [1, 7, 65_536])
def test_a_groups_unpacked_rows_are_the_frame_of_the_row_path(max_pack_rows):
    table = _table(200, seed=max_pack_rows)
    packed = _packed(table, max_pack_rows=max_pack_rows)
    assert packed.schema.names == [GROUP, "__wo_packed"] and packed.schema.names[PACKED_POSITION] == "__wo_packed"
    assert packed.schema.field(GROUP).type == pa.int64()
    groups = packed.column(0).to_pylist()
    payloads = packed.column(PACKED_POSITION).to_pylist()
    assert sorted(set(groups)) == sorted(set(table.column(GROUP).to_pylist()))
    for group in set(groups):
        mine = [p for g, p in zip(groups, payloads) if g == group]
        if max_pack_rows == 65_536:
            assert len(mine) == 1
        expected = _row_path(table.filter(pa.compute.equal(table.column(GROUP), group)), "America/New_York")
        got = unpack_rows(mine, "America/New_York")
        pd.testing.assert_frame_equal(got, expected)  # same rows, same order, same dtypes and values


def test_packing_bounds_a_payload_and_keeps_each_groups_order():
    table = pa.table({"v": pa.array(range(10), pa.int64()), GROUP: pa.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], pa.int32())})
    packed = _packed(table, max_pack_rows=3)
    assert packed.schema.field(GROUP).type == pa.int32()
    per_group: dict = {}
    for group, payload in zip(packed.column(0).to_pylist(), packed.column(1).to_pylist()):
        rows = unpack_rows([payload], None)
        assert len(rows) <= 3
        per_group.setdefault(group, []).extend(rows["v"].tolist())
    assert per_group == {0: [1, 4, 8], 1: [0, 2, 3, 5, 6, 7, 9]}


def test_payloads_past_a_batchs_byte_bound_go_to_the_next_batch_in_order():
    """Payloads share one buffer per output batch; past ``max_payload_bytes`` a new batch starts, and
    a single payload larger than the bound is refused, naming the bound."""
    table = _table(300, seed=3)
    one_payload = len(_packed(table.slice(0, 5), max_pack_rows=5).column(1)[0].as_py())
    batches = list(PackRows(GROUP, max_pack_rows=5, max_payload_bytes=3 * one_payload)._pack(table))
    assert len(batches) > 5 and all(batch.num_rows <= 3 for batch in batches)
    whole = _packed(table, max_pack_rows=5)
    split = pa.Table.from_batches(batches)
    assert split.column(0).to_pylist() == whole.column(0).to_pylist()
    for group in set(whole.column(0).to_pylist()):
        def rows(packed):
            return unpack_rows([p for g, p in zip(packed.column(0).to_pylist(), packed.column(1).to_pylist())
                                if g == group], None)
        pd.testing.assert_frame_equal(rows(split), rows(whole))
    with pytest.raises(ValueError, match="more than a binary column holds"):
        list(PackRows(GROUP, max_pack_rows=5, max_payload_bytes=one_payload // 2)._pack(table))


def _sessions_with_dead_letters():
    early = TriggerOption.at_watermark().with_early_firings_at_every(count=2).accumulating_and_retracting_fired_panes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KeyedWindowedOperator(SessionWindows(4_000), Sum("amount"), trigger=early, key="user", timestamp="ts",
                                     allowed_lateness=2_000, watermark=bounded_disorder(3_000),
                                     late_data_output=True, on_bad_element="dead_letter")


def _batches() -> list[list[dict]]:
    rows = [[{"user": u, "amount": a, "ts": BASE + t} for u, a, t in
             [("a", 1, 1_000), ("b", 2, 2_500), ("a", 3, 3_000), ("c", 1, 9_000)]],
            [{"user": "a", "amount": 4, "ts": BASE + 12_000}, {"user": None, "amount": 1, "ts": BASE + 12_500},
             {"user": "b", "amount": None, "ts": BASE + 13_000}, {"user": "c", "amount": 2, "ts": BASE + 1_000}],
            [{"user": "b", "amount": 5, "ts": BASE + 20_000}, {"user": "a", "amount": 6, "ts": BASE + 14_000},
             {"user": "a", "amount": 1, "ts": BASE + 2_000}]]
    return rows


def _everything(store: dict) -> Counter:
    """Every output row: panes, late elements and dead letters alike."""
    return Counter(tuple(sorted((k, str(v)) for k, v in row.items())) for rows in store.values() for row in rows)


def _hopping_sums_with_late_data():  # the array path (no scan-stage fold: late elements are kept)
    return KeyedWindowedOperator(TimeWindows(6_000).slide_by(2_000), Sum("amount"), key="user", timestamp="ts",
                                 watermark=bounded_disorder(3_000), late_data_output=True, on_bad_element="dead_letter")


def _plan_text(spark, tmp_path, op) -> str:
    from .harness import MARKED_SCHEMA

    df = spark.readStream.schema(MARKED_SCHEMA).json(str(tmp_path))
    return op.apply(df, end_of_input="end_of_input")._jdf.queryExecution().analyzed().toString()


@pytest.mark.parametrize("make", [_sessions_with_dead_letters, _hopping_sums_with_late_data])
def test_packed_and_row_by_row_handoff_give_the_same_output(spark, tmp_path, make):
    batches = _batches()
    outputs = {}
    try:
        for packed in ("false", "true"):
            spark.conf.set(PACK_CONF, packed)
            assert ("MapInArrow PackRows" in _plan_text(spark, tmp_path, make())) == (packed == "true")
            outputs[packed] = run_spark(spark, make(), batches, tmp_path / packed)
    finally:
        spark.conf.unset(PACK_CONF)
    assert _everything(outputs["true"]) == _everything(outputs["false"])
    assert spark_panes(outputs["true"])  # (the runs made panes)
    kinds = {row.get("record_type", "pane") for rows in outputs["true"].values() for row in rows}
    if make is _sessions_with_dead_letters:
        assert kinds == {"pane", "late", "dead_letter"}, kinds


def test_rows_a_scan_stage_fold_reduced_are_not_packed(spark, tmp_path):
    folded = KeyedWindowedOperator(TimeWindows(5_000), Count(), key="user", timestamp="ts",
                                   watermark=bounded_disorder(3_000))  # pre-aggregated in the scan stage
    text = _plan_text(spark, tmp_path, folded)
    assert "PreAggregation" in text and "PackRows" not in text


_PLAIN_FIELDS = [("i64", pa.int64()), ("i32", pa.int32()), ("i16", pa.int16()), ("i8", pa.int8()),
                 ("f64", pa.float64()), ("f32", pa.float32()), ("s", pa.string()), ("b", pa.bool_())]


@pytest.mark.parametrize("seed", range(3))
def test_a_record_of_plain_fields_unpacks_to_the_dicts_of_pyspark_s_conversion(seed):
    """A struct of numbers, strings and booleans (a merge's whole row) takes Arrow's ``to_pylist``;
    each dict equals pyspark's, value by value and type by type, NaN, nulls and float32 included.
    A struct with another field type (a date) keeps pyspark's conversion."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    rng = np.random.default_rng(seed)
    n = 60

    def field_values(arrow_type):
        picks = rng.integers(0, 6, n)
        if pa.types.is_floating(arrow_type):
            return [None if p == 0 else float("nan") if p == 1 else float("-inf") if p == 2 else float(rng.normal())
                    for p in picks]
        if pa.types.is_integer(arrow_type):
            info = np.iinfo(arrow_type.to_pandas_dtype())
            return [None if p == 0 else int(info.min) if p == 1 else int(info.max) if p == 2 else int(p) for p in picks]
        if pa.types.is_boolean(arrow_type):
            return [None if p == 0 else bool(p % 2) for p in picks]
        return [None if p == 0 else "" if p == 1 else f"é{p}" for p in picks]

    plain = pa.StructArray.from_arrays([pa.array(field_values(t), t) for _, t in _PLAIN_FIELDS],
                                       names=[name for name, _ in _PLAIN_FIELDS],
                                       mask=pa.array(rng.integers(0, 5, n) == 0))
    dated = pa.array([{"a": 1, "d": dt.date(2026, 1, 2)} if i % 3 else None for i in range(n)],
                     pa.struct([("a", pa.int64()), ("d", pa.date32())]))
    table = pa.table({"row": plain, "dated": dated, GROUP: pa.array(np.zeros(n, dtype=np.int64))})
    got = unpack_rows(list(_packed(table).column(PACKED_POSITION).to_pylist()), "UTC")
    expected = ArrowBatchTransformer.to_pandas(table, timezone="UTC")
    for name, column in zip(table.column_names, expected):
        assert got[name].dtype == column.dtype
        assert [repr(v) for v in got[name]] == [repr(v) for v in column], name  # (repr: NaN, -0.0 and types show)
