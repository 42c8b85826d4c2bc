"""The scan fold of a stage, built and installed by the driver: one table of builders, one install.

``build_fold`` makes the fold ``paths.choose_paths`` chose (a ``scan.fold.ScanFold``) from the
stage's operator, plan and input schema; ``install_fold`` puts it in the query as a ``mapInArrow``
pass before the shuffle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from ...engine.columnar import columnar_form
from ...operator import WindowingOptions
from ...windows.session_windows import SessionWindows
from ..base.connect_compat import map_in_arrow
from ..plan.paths import Fold
from ..plan import SparkPlan
from ..scan.fold import ScanFold
from ..scan.preaggregate import PreAggregation
from ..scan.prechain import PreChaining
from ..scan.prefold import PreFolding
from ..scan.preselect import PreSelection


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


__all__ = ["FoldInput", "FOLD_BUILDERS", "build_fold", "install_fold"]
