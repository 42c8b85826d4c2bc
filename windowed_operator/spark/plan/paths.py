"""Which path runs an operator on Spark: its engine, its scan-stage fold, its state layout and its
handoff, decided here for every stage (raw rows, a merge of two inputs, a chained stage).

The driver knows the operator, the Spark types of its key and value, the ``vectorized=`` and
``preaggregate=`` options of ``apply()`` and the session's settings; from them ``choose_paths``
decides once, as one table, and the plan carries the answer (``SparkPlan.paths``) to the workers,
which build what it names and decide nothing again (the worker keeps only its handoff guards).

It lives in ``spark/`` and not beside the engines because only the Spark runner chooses: the local
runner runs every operator element by element, while the array path, the tables, the scan-stage
folds and the handoffs are the Spark runner's ways to the same panes (and the folds' choice depends
on Spark's types).  The module imports no pyspark: the choice is pure Python, tested without a JVM.

=============  ==========================================================================  ==================
engine         chosen when (first match)                                                   scan folds allowed
=============  ==========================================================================  ==================
session table  ``vectorized=``, arrays fold the values, session windows a table serves      prechain
pane table     ``vectorized=``, arrays fold the values, the default trigger's pane sharing  preaggregate
window table   ``vectorized=``, arrays fold the values, windows a table serves otherwise    preaggregate
array          ``vectorized=``, windows assigned by timestamp, an accumulation with arrays  preselect, prefold
native         a chained stage Spark's own aggregation computes (``nativeStages``)          (no Python)
element        otherwise (and every merge or chained stage the array path does not serve)  none
=============  ==========================================================================  ==================

A scan fold needs ``preaggregate=`` too, and what every fold before the shuffle needs
(``folds_before_shuffle``; none folds under a per-partition watermark: ``_scan_stage_may_fold``);
the handoff (``handoff.choose_handoff``) is chosen when the stage is wired, as it depends on the fold.
A merge's or a chained stage's rows (a union of two inputs, or panes) take the array path where it
serves (``merge_paths``, ``chained_paths``), the element path otherwise: no table, no scan fold; a
chained stage runs as Spark's own aggregation instead where the setting allows it (``nativeStages``: the
checkpoint's, or the session's: ``driver.checkpoint_settings``) and
``driver.native_stage.native_refusal`` finds nothing against it (its rules read Spark's types).

The state layout (``stage_layout``, over ``state.layouts.choose_layout``) follows the engine: the
logs where no element joins a window that fired (``TriggerOption.fires_once_at_end``), in event time
(the pane table's rows by pane; the object paths' windows by window, never a chained stage's), the
session and window tables' rows in row shards, everything else per key.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Optional

from ...engine.build import build_core
from ...engine.columnar_triggers import row_trigger
from ...engine.tables import TABLE_CLASSES, supports_columnar, supports_columnar_path
from ...operator import WindowingOptions
from ...panes import TimestampCombiner
from ...state.layouts import choose_layout
from ...watermarks import partition_of
from ...windows.session_windows import SessionWindows
from ..base.handoff import Handoff
from ..scan.preaggregate import preaggregable
from ..scan.prefold import prefoldable
from ..scan.preselect import preselectable


#: ``SparkPlan.value_column`` when the accumulation folds whole rows on the array path
#: (``Accumulation.folds_rows``: AllMax, TopN), not one column of them.
WHOLE_ROWS = "*"


class Engine(str, Enum):
    """What runs a key group's batch in the worker."""

    ELEMENT = "element"  # the core, element by element
    ARRAY = "array"  # the core's array path (``vectorized``)
    PANE_TABLE = "pane table"  # ``columnar.ColumnarCore``: the group's panes as one table
    SESSION_TABLE = "session table"  # ``columnar_sessions.ColumnarSessions``
    WINDOW_TABLE = "window table"  # ``columnar_windows.ColumnarWindows``
    NATIVE = "native"  # a chained stage as Spark's own streaming aggregation (``driver.native_stage``)

    @property
    def table(self) -> bool:
        """One of the columnar engines (a table of the key group)."""
        return self in (Engine.PANE_TABLE, Engine.SESSION_TABLE, Engine.WINDOW_TABLE)


class Fold(str, Enum):
    """What the scan stage folds before the shuffle (each a ``scan_fold.ScanFold``)."""

    NONE = "none"
    PREAGGREGATE = "preaggregate"  # partials per (key, pane) (``preaggregate``)
    PRECHAIN = "prechain"  # chains of a key's session elements (``prechain``)
    PRESELECT = "preselect"  # the candidate rows per (key, pane), weighted (``preselect``)
    PREFOLD = "prefold"  # one sketch per (key, pane), weighted (``prefold``)

    @property
    def weighted(self) -> bool:
        """Each row stands for the rows its ``WEIGHT_COLUMN`` counts."""
        return self in (Fold.PRESELECT, Fold.PREFOLD)


#: The scan folds each engine may take, in the order they are tried.
FOLDS_OF: dict[Engine, tuple[Fold, ...]] = {
    Engine.PANE_TABLE: (Fold.PREAGGREGATE,),
    Engine.WINDOW_TABLE: (Fold.PREAGGREGATE,),
    Engine.SESSION_TABLE: (Fold.PREAGGREGATE, Fold.PRECHAIN),
    Engine.ARRAY: (Fold.PRESELECT, Fold.PREFOLD),
    Engine.NATIVE: (),
    Engine.ELEMENT: (),
}


@dataclass(frozen=True)
class Paths:
    """The paths of one stage: what the worker runs, how the scan stage folded its rows, and how
    they reach the processor."""

    engine: Engine = Engine.ELEMENT
    fold: Fold = Fold.NONE
    handoff: Handoff = Handoff.ROW_BY_ROW
    #: The state layout, as the fingerprint names it (``stage_layout``; "": not chosen yet).
    layout: str = ""

    @property
    def arrays(self) -> bool:
        """The core's array path (the object path's engines: element or array)."""
        return self.engine is Engine.ARRAY

    @property
    def folded_in_scan(self) -> bool:
        """The scan stage hands on folded rows (partials, chains, pre-selected rows or sketches)
        instead of the input's: such a fold selects its own columns."""
        return self.fold is not Fold.NONE


@dataclass(frozen=True)
class Facts:
    """What the driver knows of a one-input stage over raw rows when it chooses."""

    op: WindowingOptions  # the operator, its key and timestamp columns resolved
    vectorized: bool = True  # ``apply(vectorized=)``
    preaggregate: bool = True  # ``apply(preaggregate=)``
    key_type: Optional[str] = None  # the key column's Spark type (None: not keyed)
    input_type: Optional[str] = None  # the Spark type of the value column read (None: none read)
    rank_type: Optional[str] = None  # the Spark type of the accumulation's ranked field, where read


def table_engine(op: WindowingOptions) -> Optional[Engine]:
    """The columnar engine serving ``op``, or None: the session table for sessions, the pane table
    where no window needs state of its own (the default trigger without retractions: pane sharing),
    the window table otherwise."""
    window, accumulation = op.window, op.core_accumulation()
    if window is None or not supports_columnar_path(window, accumulation, op.trigger, op.timestamp_combiner):
        return None
    if isinstance(window, SessionWindows):
        return Engine.SESSION_TABLE
    if supports_columnar(window, accumulation, op.trigger, TimestampCombiner.END_OF_WINDOW):
        return Engine.PANE_TABLE
    return Engine.WINDOW_TABLE


#: The records each table engine keeps (``state.layouts.Layout.records``).
RECORDS_OF: dict[Engine, str] = {Engine.PANE_TABLE: "panes", Engine.SESSION_TABLE: "sessions",
                                 Engine.WINDOW_TABLE: "windows"}


def build_table(engine: Engine, op: WindowingOptions) -> Any:
    """The table engine ``engine`` names, for ``op`` (built in the worker from the plan's ``Paths``)."""
    return TABLE_CLASSES[RECORDS_OF[engine]](op.window, op.core_accumulation(), op.trigger, op.allowed_lateness,
                                             label=op.label(), column=op.value_column())


def choose_paths(facts: Facts) -> tuple[Paths, Optional[str]]:
    """A raw-input stage's engine and scan fold, and the column the processor folds (``WHOLE_ROWS``:
    whole rows; None: none, or the element path's reader reads it)."""
    op = facts.op
    use_arrays, value_column = vector_value_column(op)
    folds_arrays, array_column = array_values(op)
    engine = table_engine(op) if facts.vectorized and folds_arrays else None
    if engine is not None:
        value_column = array_column
    else:
        engine = Engine.ARRAY if facts.vectorized and use_arrays else Engine.ELEMENT
    value_type = facts.input_type if value_column is not None else None
    fold = Fold.NONE
    if facts.preaggregate:
        fold = next((f for f in FOLDS_OF[engine] if FOLD_RULES[f](facts, value_column, value_type)), Fold.NONE)
    return Paths(engine=engine, fold=fold), value_column


def merge_paths(op: Any) -> Paths:
    """A merge's paths: the array path for windows assigned by timestamp where each input's value is
    its whole row, one field of it or a record of its fields (a callable extractor runs per element,
    on the element path); no table engine and no scan fold (its rows are the union of two inputs)."""
    from accumulations.merge import SIDES
    from ...engine.vectorized import supports_vectorized

    arrays = supports_vectorized(build_core(op)) and all(not callable(op.side_extractor(side, "value"))
                                                         for side in SIDES)
    return Paths(engine=Engine.ARRAY if arrays else Engine.ELEMENT)


def chained_paths(op: WindowingOptions, vectorized: bool, native: bool = False) -> Paths:
    """A chained stage's paths: Spark's own aggregation where the setting allows it and nothing
    refuses it (``native``: see the module's docstring), else the array path where it serves
    (``vectorized=``, windows assigned by timestamp), the element path otherwise; no table engine and
    no scan fold (its rows are panes)."""
    from ...engine.vectorized import supports_vectorized

    if native:
        return Paths(engine=Engine.NATIVE)
    return Paths(engine=Engine.ARRAY if vectorized and supports_vectorized(build_core(op)) else Engine.ELEMENT)


def stage_layout(op: WindowingOptions, engine: Engine, *, fed: bool, time_mode: str) -> str:
    """The state layout of a stage run by ``engine`` (``fed``: a chained stage), as its fingerprint
    names it: see the module's docstring."""
    once = op.trigger.fires_once_at_end(op.allowed_lateness)
    return choose_layout(records=RECORDS_OF.get(engine), by_pane=engine is Engine.PANE_TABLE and once,
                         by_window=(not engine.table and not fed and op.window_option.kind == "assigned" and once),
                         event_time=time_mode == "EventTime").name


def array_values(operator: WindowingOptions) -> tuple[bool, Optional[str]]:
    """Whether arrays can fold this operator's values (a built-in fold over one plain column, or a
    Count reading none) and which column holds them."""
    from accumulations.numeric import Count

    accumulation = operator.core_accumulation()
    if not accumulation.supports_fold_array():
        return False, None
    own = operator.value
    field = accumulation.input_field()
    if own is None and field is None and accumulation.folds_rows():
        return True, WHOLE_ROWS
    if own is None and field is None:
        return isinstance(accumulation, Count), None
    if isinstance(own, str) and field is None:
        return True, own
    if own is None and field is not None:
        return True, field
    return False, None


def vector_value_column(operator: WindowingOptions) -> tuple[bool, Optional[str]]:
    """Whether the core's array path applies to ``operator`` (windows assigned by timestamp) and
    which column holds the values it folds."""
    from ...engine.vectorized import supports_vectorized

    if not supports_vectorized(build_core(operator)):
        return False, None
    return array_values(operator)


# -- the folds' rules ------------------------------------------------------------------------------

def folds_before_shuffle(op: WindowingOptions, *, counts_carried: bool = False) -> bool:
    """What every scan-stage fold by pane (pre-aggregation, pre-selection, pre-folding) needs: Beam's
    default trigger (it does not count elements) or, where the folded rows carry their element counts
    to the trigger (``counts_carried``: the columnar paths), ``AfterWatermark`` firing by count or by
    processing time (all of a batch's elements arrive at its processing time); windows that are unions
    of panes, and what every scan-stage fold needs (``_scan_stage_may_fold``)."""
    trigger = op.trigger.kind == "default" or (counts_carried and row_trigger(op.trigger) is not None)
    return trigger and op.window_option.pane_layout() is not None and _scan_stage_may_fold(op)


def _scan_stage_may_fold(op: WindowingOptions) -> bool:
    """No element kept aside (no late-data or dead-letter output: a bad row raises the processor's
    error in the scan stage), no skew check (the scan stage has no batch time) and no per-partition
    watermark (the heartbeats read each row's partition after the fold, and a row with a null
    partition is the processor's bad element)."""
    return (not op.late_data_output and op.on_bad_element == "raise" and op.max_future_skew is None
            and partition_of(op.watermark) is None)


def _preaggregates(facts: Facts, value_column: Optional[str], value_type: Optional[str]) -> bool:
    """Partials per (key, pane): a trigger that takes counts, keys and values Arrow folds as the table does."""
    return folds_before_shuffle(facts.op, counts_carried=True) and preaggregable(facts.key_type, value_type)


def _prechains(facts: Facts, value_column: Optional[str], value_type: Optional[str]) -> bool:
    """Whether a batch's session elements can be chained before the shuffle (``prechain``): sessions
    with a fixed gap on the columnar path (whose triggers take a chain's element count), keys and
    values Arrow reads as the processor does, and what every scan-stage fold needs."""
    op = facts.op
    window = op.window
    return (isinstance(window, SessionWindows) and window.min_gap is not None  # (a fixed gap)
            and row_trigger(op.trigger) is not None and _scan_stage_may_fold(op)
            and preaggregable(facts.key_type, value_type))


def _preselects(facts: Facts, value_column: Optional[str], value_type: Optional[str]) -> bool:
    """Whether rows can be pre-selected (``preselect``): an accumulation that keeps the top rows by a
    numeric column of whole rows, a trigger that does not count elements, windows with a pane layout,
    and no element kept aside (late data, dead letters) and no skew check (the scan stage has no batch
    time)."""
    return (value_column == WHOLE_ROWS and folds_before_shuffle(facts.op)
            and preselectable(facts.op.core_accumulation(), facts.rank_type))


def _prefolds(facts: Facts, value_column: Optional[str], value_type: Optional[str]) -> bool:
    """Whether each (key, pane) can be folded into one sketch before the shuffle (``prefold``): a
    sketch accumulation over a column of a plain type other than the event time (the fold's rows
    carry the pane's start in that column), a trigger that does not count elements,
    windows with a pane layout, panes stamped with the window's end, and no element kept aside and
    no skew check (the scan stage has no batch time)."""
    op = facts.op
    return (value_column is not None and value_column not in (WHOLE_ROWS, op.timestamp) and folds_before_shuffle(op)
            and op.timestamp_combiner == TimestampCombiner.END_OF_WINDOW
            and prefoldable(op.core_accumulation(), value_type))


#: Each scan fold's rule, over the facts, the value column and its Spark type.
FOLD_RULES: dict[Fold, Callable[[Facts, Optional[str], Optional[str]], bool]] = {
    Fold.PREAGGREGATE: _preaggregates, Fold.PRECHAIN: _prechains, Fold.PRESELECT: _preselects,
    Fold.PREFOLD: _prefolds,
}


__all__ = ["Engine", "Fold", "Paths", "Facts", "FOLDS_OF", "RECORDS_OF", "build_table", "choose_paths",
           "folds_before_shuffle", "merge_paths", "chained_paths", "stage_layout", "table_engine", "WHOLE_ROWS", "array_values",
           "vector_value_column"]
