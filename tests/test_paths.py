"""The Spark runner's path table (``windowed_operator.spark.plan.paths``): one decision per operator,
without a JVM (the module imports no pyspark session)."""
from __future__ import annotations

import pytest

from accumulations import AllMax, ApproxCountDistinct, Count, Sum
from triggers import TriggerOption
from windowed_operator import (CumulativeWindows, GlobalWindow, KeyedWindowedOperator, SessionWindows, SlidingWindows,
                               TimeWindows, bounded_disorder)
from windowed_operator.spark.plan.paths import WHOLE_ROWS, Engine, Facts, Fold, Paths, choose_paths, stage_layout


def _op(window, accumulation, **options):
    return KeyedWindowedOperator(window, accumulation, key="k", timestamp="t", **options)


CASES = [
    # (operator, facts, engine, fold)
    (_op(TimeWindows(10), Sum("v")), {}, Engine.PANE_TABLE, Fold.PREAGGREGATE),
    (_op(TimeWindows(10), Sum("v")), {"preaggregate": False}, Engine.PANE_TABLE, Fold.NONE),
    (_op(TimeWindows(10), Sum("v")), {"vectorized": False}, Engine.ELEMENT, Fold.NONE),
    (_op(TimeWindows(10), Sum("v")), {"input_type": "decimal(10,2)"}, Engine.PANE_TABLE, Fold.NONE),
    (_op(TimeWindows(10), Sum("v"), late_data_output=True), {}, Engine.PANE_TABLE, Fold.NONE),
    (_op(SessionWindows(5), Count()), {}, Engine.SESSION_TABLE, Fold.PRECHAIN),
    (_op(TimeWindows(10), AllMax(field="v")), {"rank_type": "bigint"}, Engine.ARRAY, Fold.PRESELECT),
    (_op(TimeWindows(10), ApproxCountDistinct("v")), {"input_type": "string"}, Engine.ARRAY, Fold.PREFOLD),
    (_op(SlidingWindows(10), Sum("v")), {}, Engine.ELEMENT, Fold.NONE),
    # a per-partition watermark: no scan fold (the heartbeats and the processor read each row's partition)
    (_op(TimeWindows(10), Sum("v"), watermark=bounded_disorder(5, partition="p")), {}, Engine.PANE_TABLE, Fold.NONE),
    (_op(SessionWindows(5), Count(), watermark=bounded_disorder(5, partition="p")), {}, Engine.SESSION_TABLE,
     Fold.NONE),
    (_op(TimeWindows(10), AllMax(field="v"), watermark=bounded_disorder(5, partition="p")), {"rank_type": "bigint"},
     Engine.ARRAY, Fold.NONE),
]


@pytest.mark.parametrize("op, facts, engine, fold", CASES)
def test_one_table_decides_the_engine_and_the_scan_fold(op, facts, engine, fold):
    given = {"key_type": "string", "input_type": "bigint", **facts}
    paths, _ = choose_paths(Facts(op=op, **given))
    assert (paths.engine, paths.fold) == (engine, fold)
    assert paths.folded_in_scan == (fold is not Fold.NONE)
    assert paths.arrays == (engine is Engine.ARRAY)


def test_the_value_column_is_the_one_the_chosen_engine_reads():
    _, column = choose_paths(Facts(op=_op(TimeWindows(10), AllMax(field="v")), key_type="string", rank_type="bigint"))
    assert column == WHOLE_ROWS
    _, column = choose_paths(Facts(op=_op(TimeWindows(10), Sum("v")), key_type="string", input_type="bigint"))
    assert column == "v"


def test_paths_default_to_the_element_path_row_by_row():
    assert Paths() == Paths(engine=Engine.ELEMENT, fold=Fold.NONE)
    assert not Paths().folded_in_scan and not Paths().engine.table


EARLY = TriggerOption.at_watermark().with_early_firings_at_every(count=2)
LATE = TriggerOption.at_watermark().with_late_firings_at_every(count=2)
LAYOUT_CASES = [
    # (window, trigger, allowed lateness, engine, fed, time mode, layout)
    (TimeWindows(10), TriggerOption.default(), 0, Engine.PANE_TABLE, False, "EventTime", "pane log"),
    (TimeWindows(10), TriggerOption.default(), 1, Engine.PANE_TABLE, False, "EventTime",
     "per-key pane rows in key shards"),
    (TimeWindows(10), TriggerOption.default(), 0, Engine.PANE_TABLE, False, "ProcessingTime",
     "per-key pane rows in key shards"),
    (SessionWindows(5), TriggerOption.default(), 0, Engine.SESSION_TABLE, False, "EventTime",
     "session rows in row shards"),
    (TimeWindows(10), EARLY, 0, Engine.WINDOW_TABLE, False, "EventTime", "window rows in row shards"),
    # the object paths: windows by window where they fire once at their end (default or bare at_watermark)
    (TimeWindows(10), TriggerOption.default(), 0, Engine.ARRAY, False, "EventTime", "window log"),
    (TimeWindows(10), TriggerOption.at_watermark(), 0, Engine.ELEMENT, False, "EventTime", "window log"),
    (GlobalWindow(), TriggerOption.default(), 0, Engine.ELEMENT, False, "EventTime", "window log"),
    (CumulativeWindows(10, 2), TriggerOption.default(), 0, Engine.ARRAY, False, "EventTime", "window log"),
    (TimeWindows(10), TriggerOption.default(), 1, Engine.ELEMENT, False, "EventTime", "per-key windows in key shards"),
    (TimeWindows(10), EARLY, 0, Engine.ELEMENT, False, "EventTime", "per-key windows in key shards"),
    (TimeWindows(10), LATE, 0, Engine.ELEMENT, False, "EventTime", "per-key windows in key shards"),
    (TimeWindows(10), TriggerOption.default(), 0, Engine.ELEMENT, True, "EventTime", "per-key windows in key shards"),
    (TimeWindows(10), TriggerOption.default(), 0, Engine.ELEMENT, False, "ProcessingTime",
     "per-key windows in key shards"),
    (SessionWindows(5), TriggerOption.default(), 0, Engine.ELEMENT, False, "EventTime",
     "per-key windows in key shards"),
    (SlidingWindows(5), TriggerOption.default(), 0, Engine.ELEMENT, False, "EventTime",
     "per-key windows in key shards"),
]


@pytest.mark.parametrize("window, trigger, lateness, engine, fed, time_mode, layout", LAYOUT_CASES)
def test_the_state_layout_follows_the_engine_and_a_trigger_that_fires_once(window, trigger, lateness, engine, fed,
                                                                          time_mode, layout):
    op = _op(window, Sum("v"), trigger=trigger, allowed_lateness=lateness)
    assert stage_layout(op, engine, fed=fed, time_mode=time_mode) == layout
    bare = trigger.kind == "default" or (trigger.early is None and trigger.late is None)
    assert trigger.fires_once_at_end(lateness) == (bare and lateness == 0)
