"""Checkpoints written by earlier state versions are read and continued by this one.

``tests/fixtures/state_fixture.py`` wrote each ``tests/fixtures/state-v<N>/`` with the version of its
day: an operator's checkpoint after the first batches, and the panes it emitted.  Restarted here on
the remaining batches, both runs' panes together must be those of one uninterrupted run.
"""
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: Every (version, case) stored: a version keeps the cases of its day.
STORED = sorted((p.parent.name, p.name) for p in FIXTURES.glob("state-v*/*") if (p / "checkpoint").is_dir())


def _fixture():
    import sys

    sys.path.insert(0, str(FIXTURES))
    import state_fixture

    return state_fixture


def _relocate_state_schemas(checkpoint):
    """Point the copy's operator metadata at its own state schema files: Spark records them by
    absolute path, the path the fixture was written at (another clone, another machine)."""
    for meta in checkpoint.glob("state/*/_metadata/v2/*"):
        if meta.name.startswith("."):
            continue
        meta.write_text(re.sub(r'file:[^"]*?/checkpoint/', f"file:{checkpoint}/", meta.read_text()))
        (meta.parent / f".{meta.name}.crc").unlink(missing_ok=True)  # (the checksum of the old text)


@pytest.mark.parametrize("version,case", STORED)
def test_a_stored_checkpoint_is_read_and_continued(spark, tmp_path, version, case):
    fixture = _fixture()
    op = fixture.operators()[case]
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / version / case / "checkpoint", checkpoint)
    _relocate_state_schemas(checkpoint)
    shutil.rmtree(fixture.SOURCE.parent, ignore_errors=True)
    try:
        fixture.write_source(len(fixture.BATCHES))
        continued = fixture.run(spark, op, checkpoint)
        uninterrupted = fixture.run(spark, op, tmp_path / "fresh")
    finally:
        shutil.rmtree(fixture.SOURCE.parent, ignore_errors=True)
    before = json.loads((FIXTURES / version / case / "panes.json").read_text())
    assert continued, "the continued run emitted panes"
    # (a case whose windows are all still open at the restart emits its panes only after it)
    assert before or case in fixture.CLOSED_AFTER_RESTART, "the run before the restart emitted panes"
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert Counter(map(key, before + continued)) == Counter(map(key, uninterrupted))
