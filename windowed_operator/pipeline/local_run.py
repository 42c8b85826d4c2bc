"""Running a pipeline file in the local runner: no Spark, deterministic, for tests and small data.

Each file of a file source (oldest first, as Spark reads them) or each ``rows_per_batch`` rows of a memory source is
one bundle, as one micro-batch on Spark with ``maxFilesPerTrigger=1``.  An operator's ``upstream``
watermark (Spark's ``withWatermark`` delay) is the bounded disorder it stands for.  Operators fed
by operators get their panes as elements and their watermark after them (window propagation works
here); merges get each input's bundles on their side.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from ..merge_operator import MergeOperatorBase
from ..panes import DropReason, DroppedElement, PaneRecord, as_consumed
from ..runners.totals import Totals
from ..sinks.completeness import BatchWatermark
from ..watermarks import BoundedDisorderWatermark
from .local_io import console_table, dropped_row, pane_row, read_file, side_row, typed_rows, write_rows
from .endpoints import SourceSpec
from .document import Pipeline


def source_batches(spec: SourceSpec) -> list[list[dict]]:
    if spec.files is not None:
        suffix = {"json": "*.json", "csv": "*.csv", "parquet": "*.parquet"}[spec.files.format]
        # Spark's file source takes files oldest first (then, here, by name where times tie)
        files = sorted(Path(spec.files.path).glob(suffix), key=lambda f: (f.stat().st_mtime_ns, f.name))
        if not files:
            raise FileNotFoundError(f"source path {spec.files.path!r} has no {suffix} files (the examples' data is "
                                    "written by examples/pipelines/run.py NAME)")
        return [read_file(f, spec.files.format, spec.files.schema_, spec.files.options) for f in files]
    if spec.memory is not None:
        rows, size = typed_rows(spec.memory.rows, spec.memory.schema_), spec.memory.rows_per_batch
        return [rows[i:i + size] for i in range(0, len(rows), size)]
    raise ValueError("the rate source needs Spark: run the pipeline without --local")


#: The query id under which ``run --local`` records the bundles a table sink has applied.
LOCAL_QUERY_ID = "local"
#: Drop reasons of elements behind the watermark (the rest are bad elements).
LATE_REASONS = frozenset({DropReason.EXPIRED.value, DropReason.CLOSED_WINDOW.value})


@dataclass
class LocalRun:
    """What a local run produced: each operator's runner (its panes, late data, dead letters) and
    totals, and the rows each sink received, per bundle."""

    runners: dict[str, Any]
    totals: dict[str, Totals] = field(default_factory=dict)
    sink_rows: list[list[list[dict]]] = field(default_factory=list)

    def panes(self, operator: str) -> list[PaneRecord]:
        return self.runners[operator].outputs


def _refuse_spark_only_sinks(pipeline: Pipeline) -> None:
    for i, sink in enumerate(pipeline.sinks):
        if sink.foreach_batch is not None:
            raise ValueError(f"sinks[{i}]: a foreach_batch sink ({sink.foreach_batch.function}) receives Spark "
                             "DataFrames: run the pipeline on Spark (without --local)")


def run_pipeline_locally(pipeline: Pipeline, out: Optional[TextIO] = None) -> LocalRun:
    """Run the pipeline in the local runner, feeding its sinks as Spark would: console sinks print
    each bundle (to ``out``, default stdout), files sinks write one file per bundle, memory sinks
    keep the rows (``LocalRun.sink_rows``), table sinks apply each bundle as a batch (``TableSink``,
under the query id ``LOCAL_QUERY_ID``); then a totals line per operator."""
    out = out if out is not None else sys.stdout
    _refuse_spark_only_sinks(pipeline)
    operators = pipeline.build_operators()
    run = LocalRun(runners={}, sink_rows=[[] for _ in pipeline.sinks])
    # (the bundles' query: a rerun of the same file skips the batches its table has applied)
    tables = {i: sink.table.build(operators.get(sink.input), query_id=LOCAL_QUERY_ID)
              for i, sink in enumerate(pipeline.sinks) if sink.table is not None}

    def run_watermark(name: str) -> BatchWatermark:
        return BatchWatermark.of_runner(run.runners[name])

    def deliver(bundle: int, name: str, panes: list[PaneRecord], late: list[DroppedElement],
                dead: list[DroppedElement]) -> None:
        op = operators[name]
        side_outputs = bool(op.late_data_output or op.on_bad_element == "dead_letter")
        run.totals.setdefault(name, Totals()).add(len(panes))  # drops: counted from the runner at the end
        late = late if op.late_data_output else []
        dead = dead if op.on_bad_element == "dead_letter" else []
        merge = isinstance(op, MergeOperatorBase)
        rows_of = {  # (what each sink's ``output`` receives, as on Spark: ``windowed_operator.spark.plan.outputs``)
            "all": [pane_row(p, op.keyed, side_outputs, merge) for p in panes] +
                   [dropped_row(d, "late", op.keyed, merge, op.fired_by) for d in late] +
                   [dropped_row(d, "dead_letter", op.keyed, merge, op.fired_by) for d in dead],
            "panes": [pane_row(p, op.keyed, False) for p in panes],
            "side": [side_row(d, "late", op.keyed, merge) for d in late] +
                    [side_row(d, "dead_letter", op.keyed, merge) for d in dead]}
        for i, sink in enumerate(pipeline.sinks):
            if sink.input != name:
                continue
            rows = rows_of[sink.output]
            run.sink_rows[i].append(rows)
            if sink.console is not None:
                print(console_table(bundle, rows, sink.console.num_rows, sink.console.truncate), file=out, flush=True)
            elif sink.files is not None:
                write_rows(Path(sink.files.path), bundle, rows, sink.files.format)
            elif sink.table is not None:
                tables[i].write(rows, bundle, watermark=run_watermark(name))

    try:
        run_pipeline_runners(pipeline, operators, deliver, runners=run.runners)
    finally:
        for table in tables.values():
            table.dispose()
    for name, runner in run.runners.items():
        totals = run.totals.setdefault(name, Totals())
        totals.late_rows_dropped = sum(n for reason, n in runner.dropped_counts.items() if reason in LATE_REASONS)
        totals.bad_rows = sum(n for reason, n in runner.dropped_counts.items() if reason not in LATE_REASONS)
    for spec in pipeline.operators:
        print(run.totals.get(spec.name, Totals()).line(spec.name, step="bundles"), file=out, flush=True)
    return run


Deliver = Callable[[int, str, list[PaneRecord], list[DroppedElement], list[DroppedElement]], None]


def run_pipeline_runners(pipeline: Pipeline, operators: Optional[dict[str, Any]] = None,
                         deliver: Optional[Deliver] = None, runners: Optional[dict[str, Any]] = None,
                         ) -> dict[str, Any]:
    """Run every operator to the end of its input; returns the local runners by operator name.
    ``deliver(bundle, operator, panes, late, dead)`` receives what each operator emitted per bundle.
    ``runners``: the dict to keep the runners in (filled before the first bundle: ``deliver`` may
    read an operator's watermark).  Each bundle is one file of each source, as one Spark micro-batch; with ``trigger_interval`` each
    is that much processing time after the previous one (processing-time triggers, idle timeouts),
    else processing time stands still."""
    operators = operators if operators is not None else pipeline.build_operators()
    runners = runners if runners is not None else {}
    for spec in pipeline.operators:
        op = operators[spec.name]
        if spec.upstream_delay is not None:
            op = op.model_copy(update={"watermark": BoundedDisorderWatermark(max_disorder=spec.upstream_delay)})
        runners[spec.name] = op.local_runner()
    batches = {name: _without_markers(source_batches(spec), spec.end_of_input)
               for name, spec in pipeline.sources.items()}
    rounds = max(len(b) for b in batches.values())
    for i in range(rounds + 1):
        emitted: dict[str, list] = {}
        for name, source in batches.items():
            rows = source[i] if i < len(source) else []
            emitted[name] = rows
        for spec in pipeline.operators:
            runner = runners[spec.name]
            late_before, dead_before = len(runner.late_data), len(runner.dead_letters)
            out_now: list[PaneRecord] = []
            if pipeline.trigger_interval and i > 0:  # each micro-batch is one trigger interval later
                out_now.extend(runner.advance_processing_time(pipeline.trigger_interval))
            if spec.input is not None:
                if emitted[spec.input]:  # (an upstream operator's last panes too: those the end of input fired)
                    fed: list = emitted[spec.input]  # (a source's rows or an upstream operator's panes)
                    if spec.input in operators:  # an upstream operator's panes, retractions undone
                        fed = as_consumed(fed, operators[spec.input])
                    out_now.extend(runner.add_elements(*fed))
                if i == rounds:
                    out_now.extend(runner.finish())
                elif spec.input in runners:
                    out_now.extend(runner.advance_watermark_to(runners[spec.input].watermark))
            elif i == rounds:
                out_now.extend(runner.finish())
            else:
                left, right = emitted[spec.left], emitted[spec.right]  # type: ignore[index]
                if left or right:
                    out_now.extend(runner.add_elements_from_both(left, right))
            emitted[spec.name] = out_now
            if deliver is not None:
                deliver(i, spec.name, out_now, runner.late_data[late_before:], runner.dead_letters[dead_before:])
    return runners


def _without_markers(batches: list[list[dict]], column: Optional[str]) -> list[list[dict]]:
    """The rows that are data: end-of-input markers only end the input, which the local runner does
    anyway after the last bundle."""
    if column is None:
        return batches
    return [[{k: v for k, v in r.items() if k != column} for r in rows if not (r.get(column) is True or r.get(column) == 1)]
            for rows in batches]
