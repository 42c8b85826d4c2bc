"""Running a pipeline file in the local runner: no Spark, deterministic, for tests and small data.

Each file of a file source (in name order) or each ``rows_per_batch`` rows of a memory source is
one bundle, as one micro-batch on Spark with ``maxFilesPerTrigger=1``.  An operator's ``upstream``
watermark (Spark's ``withWatermark`` delay) is the bounded disorder it stands for.  Operators fed
by operators get their panes as elements and their watermark after them (window propagation works
here); merges get each input's bundles on their side.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional, TextIO

from ..panes import PaneRecord
from ..watermarks import BoundedDisorderWatermark
from .spec import Pipeline, SourceSpec


def _read_file(path: Path, fmt: str) -> list[dict]:
    import pandas as pd

    if fmt == "json":
        frame = pd.read_json(path, lines=True)
    elif fmt == "csv":
        frame = pd.read_csv(path)
    else:
        frame = pd.read_parquet(path)
    return frame.to_dict("records")


def source_batches(spec: SourceSpec) -> list[list[dict]]:
    if spec.files is not None:
        suffix = {"json": "*.json", "csv": "*.csv", "parquet": "*.parquet"}[spec.files.format]
        files = sorted(Path(spec.files.path).glob(suffix))
        if not files:
            raise FileNotFoundError(f"source path {spec.files.path!r} has no {suffix} files (the examples' data is "
                                    "written by examples/pipelines/run.py NAME)")
        return [_read_file(f, spec.files.format) for f in files]
    if spec.memory is not None:
        rows, size = spec.memory.rows, spec.memory.rows_per_batch
        return [rows[i:i + size] for i in range(0, len(rows), size)]
    raise ValueError("the rate source needs Spark: run the pipeline without --local")


def run_pipeline_locally(pipeline: Pipeline, out: Optional[TextIO] = sys.stdout) -> dict[str, list[PaneRecord]]:
    """Every operator's panes, by operator name; sinks of operators are printed to ``out``."""
    results = {name: runner.outputs for name, runner in run_pipeline_runners(pipeline).items()}
    if out is not None:
        for sink in pipeline.sinks:
            if sink.input in results:
                print(f"-- {sink.input}: {len(results[sink.input])} pane(s)", file=out)
                for pane in results[sink.input]:
                    print(f"   {pane.key} [{pane.window_start}, {pane.window_end}) {pane.value!r} {pane.timing.value}"
                          f"{' retraction' if pane.is_retraction else ''}", file=out)
    return results


def run_pipeline_runners(pipeline: Pipeline) -> dict[str, Any]:
    """Run every operator to the end of its input; returns the local runners by operator name."""
    operators = pipeline.build_operators()
    runners: dict[str, Any] = {}
    for spec in pipeline.operators:
        op = operators[spec.name]
        if spec.watermark.upstream is not None:
            op = op.model_copy(update={"watermark": BoundedDisorderWatermark(max_disorder=spec.watermark.upstream)})
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
            out_now: list[PaneRecord] = []
            if i == rounds:
                out_now.extend(runner.finish())
            elif spec.input is not None:
                if emitted[spec.input]:
                    out_now.extend(runner.add_elements(*emitted[spec.input]))
                if spec.input in runners:
                    out_now.extend(runner.advance_watermark_to(runners[spec.input].watermark))
            else:
                left, right = emitted[spec.left], emitted[spec.right]  # type: ignore[index]
                if left or right:
                    out_now.extend(runner.add_elements_from_both(left, right))
            emitted[spec.name] = out_now
    return runners


def _without_markers(batches: list[list[dict]], column: Optional[str]) -> list[list[dict]]:
    """The rows that are data: end-of-input markers only end the input, which the local runner does
    anyway after the last bundle."""
    if column is None:
        return batches
    return [[{k: v for k, v in r.items() if k != column} for r in rows if not (r.get(column) is True or r.get(column) == 1)]
            for rows in batches]
