"""A pipeline file as a whole (``Pipeline``), and the checks across its parts that no one part can
make: names that resolve (an operator's inputs, a sink's input), user code the command allows,
watermarks and idle timeouts that fit the trigger interval, columns an input has, a sink's output
that fits its input."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from pydantic import Field, ValidationInfo, model_validator

from triggers.option import TriggerOption

from ..config import Duration
from ..sinks import check_operator
from ..watermarks import needs_processing_time
from .choice import Spec
from .endpoints import RATE_COLUMNS, SinkSpec, SourceSpec
from .spec import WINDOWS, InputSpec, OperatorSpec
from .user_code import CodePolicy


@dataclass(frozen=True)
class _ModeProbe:
    """What ``sinks.check_operator`` reads of an operator, from its spec (without building it)."""

    trigger: TriggerOption
    accumulation: Any
    name: str

    def label(self) -> str:
        return f"operator {self.name!r}"


class Pipeline(Spec):
    """A pipeline file, validated: its sources by name, its operators (each reading a source or
    another operator by name), its sinks, where its checkpoints go and its trigger interval; the
    references between them are checked (``reference_errors``), user code only as the ``CodePolicy``
    allows."""

    name: str = "pipeline"
    checkpoint: str = Field(default="checkpoints", description="directory of the queries' checkpoints")
    trigger_interval: Optional[Duration] = Field(default=None, gt=0, description=(
        "Spark processingTime trigger, e.g. '5 seconds' or '5s'; default: availableNow (run to the end)"))
    sources: dict[str, SourceSpec] = Field(min_length=1)
    operators: list[OperatorSpec] = Field(min_length=1)
    sinks: list[SinkSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> "Pipeline":
        context = info.context or {}
        if context.get("defer_references"):
            return self  # the loader reports them with their locations
        errors = reference_errors(self, context.get("code", CodePolicy()))
        if errors:
            raise ValueError("; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in errors))
        return self

    def columns_of(self, name: str) -> Optional[list[str]]:
        """The columns of a source or an earlier operator's output (None: not known)."""
        if name in self.sources:
            source = self.sources[name]
            return RATE_COLUMNS if source.rate is not None else source.columns
        for op in self.operators:
            if op.name == name:
                return op.output_columns()
        return None

    def build_operators(self) -> dict[str, Any]:
        """Every operator, by name; an operator fed by another must be able to consume its
        retractions (``chain.check_consumable``)."""
        from ..chain import check_consumable

        names = {op.name for op in self.operators}
        built = {op.name: op.build(fed=op.input in names) for op in self.operators}
        for spec in self.operators:
            for name in spec.inputs:
                if name in built:
                    check_consumable(built[name], built[spec.name])
        return built


def column_errors(pipeline: Pipeline) -> list[tuple[tuple, str]]:
    """Columns an operator reads (key, timestamp, value, an accumulation's field) or a source
    marks its end of input with, that its input does not have."""
    errors: list[tuple[tuple, str]] = []
    for name, source in pipeline.sources.items():
        marker, columns = source.end_of_input, source.columns
        if marker is not None and columns and marker not in columns:
            where = "files" if source.files is not None else "memory"
            errors.append((("sources", name, where, "end_of_input"),
                           f"column {marker!r} is not in the schema (columns: {', '.join(columns)})"))
    for i, op in enumerate(pipeline.operators):
        sides = [("", op.input, InputSpec())] if op.input is not None else \
            [("left_options", op.left, op.left_options), ("right_options", op.right, op.right_options)]
        for side, input_name, options in sides:
            columns = pipeline.columns_of(input_name) if input_name is not None else None
            if not columns:
                continue
            reads = []  # (location, column)
            for what in ("key", "timestamp", "value"):
                own = getattr(options, what)
                column = own or getattr(op, what)
                loc = ("operators", i, side, what) if own else ("operators", i, what)
                if isinstance(column, dict):  # a value record: each field it reads
                    reads += [((*loc, field), read) for field, read in column.items()]
                else:
                    reads.append((loc, column))
            if op.input is not None and op.value is None:
                reads.append((("operators", i, "accumulation"), op.accumulation.field()))
            if op.window is not None:
                family, args = op.window.chosen()
                reads += [(("operators", i, "window", family, p), getattr(args, p))
                          for p in WINDOWS[family].column_parameters()]
            if op.watermark is not None:
                reads.append((("operators", i, "watermark", "partition"), op.watermark.partition))
            for loc, column in reads:
                if column is not None and column not in columns:
                    errors.append((loc, f"column {column!r} is not in {input_name!r} "
                                        f"(columns: {', '.join(columns)})"))
    return errors

def reference_errors(pipeline: Pipeline, code: CodePolicy = CodePolicy()) -> list[tuple[tuple, str]]:
    """Names that do not resolve and user code that ``code`` does not allow, each with its location."""
    errors: list[tuple[tuple, str]] = []
    known = set(pipeline.sources)
    for i, op in enumerate(pipeline.operators):
        if op.name in known:
            errors.append((("operators", i, "name"), f"{op.name!r} is used twice (or is also a source name)"))
        fields = ["input"] if op.input is not None else ["left", "right"]
        for field, name in zip(fields, op.inputs):
            if name not in known:
                errors.append((("operators", i, field), f"{name!r} is not a source or an earlier operator "
                                                         f"(known: {sorted(known)})"))
        for dotted in op.accumulation.code_paths():
            if not code.permits(dotted):
                errors.append((("operators", i, "accumulation"), code.refusal(dotted, "refers to user code")))
        fed_by = [name for name in op.inputs if name in known and name not in pipeline.sources]
        if fed_by and op.watermark is not None:
            errors.append((("operators", i, "watermark"), f"it reads the panes of operator {fed_by[0]!r} and follows "
                                                          "its watermark: remove watermark"))
        idle_at = ("operators", i, "watermark", "idle_timeout") if op.watermark is not None and \
            op.watermark.idle_timeout is not None else ("operators", i, "idle_timeout") \
            if op.idle_timeout is not None else None
        if idle_at is not None and not pipeline.trigger_interval:
            errors.append((idle_at,
                           "an idle timeout needs trigger_interval: quiet time passes only in micro-batches "
                           "without data, which Spark runs with a processingTime trigger (under the default "
                           "availableNow the query would never end)"))
        if idle_at is None and not pipeline.trigger_interval and needs_processing_time(
                op.trigger, op.watermark.build() if op.watermark is not None else None):
            where = ("operators", i, "watermark", "fixed_lag") if op.watermark is not None and \
                op.watermark.fixed_lag is not None else ("operators", i, "trigger")
            errors.append((where, "processing time decides this operator's panes, which needs trigger_interval "
                                  "(e.g. trigger_interval: 5s): processing time passes only in micro-batches, and "
                                  "without an interval Spark runs them back to back, each a stateful batch with "
                                  "its checkpoint files, for as long as the query runs"))
        markers = {marker for name in op.inputs if name in pipeline.sources
                   if (marker := pipeline.sources[name].end_of_input) is not None}
        if len(markers) > 1:
            errors.append((("operators", i), f"its inputs mark the end of input with different columns "
                                             f"{sorted(markers)}: name the same column in both sources"))
        known.add(op.name)
    for i, sink in enumerate(pipeline.sinks):
        if sink.input not in known:
            errors.append((("sinks", i, "input"), f"{sink.input!r} is not a source or operator "
                                                  f"(known: {sorted(known)})"))
        if sink.foreach_batch is not None and not code.permits(sink.foreach_batch.function):
            errors.append((("sinks", i, "foreach_batch"), code.refusal(sink.foreach_batch.function,
                                                                       "calls user code")))
        if sink.table is not None:
            errors += [(("sinks", i, "table", *loc), msg) for loc, msg in _table_sink_errors(pipeline, sink)]
        errors += [(("sinks", i, "output"), msg) for msg in _output_errors(pipeline, sink)]
    return errors + column_errors(pipeline)  # (a column of an unknown input is not checked)

def _output_errors(pipeline: Pipeline, sink: SinkSpec) -> list[str]:
    """``output: panes`` or ``side`` takes part of an operator's output, ``side`` one that has some."""
    if sink.output == "all":
        return []
    if sink.input in pipeline.sources:
        return [f"output: {sink.output} takes part of an operator's output; {sink.input!r} is a source (remove "
                "output)"]
    spec = next((op for op in pipeline.operators if op.name == sink.input), None)
    if spec is None:
        return []  # (reported as an unknown input)
    if sink.output == "side" and not (spec.late_data_output or spec.on_bad_element == "dead_letter"):
        return [f"output: side receives the late data and dead letters of operator {spec.name!r}, which has "
                "neither: give it late_data_output: true or on_bad_element: dead_letter"]
    if sink.output == "side" and sink.table is not None:
        return ["output: side: a table sink keeps an operator's panes; send late data and dead letters to a "
                "files, console, memory or foreach_batch sink"]
    return []

def _table_sink_errors(pipeline: Pipeline, sink: SinkSpec) -> list[tuple[tuple, str]]:
    """A table sink reads an operator's panes, in a mode they fit (``sinks.check_operator``)."""
    assert sink.table is not None
    spec = next((op for op in pipeline.operators if op.name == sink.input), None)
    if spec is None:
        return [((), f"a table sink keeps the panes of an operator; {sink.input!r} is a source")] \
            if sink.input in pipeline.sources else []
    if spec.accumulation.code_paths():
        return []  # (user code is built only when the pipeline runs)
    probe = _ModeProbe(trigger=spec.trigger, accumulation=spec.accumulation.build(), name=spec.name)
    try:
        check_operator(probe, sink.table.mode, sink.table.final_only)
    except ValueError as exc:
        return [(("mode",), str(exc))]
    return []
