"""What checkpoints store, frozen while the code around it moves.

A checkpoint stores names and descriptions that a later release must produce again to continue it:
the state layout names, and each key group's fingerprint of the operator that wrote it (the
``repr`` of its window, accumulation and watermark, its trigger's description, and the other parts
as text).  These tests fail when any of them changes; the stored fixtures
(``tests/spark/test_state_versions.py``) check the same on Spark, with the state variables' names
and schemas.  A deliberate change adds a state version and a migration, and regenerates the golden
file (``python tests/frozen_cases.py``).
"""
from __future__ import annotations

import ast
import importlib
import json
import re
import textwrap
from pathlib import Path

import pytest

from frozen_cases import GOLDEN, described

ROOT = Path(__file__).resolve().parent.parent
#: Every state layout name a checkpoint may hold (the fingerprint's "state layout", without the key
#: shards suffix), as written by state version 8.
LAYOUT_NAMES = {"per-key windows", "per-key pane rows", "per-key session rows", "per-key window rows",
                "pane log", "window log", "session rows in row shards", "window rows in row shards"}


def test_every_fingerprint_is_the_stored_text():
    golden = json.loads(GOLDEN.read_text())
    current = described()
    assert set(current) == set(golden), "the frozen cases changed: regenerate deliberately"
    changed = {name: {part: (golden[name].get(part), text) for part, text in parts.items()
                      if golden[name].get(part) != text}
               for name, parts in current.items() if parts != golden[name]}
    assert not changed, f"descriptions checkpoints store changed (stored, now): {changed}"


def test_layout_names_and_their_transitions_are_the_stored_names():
    from windowed_operator.state import fingerprint
    from windowed_operator.state import layouts
    from windowed_operator.state.records import PaneRecords

    named = {layout.name for layout in layouts.LAYOUTS} | {PaneRecords.layout}
    named |= {layout for pair in fingerprint.LAYOUT_MIGRATIONS for layout in pair}
    assert named == LAYOUT_NAMES
    assert layouts.in_key_shards("per-key windows") == "per-key windows in key shards"


def _imports(source: str) -> list[tuple[str, str]]:
    """(module, name) for every ``from module import name`` of the library in ``source``, and
    (module, "") for every ``import module``."""
    found = []
    try:
        tree = ast.parse(source)
    except SyntaxError:  # (a fragment: its import statements alone, multi-line ones joined)
        tree = ast.parse("\n".join(re.findall(r"^(?:from \S+ import \([^)]*\)|(?:from \S+ )?import .*)$",
                                               textwrap.dedent(source), re.M)))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return [(m, n) for m, n in found if m.split(".")[0] in ("windowed_operator", "triggers", "accumulations")]


def _documented_imports() -> list[tuple[str, str, str]]:
    sources = {f"README.md block {i}": block for i, block in
               enumerate(re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S))}
    for page in sorted((ROOT / "docs").rglob("*.md")):  # the documentation pages' blocks too
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S)):
            sources[f"{page.relative_to(ROOT)} block {i}"] = block
    for path in sorted(ROOT.glob("examples/**/*.py")):
        sources[str(path.relative_to(ROOT))] = path.read_text()
    return sorted({(where, m, n) for where, text in sources.items() for m, n in _imports(text)})


@pytest.mark.parametrize("where,module,name", _documented_imports())
def test_every_import_the_readme_and_examples_use_still_works(where, module, name):
    if module.startswith("windowed_operator.spark"):  # (a core-only install, `.[test]`, has no pyspark)
        pytest.importorskip("pyspark", reason=f"{where} imports {module}, which needs the spark extra")
    imported = importlib.import_module(module)
    if name:
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}") is not None, \
            f"{where}: from {module} import {name}"
