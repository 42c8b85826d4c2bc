"""Every stored layout's state, as Spark's reader of all column families gives it, is read into its key
groups' contents and written back to the same bytes (``windowed_operator.spark.base.state_rows``): what a
rewrite of a stopped checkpoint's state (another number of key groups) reads and writes."""

import pytest

from windowed_operator.spark.base.state_rows import group_rows, read_groups

from .test_state_versions import FIXTURES, _copy

pytestmark = pytest.mark.spark

CASES = sorted(p.name for p in (FIXTURES / "state-v8").iterdir() if (p / "checkpoint").is_dir())


def test_every_layouts_state_reads_into_groups_and_writes_back_the_same_bytes(spark, tmp_path):
    assert len(CASES) == 10, CASES
    seen_families = set()
    for case in CASES:
        checkpoint = _copy("state-v8", case, tmp_path / case)
        frame = (spark.read.format("statestore").option("operatorId", 0).option("_readAllColumnFamilies", "true")
                 .load(str(checkpoint)))
        int_typed = frame.schema["partition_key"].dataType.fields[0].dataType.simpleString() == "int"
        rows = sorted((bytes(r.key_bytes), bytes(r.value_bytes) if r.value_bytes is not None else None,
                       r.column_family_name) for r in frame.collect())
        groups = read_groups(rows, int_typed)
        assert groups and all(c.meta is not None for c in groups.values()), case
        assert sorted(row for g, c in groups.items() for row in group_rows(g, c, int_typed)) == rows, case
        seen_families |= {family for _, _, family in rows}
    assert seen_families == {"wo_group", "wo_due", "wo_keys", "$eventTimers_keyToTimestamp",
                             "$eventTimers_timestampToKey"}
