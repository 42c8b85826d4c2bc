"""A key group's rows handed to the processor as slices of the Arrow batches pyspark reads.

pyspark 4.3's ``transformWithStateInPandas`` regroups its input row by row in Python
(``pyspark/worker.py``, ``transform_with_state_func``): each Arrow batch becomes pandas, is walked
with ``itertuples``, and a frame is built per grouping key from the tuples, about 4.6 us a row
(``packed_input``).  Spark sorts a stateful operator's input by its grouping key, so a key group's
rows are a run of each batch: sliced out, converted once per batch (``row_frames``), they are the
frames the row path would build, at a fraction of the cost, and with no pass in the scan stage,
which packing needs (Nexmark, 2M events, rounds interleaved: q8 1.10x over the row path and 1.22x
over packing, q5r 1.33x and 1.31x; ``benchmarks/results/nexmark_handoffs.txt``).

pyspark has no hook for this, so ``install`` wraps ``pyspark.worker.read_udfs`` in the worker
daemon (``worker_daemon``, a local master) before it forks workers: the wrapper keeps what
pyspark's function was built with (the processor's function, the key and value offsets, the state
client, the conversion settings, read from its closure) and regroups its input by slices.  Three
guards keep pyspark's own path wherever this one is not known to give the same frames:

- the function must be the one this was written against: its closure names every value the
  slices need (``_NEEDED``; ``tests/spark/test_sliced_handoff.py`` checks the pinned pyspark);
- the grouping column must be the library's (``GROUP_COLUMN``) and never null: only the library's
  processors, whose input types ``row_frames`` is tested on, take slices;
- ``WINDOWED_OPERATOR_SLICED_HANDOFF=false`` (``handoff.SLICED_HANDOFF_ENV``) in the workers' environment (on a local master,
  ``spark.executorEnv.WINDOWED_OPERATOR_SLICED_HANDOFF``) turns it off, for comparison or doubt.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Optional

import numpy as np
import pandas as pd
import pyarrow as pa

from ..base.handoff import enabled
from ..plan import GROUP_COLUMN
from ..base.row_frames import rows_frame

#: What pyspark's ``transform_with_state_func`` must hold in its closure for slices to stand in for it.
_NEEDED = ("udf", "key_offsets", "value_offsets", "stateful_processor_api_client", "runner_conf", "output_schema")
#: The name of pyspark's function (nested in ``read_udfs``) that slices stand in for.
_STOCK_NAME = "transform_with_state_func"

Batches = Iterator[pa.RecordBatch]


def stock_function_fits() -> bool:
    """Whether pyspark's ``read_udfs`` builds the function slices were written against: a nested
    function of that name whose closure names every value they need (read from its code, as
    ``install`` would find it at run time)."""
    import pyspark.worker as worker

    def nested(code: Any) -> Iterator[Any]:
        for constant in code.co_consts:
            if hasattr(constant, "co_freevars"):
                yield constant
                yield from nested(constant)

    found = [code for code in nested(worker.read_udfs.__code__) if code.co_name == _STOCK_NAME]
    return bool(found) and all(set(_NEEDED) <= set(code.co_freevars) for code in found)


def install() -> bool:
    """Wrap ``pyspark.worker.read_udfs`` in this process (the daemon, before it forks): True when
    it is wrapped; False when slicing is turned off or pyspark's function is not the expected one."""
    import pyspark.worker as worker

    if getattr(worker.read_udfs, "_slices_key_groups", False):
        return True
    if not enabled() or not stock_function_fits():
        return False
    from pyspark.util import PythonEvalType

    stock = worker.read_udfs

    def read_udfs(pickle_ser: Any, udf_info_list: Any, eval_type: int, runner_conf: Any, eval_conf: Any) -> Any:
        func, profiler, deserializer, serializer = stock(pickle_ser, udf_info_list, eval_type, runner_conf, eval_conf)
        if eval_type == PythonEvalType.SQL_TRANSFORM_WITH_STATE_PANDAS_UDF:
            func = sliced(func)
        return func, profiler, deserializer, serializer

    read_udfs._slices_key_groups = True  # type: ignore[attr-defined]
    worker.read_udfs = read_udfs
    return True


def sliced(stock: Callable[[int, Batches], Batches]) -> Callable[[int, Batches], Batches]:
    """pyspark's ``transform_with_state_func`` regrouping by slices, or ``stock`` itself where its
    closure lacks a value slicing needs."""
    cells = _closure(stock)
    if any(name not in cells for name in _NEEDED):
        return stock
    from pyspark.sql.conversion import PandasToArrowConversion
    from pyspark.sql.streaming.stateful_processor_util import TransformWithStateInPandasFuncMode as Mode

    udf, client, conf, output_schema = (cells["udf"], cells["stateful_processor_api_client"], cells["runner_conf"],
                                        cells["output_schema"])
    key_offsets, value_offsets = list(cells["key_offsets"]), list(cells["value_offsets"])

    def converted(frames: Iterator[pd.DataFrame]) -> Batches:  # (as pyspark converts the processor's output)
        for frame in frames:
            yield PandasToArrowConversion.convert(
                [frame], output_schema, timezone=conf.timezone, safecheck=conf.safecheck, arrow_cast=True,
                assign_cols_by_name=conf.assign_cols_by_name,
                int_to_decimal_coercion_enabled=conf.int_to_decimal_coercion_enabled)

    def func(split_index: int, batches: Batches) -> Batches:
        batches = iter(batches)
        first = next(batches, None)
        rest = itertools.chain([] if first is None else [first], batches)
        if not _library_grouped(first, key_offsets) or getattr(conf, "prefer_int_ext_dtype", False):
            yield from stock(split_index, rest)
            return
        for key, runs in itertools.groupby(key_runs(rest, key_offsets, value_offsets, conf.timezone),
                                           key=lambda run: run[0]):
            yield from converted(udf(client, Mode.PROCESS_DATA, key, (frame for _, frame in runs)))
        yield from converted(udf(client, Mode.PROCESS_TIMER, None, iter([])))
        yield from converted(udf(client, Mode.COMPLETE, None, iter([])))

    return func


def key_runs(batches: Batches, key_offsets: list[int], value_offsets: list[int],
             timezone: Optional[str]) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """Each batch's runs of one key, in order: (the key as pyspark passes it, a tuple of Python
    values; the run's value columns as the row path's frame).  A key whose rows span batches comes
    as consecutive runs, as the row path gives it consecutive chunks."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        keys = [batch.column(offset).to_numpy(zero_copy_only=False) for offset in key_offsets]
        starts_run = np.zeros(batch.num_rows, dtype=bool)
        starts_run[0] = True
        for column in keys:
            starts_run[1:] |= column[1:] != column[:-1]
        starts = np.flatnonzero(starts_run).tolist()
        ends = [*starts[1:], batch.num_rows]
        values = rows_frame(pa.Table.from_batches([batch]).select(value_offsets), timezone)
        # The row path converts the whole batch, then builds a key's frame from its rows' Python
        # values, inferring an object column's dtype from that key's rows alone (booleans with a
        # null elsewhere in the batch come back bool): a run of an object column is inferred again.
        objects = values.dtypes.eq(object).any()  # type: ignore[arg-type]  # pandas-stubs: eq takes a dtype too
        key_values = [column.tolist() for column in keys]
        for start, end in zip(starts, ends):
            run = values.iloc[start:end]
            if start:
                run = run.reset_index(drop=True)
            yield tuple(column[start] for column in key_values), run.infer_objects() if objects else run


def _library_grouped(batch: Optional[pa.RecordBatch], key_offsets: list[int]) -> bool:
    """The input of one of the library's processors: grouped by its group column alone, never null
    (no input at all: nothing to regroup either way)."""
    if batch is None:
        return True
    if len(key_offsets) != 1 or batch.schema.names[key_offsets[0]] != GROUP_COLUMN:
        return False
    key_type = batch.schema.types[key_offsets[0]]
    return pa.types.is_integer(key_type) and batch.column(key_offsets[0]).null_count == 0


def _closure(func: Callable[..., Any]) -> dict[str, Any]:
    cells = func.__closure__ or ()
    try:
        return {name: cell.cell_contents for name, cell in zip(func.__code__.co_freevars, cells)}
    except ValueError:  # an empty cell
        return {}


__all__ = ["install", "key_runs", "sliced", "stock_function_fits"]
