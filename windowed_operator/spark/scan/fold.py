"""The scan-stage folds: one protocol, one table of builders, one install.

Before the shuffle, a ``mapInArrow`` pass may fold each partition's rows so that fewer cross it
(``paths.Fold``): partials per (key, pane) (``preaggregate``), chains of session elements
(``prechain``), candidate rows (``preselect``) or sketches (``prefold``) per (key, pane).  Each is a
``ScanFold``; ``build_fold`` makes the one ``paths.choose_paths`` chose, ``install_fold`` puts it in
the query, and the processor reads its rows by the fold the plan names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from ...engine.columnar import columnar_form
from ...operator import WindowingOptions
from ...windows.session_windows import SessionWindows
from ..connect_compat import map_in_arrow
from ..paths import Fold
from ..plan import SparkPlan
from .preaggregate import PreAggregation
from .prechain import PreChaining
from .prefold import PreFolding
from .preselect import PreSelection


class ScanFold(Protocol):
    """What every scan-stage fold answers: the driver installs it (``install_fold``), Spark calls it
    on each partition's Arrow batches, and the plan takes ``plan_updates`` for the worker."""

    @property
    def input_columns(self) -> list[str]:
        """The columns it reads, in order."""
        ...

    def output_schema(self) -> StructType:
        """The Spark schema of the rows it hands on (known without analysing the input)."""
        ...

    def plan_updates(self) -> dict[str, Any]:
        """``SparkPlan`` fields the processor needs to read its rows (its aggregate columns...)."""
        ...

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """A partition's batches folded (called in the scan stage, on the executors)."""
        ...


@dataclass(frozen=True)
class FoldInput:
    """What a fold is built from: the stage's operator and plan, its input schema, the value's Spark type."""

    op: WindowingOptions
    plan: SparkPlan
    shape: StructType
    value_type: Optional[str]


def _preaggregation(given: FoldInput) -> ScanFold:
    op, plan = given.op, given.plan
    form = columnar_form(op.core_accumulation())
    assert form is not None  # (a table engine: the accumulation has a columnar form)
    return PreAggregation(layout=op.window_option.pane_layout(), form=form, key_column=plan.key_column,
                          time_column=plan.time_column, value_column=plan.value_column, key_type=plan.key_type,
                          value_type=given.value_type, reader=plan.record_reader())


def _prechaining(given: FoldInput) -> ScanFold:
    op, plan = given.op, given.plan
    sessions, form = op.window, columnar_form(op.core_accumulation())
    # (paths: sessions with a fixed gap on the session table, whose accumulation has a columnar form)
    assert isinstance(sessions, SessionWindows) and sessions.min_gap is not None and form is not None
    return PreChaining(gap=int(sessions.min_gap), form=form, key_column=plan.key_column,
                       time_column=plan.time_column, value_column=plan.value_column, key_type=plan.key_type,
                       value_type=given.value_type, reader=plan.record_reader())


def _preselection(given: FoldInput) -> ScanFold:
    op, plan = given.op, given.plan
    return PreSelection(layout=op.window_option.pane_layout(), accumulation=op.core_accumulation(),
                        key_column=plan.key_column, time_column=plan.time_column, reader=plan.record_reader(),
                        shape=given.shape)


def _prefolding(given: FoldInput) -> ScanFold:
    op, plan = given.op, given.plan
    key = plan.key_column
    return PreFolding(layout=op.window_option.pane_layout(), accumulation=op.core_accumulation(),
                      key_column=key, time_column=plan.time_column, value_column=str(plan.value_column),
                      reader=plan.record_reader(), key_type=given.shape[key].dataType if key else None)


#: How each fold is built.
FOLD_BUILDERS: dict[Fold, Callable[[FoldInput], ScanFold]] = {
    Fold.PREAGGREGATE: _preaggregation, Fold.PRECHAIN: _prechaining, Fold.PRESELECT: _preselection,
    Fold.PREFOLD: _prefolding,
}


def build_fold(fold: Fold, given: FoldInput) -> ScanFold:
    return FOLD_BUILDERS[fold](given)


def install_fold(fold: ScanFold, projected: DataFrame) -> tuple[DataFrame, list[str], StructType]:
    """``projected`` folded in its scan stage: the folded rows, their columns and their schema."""
    schema = fold.output_schema()
    return map_in_arrow(projected, fold, schema, fold.input_columns), [f.name for f in schema.fields], schema


__all__ = ["ScanFold", "FoldInput", "FOLD_BUILDERS", "build_fold", "install_fold"]
