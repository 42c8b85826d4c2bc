"""Checkpoints written by earlier state versions are read and continued by this one.

``tests/fixtures/state_fixture.py`` wrote each ``tests/fixtures/state-v<N>/`` with the version of its
day: an operator's checkpoint after the first batches, and the panes it emitted.  Restarted here on
the remaining batches, both runs' panes together must be those of one uninterrupted run.  Each
case's newest checkpoint (every layout a checkpoint may hold has one) is first moved from 2 to 3 state
partitions (Spark's offline repartitioning, ``windowed_operator.spark.repartition``) and to other key
groups: every layout restarts exactly after both.
"""
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: The newest version's fixtures (a layout within a version, like ``state-v7-row-shards``, aside).
LATEST = max((p.name for p in FIXTURES.glob("state-v*") if re.fullmatch(r"state-v\d+", p.name)),
             key=lambda name: int(name[len("state-v"):]))
#: Every (version, case) stored: a version keeps the cases of its day.
STORED = sorted((p.parent.name, p.name) for p in FIXTURES.glob("state-v*/*") if (p / "checkpoint").is_dir())
#: Each case's newest stored version (a later version stores the layouts it still writes).
NEWEST = {case: max((v for v, c in STORED if c == case and re.fullmatch(r"state-v\d+", v)),
                    key=lambda name: int(name[len("state-v"):])) for _, case in STORED}


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


def _copy(version: str, case: str, to: Path) -> Path:
    shutil.copytree(FIXTURES / version / case / "checkpoint", to)
    _relocate_state_schemas(to)
    return to


def _fingerprints(spark, checkpoint: Path) -> list[dict]:
    from windowed_operator.spark.inspect import group_records

    return sorted({json.dumps(json.loads(r["meta"])["fingerprint"], sort_keys=True)
                   for r in group_records(spark, str(checkpoint)).collect()})


def _state_variables(checkpoint: Path) -> tuple[dict, list[bytes]]:
    """The operator's declared state variables (names, kinds, time and output mode) and the bytes of
    its state schema files (every variable's key and value schema), as Spark stored them."""
    (meta,) = [p for p in checkpoint.glob("state/0/_metadata/v2/*") if not p.name.startswith(".")]
    properties = json.loads(json.loads(meta.read_text().split("\n", 1)[1])["operatorPropertiesJson"])
    properties["stateVariables"] = sorted(properties["stateVariables"], key=lambda v: v["stateName"])
    schemas = sorted(p.read_bytes() for p in checkpoint.glob("state/0/_stateSchema/default/*")
                     if not p.name.startswith("."))
    return properties, schemas


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory):
    """One uninterrupted run of a case (its panes and checkpoint), shared by every version storing
    the case: the same operator over the same batches."""
    runs: dict[str, tuple[list, Path]] = {}

    def run(case: str) -> tuple[list, Path]:
        if case not in runs:
            fixture = _fixture()
            fresh = tmp_path_factory.mktemp(f"fresh-{case}") / "checkpoint"
            shutil.rmtree(fixture.SOURCE.parent, ignore_errors=True)
            try:
                fixture.write_source(len(fixture.BATCHES))
                runs[case] = (fixture.run(spark, fixture.operators()[case], fresh, case), fresh)
            finally:
                shutil.rmtree(fixture.SOURCE.parent, ignore_errors=True)
        return runs[case]

    return run


#: The key groups each case's newest stored checkpoint is rescaled to (from 16) before they are
#: continued: every new group gathers keys of several old ones, and every old group's keys scatter.
RESCALED = 5


@pytest.mark.parametrize("version,case", STORED)
def test_a_stored_checkpoint_is_read_and_continued(spark, tmp_path, uninterrupted, monkeypatch, version, case):
    """Each stored checkpoint continues as an uninterrupted run; each case's newest is first moved
    to 3 state partitions (``repartition``) and to 5 key groups (``rescale``)."""
    fixture = _fixture()
    op = fixture.operators()[case]
    expected, fresh = uninterrupted(case)
    checkpoint = _copy(version, case, tmp_path / "checkpoint")
    if version == NEWEST[case]:
        from windowed_operator.spark.repartition import repartition_checkpoint
        from windowed_operator.spark.rescale import RescaleError, rescale_checkpoint

        assert repartition_checkpoint(spark, str(checkpoint), 3, quiet_seconds=0).partitions_before == 2
        if case == "non_keyed":
            with pytest.raises(RescaleError, match="no keyed operator of its query holds state"):
                rescale_checkpoint(spark, str(checkpoint), RESCALED, quiet_seconds=0)
        else:
            done = rescale_checkpoint(spark, str(checkpoint), RESCALED, quiet_seconds=0)
            assert (done.key_groups_before, done.key_groups, done.partitions) == (16, RESCALED, 3)
            assert done.operators[0][2] > 0, "keys moved"
            # (a checkpoint started before balanced placement: restarted with the count, not told the checkpoint)
            monkeypatch.setitem(fixture.APPLY, case, {**fixture.APPLY.get(case, {}), "key_groups": RESCALED})
    shutil.rmtree(fixture.SOURCE.parent, ignore_errors=True)
    try:
        fixture.write_source(len(fixture.BATCHES))
        continued = fixture.run(spark, op, checkpoint, case)
    finally:
        shutil.rmtree(fixture.SOURCE.parent, ignore_errors=True)
    uninterrupted_panes = expected
    before = json.loads((FIXTURES / version / case / "panes.json").read_text())
    assert continued, "the continued run emitted panes"
    # (a case whose windows are all still open at the restart emits its panes only after it)
    assert before or case in fixture.CLOSED_AFTER_RESTART, "the run before the restart emitted panes"
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert Counter(map(key, before + continued)) == Counter(map(key, uninterrupted_panes))
    if version == LATEST and _still_written(fixture.LAYOUTS[case]):
        _check_stores_what_the_fixture_stores(spark, tmp_path, case, fresh)


def _still_written(layout: str) -> bool:
    """Whether this release still writes ``layout`` (otherwise a restart moves it in: per-key
    session and window rows, written only with the removed ``spark.windowed_operator.rowShards``,
    and per-key records in entries of their own, only with the removed ``...keyShards``)."""
    from windowed_operator.state.layouts import BY_NAME, KEY_SHARDS_SUFFIX, record_layout

    base = BY_NAME[record_layout(layout)]
    return base.chosen and (not base.per_key or layout.endswith(KEY_SHARDS_SUFFIX))


def _check_stores_what_the_fixture_stores(spark, tmp_path, case, fresh):
    """Frozen: a checkpoint written today holds the layout, the fingerprint and the state variables
    (names, kinds, schemas) of the latest version's stored one, for every layout a checkpoint may
    hold.  A deliberate change adds a state version, a migration and its fixtures."""
    from windowed_operator.state.layouts import STATE_VERSION

    assert LATEST == f"state-v{STATE_VERSION}", f"state version {STATE_VERSION} has no fixtures: write them " \
        "(python tests/fixtures/state_fixture.py) with its migration"
    stored = _fingerprints(spark, _copy(LATEST, case, tmp_path / "stored"))
    assert {json.loads(f)["state layout"] for f in stored} == {_fixture().LAYOUTS[case]}
    assert _fingerprints(spark, fresh) == stored
    assert _state_variables(fresh) == _state_variables(FIXTURES / LATEST / case / "checkpoint")


def test_the_newest_version_stores_every_layout_this_release_writes():
    """A new state version writes a fixture of every layout still written (``_still_written``), so
    that the frozen check above covers each."""
    from windowed_operator.state.layouts import LAYOUTS, in_key_shards

    written = {in_key_shards(layout.name) if layout.per_key else layout.name for layout in LAYOUTS if layout.chosen}
    stored = {_fixture().LAYOUTS[case] for version, case in STORED if version == LATEST}
    assert stored == written
