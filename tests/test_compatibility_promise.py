"""The docs' compatibility promise (docs/contributing/state-compatibility.md) equals the code: the
state versions read, the layouts and the transitions into each (``state.layouts``), and the
changes a restart may make (``fingerprint.SAFE_CHANGES``), so the page cannot drift."""
import re
from pathlib import Path
import pytest

from windowed_operator.state.fingerprint import SAFE_CHANGES
from windowed_operator.state import layouts

PAGE = Path(__file__).resolve().parent.parent / "docs" / "contributing" / "state-compatibility.md"


def _promise() -> str:
    text = PAGE.read_text()
    return text[text.index("## The promise of this release"):]


def test_the_versions_read_are_the_registrys():
    match = re.search(r"\*\*State versions read:\*\* ([\d, ]+)\.", _promise())
    assert match, "the promise names the state versions read"
    assert tuple(v.strip() for v in match.group(1).split(",")) == layouts.VERSIONS_READ
    assert layouts.VERSIONS_READ[-1] == str(layouts.STATE_VERSION)


def test_the_layout_table_is_the_registry():
    rows = [line for line in _promise().splitlines() if line.startswith("| `")]
    documented = {}
    for row in rows:
        name, written, sources, versions = [cell.strip() for cell in row.strip("|").split("|")]
        documented[name.strip("`")] = (written.startswith("yes"), set(re.findall(r"`([^`]+)`", sources)),
                                       tuple(v.strip() for v in versions.split(",")))
    expected = {layout.name: (layout.chosen, {move.source for move in layout.moves_in}, layout.versions)
                for layout in layouts.LAYOUTS}
    assert documented == expected
    assert {(source, name) for name, (_, sources, _) in documented.items() for source in sources} \
        == layouts.LAYOUT_MIGRATIONS


def test_what_a_restart_may_change_is_the_fingerprints_list():
    text = _promise()
    listed = text[text.index("**What a restart may change**"):]
    listed = listed[listed.index("):") + 2:listed.index(". See")]
    names = [re.sub(r"\s*\(.*?\)", "", part).strip() for part in listed.replace("\n", " ").split(",")]
    assert names == list(SAFE_CHANGES)


def test_every_layout_the_choice_makes_is_a_written_one_and_every_act_exists():
    from windowed_operator.state import transitions

    chosen = {layouts.choose_layout(records=records, by_pane=by_pane, by_window=by_window, event_time=event_time,
                                    ).layout.name
              for records in (None, "panes", "sessions", "windows") for by_pane in (False, True)
              for by_window in (False, True) for event_time in (False, True)}
    assert chosen == {layout.name for layout in layouts.LAYOUTS if layout.chosen}
    group_acts = {move.act for layout in layouts.LAYOUTS for move in layout.moves_in if not move.by_key}
    assert group_acts == set(transitions.ACTS)


def test_the_readers_of_earlier_versions_are_legacys_and_serve_versions_read():
    from windowed_operator.state import legacy

    text = _promise()
    listed = text[text.index("**Readers of earlier versions**"):text.index("**What a restart may change**")]
    documented = {name: tuple(v.strip() for v in versions.split(","))
                  for name, versions in re.findall(r"`(\w+)` \(([\d, ]+)\)", listed)}
    assert documented == legacy.READERS
    assert all(set(versions) <= set(layouts.VERSIONS_READ[:-1]) for versions in legacy.READERS.values())
    by_key = {move.act for layout in layouts.LAYOUTS for move in layout.moves_in if move.by_key}
    assert by_key <= set(legacy.READERS)


def test_every_row_names_its_store_and_the_stores_use_the_rows_names():
    import importlib

    from windowed_operator.state.pane_log import PaneLog
    from windowed_operator.state.records import PaneRecords
    from windowed_operator.state.window_log import WindowLog

    from windowed_operator.state.stores import store_class

    for row in (*layouts.LAYOUTS, layouts.KEY_SHARDS):
        module, name = row.store.split(".")
        assert isinstance(getattr(importlib.import_module(f"windowed_operator.state.{module}"), name), type), row
    for row in layouts.LAYOUTS:  # every layout's store serves the one protocol, opened from the row
        assert callable(store_class(row).opened) and callable(store_class(row).run_batch), row
    assert (PaneLog.layout, PaneLog.domain, PaneLog.meta_key) == (
        layouts.PANE_LOG.name, layouts.PANE_LOG.domain, layouts.PANE_LOG.meta_key)
    assert (WindowLog.layout, WindowLog.domain, WindowLog.meta_key) == (
        layouts.WINDOW_LOG.name, layouts.WINDOW_LOG.domain, layouts.WINDOW_LOG.meta_key)
    assert PaneRecords.layout == layouts.PER_KEY_PANE_ROWS.name


@pytest.mark.parametrize("window, trigger, lateness, expected", [
    ("tumbling", "default", 0, "pane log"),
    ("tumbling", "default", 5, "per-key pane rows in key shards"),
    ("sessions", "default", 0, "session rows in row shards"),
    ("tumbling", "early", 0, "window rows in row shards"),
])
def test_a_runner_opens_the_store_the_chosen_layout_names(window, trigger, lateness, expected):
    """The layout chosen once (``paths.stage_layout``), ``stores.open_state`` opens the store its
    registry row names: the one dispatch a runner makes."""
    from accumulations import Sum
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows
    from windowed_operator.engine.build import build_core
    from windowed_operator.spark.plan.paths import Facts, build_table, choose_paths, stage_layout
    from windowed_operator.state.stores import open_state, store_class

    from helpers import MemoryStore

    option = TriggerOption.default() if trigger == "default" else \
        TriggerOption.at_watermark().with_early_firings_at_every(count=2)
    op = KeyedWindowedOperator(TimeWindows(10) if window == "tumbling" else SessionWindows(10), Sum("v"),
                               trigger=option, allowed_lateness=lateness, key="k", timestamp="t")
    paths, _ = choose_paths(Facts(op))
    table = build_table(paths.engine, op) if paths.engine.table else None
    layout = stage_layout(op, paths.engine, fed=False, time_mode="EventTime")
    state = open_state(MemoryStore(), op, build_core(op), table, layout=layout, time_mode="EventTime", key_groups=4,
                       key_column="k")
    assert state.fingerprint["state layout"] == expected
    assert type(state.store) is store_class(state.layout)
