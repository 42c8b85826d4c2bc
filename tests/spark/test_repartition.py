"""A stopped query's checkpoint moved to another number of state partitions
(``windowed_operator.spark.repartition``) or key groups (``windowed_operator.spark.rescale``) restarts
exactly; a running one is refused.

Every layout restarts after a repartitioning in ``test_state_versions`` (the newest version's stored
checkpoints are moved before they are continued); here the sinks that need something of it (Spark's
file sink, whose log must hold every batch; the table sink) and a chain.  The full matrix (every
layout, per-partition watermarks, balanced key groups, each into every sink, moved twice) is
``benchmarks/repartition_matrix.py`` (``benchmarks/results/repartition_matrix.txt``)."""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from windowed_operator.spark.repartition import RepartitionError, repartition_checkpoint

pytestmark = pytest.mark.spark

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
STORED = Path(__file__).resolve().parents[1] / "fixtures" / "state-v8" / "pane_log" / "checkpoint"


@pytest.fixture
def matrix(tmp_path, monkeypatch):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import repartition_matrix
    finally:
        sys.path.remove(str(BENCHMARKS))
    monkeypatch.setattr(repartition_matrix.fixture, "SOURCE", tmp_path / "in")
    return repartition_matrix


@pytest.mark.parametrize("case,sink", [("sessions_retracting", "file"), ("chain", "table")])
def test_a_checkpoint_moved_to_more_partitions_then_fewer_restarts_exactly(spark, tmp_path, matrix, case, sink):
    """Sessions with early firings and retractions into Spark's JSON file sink (read back through its
    log: the repartitioning's batches are logged with no files, by a second call as a repair of a
    checkpoint moved without naming the sink), a chain into the table sink: 2 -> 5 partitions and
    16 -> 40 key groups, a restart, 5 -> 3 partitions and 40 -> 7 groups, a restart; the output
    equals an uninterrupted run's."""
    outcome = matrix.check(spark, case, sink, tmp_path / "run", partitions=(5, 3), repair=True, key_groups=(40, 7))
    assert outcome["rows"] > 0
    assert [m[:3] for m in outcome["moves"]] == [(2, 5, m[2]) for m in outcome["moves"][:1]] + [
        ("groups", 16, 40), (5, 3, outcome["moves"][2][2]), ("groups", 40, 7)]
    assert outcome["equal"], outcome


def _copy_stored(to: Path) -> Path:
    """A stored checkpoint, its last batch committed now (as a query just stopped leaves it)."""
    from .test_state_versions import _relocate_state_schemas

    shutil.copytree(STORED, to)
    _relocate_state_schemas(to)
    last = max((p for p in (to / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    os.utime(last)
    return to


def test_a_checkpoint_just_written_or_mid_batch_or_unchanged_is_refused_naming_why(spark, tmp_path):
    checkpoint = _copy_stored(tmp_path / "checkpoint")
    with pytest.raises(RepartitionError, match=r"last batch committed \d+ s ago: its query may still be running"):
        repartition_checkpoint(spark, str(checkpoint), 4)
    with pytest.raises(RepartitionError, match="has 2 state partitions already"):
        repartition_checkpoint(spark, str(checkpoint), 2, quiet_seconds=0)
    with pytest.raises(RepartitionError, match="partitions must be a positive integer, got 0"):
        repartition_checkpoint(spark, str(checkpoint), 0, quiet_seconds=0)
    last = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    shutil.copy(checkpoint / "offsets" / str(last), checkpoint / "offsets" / str(last + 1))
    with pytest.raises(RepartitionError, match=f"batch {last + 1} began and was not committed"):
        repartition_checkpoint(spark, str(checkpoint), 4, quiet_seconds=0)
    with pytest.raises(RepartitionError, match="no batch committed"):
        repartition_checkpoint(spark, str(tmp_path / "nothing"), 4, quiet_seconds=0)
    (checkpoint / "offsets" / str(last + 1)).unlink()
    out = tmp_path / "not-a-sink"
    out.mkdir()
    with pytest.raises(RepartitionError, match="no _spark_metadata log there"):
        repartition_checkpoint(spark, str(checkpoint), 4, quiet_seconds=0, file_sinks=(str(out),))
    assert _partitions(checkpoint) == 2, "nothing moved"


def _partitions(checkpoint: Path) -> int:
    return sum(p.name.isdigit() for p in (checkpoint / "state" / "0").iterdir())


def test_the_command_refuses_a_fresh_checkpoint_and_moves_a_quiet_one(spark, tmp_path, capsys):
    from windowed_operator.cli import main

    checkpoint = _copy_stored(tmp_path / "checkpoint")
    assert main(["repartition", str(checkpoint), "--partitions", "3"]) == 1
    assert "its query may still be running" in capsys.readouterr().err
    assert main(["repartition", str(checkpoint), "--partitions", "3", "--quiet-seconds", "0"]) == 0
    said = capsys.readouterr().out
    assert f"{checkpoint}: state moved from 2 to 3 partitions" in said
    assert "key groups" not in said, "16 key groups: no partition idle"
    assert _partitions(checkpoint) == 3


def test_rescale_refuses_a_fresh_checkpoint_or_an_unchanged_count_and_moves_a_quiet_one(spark, tmp_path, capsys):
    from windowed_operator.cli import main
    from windowed_operator.spark.driver.key_groups import recorded_key_groups
    from windowed_operator.spark.rescale import RescaleError, rescale_checkpoint

    checkpoint = _copy_stored(tmp_path / "checkpoint")
    assert main(["rescale", str(checkpoint), "--key-groups", "4"]) == 1
    assert "its query may still be running" in capsys.readouterr().err
    with pytest.raises(RescaleError, match="has 16 key groups already"):
        rescale_checkpoint(spark, str(checkpoint), 16, quiet_seconds=0)
    with pytest.raises(RescaleError, match=r"key_groups must be an integer from 1 to 65536, got 0"):
        rescale_checkpoint(spark, str(checkpoint), 0, quiet_seconds=0)
    commits = [p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    assert main(["rescale", str(checkpoint), "--key-groups", "4", "--quiet-seconds", "0"]) == 0
    said = capsys.readouterr().out
    assert f"{checkpoint}: state moved from 16 to 4 key groups" in said
    assert "operator 0: 1 key placed, from 3 groups into 4" in said, "(the pane log's one key with state: 3 groups held)"
    assert recorded_key_groups(str(checkpoint), spark).count == 4
    assert sum(p.name.isdigit() for p in (checkpoint / "commits").iterdir()) == len(commits) + 1, "one batch more"


def test_the_checkpoint_of_a_running_query_is_refused(spark, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load().groupBy("value").count()
             .writeStream.format("noop").outputMode("update").option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="1 second").start())
    try:
        while query.lastProgress is None:  # (a batch committed; a rate source never runs out of input)
            assert query.isActive, query.exception()
            time.sleep(0.2)
        with pytest.raises(RepartitionError, match=f"checkpoint of the running query {query.id}"):
            repartition_checkpoint(spark, str(checkpoint), 4, quiet_seconds=0)
        from windowed_operator.spark.rescale import rescale_checkpoint

        with pytest.raises(RepartitionError, match=f"checkpoint of the running query {query.id}"):
            rescale_checkpoint(spark, str(checkpoint), 4, quiet_seconds=0)
    finally:
        query.stop()
