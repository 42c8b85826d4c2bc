"""The floor of a query: the same query with each of our stateful processors replaced by one that
reads every frame it is handed and does nothing else, so that what remains is Spark's cost of the
query's shape: its scan stage (our fold, where it has one), grouping by key group, the handoff
(packed or row by row) and the output rows.

    with floor_plans(rows_per_call):   # build the query inside: each transformWithStateInPandas gets the floor's
        out = operator.apply(df)

The floor emits as many rows as ours (``rows_per_call``: per operator, rows each call yields, so
that early firings and retractions are not charged to ours; ``calibrate`` finds them from one run
of ours and one counting run of the floor), with the processor's output schema: the key varies (a
next stage groups them as it would ours), each is a pane of one window ending at the batch's
watermark (a native next stage takes them, not late), values 0 or null.  It registers no timers and
declares no state.  ours / floor (throughput) is then the library's own share of a query's time;
floor / native is Spark's price of a Python stateful operator (``benchmarks/run.py``,
``benchmarks/nexmark/run.py``).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

#: The prefix of our operators' observed metrics (``windowed_operator.spark.base.progress``).
OBSERVATION_PREFIX = "windowed_operator "


def operator_of(observation: str) -> str:
    """The operator name (or, unnamed, label) an observation is named after (``stage.observation_name``)."""
    name = observation[len(OBSERVATION_PREFIX):]
    head, sep, tail = name.rpartition(" #")
    return head if sep and tail.isdigit() else name


class FloorProcessor(StatefulProcessor):
    """Reads every frame of a call; yields ``rows`` rows of ``fields`` (name, DDL type) with the key
    varying; counts its calls in ``calls`` (an accumulator) where given."""

    def __init__(self, fields: list[tuple[str, str]], rows: int, calls: Any = None) -> None:
        self.fields, self.rows, self.calls = fields, rows, calls
        self.frame: Optional[pd.DataFrame] = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        integral = dict(self.fields).get("key", "string").strip().lower() in ("bigint", "int", "long", "integer")
        columns: dict[str, Any] = {name: [None] * self.rows for name, _ in self.fields}
        if "key" in columns:
            columns["key"] = list(range(self.rows)) if integral else [str(i) for i in range(self.rows)]
        for name, type_name in self.fields:  # (plain pane values: a native next stage refuses nulls)
            if name in ("timing",):
                columns[name] = ["ON_TIME"] * self.rows
            elif name in ("pane_index", "__wo_phase") or (name == "value" and type_name in ("bigint", "double")):
                columns[name] = [0] * self.rows
            elif name in ("is_first", "is_last", "is_retraction"):
                columns[name] = [False] * self.rows
        self.frame = pd.DataFrame(columns)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        for _ in rows:
            pass
        if self.calls is not None:
            self.calls.add(1)
        if self.rows:
            yield self._stamped(timerValues.getCurrentWatermarkInMs())

    def _stamped(self, watermark: int) -> pd.DataFrame:
        """The rows as panes of one window ending just after the watermark (not late by Spark's rule)."""
        frame = self.frame
        assert frame is not None
        names = dict(self.fields)
        for name, value in (("window_start", watermark - 9_999), ("window_end", watermark + 1), ("timestamp", watermark)):
            if name in names:
                frame[name] = value
        if "event_time" in names:
            frame["event_time"] = pd.Timestamp(watermark * 1000 + 999, unit="us", tz="UTC")
        return frame

    def close(self) -> None:
        pass


class _FloorFactory:
    """Stands for ``DeferredProcessor`` in ``driver.stage`` while a floor query is built."""

    def __init__(self, rows_per_call: Callable[[str], int], calls: Callable[[str], Any]) -> None:
        self.rows_per_call, self.calls = rows_per_call, calls

    def of(self, plan: Any) -> FloorProcessor:
        label = plan.operator.name or plan.operator.label()  # (as its observed metrics are named)
        return FloorProcessor(plan.processor_fields(), self.rows_per_call(label), self.calls(label))


@contextmanager
def floor_plans(rows_per_call: Callable[[str], int] = lambda label: 0,
                calls: Callable[[str], Any] = lambda label: None) -> Iterator[None]:
    """Queries built inside get the floor's processor (``rows_per_call(operator)`` rows per call,
    the operator by its name or, unnamed, its label; ``calls(operator)``: an accumulator counting
    its calls, or None)."""
    import sys

    from pyspark import cloudpickle

    from windowed_operator.spark.driver import stage

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # (executors cannot import benchmarks/)
    original = stage.DeferredProcessor
    stage.DeferredProcessor = _FloorFactory(rows_per_call, calls)  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        stage.DeferredProcessor = original  # type: ignore[misc]


def panes_by_operator(progress: list[dict]) -> dict[str, int]:
    """Pane rows each of our operators emitted over a run (its observed ``panes``), by label."""
    found: dict[str, int] = {}
    for batch in progress:
        for name, metrics in (batch.get("observedMetrics") or {}).items():
            if name.startswith(OBSERVATION_PREFIX):
                metrics = metrics.asDict() if hasattr(metrics, "asDict") else metrics  # (a Row, or JSON's dict)
                found[operator_of(name)] = found.get(operator_of(name), 0) + int(metrics.get("panes", 0) or 0)
    return found


def calibrate(spark: Any, ours_progress: list[dict], run_floor: Callable[[dict[str, int], Callable[[str], Any]], Any],
              passes: int = 3) -> dict[str, int]:
    """Rows per call for each operator: its panes in ours' run over the floor's calls in a counting
    run (``run_floor(rows, calls)`` builds the query inside ``floor_plans`` with those and runs it).
    A later stage of a chain is called only as often as the stage before it emits: each pass runs
    with the rows found so far, until they hold (at most ``passes`` runs)."""
    panes = panes_by_operator(ours_progress)
    rows: dict[str, int] = {}
    for _ in range(passes):
        counters: dict[str, Any] = {}

        def calls(label: str) -> Any:
            return counters.setdefault(label, spark.sparkContext.accumulator(0))

        run_floor(dict(rows), calls)
        found = {label: math.ceil(panes.get(label, 0) / max(1, counter.value)) for label, counter in counters.items()}
        if found == rows or len(found) == 1:  # (one stage: its calls do not depend on the rows)
            return found
        rows = found
    return rows


def floor_rows(progress: list[dict]) -> int:
    """The rows a run's sink received (the floor's: every row its last stage emitted)."""
    return sum(int((batch.get("sink") or {}).get("numOutputRows", 0) or 0) for batch in progress)


__all__ = ["FloorProcessor", "calibrate", "floor_plans", "floor_rows", "panes_by_operator"]
