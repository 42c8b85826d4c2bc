"""Key groups chosen at a query's first start and kept in its checkpoint (``spark.driver.key_groups``),
without a JVM: the balanced placement, the count, the record and what a restart reads back."""
import json
from collections import Counter

import pytest

pytest.importorskip("pyspark")

from windowed_operator.spark.driver.key_groups import (RECORD, KeyGroups, balanced_values, first_count,  # noqa: E402
                                                       key_groups_for, murmur3_int)
from windowed_operator.spark.base.errors import SparkOperatorError  # noqa: E402


class Session:
    """What key_groups_for reads of a session: its shuffle partitions."""

    def __init__(self, partitions: int) -> None:
        self.conf = {"spark.sql.shuffle.partitions": str(partitions)}  # (a dict has .get)


@pytest.mark.parametrize("count, partitions", [(16, 2), (16, 6), (18, 6), (200, 200), (1024, 64), (5, 8)])
def test_each_partition_gets_its_share_of_the_groups(count, partitions):
    values = balanced_values(count, partitions)
    assert len(set(values)) == count and all(0 <= v < 2 ** 31 for v in values)
    assert all(murmur3_int(v) % partitions == g % partitions for g, v in enumerate(values))
    load = Counter(murmur3_int(v) % partitions for v in values)
    assert max(load.values()) - min(load.values(), default=0) <= 1


@pytest.mark.parametrize("partitions, count", [(1, 16), (2, 16), (6, 18), (16, 16), (24, 24), (200, 200)])
def test_the_first_start_takes_a_multiple_of_the_partitions_at_least_16(partitions, count):
    assert first_count(partitions) == count


def test_without_the_checkpoint_the_placement_is_the_earlier_one(tmp_path):
    assert key_groups_for(Session(200), None, None) == KeyGroups(16)
    assert key_groups_for(Session(200), 64, None) == KeyGroups(64)
    with pytest.raises(SparkOperatorError, match="key_groups must be a positive integer, got 0"):
        key_groups_for(Session(2), 0, None)


def test_a_first_start_chooses_and_keeps_them_and_a_restart_reads_them_back(tmp_path):
    checkpoint = str(tmp_path / "checkpoint")
    first = key_groups_for(Session(32), None, checkpoint)
    assert first.count == 32 and first.values == balanced_values(32, 32)
    record = json.loads((tmp_path / "checkpoint" / RECORD).read_text())
    assert record == {"key_groups": 32, "values": list(first.values), "partitions_at_first_start": 32}
    # a restart under another session (Spark keeps the checkpoint's 32 state partitions) reads them back
    assert key_groups_for(Session(4), None, checkpoint) == first
    assert key_groups_for(Session(4), 32, checkpoint) == first
    with pytest.raises(SparkOperatorError, match=r"key_groups=64, but the checkpoint .* keeps 32 key groups"):
        key_groups_for(Session(4), 64, checkpoint)
    assert key_groups_for(Session(8), 40, str(tmp_path / "other")).count == 40  # (explicit at a first start)


def test_a_checkpoint_started_before_keeps_its_placement(tmp_path):
    """Batches but no record: a query started before balanced placement (or without checkpoint=);
    its groups stay the bigints 0..n-1 (a balanced int column would be refused by Spark), no record."""
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n")
    assert key_groups_for(Session(64), None, str(tmp_path)) == KeyGroups(16)
    assert key_groups_for(Session(64), 48, str(tmp_path)) == KeyGroups(48)
    assert not (tmp_path / RECORD).exists()


def test_the_key_groups_share_the_checkpoints_record_with_the_pipelines_settings(tmp_path):
    """One record per checkpoint (``spark.checkpoint_record``): the pipeline runner's native stages
    setting and the key groups each keep the other."""
    from windowed_operator.spark.driver.checkpoint_settings import read_state, record

    checkpoint = str(tmp_path / "checkpoint")
    record([checkpoint], True)
    chosen = key_groups_for(Session(4), None, checkpoint)
    assert read_state(checkpoint).recorded is True
    assert json.loads((tmp_path / "checkpoint" / RECORD).read_text())["spark.windowed_operator.nativeStages"] is True
    other = str(tmp_path / "other")
    chosen_first = key_groups_for(Session(4), None, other)
    record([other], False)
    assert key_groups_for(Session(2), None, other) == chosen_first and read_state(other).recorded is False
    assert chosen.count == 16


def test_the_inspector_says_how_the_key_groups_lie_over_the_state_partitions():
    from windowed_operator.spark.inspect import placement_line

    assert placement_line(4, (16, True)) == ("key groups: 16 over 4 state partitions (placed by Spark's hash of "
                                             "their values, balanced over the partitions of the query's first start)")
    assert placement_line(20, (16, False)) == ("key groups: 16 over 20 state partitions (placed by Spark's hash of "
                                               "the group number); 4 partition(s) hold no state")
    assert placement_line(3, None) == "state partitions: 3"
